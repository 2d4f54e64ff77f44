package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
	"github.com/ds4-go/ds4/plots"
)

// serveDoc describes the serve subcommand in its help.
const serveDoc = `Drives a running OpenAI-compatible server (ds4-server, llama-server,
vLLM) with N concurrent streaming clients for each N of --clients, each
client sending --requests greedy chat completions in turn, and prints per
N the aggregate generation rate (tokens of all replies over the level's
wall time), its ratio to the first level's, the prompt tokens evaluated
(less the cached ones) per second, requests/s, and the time to
first token and inter-token latency p50/p99 in milliseconds. Tokens are
the usage's completion_tokens, or the chunks with text when the server
sends no usage; failed requests are counted, not fatal. Prompts are
--prompt-tokens DS4 tokens of --prompt-file (default: built-in text);
with --fresh-prompts every request gets its own, so no prefix cache helps.
The last line counts the prompts whose replies differed between requests
(at temperature 0 a deterministic server answers a prompt alike at every N;
ds4-server samples thinking replies at its own settings, so ask it for
--model deepseek-chat, which does not think).`

// serveFlags are the serve subcommand's options.
type serveFlags struct {
	cfg                                harness.LoadConfig
	promptFile, parquetDir, svg, title string
	promptTokens                       int
	fresh, noProgress                  bool
}

func parseServe(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{cfg: harness.LoadConfig{Endpoint: "http://127.0.0.1:8000"}}
	fs := pflag.NewFlagSet("ds4-bench serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVar(&f.cfg.Endpoint, "endpoint", f.cfg.Endpoint, "the server: base URL, /v1 URL or chat completions URL")
	fs.IntSliceVar(&f.cfg.Clients, "clients", []int{1, 2, 4, 8}, "concurrent clients of each level, run in turn")
	fs.IntVar(&f.cfg.Requests, "requests", 4, "requests each client sends in turn at each level")
	fs.IntVar(&f.cfg.MaxTokens, "max-tokens", 128, "max_tokens of each request")
	fs.IntVar(&f.promptTokens, "prompt-tokens", 64, "DS4 tokens of text in each prompt (0: the whole --prompt-file)")
	fs.StringVar(&f.promptFile, "prompt-file", "", "text the prompts are cut from (default: built-in numbered sentences)")
	fs.BoolVar(&f.fresh, "fresh-prompts", false, "a new prompt for every request, so no prefix cache helps")
	fs.StringVar(&f.cfg.Model, "model", "", "model id to request (default: the first of the endpoint's /v1/models)")
	fs.StringVar(&f.cfg.APIKey, "api-key", "", "API key of the server, if it has one")
	fs.DurationVar(&f.cfg.Timeout, "timeout", 0, "bound on one request (0: none)")
	fs.StringVar(&f.parquetDir, "parquet", "", "write the levels and the requests as Parquet under DIR")
	fs.StringVar(&f.svg, "svg", "", "draw throughput and latency against the clients to FILE (.svg, or .png)")
	fs.StringVar(&f.title, "title", "", "chart title (default: the model id and the endpoint)")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar or progress lines on stderr")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := f.validate(fs); err != nil {
		return nil, cli.Usage(fmt.Errorf("serve: %w", err))
	}
	return f, nil
}

// validate checks the flags, naming the flag and the value at fault.
func (f *serveFlags) validate(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if _, err := harness.ChatURL(f.cfg.Endpoint); err != nil {
		return cli.FlagError(fs, "endpoint", "want http://HOST[:PORT][/v1]")
	}
	for _, v := range []struct {
		name string
		bad  bool
		want string
	}{
		{"clients", len(f.cfg.Clients) == 0 || slices.Min(f.cfg.Clients) < 1, "each must be at least 1"},
		{"requests", f.cfg.Requests < 1, "must be at least 1"},
		{"max-tokens", f.cfg.MaxTokens < 1, "must be at least 1"},
		{"prompt-tokens", f.promptTokens < 0, "must be at least 0"},
		{"timeout", f.cfg.Timeout < 0, "must be at least 0"},
		{"svg", f.svg != "" && !isChart(f.svg), "must end in .svg or .png"},
	} {
		if v.bad {
			return cli.FlagError(fs, v.name, "%s", v.want)
		}
	}
	if err := cli.InputFile("prompt-file", f.promptFile); err != nil {
		return err
	}
	return cli.OutputFile("svg", f.svg)
}

// runServe is the serve subcommand.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServe(args, stderr)
	if err != nil {
		return err
	}
	text := harness.DefaultLoadText()
	if f.promptFile != "" {
		raw, err := os.ReadFile(f.promptFile)
		if err != nil {
			return err
		}
		text = string(raw)
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	if f.cfg.Prompt, err = harness.LoadPrompts(tok, text, f.promptTokens, f.fresh); err != nil {
		return cli.Usage(fmt.Errorf("serve: --prompt-file %s: %w", f.promptFile, err))
	}
	if f.cfg.Model == "" {
		if f.cfg.Model, err = harness.EndpointModel(ctx, &http.Client{Timeout: 30 * time.Second}, f.cfg.Endpoint, f.cfg.APIKey); err != nil {
			fmt.Fprintf(stderr, "ds4-bench serve: requests name no model: %v\n", err)
		}
	}
	meta, err := harness.CollectMeta(harness.MetaOptions{Tool: "ds4-bench serve", Backend: "endpoint", Hash: harness.HashNone,
		Args: append([]string{"ds4-bench", "serve"}, args...)})
	if err != nil {
		return err
	}
	meta.ModelFile, meta.ModelName = f.cfg.Endpoint, f.cfg.Model
	finish := f.progress(stderr)
	levels, reqs, runErr := harness.Load(ctx, f.cfg)
	finish()
	if len(levels) > 0 {
		if err := harness.WriteLoadTable(stdout, levels); err != nil {
			return err
		}
		prompts, differing := harness.DifferingOutputs(reqs)
		fmt.Fprintf(stdout, "outputs: %d of %d prompts answered differently by different requests\n", differing, prompts)
	}
	return errors.Join(runErr, f.write(meta, levels, reqs, stderr))
}

// progress sets the run to report each finished request on stderr unless
// --no-progress: on a terminal as a progress bar, otherwise as one line
// per request. It returns the function that ends the report.
func (f *serveFlags) progress(stderr io.Writer) func() {
	if f.noProgress {
		return func() {}
	}
	total := 0
	for _, n := range f.cfg.Clients {
		total += n * f.cfg.Requests
	}
	if isTerminal(stderr) {
		bar := progress.New(stderr, "ds4-bench serve", int64(total), " req")
		f.cfg.Done = func(harness.LoadRequest) { bar.Add(1) }
		return bar.Finish
	}
	var mu sync.Mutex
	done := 0
	f.cfg.Done = func(q harness.LoadRequest) {
		mu.Lock()
		defer mu.Unlock()
		done++
		fmt.Fprintf(stderr, "ds4-bench serve: %d/%d %s\n", done, total, q.Summary())
	}
	return func() {}
}

// write writes the run as Parquet under --parquet and its chart to --svg,
// where asked.
func (f *serveFlags) write(meta harness.RunMeta, levels []harness.LoadLevel, reqs []harness.LoadRequest, stderr io.Writer) error {
	if f.parquetDir != "" && len(reqs) > 0 {
		setup := harness.LoadSetup{Endpoint: f.cfg.Endpoint, ModelID: f.cfg.Model, RequestsPerClient: int64(f.cfg.Requests),
			MaxTokens: int64(f.cfg.MaxTokens), PromptFile: f.promptFile, PromptTargetTokens: int64(f.promptTokens), FreshPrompts: f.fresh}
		paths, err := harness.WriteLoadRun(f.parquetDir, meta, setup, levels, reqs)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintf(stderr, "ds4-bench serve: wrote %s\n", p)
		}
	}
	if f.svg == "" || len(levels) == 0 {
		return nil
	}
	pts := make([]plots.LoadPoint, len(levels))
	for i, l := range levels {
		pts[i] = plots.LoadPoint{Clients: float64(l.Clients), DecodeTPS: l.DecodeTPS, ITLP50MS: l.ITLP50MS, ITLP99MS: l.ITLP99MS}
	}
	title := f.title
	if title == "" {
		title = fmt.Sprintf("%s at %s", f.cfg.Model, f.cfg.Endpoint)
	}
	ch, err := plots.Load(pts, plots.LoadOptions{Title: title})
	if err != nil {
		return err
	}
	if err := ch.Save(f.svg); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4-bench serve: wrote %s\n", f.svg)
	return nil
}
