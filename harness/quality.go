package harness

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// This file holds the quality tests of docs/formats/harness.md#quality-scoring: teacher-forced
// scoring of reference continuations (docs/formats/harness.md#scores), the comparison of two scored
// runs (docs/formats/harness.md#comparing-scores), and the local stand-in for the official continuations (a
// reference model's own greedy continuations, docs/formats/harness.md#manifest's layout).

// QualityCase is one row of a quality manifest: a prompt and the
// continuation to score after it.
type QualityCase struct {
	ID               string
	PromptFile       string
	ContinuationFile string
}

// Texts reads the case's prompt and continuation.
func (c QualityCase) Texts() (prompt, continuation string, err error) {
	p, err := os.ReadFile(c.PromptFile)
	if err != nil {
		return "", "", fmt.Errorf("quality: case %s: %w", c.ID, err)
	}
	t, err := os.ReadFile(c.ContinuationFile)
	if err != nil {
		return "", "", fmt.Errorf("quality: case %s: %w", c.ID, err)
	}
	return string(p), string(t), nil
}

// ReadManifest reads a quality manifest file (see ParseManifest); file
// names are resolved against the manifest's directory.
func ReadManifest(path string) ([]QualityCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	cases, err := ParseManifest(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// ParseManifest parses a quality manifest: tab-separated rows of id,
// prompt file and continuation file (further fields are ignored),
// skipping empty lines and lines starting with '#'. A relative file name
// is taken as given when that file exists (upstream's manifests name
// files relative to the working directory) and else relative to dir (the
// manifests WriteReferenceManifest writes name them relative to their
// own directory).
func ParseManifest(data []byte, dir string) ([]QualityCase, error) {
	var cases []QualityCase
	seen := map[string]bool{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 3 || f[0] == "" || f[1] == "" || f[2] == "" {
			return nil, fmt.Errorf("quality: manifest line %d: want id, prompt file and continuation file separated by tabs", n+1)
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("quality: manifest line %d: duplicate case id %q", n+1, f[0])
		}
		seen[f[0]] = true
		cases = append(cases, QualityCase{ID: f[0], PromptFile: resolveFile(dir, f[1]), ContinuationFile: resolveFile(dir, f[2])})
	}
	if len(cases) == 0 {
		return nil, errors.New("quality: manifest has no cases")
	}
	return cases, nil
}

func resolveFile(dir, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	if _, err := os.Stat(name); err == nil {
		return name
	}
	return filepath.Join(dir, name)
}

// Forcer is the part of an inference session that teacher forcing drives:
// the logits after the last token, and appending one token.
// *engine.Session implements it.
type Forcer interface {
	Logits() []float32
	Decode(token int) error
}

// TargetScore is the teacher-forced score of a target sequence.
type TargetScore struct {
	NLL        float64 // Σ −ln p(target[i]), each log-probability rounded to float32 as upstream's
	FirstMatch bool    // the greedy token before the first target token is that token
	GreedyLCP  int     // length of the target prefix the greedy choices reproduce
}

// ScoreTargets scores target teacher-forced from s's current state: at
// every step it records the greedy token (the first maximal logit) and the
// target token's log-probability, then appends the target token. The last
// target token is not evaluated (nothing reads its logits), so s ends
// holding all but the last target token.
func ScoreTargets(s Forcer, target []int) (TargetScore, error) {
	var sc TargetScore
	matching := true
	for i, t := range target {
		logits := s.Logits()
		if t < 0 || t >= len(logits) {
			return sc, fmt.Errorf("quality: target token %d outside the vocabulary (%d)", t, len(logits))
		}
		greedy := sample.Argmax(logits)
		if i == 0 {
			sc.FirstMatch = greedy == t
		}
		if matching && greedy == t {
			sc.GreedyLCP++
		} else {
			matching = false
		}
		sc.NLL -= float64(sample.Logprob(logits, t))
		if i+1 < len(target) {
			if err := s.Decode(t); err != nil {
				return sc, fmt.Errorf("quality: target token %d: %w", i, err)
			}
		}
	}
	return sc, nil
}

// ScoreRow is the score of one case, a row of the scorer's TSV.
type ScoreRow struct {
	ID           string  `parquet:"case_id"`
	PromptTokens int64   `parquet:"prompt_tokens"`
	TargetTokens int64   `parquet:"target_tokens"`
	NLL          float64 `parquet:"nll"`
	AvgNLL       float64 `parquet:"avg_nll"`
	FirstMatch   bool    `parquet:"first_match"`
	GreedyLCP    int64   `parquet:"greedy_lcp"`
}

// ScoreOptions configure ScoreCases.
type ScoreOptions struct {
	Context  int // session context in tokens; 0 means 4096, smaller values are raised to 1024 as upstream's
	Numerics engine.Numerics
	// Log, when set, receives upstream's line per case (id, cases, prompt
	// and target lengths, average NLL, LCP).
	Log io.Writer
	// Row, when set, is called with each case's row as soon as it is
	// scored (the command writes the TSV as it goes).
	Row func(ScoreRow) error
}

// ScoreCases scores each case on one session of m, as upstream's
// score_official does: the prompt is the no-think chat encoding with no
// system text, the target the plain tokenization of the continuation, and
// the target is scored teacher-forced.
func ScoreCases(m *engine.Model, be backends.Backend, tok *tokenizer.Tokenizer, cases []QualityCase, opt ScoreOptions) ([]ScoreRow, error) {
	ctx := opt.Context
	if ctx <= 0 {
		ctx = 4096
	}
	ctx = max(ctx, 1024)
	s, err := engine.NewSession(m, be, engine.Options{Context: ctx, Numerics: opt.Numerics})
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	rows := make([]ScoreRow, 0, len(cases))
	for i, c := range cases {
		prompt, cont, err := c.Texts()
		if err != nil {
			return rows, err
		}
		ids := EncodeChat(tok, "", prompt)
		target := tok.Encode(cont)
		if len(ids)+len(target)+1 >= ctx {
			return rows, fmt.Errorf("quality: case %s: %d prompt and %d target tokens exceed the context of %d", c.ID, len(ids), len(target), ctx)
		}
		if err := checkVocab(ids, m.Params.Vocab); err != nil {
			return rows, fmt.Errorf("quality: case %s: prompt: %w", c.ID, err)
		}
		s.Reset()
		if err := s.Prefill(ids); err != nil {
			return rows, fmt.Errorf("quality: case %s: %w", c.ID, err)
		}
		sc, err := ScoreTargets(s, target)
		if err != nil {
			return rows, fmt.Errorf("quality: case %s: %w", c.ID, err)
		}
		r := ScoreRow{ID: c.ID, PromptTokens: int64(len(ids)), TargetTokens: int64(len(target)), NLL: sc.NLL,
			FirstMatch: sc.FirstMatch, GreedyLCP: int64(sc.GreedyLCP)}
		if len(target) > 0 {
			r.AvgNLL = sc.NLL / float64(len(target))
		}
		rows = append(rows, r)
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "%s cases=%d prompt=%d target=%d avg_nll=%.6f lcp=%d\n", r.ID, i+1, r.PromptTokens, r.TargetTokens, r.AvgNLL, r.GreedyLCP)
		}
		if opt.Row != nil {
			if err := opt.Row(r); err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

func checkVocab(ids []int, vocab int) error {
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("token %d outside the model's vocabulary (%d)", id, vocab)
		}
	}
	return nil
}

// ScoreHeader is the header line of the scorer's TSV.
const ScoreHeader = "id\tprompt_tokens\ttarget_tokens\tnll\tavg_nll\tfirst_match\tgreedy_lcp\n"

// AppendScoreTSV appends r as one line of the scorer's TSV (NLLs with 9
// decimals, first_match 0 or 1).
func AppendScoreTSV(dst []byte, r ScoreRow) []byte {
	return fmt.Appendf(dst, "%s\t%d\t%d\t%.9f\t%.9f\t%d\t%d\n", r.ID, r.PromptTokens, r.TargetTokens, r.NLL, r.AvgNLL, b2i(r.FirstMatch), r.GreedyLCP)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteScores writes rows as the scorer's TSV, header included.
func WriteScores(w io.Writer, rows []ScoreRow) error {
	buf := []byte(ScoreHeader)
	for _, r := range rows {
		buf = AppendScoreTSV(buf, r)
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("quality: %w", err)
	}
	return nil
}

// ReadScores reads a scorer TSV by its header's column names (id,
// target_tokens, nll, avg_nll, first_match and greedy_lcp are required,
// prompt_tokens is read when present).
func ReadScores(r io.Reader) ([]ScoreRow, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
		return nil, errors.New("quality: empty score file")
	}
	col := map[string]int{}
	for i, name := range strings.Split(strings.TrimRight(sc.Text(), "\r"), "\t") {
		col[name] = i
	}
	for _, name := range []string{"id", "target_tokens", "nll", "avg_nll", "first_match", "greedy_lcp"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("quality: score header lacks column %q", name)
		}
	}
	var rows []ScoreRow
	seen := map[string]bool{}
	for n := 2; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		field := func(name string) (string, error) {
			i, ok := col[name]
			if !ok {
				return "0", nil
			}
			if i >= len(f) {
				return "", fmt.Errorf("quality: score line %d: missing %s", n, name)
			}
			return f[i], nil
		}
		var row ScoreRow
		var err error
		row.ID, err = field("id")
		if err != nil {
			return nil, err
		}
		ints := []struct {
			name string
			dst  *int64
		}{{"prompt_tokens", &row.PromptTokens}, {"target_tokens", &row.TargetTokens}, {"greedy_lcp", &row.GreedyLCP}}
		for _, c := range ints {
			s, err := field(c.name)
			if err != nil {
				return nil, err
			}
			if *c.dst, err = strconv.ParseInt(s, 10, 64); err != nil || *c.dst < 0 {
				return nil, fmt.Errorf("quality: score line %d: %s %q is not a count", n, c.name, s)
			}
		}
		for _, c := range []struct {
			name string
			dst  *float64
		}{{"nll", &row.NLL}, {"avg_nll", &row.AvgNLL}} {
			s, err := field(c.name)
			if err != nil {
				return nil, err
			}
			if *c.dst, err = strconv.ParseFloat(s, 64); err != nil || math.IsNaN(*c.dst) || math.IsInf(*c.dst, 0) {
				return nil, fmt.Errorf("quality: score line %d: %s %q is not a finite number", n, c.name, s)
			}
		}
		s, err := field("first_match")
		if err != nil {
			return nil, err
		}
		switch s {
		case "0":
		case "1":
			row.FirstMatch = true
		default:
			return nil, fmt.Errorf("quality: score line %d: first_match %q is not 0 or 1", n, s)
		}
		if seen[row.ID] {
			return nil, fmt.Errorf("quality: score line %d: duplicate case id %q", n, row.ID)
		}
		seen[row.ID] = true
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	return rows, nil
}

// ReadScoresFile reads a scorer TSV from a file.
func ReadScoresFile(path string) ([]ScoreRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	defer f.Close()
	rows, err := ReadScores(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// ScoreSummary aggregates a scored run.
type ScoreSummary struct {
	Cases        int
	Tokens       int64
	AvgNLL       float64 // token-weighted: Σ nll / Σ target tokens (0 without tokens)
	FirstMatches int
	AvgLCP       float64 // mean greedy LCP per case
}

// SummarizeScores aggregates rows.
func SummarizeScores(rows []ScoreRow) ScoreSummary {
	s := ScoreSummary{Cases: len(rows)}
	var nll float64
	var lcp int64
	for _, r := range rows {
		s.Tokens += r.TargetTokens
		nll += r.NLL
		lcp += r.GreedyLCP
		s.FirstMatches += b2i(r.FirstMatch)
	}
	if s.Tokens > 0 {
		s.AvgNLL = nll / float64(s.Tokens)
	}
	if s.Cases > 0 {
		s.AvgLCP = float64(lcp) / float64(s.Cases)
	}
	return s
}

// String formats the summary as upstream's final stderr line.
func (s ScoreSummary) String() string {
	return fmt.Sprintf("summary cases=%d tokens=%d avg_nll=%.9f first_match=%d avg_lcp=%.3f", s.Cases, s.Tokens, s.AvgNLL, s.FirstMatches, s.AvgLCP)
}

// ScorePair is one case scored by two runs.
type ScorePair struct {
	Old, New ScoreRow
	Delta    float64 // New.NLL − Old.NLL (negative: the new run fits better)
}

// ScoreComparison is the comparison of two scored runs on the cases both
// hold (docs/formats/harness.md#comparing-scores).
type ScoreComparison struct {
	Pairs                []ScorePair // by id
	Tokens               int64
	OldAvgNLL, NewAvgNLL float64 // token-weighted
	NewWins, OldWins     int     // cases where that run's total NLL is lower by more than 1e-9
	Ties                 int
	OldFirst, NewFirst   int     // first-token matches
	OldAvgLCP, NewAvgLCP float64 // mean greedy LCP per case
}

// CompareScores joins two runs on the case id and compares them; it fails
// when they share no case, when a shared case has different target
// lengths, or when the shared cases have no target token.
func CompareScores(old, new []ScoreRow) (*ScoreComparison, error) {
	byID := make(map[string]ScoreRow, len(new))
	for _, r := range new {
		byID[r.ID] = r
	}
	c := &ScoreComparison{}
	var oldNLL, newNLL float64
	var oldLCP, newLCP int64
	for _, o := range old {
		n, ok := byID[o.ID]
		if !ok {
			continue
		}
		if o.TargetTokens != n.TargetTokens {
			return nil, fmt.Errorf("quality: case %s: %d target tokens in the old run, %d in the new", o.ID, o.TargetTokens, n.TargetTokens)
		}
		p := ScorePair{Old: o, New: n, Delta: n.NLL - o.NLL}
		c.Pairs = append(c.Pairs, p)
		c.Tokens += o.TargetTokens
		oldNLL += o.NLL
		newNLL += n.NLL
		oldLCP += o.GreedyLCP
		newLCP += n.GreedyLCP
		c.OldFirst += b2i(o.FirstMatch)
		c.NewFirst += b2i(n.FirstMatch)
		switch {
		case p.Delta < -1e-9:
			c.NewWins++
		case p.Delta > 1e-9:
			c.OldWins++
		default:
			c.Ties++
		}
	}
	if len(c.Pairs) == 0 {
		return nil, errors.New("quality: no common cases")
	}
	if c.Tokens == 0 {
		return nil, errors.New("quality: the common cases have no target tokens")
	}
	slices.SortFunc(c.Pairs, func(a, b ScorePair) int { return strings.Compare(a.Old.ID, b.Old.ID) })
	c.OldAvgNLL, c.NewAvgNLL = oldNLL/float64(c.Tokens), newNLL/float64(c.Tokens)
	n := float64(len(c.Pairs))
	c.OldAvgLCP, c.NewAvgLCP = float64(oldLCP)/n, float64(newLCP)/n
	return c, nil
}

// Best returns the k pairs where the new run gains most (most negative
// Delta first) when newBetter is true, else the k where the old run does
// (most positive first); ties are ordered by id as upstream's tuple sort
// orders them (ascending, descending for the old run's list).
func (c *ScoreComparison) Best(k int, newBetter bool) []ScorePair {
	ps := slices.Clone(c.Pairs)
	slices.SortFunc(ps, func(a, b ScorePair) int {
		r := cmp.Or(cmp.Compare(a.Delta, b.Delta), strings.Compare(a.Old.ID, b.Old.ID))
		if newBetter {
			return r
		}
		return -r
	})
	return ps[:min(k, len(ps))]
}

// WriteText writes the comparison in upstream compare_scores.py's
// tab-separated layout: the summary keys, then the 8 cases the new run
// fits best and the 8 the old run fits best.
func (c *ScoreComparison) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "cases\t%d\n", len(c.Pairs))
	fmt.Fprintf(&b, "tokens\t%d\n", c.Tokens)
	fmt.Fprintf(&b, "old_avg_nll\t%.9f\n", c.OldAvgNLL)
	fmt.Fprintf(&b, "new_avg_nll\t%.9f\n", c.NewAvgNLL)
	fmt.Fprintf(&b, "delta_new_minus_old\t%.9f\n", c.NewAvgNLL-c.OldAvgNLL)
	fmt.Fprintf(&b, "relative_nll_change\t%.3f%%\n", (c.NewAvgNLL/c.OldAvgNLL-1)*100)
	fmt.Fprintf(&b, "case_wins_new_old_ties\t%d\t%d\t%d\n", c.NewWins, c.OldWins, c.Ties)
	fmt.Fprintf(&b, "first_token_matches_old_new\t%d\t%d\n", c.OldFirst, c.NewFirst)
	fmt.Fprintf(&b, "avg_greedy_lcp_old_new\t%.3f\t%.3f\n", c.OldAvgLCP, c.NewAvgLCP)
	for _, part := range []struct {
		title string
		new   bool
	}{{"new best cases:", true}, {"old best cases:", false}} {
		fmt.Fprintf(&b, "\n%s\n", part.title)
		for _, p := range c.Best(8, part.new) {
			fmt.Fprintf(&b, "%s\tdelta_nll=%.6f\ttokens=%d\told=%.6f\tnew=%.6f\n", p.Old.ID, p.Delta, p.Old.TargetTokens, p.Old.AvgNLL, p.New.AvgNLL)
		}
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("quality: %w", err)
	}
	return nil
}

// QualityTable and QualityCompareTable are the directories of scored runs
// and of score comparisons under a results root.
const (
	QualityTable        = "quality"
	QualityCompareTable = "quality_compare"
)

// QualityRecord is one row of a scored run's Parquet file: the run and one
// case.
type QualityRecord struct {
	RunMeta
	Manifest string `parquet:"manifest"`
	ScoreRow
}

// QualityCompareRecord is one row of a comparison's Parquet file: the run
// and one case scored by both.
type QualityCompareRecord struct {
	RunMeta
	OldFile       string  `parquet:"old_file"`
	NewFile       string  `parquet:"new_file"`
	CaseID        string  `parquet:"case_id"`
	TargetTokens  int64   `parquet:"target_tokens"`
	OldNLL        float64 `parquet:"old_nll"`
	NewNLL        float64 `parquet:"new_nll"`
	DeltaNLL      float64 `parquet:"delta_nll"`
	OldAvgNLL     float64 `parquet:"old_avg_nll"`
	NewAvgNLL     float64 `parquet:"new_avg_nll"`
	OldFirstMatch bool    `parquet:"old_first_match"`
	NewFirstMatch bool    `parquet:"new_first_match"`
	OldGreedyLCP  int64   `parquet:"old_greedy_lcp"`
	NewGreedyLCP  int64   `parquet:"new_greedy_lcp"`
}

// WriteQualityRun writes a scored run as one Parquet file under
// root/quality and returns its path.
func WriteQualityRun(root string, meta RunMeta, manifest string, rows []ScoreRow) (string, error) {
	recs := make([]QualityRecord, len(rows))
	for i, r := range rows {
		recs[i] = QualityRecord{RunMeta: meta, Manifest: manifest, ScoreRow: r}
	}
	return WriteRun(root, QualityTable, meta, recs)
}

// WriteQualityCompareRun writes a comparison's joined rows as one Parquet
// file under root/quality_compare and returns its path.
func WriteQualityCompareRun(root string, meta RunMeta, oldFile, newFile string, c *ScoreComparison) (string, error) {
	recs := make([]QualityCompareRecord, len(c.Pairs))
	for i, p := range c.Pairs {
		recs[i] = QualityCompareRecord{RunMeta: meta, OldFile: oldFile, NewFile: newFile, CaseID: p.Old.ID, TargetTokens: p.Old.TargetTokens,
			OldNLL: p.Old.NLL, NewNLL: p.New.NLL, DeltaNLL: p.Delta, OldAvgNLL: p.Old.AvgNLL, NewAvgNLL: p.New.AvgNLL,
			OldFirstMatch: p.Old.FirstMatch, NewFirstMatch: p.New.FirstMatch, OldGreedyLCP: p.Old.GreedyLCP, NewGreedyLCP: p.New.GreedyLCP}
	}
	return WriteRun(root, QualityCompareTable, meta, recs)
}

// ReferenceOptions configure WriteReferenceManifest.
type ReferenceOptions struct {
	MaxTokens int // greedy tokens per continuation; 0 means 24, upstream's collection length
	Context   int // session context; 0 means 4096
	Numerics  engine.Numerics
	Log       io.Writer // one line per case when set
}

// WriteReferenceManifest is the local stand-in for upstream's
// collect_official.py: it asks m (a reference, e.g. the lossless
// conversion) for the greedy continuation of every prompt, rendered as the
// scorer renders it, and writes dir/prompts/<id>.txt,
// dir/continuations/<id>.txt, dir/responses/<id>.json (the greedy token
// ids) and dir/manifest.tsv with paths relative to dir. Generation stops
// at EOS or MaxTokens. Scoring another model on the manifest measures how
// well it reproduces the reference, with no API key; the reference itself
// scores its own greedy path (LCP equals the target length unless
// re-tokenizing the continuation text changes the tokens, docs/formats/harness.md#upstream-quirks).
func WriteReferenceManifest(dir string, m *engine.Model, be backends.Backend, tok *tokenizer.Tokenizer, prompts []PromptCase, opt ReferenceOptions) (string, error) {
	maxTokens := opt.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 24
	}
	ctx := opt.Context
	if ctx <= 0 {
		ctx = 4096
	}
	for _, sub := range []string{"prompts", "continuations", "responses"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return "", fmt.Errorf("quality: %w", err)
		}
	}
	s, err := engine.NewSession(m, be, engine.Options{Context: ctx, Numerics: opt.Numerics})
	if err != nil {
		return "", fmt.Errorf("quality: %w", err)
	}
	eos := tok.Special(tokenizer.EOS)
	manifest := []byte("# id\tprompt_file\tcontinuation_file\tresponse_file\n")
	for i, p := range prompts {
		if p.ID == "" || strings.ContainsAny(p.ID, "\t\n/\\") || p.ID == "." || p.ID == ".." {
			return "", fmt.Errorf("quality: prompt id %q cannot name a file", p.ID)
		}
		ids := EncodeChat(tok, "", p.Prompt)
		if err := checkVocab(ids, m.Params.Vocab); err != nil {
			return "", fmt.Errorf("quality: prompt %s: %w", p.ID, err)
		}
		n := min(maxTokens, ctx-len(ids)-1)
		if n <= 0 {
			return "", fmt.Errorf("quality: prompt %s: %d tokens leave no room in the context of %d", p.ID, len(ids), ctx)
		}
		s.Reset()
		if err := s.Prefill(ids); err != nil {
			return "", fmt.Errorf("quality: prompt %s: %w", p.ID, err)
		}
		var gen []int
		g, err := s.Generate(context.Background(), engine.GenerateOptions{MaxTokens: n, EOS: eos, Token: func(t, _ int) bool {
			gen = append(gen, t)
			return false
		}})
		if err != nil {
			return "", fmt.Errorf("quality: prompt %s: %w", p.ID, err)
		}
		text := tok.Decode(gen)
		resp, err := json.Marshal(struct {
			ID           string `json:"id"`
			PromptTokens int    `json:"prompt_tokens"`
			Tokens       []int  `json:"tokens"`
			StoppedEOS   bool   `json:"stopped_eos"`
		}{p.ID, len(ids), gen, g.Reason == engine.StopEOS})
		if err != nil {
			return "", fmt.Errorf("quality: %w", err)
		}
		rel := [3]string{filepath.Join("prompts", p.ID+".txt"), filepath.Join("continuations", p.ID+".txt"), filepath.Join("responses", p.ID+".json")}
		for j, content := range [][]byte{[]byte(p.Prompt), text, append(resp, '\n')} {
			if err := os.WriteFile(filepath.Join(dir, rel[j]), content, 0o644); err != nil {
				return "", fmt.Errorf("quality: %w", err)
			}
		}
		manifest = fmt.Appendf(manifest, "%s\t%s\t%s\t%s\n", p.ID, rel[0], rel[1], rel[2])
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "%s %d/%d prompt=%d continuation=%d\n", p.ID, i+1, len(prompts), len(ids), len(gen))
		}
	}
	path := filepath.Join(dir, "manifest.tsv")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return "", fmt.Errorf("quality: %w", err)
	}
	return path, nil
}
