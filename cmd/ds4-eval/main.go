// Command ds4-eval is a capability regression run: it asks the model every
// question of a JSONL question file, lets it think within a token budget,
// extracts and grades the final answer, and reports (docs/formats/harness.md#eval).
//
//	ds4-eval -f QUESTIONS.jsonl [-m MODEL] [-n TOKENS] [--questions N] [--trace FILE] [--parquet DIR]
//
// Each question streams to stdout as it is answered; a report table ends
// the run. With no -m and no ./ds4flash.gguf the built-in tiny synthetic
// model answers (with random weights, so every answer is wrong). The
// question file format is in the -h text and in testdata/README.md, next
// to a five-question example.
//
// --trace FILE writes upstream's trace: the run settings, then per
// question its fields, how thinking closed, the prompts and the full model
// output. --parquet DIR writes one row per question to
// DIR/eval/model=…/date=…/<run_id>.parquet: the run metadata columns of
// every ds4-go table, the settings (questions_file, ctx, max_tokens,
// temperature, top_p, min_p, seed, think_mode, the three budget settings,
// think_close_tokens) and the question's case_index, source, case_id,
// domain, title, answer_kind, n_choices, prompt, expected, picked, status,
// passed, prompt_tokens, gen_tokens, stopped_eos, prefill_seconds,
// gen_seconds, gen_tps, think_close (+ _token_index, _remaining_budget,
// _rank), error and output (invalid UTF-8 replaced by U+FFFD).
//
// Upstream's split-screen terminal UI is not part of this build: output
// is always the plain stream (--plain and --pause-ms are accepted), with
// thinking dimmed when stdout is a terminal; Ctrl+C stops the running
// question and prints the report.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// longPrompt is the prompt length from which prefill shows a progress bar.
const longPrompt = 2048

// run executes a command line and returns the exit status: 0 when every
// question passed, 1 on failed questions or a runtime error, 2 on a bad
// command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(command(ctx, stdout, stderr), args, stdout, stderr)
}

// command describes ds4-eval.
func command(ctx context.Context, stdout, stderr io.Writer) cli.Command {
	return cli.Command{
		Name:     "ds4-eval",
		Synopsis: []string{"-f QUESTIONS.jsonl [flags]"},
		Doc:      doc,
		Run:      func(args []string) error { return runEval(ctx, args, stdout, stderr) },
	}
}

// doc describes ds4-eval in its help.
const doc = `Asks the model every question of a JSONL file (one JSON object per line),
streams each answer (thinking dimmed on a terminal), grades the final
answer line and prints a report. It is a regression run, not a leaderboard.

Question file fields:
  source, id   required; "source/id" names the case and must be unique
  question     required; the question text
  answer       required; the key: a capital letter for multiple choice, a
               non-negative integer, or a line set "N", "N-M", "3,13-15"
  choices      0 to 10 strings, rendered "A. …", "B. …"
  kind         multiple_choice | exact_integer | line_set; when omitted,
               choices make multiple_choice, source "COMPSEC" line_set,
               anything else exact_integer
  domain, title  labels (the title defaults to the question's start)

Grading: the visible answer follows the first "</think>". Multiple choice
takes the first isolated letter within 96 bytes of the first "answer", else
the last isolated letter; an integer the first number within 160 bytes of
"answer", else the last number; a line set the numbers and N-M ranges on
the "answer" line, passing when every line given is in the key's set.

Thinking budget: with at most --hard-limit-reply-budget tokens left, the
close of thinking is forced; with at most --soft-limit-reply-budget left it
is emitted when it ranks in the top --soft-limit-think-close-rank tokens.
Upstream forces "</think>" as plain text, three ordinary tokens, so its
soft limit never fires; --think-close-tokens special forces the single
special token instead (a corrected mode, not upstream's behaviour).

Exit status: 0 when every question passed, 1 on a failed question or a
runtime error, 2 on a bad command line. Ctrl+C stops the running question
and prints the report.`

// evalFlags are ds4-eval's options.
type evalFlags struct {
	questionsFile, model, trace, parquet, hash, closeTokens string
	threads, questions, pauseMS                             int
	warm, think, nothink, plain                             bool
	cfg                                                     harness.EvalConfig
	ssd                                                     *cli.Streaming
}

func parseFlags(args []string, stdout, stderr io.Writer) (*evalFlags, error) {
	f := &evalFlags{}
	fs := pflag.NewFlagSet("ds4-eval", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVarP(&f.questionsFile, "questions-file", "f", "", "JSONL question file (required)")
	fs.StringVarP(&f.model, "model", "m", "", cli.ModelUsage)
	fs.IntVarP(&f.threads, "threads", "t", 0, cli.ThreadsUsage)
	fs.BoolVar(&f.warm, "warm-weights", false, "read every page of the weights before evaluating")
	fs.IntVarP(&f.cfg.Tokens, "tokens", "n", 16000, "max generated tokens per question (at most 1000000)")
	fs.IntVar(&f.questions, "questions", 0, "run only the first N questions of the file")
	fs.Float32Var(&f.cfg.Temperature, "temp", 0, "sampling temperature, 0..100; 0 is greedy")
	fs.Float32Var(&f.cfg.TopP, "top-p", 1, "nucleus sampling mass, 0..1")
	fs.Float32Var(&f.cfg.MinP, "min-p", 0.05, "keep tokens at least this times as likely as the top token, 0..1")
	fs.Uint64Var(&f.cfg.Seed, "seed", 0, "sampling seed (0: from the clock)")
	fs.StringVar(&f.trace, "trace", "", "write questions, outputs and grading decisions to FILE (mode 0600)")
	fs.BoolVar(&f.think, "think", false, "think before answering (the default)")
	fs.BoolVar(&f.nothink, "nothink", false, "answer without thinking")
	fs.IntVar(&f.cfg.SoftBudget, "soft-limit-reply-budget", 1024, "within the last N tokens, close thinking when the close token ranks high")
	fs.IntVar(&f.cfg.HardBudget, "hard-limit-reply-budget", 512, "force the close of thinking with N tokens left for the answer")
	fs.IntVar(&f.cfg.SoftRank, "soft-limit-think-close-rank", 3, "soft-close when the close token is in the top N tokens")
	fs.StringVar(&f.closeTokens, "think-close-tokens", "plain", `tokens forced to close thinking: "plain" (upstream: "</think>" as text) or "special" (the special token)`)
	fs.IntVar(&f.pauseMS, "pause-ms", 350, "pause after each result in the split-screen UI (accepted; this build always runs --plain)")
	fs.BoolVar(&f.plain, "plain", false, "plain streamed output (always, in this build)")
	fs.StringVar(&f.parquet, "parquet", "", "write one Parquet row per question under DIR/eval/model=…/date=…/")
	fs.StringVar(&f.hash, "hash", string(harness.DefaultHash), "model fingerprint in the Parquet run metadata: sha256, quick or none")
	f.ssd = cli.AddStreaming(fs)
	cli.AddUpstream(fs, upstreamFlags()...)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := cli.CheckUpstream(fs, stderr, "ds4-eval", upstreamFlags()...); err != nil {
		return nil, cli.Usage(err)
	}
	if err := f.validate(fs); err != nil {
		return nil, cli.Usage(err)
	}
	if err := f.ssd.Check(); err != nil {
		return nil, cli.Usage(err)
	}
	return f, nil
}

// upstreamFlags are upstream ds4-eval's flags that this build accepts
// without effect or refuses (see internal/cli).
func upstreamFlags() [][]cli.Upstream {
	return [][]cli.Upstream{cli.Backends(), cli.Tuning(), cli.MTP()}
}

// validate checks the flags, naming the flag and the value at fault,
// before anything is loaded.
func (f *evalFlags) validate(fs *pflag.FlagSet) error {
	c := &f.cfg
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case f.questionsFile == "":
		return errors.New("give the question file with -f/--questions-file")
	case f.think && f.nothink:
		return errors.New("--think and --nothink exclude each other")
	}
	if err := cli.Threads(fs, f.threads); err != nil {
		return err
	}
	for _, v := range []struct {
		name string
		bad  bool
		want string
	}{
		{"questions", fs.Changed("questions") && f.questions <= 0, "must be at least 1"},
		{"pause-ms", f.pauseMS <= 0, "must be at least 1"},
		{"hash", !harness.HashMode(f.hash).Valid(), "must be sha256, quick or none"},
		{"think-close-tokens", f.closeTokens != "plain" && f.closeTokens != "special", "must be plain or special"},
		{"tokens", c.Tokens <= 0, "must be at least 1"},
		{"tokens", c.Tokens > harness.MaxEvalContext, fmt.Sprintf("exceeds the %d token context cap", harness.MaxEvalContext)},
		{"soft-limit-reply-budget", c.SoftBudget <= 0, "must be at least 1"},
		{"hard-limit-reply-budget", c.HardBudget <= 0, "must be at least 1"},
		{"soft-limit-think-close-rank", c.SoftRank <= 0, "must be at least 1"},
		{"hard-limit-reply-budget", c.HardBudget >= c.Tokens, fmt.Sprintf("must be smaller than --tokens (%d)", c.Tokens)},
		{"soft-limit-reply-budget", c.SoftBudget < c.HardBudget, fmt.Sprintf("must be >= --hard-limit-reply-budget (%d)", c.HardBudget)},
		{"temp", !(c.Temperature >= 0 && c.Temperature <= sample.MaxTemperature), fmt.Sprintf("must be in [0, %d]", sample.MaxTemperature)},
		{"top-p", !(c.TopP >= 0 && c.TopP <= 1), "must be in [0, 1]"},
		{"min-p", !(c.MinP >= 0 && c.MinP <= 1), "must be in [0, 1]"},
	} {
		if v.bad {
			return cli.FlagError(fs, v.name, "%s", v.want)
		}
	}
	for _, in := range []struct{ name, path string }{{"questions-file", f.questionsFile}, {"model", f.model}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return err
		}
	}
	if err := cli.OutputFile("trace", f.trace); err != nil {
		return err
	}
	f.cfg.Think = !f.nothink
	f.cfg.SpecialClose = f.closeTokens == "special"
	return f.cfg.Validate()
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	cases, err := loadCases(f)
	if err != nil {
		return err
	}
	trace, err := openTrace(f.trace)
	if err != nil {
		return err
	}
	if trace != nil {
		defer trace.Close()
	}
	m, modelPath, err := cli.OpenModel(f.model, false, "ds4-eval", stderr)
	if err != nil {
		return err
	}
	if m.File != nil {
		defer m.File.Close()
	}
	if f.warm {
		m.WarmWeights(stderr, "ds4-eval")
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	prompts, err := harness.EncodeEvalPrompts(tok, cases, f.cfg.Think, m.Params.Vocab)
	if err != nil {
		return err
	}
	ctxSize, maxPrompt, err := sizeContext(prompts, f.cfg.Tokens, m.Params, stderr)
	if err != nil {
		return err
	}
	streamed, err := f.ssd.StartStreaming(m, modelPath, cli.StreamSetup{Context: ctxSize}, "ds4-eval", stderr)
	if err != nil {
		return err
	}
	defer streamed.Stop()

	be := cpu.New(f.threads)
	defer be.Close()
	started := time.Now()
	var meta harness.RunMeta
	if f.parquet != "" {
		meta, err = harness.CollectMeta(harness.MetaOptions{
			Tool: "ds4-eval", ModelPath: modelPath, Model: m, Backend: "cpu", Threads: be.Workers(),
			Hash: harness.HashMode(f.hash), Args: append([]string{"ds4-eval"}, args...), Now: started, Progress: stderr,
		})
		if err != nil {
			return err
		}
	}
	s, err := engine.NewSession(m, be, engine.Options{Context: ctxSize})
	if err != nil {
		return err
	}
	sampler := harness.NewEvalSampler(&f.cfg)
	e := &harness.Evaluator{Session: s, Tok: tok, Config: f.cfg, Sampler: sampler}
	if trace != nil {
		modelName := cmp.Or(modelPath, "builtin:tiny")
		err := harness.WriteEvalTraceHeader(trace, harness.EvalTraceHeader{
			Started: started, Model: modelName, Backend: "cpu", Ctx: ctxSize, MaxPromptTokens: maxPrompt,
			Questions: len(cases), QuestionsFile: f.questionsFile, Config: f.cfg,
		})
		if err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	results, runtime, runErr := runCases(ctx, e, cases, prompts, f.cfg, trace, stdout, stderr)
	return report(results, runtime, runErr, f, meta, ctxSize, trace, stdout, stderr)
}

// sizeContext returns the context prompts and a generation budget of
// tokens need, and the largest prompt's length, saying both and the
// buffers of a model of p at that size on stderr.
func sizeContext(prompts [][]int, tokens int, p layout.Params, stderr io.Writer) (ctxSize, maxPrompt int, err error) {
	ctxSize, maxPrompt, maxCase, err := harness.EvalContext(prompts, tokens)
	if err != nil {
		return 0, 0, cli.Usage(err)
	}
	fmt.Fprintf(stderr, "ds4-eval: context auto-sized to %d tokens (largest prompt=%d tokens, case=%d, generation budget=%d)\n",
		ctxSize, maxPrompt, maxCase+1, tokens)
	memBytes, rawRows, compRows := engine.ContextMemory(p, ctxSize)
	fmt.Fprintf(stderr, "ds4-eval: context buffers %.2f MiB (ctx=%d, backend=cpu, raw_kv_rows=%d, compressed_kv_rows=%d)\n",
		float64(memBytes)/(1<<20), ctxSize, rawRows, compRows)
	return ctxSize, maxPrompt, nil
}

// loadCases reads the question file and keeps the first --questions.
func loadCases(f *evalFlags) ([]harness.EvalCase, error) {
	cases, err := harness.LoadEvalCases(f.questionsFile)
	if err != nil {
		return nil, fmt.Errorf("--questions-file: %w", err)
	}
	if f.questions > len(cases) {
		return nil, cli.Usage(fmt.Errorf("--questions %d: %s holds only %d questions", f.questions, f.questionsFile, len(cases)))
	}
	if f.questions > 0 {
		cases = cases[:f.questions]
	}
	return cases, nil
}

// openTrace creates the --trace file; it returns nil when there is none.
func openTrace(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	trace, err := cli.CreatePrivate(path)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--trace %s: %w", path, err))
	}
	return trace, nil
}

// runCases runs the cases, streaming each to stdout (with a prefill bar
// on stderr for long prompts) and to the trace.
func runCases(ctx context.Context, e *harness.Evaluator, cases []harness.EvalCase, prompts [][]int, cfg harness.EvalConfig,
	trace *os.File, stdout, stderr io.Writer) ([]harness.EvalResult, time.Duration, error) {
	out := newPlain(stdout)
	e.OnToken = out.token
	var bar *progress.Bar
	prefilled := 0
	e.OnStart = func(r *harness.EvalResult) {
		out.start(r, len(cases), cfg.Think)
		bar, prefilled = nil, 0
		if r.PromptTokens >= longPrompt {
			bar = progress.New(stderr, "prefill", int64(r.PromptTokens), " tok")
		}
	}
	e.Prefill = func(done, total int) {
		if bar != nil {
			bar.Add(int64(done - prefilled))
		}
		prefilled = done
	}
	return e.RunAll(ctx, cases, prompts, func(r *harness.EvalResult) error {
		if bar != nil {
			bar.Finish()
			bar = nil
		}
		out.result(r, len(cases), e.Session.Context())
		if trace != nil {
			return harness.WriteEvalTraceCase(trace, r, len(cases), cfg, time.Now())
		}
		return nil
	})
}

// report prints the report table and the speeds, ends the trace and
// writes the Parquet results; it returns runErr, a failure of its own, or
// cli.ErrReported when a question failed.
func report(results []harness.EvalResult, runtime time.Duration, runErr error, f *evalFlags, meta harness.RunMeta, ctxSize int,
	trace *os.File, stdout, stderr io.Writer) error {
	if err := harness.WriteEvalReport(stdout, results, runtime); err != nil {
		return errors.Join(runErr, err)
	}
	printSpeed(stderr, results)
	if trace != nil {
		if err := harness.WriteEvalTraceSummary(trace, results); err != nil {
			return errors.Join(runErr, fmt.Errorf("trace: %w", err))
		}
	}
	if f.parquet != "" {
		path, err := harness.WriteEvalRun(f.parquet, meta, harness.NewEvalSettings(f.questionsFile, ctxSize, f.cfg), results)
		if err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintf(stderr, "ds4-eval: wrote %s\n", path)
	}
	if runErr != nil {
		return runErr
	}
	if _, failed := harness.EvalCounts(results); failed > 0 {
		return cli.ErrReported
	}
	return nil
}
