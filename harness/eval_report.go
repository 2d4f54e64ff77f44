package harness

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// thinkModeName is upstream's name of the thinking mode.
func thinkModeName(think bool) string {
	if think {
		return "high"
	}
	return "none"
}

// g6 formats a real as C's %.6g.
func g6(v float32) string { return strconv.FormatFloat(float64(v), 'g', 6, 32) }

// EvalTraceHeader is the run description at the top of a trace file.
type EvalTraceHeader struct {
	Started         time.Time
	Model           string // model path, or builtin:tiny
	Backend         string
	Ctx             int
	MaxPromptTokens int
	Questions       int
	QuestionsFile   string
	Config          EvalConfig
}

// WriteEvalTraceHeader writes the trace header: "# ds4-eval trace", then
// upstream's "key: value" lines, then this build's questions_file and
// think_close_tokens, then a blank line.
func WriteEvalTraceHeader(w io.Writer, h EvalTraceHeader) error {
	c := h.Config
	_, err := fmt.Fprintf(w, "# ds4-eval trace\nstarted_unix: %d\nmodel: %s\nbackend: %s\nctx: %d\nmax_tokens: %d\n"+
		"max_prompt_tokens: %d\nquestions: %d\ntemperature: %s\ntop_p: %s\nmin_p: %s\nseed: %d\n"+
		"think_mode_requested: %s\nsoft_limit_reply_budget: %d\nhard_limit_reply_budget: %d\n"+
		"soft_limit_think_close_rank: %d\nquestions_file: %s\nthink_close_tokens: %s\n\n",
		h.Started.Unix(), h.Model, h.Backend, h.Ctx, c.Tokens, h.MaxPromptTokens, h.Questions,
		g6(c.Temperature), g6(c.TopP), g6(c.MinP), c.Seed, thinkModeName(c.Think),
		c.SoftBudget, c.HardBudget, c.SoftRank, h.QuestionsFile, closeMode(c.SpecialClose))
	return err
}

// closeMode names the close-token mode.
func closeMode(special bool) string {
	if special {
		return "special"
	}
	return "plain"
}

// WriteEvalTraceCase writes one case's trace record (of n cases) at time
// at: its fields, how thinking closed, its choices (or
// "answer_kind: exact_integer" for every other kind, as upstream writes),
// then the system prompt, the question prompt and the model output as
// framed blocks.
func WriteEvalTraceCase(w io.Writer, r *EvalResult, n int, cfg EvalConfig, at time.Time) error {
	c := r.Case
	bw := bufio.NewWriter(w)
	picked := r.Picked
	if picked == "" {
		picked = NoAnswer
	}
	fmt.Fprintf(bw, "===== CASE %d/%d %s =====\ntimestamp_unix: %d\nsource: %s\nid: %s\ndomain: %s\ntitle: %s\n"+
		"status: %s\npicked: %s\nexpected: %s\nprompt_tokens: %d\ngenerated_tokens: %d\nelapsed_sec: %.3f\n"+
		"temperature: %s\ntop_p: %s\nmin_p: %s\nthink_mode_effective: %s\n",
		r.Index+1, n, c.Name(), at.Unix(), c.Source, c.ID, c.Domain, c.Title,
		r.Status, picked, c.Answer, r.PromptTokens, r.Generated, r.GenSec,
		g6(cfg.Temperature), g6(cfg.TopP), g6(cfg.MinP), thinkModeName(cfg.Think))
	if r.Close.Kind != CloseNone {
		fmt.Fprintf(bw, "think_close: %s\nthink_close_token_index: %d\nthink_close_remaining_budget: %d\nthink_close_rank: %d\n",
			r.Close.Kind, r.Close.Index, r.Close.Remaining, r.Close.Rank)
	} else {
		fmt.Fprintf(bw, "think_close: none\n")
	}
	if r.Err != "" {
		fmt.Fprintf(bw, "error: %s\n", r.Err)
	}
	if c.Kind == AnswerChoice {
		bw.WriteString("choices:\n")
		for i, ch := range c.Choices {
			fmt.Fprintf(bw, "  %c. %s\n", 'A'+i, ch)
		}
	} else {
		bw.WriteString("answer_kind: exact_integer\n")
	}
	writeTraceBlock(bw, "SYSTEM_PROMPT", EvalSystemPrompt)
	writeTraceBlock(bw, "QUESTION_PROMPT", r.Prompt)
	writeTraceBlock(bw, "MODEL_OUTPUT", r.Output)
	bw.WriteByte('\n')
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("eval: trace: %w", err)
	}
	return nil
}

// writeTraceBlock frames text as LABEL_BEGIN bytes=<n> … LABEL_END, with a
// newline added before the end marker when the text lacks one.
func writeTraceBlock(w *bufio.Writer, label, text string) {
	fmt.Fprintf(w, "%s_BEGIN bytes=%d\n", label, len(text))
	w.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		w.WriteByte('\n')
	}
	fmt.Fprintf(w, "%s_END\n", label)
}

// EvalCounts returns the numbers of passed and failed cases.
func EvalCounts(results []EvalResult) (passed, failed int) {
	for _, r := range results {
		switch r.Status {
		case StatusPassed:
			passed++
		case StatusFailed:
			failed++
		}
	}
	return passed, failed
}

// WriteEvalTraceSummary writes the trace's closing summary.
func WriteEvalTraceSummary(w io.Writer, results []EvalResult) error {
	passed, failed := EvalCounts(results)
	_, err := fmt.Fprintf(w, "===== SUMMARY =====\npassed: %d\nfailed: %d\ntotal: %d\n", passed, failed, len(results))
	return err
}

// FormatRuntime formats a duration as upstream's report does: "HHh:MMm".
func FormatRuntime(d time.Duration) string {
	minutes := int64(max(d, 0) / time.Minute)
	return fmt.Sprintf("%02dh:%02dm", minutes/60, minutes%60)
}

// WriteEvalReport writes the final report: the summary line
// "ds4-eval: <passed>/<n> passed[, <failed> failed], runtime HHh:MMm" and
// a table with one line per case.
func WriteEvalReport(w io.Writer, results []EvalResult, runtime time.Duration) error {
	passed, failed := EvalCounts(results)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "ds4-eval: %d/%d passed", passed, len(results))
	if failed > 0 {
		fmt.Fprintf(bw, ", %d failed", failed)
	}
	fmt.Fprintf(bw, ", runtime %s\n", FormatRuntime(runtime))
	fmt.Fprintf(bw, "%-3s %-8s %8s %8s %8s %-8s %-8s %s\n", "#", "state", "prompt", "gen", "total", "given", "correct", "test")
	for i := range results {
		r := &results[i]
		given := r.Picked
		if given == "" {
			given = "-"
		}
		fmt.Fprintf(bw, "%3d %-8s %8d %8d %8d %-8s %-8s %s\n", r.Index+1, r.Status, r.PromptTokens, r.Generated,
			r.PromptTokens+r.Generated, given, r.Case.Answer, r.Case.Name())
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("eval: report: %w", err)
	}
	return nil
}

// EvalSettings are the run-wide columns of an eval Parquet file.
type EvalSettings struct {
	QuestionsFile string  `parquet:"questions_file"`
	Ctx           int64   `parquet:"ctx"`
	MaxTokens     int64   `parquet:"max_tokens"`
	Temperature   float64 `parquet:"temperature"`
	TopP          float64 `parquet:"top_p"`
	MinP          float64 `parquet:"min_p"`
	Seed          uint64  `parquet:"seed"`
	ThinkMode     string  `parquet:"think_mode"`
	SoftBudget    int64   `parquet:"soft_limit_reply_budget"`
	HardBudget    int64   `parquet:"hard_limit_reply_budget"`
	SoftRank      int64   `parquet:"soft_limit_think_close_rank"`
	CloseTokens   string  `parquet:"think_close_tokens"`
}

// NewEvalSettings returns the settings columns of a run.
func NewEvalSettings(questionsFile string, ctx int, c EvalConfig) EvalSettings {
	return EvalSettings{
		QuestionsFile: questionsFile, Ctx: int64(ctx), MaxTokens: int64(c.Tokens),
		Temperature: float64(c.Temperature), TopP: float64(c.TopP), MinP: float64(c.MinP), Seed: c.Seed,
		ThinkMode: thinkModeName(c.Think), SoftBudget: int64(c.SoftBudget), HardBudget: int64(c.HardBudget),
		SoftRank: int64(c.SoftRank), CloseTokens: closeMode(c.SpecialClose),
	}
}

// EvalRow is the per-question part of an eval Parquet row.
type EvalRow struct {
	CaseIndex           int64   `parquet:"case_index"`
	Source              string  `parquet:"source"`
	CaseID              string  `parquet:"case_id"`
	Domain              string  `parquet:"domain"`
	Title               string  `parquet:"title"`
	Kind                string  `parquet:"answer_kind"`
	Choices             int64   `parquet:"n_choices"`
	Prompt              string  `parquet:"prompt"`
	Expected            string  `parquet:"expected"`
	Picked              string  `parquet:"picked"`
	Status              string  `parquet:"status"`
	Passed              bool    `parquet:"passed"`
	PromptTokens        int64   `parquet:"prompt_tokens"`
	GenTokens           int64   `parquet:"gen_tokens"`
	StoppedEOS          bool    `parquet:"stopped_eos"`
	PrefillSeconds      float64 `parquet:"prefill_seconds"`
	GenSeconds          float64 `parquet:"gen_seconds"`
	GenTPS              float64 `parquet:"gen_tps"`
	ThinkClose          string  `parquet:"think_close"`
	ThinkCloseIndex     int64   `parquet:"think_close_token_index"`
	ThinkCloseRemaining int64   `parquet:"think_close_remaining_budget"`
	ThinkCloseRank      int64   `parquet:"think_close_rank"`
	Error               string  `parquet:"error"`
	Output              string  `parquet:"output"`
}

// EvalRecord is one row of an eval run's Parquet file: the run, its
// settings and one question.
type EvalRecord struct {
	RunMeta
	EvalSettings
	EvalRow
}

// EvalTable is the directory of eval runs under a results root.
const EvalTable = "eval"

// NewEvalRow returns the Parquet columns of one result.
func NewEvalRow(r *EvalResult) EvalRow {
	c := r.Case
	return EvalRow{
		CaseIndex: int64(r.Index), Source: c.Source, CaseID: c.ID, Domain: c.Domain, Title: c.Title,
		Kind: string(c.Kind), Choices: int64(len(c.Choices)), Prompt: r.Prompt, Expected: c.Answer,
		Picked: r.Picked, Status: string(r.Status), Passed: r.Status == StatusPassed,
		PromptTokens: int64(r.PromptTokens), GenTokens: int64(r.Generated), StoppedEOS: r.EOS,
		PrefillSeconds: r.PrefillSec, GenSeconds: r.GenSec, GenTPS: r.GenTPS(),
		ThinkClose: r.Close.Kind.String(), ThinkCloseIndex: int64(r.Close.Index),
		ThinkCloseRemaining: int64(r.Close.Remaining), ThinkCloseRank: int64(r.Close.Rank),
		Error: r.Err, Output: strings.ToValidUTF8(r.Output, "\uFFFD"),
	}
}

// WriteEvalRun writes the results of one run as one Parquet file under
// root (root/eval/model=…/date=…/<run_id>.parquet) and returns its path.
func WriteEvalRun(root string, meta RunMeta, set EvalSettings, results []EvalResult) (string, error) {
	recs := make([]EvalRecord, len(results))
	for i := range results {
		recs[i] = EvalRecord{RunMeta: meta, EvalSettings: set, EvalRow: NewEvalRow(&results[i])}
	}
	return WriteRun(root, EvalTable, meta, recs)
}
