package harness

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// replay is a Forcer over a fixed sequence of logit rows: row i is shown
// after i decoded tokens.
type replay struct {
	rows    [][]float32
	decoded []int
}

func (r *replay) Logits() []float32 { return r.rows[len(r.decoded)] }
func (r *replay) Decode(t int) error {
	r.decoded = append(r.decoded, t)
	return nil
}

func ln(x float64) float32 { return float32(math.Log(x)) }

func TestScoreTargets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   [][]float32
		target []int
		want   TargetScore
	}{
		{
			// p(0) = 2/5 (greedy, match), p(1) = 1/9 (greedy is 2: the
			// prefix ends), p(3) = 5/8 (greedy again, but after a miss):
			// NLL = ln(5/2) + ln 9 + ln(8/5) = ln 36.
			name:   "prefix then miss",
			rows:   [][]float32{{ln(2), 0, 0, 0}, {0, 0, ln(6), 0}, {0, 0, 0, ln(5)}},
			target: []int{0, 1, 3},
			want:   TargetScore{NLL: math.Log(36), FirstMatch: true, GreedyLCP: 1},
		},
		{
			// Two maximal logits: greedy is the first (id 0), so target 1
			// is no match; p(1) = e/(2e+2), then p(2) = 1/4.
			name:   "tie goes to the lower id",
			rows:   [][]float32{{1, 1, 0, 0}, {0, 0, 0, 0}},
			target: []int{1, 2},
			want:   TargetScore{NLL: math.Log((2*math.E+2)/math.E) + math.Log(4), FirstMatch: false, GreedyLCP: 0},
		},
		{
			// Every target greedy: LCP is the whole target; p = 1/2, 1/2.
			name:   "all greedy",
			rows:   [][]float32{{0, ln(4), 0, 0, 0}, {0, 0, 0, 0, ln(4)}},
			target: []int{1, 4},
			want:   TargetScore{NLL: 2 * math.Log(2), FirstMatch: true, GreedyLCP: 2},
		},
		{
			name: "empty target",
			rows: [][]float32{{0, 0}},
			want: TargetScore{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &replay{rows: tc.rows}
			got, err := ScoreTargets(r, tc.target)
			require.NoError(t, err)
			require.InDelta(t, tc.want.NLL, got.NLL, 1e-6)
			require.Equal(t, tc.want.FirstMatch, got.FirstMatch)
			require.Equal(t, tc.want.GreedyLCP, got.GreedyLCP)
			// Every target token but the last is appended.
			if len(tc.target) > 0 {
				require.Equal(t, tc.target[:len(tc.target)-1], r.decoded)
			}
		})
	}
	_, err := ScoreTargets(&replay{rows: [][]float32{{0, 0}}}, []int{2})
	require.ErrorContains(t, err, "outside the vocabulary")
}

func TestReadManifest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	write("p/a.txt", "prompt a")
	write("c/a.txt", "cont a")
	abs := write("abs.txt", "absolute")
	m := write("manifest.tsv", "# id\tprompt_file\tcontinuation_file\tresponse_file\n\ncase_a\tp/a.txt\tc/a.txt\tr/a.json\r\ncase_b\t"+abs+"\t"+abs+"\n")
	cases, err := ReadManifest(m)
	require.NoError(t, err)
	require.Len(t, cases, 2)
	require.Equal(t, "case_a", cases[0].ID)
	p, c, err := cases[0].Texts()
	require.NoError(t, err)
	require.Equal(t, "prompt a", p)
	require.Equal(t, "cont a", c)
	require.Equal(t, abs, cases[1].PromptFile)

	for _, tc := range []struct{ body, want string }{
		{"a\tp.txt\n", "want id, prompt file"},
		{"a\tp.txt\t\n", "want id, prompt file"},
		{"a\tx\ty\na\tx\ty\n", "duplicate case id"},
		{"# only a comment\n", "no cases"},
	} {
		_, err := ReadManifest(write("bad.tsv", tc.body))
		require.ErrorContains(t, err, tc.want, tc.body)
	}
	_, err = ReadManifest(filepath.Join(dir, "missing.tsv"))
	require.Error(t, err)
	cases, err = ReadManifest(write("gone.tsv", "x\tnope.txt\tnope.txt\n"))
	require.NoError(t, err)
	_, _, err = cases[0].Texts()
	require.ErrorContains(t, err, "case x")
}

func TestScoreTSV(t *testing.T) {
	rows := []ScoreRow{
		{ID: "case_000", PromptTokens: 17, TargetTokens: 24, NLL: 4.2565, AvgNLL: 4.2565 / 24, FirstMatch: true, GreedyLCP: 12},
		{ID: "case_001", PromptTokens: 9, TargetTokens: 0},
	}
	var b strings.Builder
	require.NoError(t, WriteScores(&b, rows))
	require.Equal(t, ScoreHeader+
		"case_000\t17\t24\t4.256500000\t0.177354167\t1\t12\n"+
		"case_001\t9\t0\t0.000000000\t0.000000000\t0\t0\n", b.String())
	back, err := ReadScores(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Equal(t, "case_000", back[0].ID)
	require.InDelta(t, rows[0].AvgNLL, back[0].AvgNLL, 1e-9)
	require.Equal(t, rows[1], back[1])

	// Columns are found by name, prompt_tokens is optional.
	back, err = ReadScores(strings.NewReader("greedy_lcp\tid\tfirst_match\tnll\tavg_nll\ttarget_tokens\n3\tx\t1\t1.5\t0.5\t3\n"))
	require.NoError(t, err)
	require.Equal(t, []ScoreRow{{ID: "x", TargetTokens: 3, NLL: 1.5, AvgNLL: 0.5, FirstMatch: true, GreedyLCP: 3}}, back)

	for _, tc := range []struct{ body, want string }{
		{"", "empty score file"},
		{"id\tnll\n", "lacks column"},
		{ScoreHeader + "a\t1\t2\tx\t0\t0\t0\n", "nll \"x\""},
		{ScoreHeader + "a\t1\t2\tNaN\t0\t0\t0\n", "not a finite number"},
		{ScoreHeader + "a\t1\t-2\t1\t0\t0\t0\n", "not a count"},
		{ScoreHeader + "a\t1\t2\t1\t0\t2\t0\n", "not 0 or 1"},
		{ScoreHeader + "a\t1\t2\n", "missing"},
		{ScoreHeader + "a\t1\t2\t1\t1\t1\t1\na\t1\t2\t1\t1\t1\t1\n", "duplicate"},
	} {
		_, err := ReadScores(strings.NewReader(tc.body))
		require.ErrorContains(t, err, tc.want, tc.body)
	}

	s := SummarizeScores([]ScoreRow{
		{TargetTokens: 10, NLL: 2, FirstMatch: true, GreedyLCP: 4},
		{TargetTokens: 30, NLL: 10, GreedyLCP: 1},
	})
	require.Equal(t, "summary cases=2 tokens=40 avg_nll=0.300000000 first_match=1 avg_lcp=2.500", s.String())
	require.Equal(t, "summary cases=0 tokens=0 avg_nll=0.000000000 first_match=0 avg_lcp=0.000", SummarizeScores(nil).String())
}

// The comparison of two synthetic runs, every figure computed by hand:
// shared cases a, b, c (20 tokens); old Σnll 6 → 0.3, new 1.5+1+3.3 = 5.8
// → 0.29; a is a new win (−0.5), b a tie, c an old win (+0.3).
const (
	oldScores = ScoreHeader +
		"a\t10\t10\t2.0\t0.2\t1\t5\n" +
		"b\t10\t5\t1.0\t0.2\t0\t0\n" +
		"c\t10\t5\t3.0\t0.6\t1\t2\n" +
		"only_old\t10\t5\t9.0\t1.8\t1\t5\n"
	newScores = ScoreHeader +
		"c\t10\t5\t3.3\t0.66\t0\t0\n" +
		"a\t10\t10\t1.5\t0.15\t1\t7\n" +
		"b\t10\t5\t1.0\t0.2\t1\t1\n" +
		"only_new\t10\t5\t0.1\t0.02\t1\t5\n"
	wantComparison = "cases\t3\n" +
		"tokens\t20\n" +
		"old_avg_nll\t0.300000000\n" +
		"new_avg_nll\t0.290000000\n" +
		"delta_new_minus_old\t-0.010000000\n" +
		"relative_nll_change\t-3.333%\n" +
		"case_wins_new_old_ties\t1\t1\t1\n" +
		"first_token_matches_old_new\t2\t2\n" +
		"avg_greedy_lcp_old_new\t2.333\t2.667\n" +
		"\nnew best cases:\n" +
		"a\tdelta_nll=-0.500000\ttokens=10\told=0.200000\tnew=0.150000\n" +
		"b\tdelta_nll=0.000000\ttokens=5\told=0.200000\tnew=0.200000\n" +
		"c\tdelta_nll=0.300000\ttokens=5\told=0.600000\tnew=0.660000\n" +
		"\nold best cases:\n" +
		"c\tdelta_nll=0.300000\ttokens=5\told=0.600000\tnew=0.660000\n" +
		"b\tdelta_nll=0.000000\ttokens=5\told=0.200000\tnew=0.200000\n" +
		"a\tdelta_nll=-0.500000\ttokens=10\told=0.200000\tnew=0.150000\n"
)

func TestCompareScores(t *testing.T) {
	old, err := ReadScores(strings.NewReader(oldScores))
	require.NoError(t, err)
	nw, err := ReadScores(strings.NewReader(newScores))
	require.NoError(t, err)
	c, err := CompareScores(old, nw)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, c.WriteText(&b))
	require.Equal(t, wantComparison, b.String())

	// Equal deltas are listed by id: ascending among the new run's best,
	// descending among the old run's (upstream sorts (delta, id) tuples).
	var many []ScoreRow
	for _, id := range []string{"k", "b", "x", "a", "m", "c", "z", "d", "y", "e"} {
		many = append(many, ScoreRow{ID: id, TargetTokens: 1, NLL: 1})
	}
	c, err = CompareScores(many, many)
	require.NoError(t, err)
	require.Equal(t, 10, c.Ties)
	var ids []string
	for _, p := range c.Best(8, true) {
		ids = append(ids, p.Old.ID)
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e", "k", "m", "x"}, ids)
	ids = ids[:0]
	for _, p := range c.Best(8, false) {
		ids = append(ids, p.Old.ID)
	}
	require.Equal(t, []string{"z", "y", "x", "m", "k", "e", "d", "c"}, ids)

	_, err = CompareScores(old[:1], nw[3:])
	require.ErrorContains(t, err, "no common cases")
	_, err = CompareScores([]ScoreRow{{ID: "a", TargetTokens: 3}}, []ScoreRow{{ID: "a", TargetTokens: 4}})
	require.ErrorContains(t, err, "case a: 3 target tokens in the old run, 4 in the new")
	_, err = CompareScores([]ScoreRow{{ID: "a"}}, []ScoreRow{{ID: "a"}})
	require.ErrorContains(t, err, "no target tokens")
}

func TestQualityParquet(t *testing.T) {
	old, err := ReadScores(strings.NewReader(oldScores))
	require.NoError(t, err)
	nw, err := ReadScores(strings.NewReader(newScores))
	require.NoError(t, err)
	c, err := CompareScores(old, nw)
	require.NoError(t, err)
	meta := testMeta(t)
	root := t.TempDir()
	path, err := WriteQualityCompareRun(root, meta, "old.tsv", "new.tsv", c)
	require.NoError(t, err)
	require.Equal(t, RunPath(root, QualityCompareTable, meta.Partitions(), meta.RunID), path)
	recs, err := ReadRows[QualityCompareRecord](path)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, "a", recs[0].CaseID)
	require.InDelta(t, -0.5, recs[0].DeltaNLL, 1e-12)
	require.Equal(t, int64(7), recs[0].NewGreedyLCP)
	require.Equal(t, "new.tsv", recs[2].NewFile)
	require.Equal(t, meta.RunID, recs[1].RunID)

	path, err = WriteQualityRun(root, meta, "m.tsv", old)
	require.NoError(t, err)
	qrecs, err := ReadRows[QualityRecord](path)
	require.NoError(t, err)
	require.Len(t, qrecs, 4)
	require.Equal(t, old[3], qrecs[3].ScoreRow)
	require.Equal(t, "m.tsv", qrecs[0].Manifest)
}

// TestScoreTinyModel writes a reference manifest from the tiny model's
// own greedy continuations and scores the same model on it. The scorer's
// NLL (decode steps, float32 log-probabilities) is checked against an
// independent computation: one prefill of prompt + target with every
// position's logits, log-softmax in float64 here.
func TestScoreTinyModel(t *testing.T) {
	m, tok, be := tinyRig(t, 0)
	prompts := []PromptCase{{"case_000", "Explain B-tree insertion."}, {"it", "Spiega come funziona un B-tree."}}
	dir := t.TempDir()
	var log strings.Builder
	manifest, err := WriteReferenceManifest(dir, m, be, tok, prompts, ReferenceOptions{MaxTokens: 6, Context: 256, Log: &log})
	require.NoError(t, err)
	require.Contains(t, log.String(), "it 2/2")
	cases, err := ReadManifest(manifest)
	require.NoError(t, err)
	require.Len(t, cases, 2)

	var streamed []ScoreRow
	log.Reset()
	rows, err := ScoreCases(m, be, tok, cases, ScoreOptions{Log: &log, Row: func(r ScoreRow) error { streamed = append(streamed, r); return nil }})
	require.NoError(t, err)
	require.Equal(t, rows, streamed)
	require.Contains(t, log.String(), "case_000 cases=1 prompt=")

	for i, r := range rows {
		prompt, cont, err := cases[i].Texts()
		require.NoError(t, err)
		ids := EncodeChat(tok, "", prompt)
		target := tok.Encode(cont)
		require.Equal(t, int64(len(ids)), r.PromptTokens)
		require.Equal(t, int64(len(target)), r.TargetTokens)
		require.Positive(t, r.TargetTokens)

		// The greedy tokens the reference produced: where re-tokenizing
		// their text gives them back, the model reproduces all of them.
		raw, err := os.ReadFile(filepath.Join(dir, "responses", r.ID+".json"))
		require.NoError(t, err)
		var resp struct{ Tokens []int }
		require.NoError(t, json.Unmarshal(raw, &resp))
		// They are the greedy continuation of a hand decode loop.
		h, err := engine.NewSession(m, be, engine.Options{Context: 256})
		require.NoError(t, err)
		require.NoError(t, h.Prefill(ids))
		var hand []int
		for len(hand) < 6 {
			id := sample.Argmax(h.Logits())
			if id == tok.Special(tokenizer.EOS) {
				break
			}
			hand = append(hand, id)
			require.NoError(t, h.Decode(id))
		}
		require.Equal(t, hand, resp.Tokens, r.ID)
		if slices.Equal(resp.Tokens, target) {
			require.True(t, r.FirstMatch, r.ID)
			require.Equal(t, r.TargetTokens, r.GreedyLCP, r.ID)
		}

		seq := append(append([]int{}, ids...), target[:len(target)-1]...)
		s, err := engine.NewSession(m, be, engine.Options{Context: 1024})
		require.NoError(t, err)
		all := make([]float32, len(seq)*m.Params.Vocab)
		require.NoError(t, s.PrefillAll(seq, all))
		var nll float64
		for j, tt := range target {
			row := all[(len(ids)-1+j)*m.Params.Vocab:][:m.Params.Vocab]
			nll -= logSoftmaxAt(row, tt)
		}
		require.InDelta(t, nll, r.NLL, 1e-4*float64(len(target)), r.ID)
		require.InDelta(t, nll/float64(len(target)), r.AvgNLL, 1e-4, r.ID)
	}

	// A target that does not fit the context is refused.
	long := filepath.Join(dir, "long.txt")
	require.NoError(t, os.WriteFile(long, []byte(strings.Repeat("token ", 1100)), 0o644))
	_, err = ScoreCases(m, be, tok, []QualityCase{{ID: "long", PromptFile: cases[0].PromptFile, ContinuationFile: long}}, ScoreOptions{Context: 512})
	require.ErrorContains(t, err, "exceed the context of 1024")
	_, err = WriteReferenceManifest(dir, m, be, tok, []PromptCase{{"../x", "hi"}}, ReferenceOptions{})
	require.ErrorContains(t, err, "cannot name a file")
}

// logSoftmaxAt returns ln softmax(row)[id] in float64.
func logSoftmaxAt(row []float32, id int) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(row[id]) - mx - math.Log(sum)
}

// FuzzReadScores feeds arbitrary bytes to the score TSV reader: it must
// not panic, and what it accepts must survive a write and a re-read with
// the same ids and counts.
func FuzzReadScores(f *testing.F) {
	for _, seed := range []string{oldScores, newScores, "", ScoreHeader, "id\tnll\n", ScoreHeader + "a\t1\t2\tx\t0\t0\t0\n",
		"greedy_lcp\tid\tfirst_match\tnll\tavg_nll\ttarget_tokens\n3\tx\t1\t1.5\t0.5\t3\n", ScoreHeader + "a\t1\t2\t1e308\t-0\t1\t9\r\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadScores(bytes.NewReader(data))
		if err != nil {
			return
		}
		var b strings.Builder
		require.NoError(t, WriteScores(&b, rows))
		back, err := ReadScores(strings.NewReader(b.String()))
		if strings.ContainsAny(strings.Join(idsOf(rows), ""), "\n\r") {
			return // an id ending in \r does not survive its own line end
		}
		require.NoError(t, err, b.String())
		require.Equal(t, idsOf(rows), idsOf(back))
		for i := range rows {
			require.Equal(t, rows[i].TargetTokens, back[i].TargetTokens)
			require.Equal(t, rows[i].GreedyLCP, back[i].GreedyLCP)
			require.Equal(t, rows[i].FirstMatch, back[i].FirstMatch)
		}
	})
}

func idsOf(rows []ScoreRow) []string {
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// FuzzParseManifest feeds arbitrary bytes to the manifest parser: it must
// not panic, and every case it accepts has an id and both file names.
func FuzzParseManifest(f *testing.F) {
	for _, seed := range []string{"# id\tprompt_file\tcontinuation_file\tresponse_file\ncase_000\tp/a.txt\tc/a.txt\tr/a.json\n",
		"a\tx\ty\na\tx\ty\n", "a\tp.txt\t\n", "\n\n#\n", "a\t/abs\t../rel\r\n"} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := ParseManifest(data, dir)
		if err != nil {
			return
		}
		require.NotEmpty(t, cases)
		for _, c := range cases {
			require.NotEmpty(t, c.ID)
			require.NotEmpty(t, c.PromptFile)
			require.NotEmpty(t, c.ContinuationFile)
		}
	})
}
