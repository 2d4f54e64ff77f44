// Command ds4-bench measures instantaneous prefill and generation
// throughput at a series of context frontiers over one fixed token
// sequence, as upstream's ds4-bench does, and plots the results.
//
//	ds4-bench --prompt-file FILE [-m MODEL] [--ctx-start N] [--ctx-max N]
//	          [--step-incr N | --step-mul F] [--gen-tokens N] [--csv FILE]
//	          [--repeat N] [--parquet DIR] [--svg FILE]
//	ds4-bench plot CSV... [-o OUT.svg|OUT.png] [--title T] [--width 960] [--height 540]
//	ds4-bench roofline [-m MODEL] [--prefill N] [--decode N] [--parquet DIR]
//	ds4-bench extrapolate -m SMALL -m LARGE [--layers N] [--pairs N] [--parquet DIR]
//	ds4-bench redteam [--url http://127.0.0.1:8000] [--pid PID] [--case NAME]...
//	ds4-bench serve [--endpoint URL] [--clients 1,2,4,8] [--requests M] [--max-tokens N]
//	          [--prompt-tokens K] [--prompt-file F] [--fresh-prompts] [--parquet DIR] [--svg FILE]
//
// The CSV has upstream's columns exactly; --parquet adds one Parquet file
// per run with the run metadata under DIR/bench/model=…/date=…/;
// --svg draws upstream's speed chart of the run. With no -m and no
// ./ds4flash.gguf the built-in tiny synthetic model is measured.
//
// Deviation from upstream: the default --system is upstream ds4's CLI
// default, "You are a helpful assistant", shared by every command here,
// where upstream's ds4-bench ends it with a period.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	"gonum.org/v1/plot/vg"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
	"github.com/ds4-go/ds4/plots"
	"github.com/ds4-go/ds4/steering"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(command(ctx, stdout, stderr), args, stdout, stderr)
}

// command describes ds4-bench and its subcommands.
func command(ctx context.Context, stdout, stderr io.Writer) cli.Command {
	return cli.Command{
		Name:     "ds4-bench",
		Synopsis: []string{"--prompt-file FILE [flags]", "--chat-prompt-file FILE [flags]", "COMMAND [flags]"},
		Doc: `Benchmarks instantaneous prefill and generation throughput at context
frontiers such as 2048, 4096, 6144, ... . Generation is always greedy,
runs for exactly --gen-tokens tokens, and skips EOS so every row is
comparable. Each frontier's prefill covers only the new interval; the
session is snapshotted before the generation probe and restored after it.`,
		Run: func(args []string) error { return runBench(ctx, args, stdout, stderr) },
		Commands: []cli.Command{{
			Name:     "ds4-bench plot",
			Synopsis: []string{"[flags] CSV..."},
			Summary:  "draw the speed chart of one or several ds4-bench CSV files",
			Run:      func(args []string) error { return runPlot(args, stdout, stderr) },
		}, {
			Name:     "ds4-bench roofline",
			Synopsis: []string{"[-m MODEL] [flags]"},
			Summary:  "measure the machine's limits and the model's fraction of them",
			Doc:      rooflineDoc,
			Run:      func(args []string) error { return runRoofline(ctx, args, stdout, stderr) },
		}, {
			Name:     "ds4-bench extrapolate",
			Synopsis: []string{"-m SMALL -m LARGE [--layers N] [flags]"},
			Summary:  "project speed to the full layer count from two slices",
			Doc:      extrapolateDoc,
			Run:      func(args []string) error { return runExtrapolate(ctx, args, stdout, stderr) },
		}, {
			Name:     "ds4-bench redteam",
			Synopsis: []string{"[--url http://127.0.0.1:8000] [--pid PID] [flags]"},
			Summary:  "replay the red team's attacks on a running ds4-server",
			Doc:      fmt.Sprintf(redteamDoc, wrapList(harness.RedTeamCases, 72)),
			Run:      func(args []string) error { return runRedteam(ctx, args, stdout, stderr) },
		}, {
			Name:     "ds4-bench serve",
			Synopsis: []string{"[--endpoint URL] [--clients N,N...] [--requests M] [flags]"},
			Summary:  "load an OpenAI-compatible server with concurrent streaming clients",
			Doc:      serveDoc,
			Run:      func(args []string) error { return runServe(ctx, args, stdout, stderr) },
		}},
	}
}

// benchFlags are ds4-bench's options.
type benchFlags struct {
	promptFile, chatFile, system, model, csvPath string
	parquetDir, svgPath, title, hash             string
	threads, repeat                              int
	warm, noProgress                             bool
	cfg                                          harness.BenchConfig
	steerFile                                    string
	steerFFN, steerAttn                          float64
	ssd                                          *cli.Streaming
}

func parseBench(args []string, stdout, stderr io.Writer) (*benchFlags, *pflag.FlagSet, error) {
	f := &benchFlags{cfg: harness.DefaultBenchConfig()}
	fs := pflag.NewFlagSet("ds4-bench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVar(&f.promptFile, "prompt-file", "", "raw benchmark text, tokenized as plain text (no BOS, no template)")
	fs.StringVar(&f.chatFile, "chat-prompt-file", "", "text rendered as one non-thinking chat user message")
	fs.StringVar(&f.system, "system", cli.DefaultSystem, "system text, only with --chat-prompt-file (also -sys)")
	fs.StringVarP(&f.model, "model", "m", "", cli.ModelUsage)
	fs.IntVarP(&f.threads, "threads", "t", 0, cli.ThreadsUsage)
	fs.BoolVar(&f.warm, "warm-weights", false, "read every page of the weights before measuring")
	fs.IntVar(&f.cfg.CtxStart, "ctx-start", f.cfg.CtxStart, "first measured frontier")
	fs.IntVar(&f.cfg.CtxMax, "ctx-max", f.cfg.CtxMax, "last measured frontier (always measured)")
	fs.IntVar(&f.cfg.CtxAlloc, "ctx-alloc", 0, "allocated context (default ctx-max + gen-tokens + 1)")
	fs.Float64Var(&f.cfg.StepMul, "step-mul", f.cfg.StepMul, "multiplicative step (>= 1)")
	fs.IntVar(&f.cfg.StepIncr, "step-incr", f.cfg.StepIncr, "linear step, used when --step-mul is 1")
	fs.IntVarP(&f.cfg.GenTokens, "gen-tokens", "n", f.cfg.GenTokens, "greedy decode tokens per frontier (also --tokens)")
	fs.IntVar(&f.cfg.GenTokens, "tokens", f.cfg.GenTokens, "alias of --gen-tokens")
	fs.StringVar(&f.csvPath, "csv", "", "CSV destination (default stdout)")
	fs.IntVar(&f.repeat, "repeat", 1, "measurements per frontier; rates become means, their SDs go to Parquet and stderr")
	fs.StringVar(&f.parquetDir, "parquet", "", "write the run as Parquet under DIR (hive-style partitions)")
	fs.StringVar(&f.svgPath, "svg", "", "draw the speed chart of the run to FILE (.svg, or .png)")
	fs.StringVar(&f.title, "title", "", "chart title (default from the CSV name or the model)")
	fs.StringVar(&f.hash, "hash", string(harness.DefaultHash), "model fingerprint in the run metadata: sha256, quick or none")
	fs.StringVar(&f.steerFile, "dir-steering-file", "", "directional steering vector FILE (.f32)")
	fs.Float64Var(&f.steerFFN, "dir-steering-ffn", 0, "steering scale at the FFN output in [-100, 100] (1 when only a file is given)")
	fs.Float64Var(&f.steerAttn, "dir-steering-attn", 0, "steering scale at the attention output in [-100, 100]")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar or progress lines on stderr")
	fs.MarkHidden("tokens")
	fs.StringVar(&f.system, "sys", f.system, "upstream's spelling of --system")
	fs.MarkHidden("sys")
	f.ssd = cli.AddStreaming(fs)
	cli.AddUpstream(fs, upstreamFlags()...)
	if err := cli.Parse(fs, args); err != nil {
		return nil, fs, err
	}
	if err := cli.CheckUpstream(fs, stderr, "ds4-bench", upstreamFlags()...); err != nil {
		return nil, fs, cli.Usage(err)
	}
	if err := f.validate(fs); err != nil {
		return nil, fs, cli.Usage(err)
	}
	if err := f.ssd.Check(); err != nil {
		return nil, fs, cli.Usage(err)
	}
	f.cfg.Repeat = f.repeat
	if err := f.cfg.Normalize(); err != nil {
		return nil, fs, cli.Usage(err)
	}
	return f, fs, nil
}

// upstreamFlags are upstream ds4-bench's flags that this build accepts
// without effect or refuses (see internal/cli).
func upstreamFlags() [][]cli.Upstream {
	return [][]cli.Upstream{cli.Backends(), cli.Tuning()}
}

// validate checks the flags, naming the flag and the value at fault,
// before anything is loaded.
func (f *benchFlags) validate(fs *pflag.FlagSet) error {
	c := &f.cfg
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if (f.promptFile == "") == (f.chatFile == "") {
		return errors.New("specify exactly one of --prompt-file or --chat-prompt-file")
	}
	if err := cli.Threads(fs, f.threads); err != nil {
		return err
	}
	maxCtx := layout.MaxContextLength()
	for _, v := range []struct {
		name string
		bad  bool
		want string
	}{
		{"ctx-start", c.CtxStart <= 0, "must be at least 1"},
		{"ctx-max", c.CtxMax <= 0, "must be at least 1"},
		{"ctx-start", c.CtxStart > c.CtxMax, fmt.Sprintf("must be at most --ctx-max (%d)", c.CtxMax)},
		{"ctx-max", c.CtxMax > maxCtx, fmt.Sprintf("must be at most %d, the DS4 context length", maxCtx)},
		{"gen-tokens", c.GenTokens <= 0, "must be at least 1"},
		{"gen-tokens", c.GenTokens > maxCtx, fmt.Sprintf("must be at most %d, the DS4 context length", maxCtx)},
		{"ctx-alloc", fs.Changed("ctx-alloc") && c.CtxAlloc <= c.CtxMax+c.GenTokens,
			fmt.Sprintf("must be greater than --ctx-max + --gen-tokens (%d)", c.CtxMax+c.GenTokens)},
		{"ctx-alloc", c.CtxAlloc > maxCtx, fmt.Sprintf("must be at most %d, the DS4 context length", maxCtx)},
		{"step-mul", math.IsNaN(c.StepMul) || math.IsInf(c.StepMul, 0) || c.StepMul < 1, "must be a finite number >= 1"},
		{"step-incr", c.StepMul == 1 && c.StepIncr <= 0, "must be at least 1 when --step-mul is 1"},
		{"repeat", f.repeat <= 0, "must be at least 1"},
		{"hash", !harness.HashMode(f.hash).Valid(), "must be sha256, quick or none"},
		{"svg", f.svgPath != "" && !isChart(f.svgPath), "must end in .svg or .png"},
	} {
		if v.bad {
			return cli.FlagError(fs, v.name, "%s", v.want)
		}
	}
	if !fs.Changed("ctx-alloc") && c.CtxMax+c.GenTokens+1 > maxCtx {
		return fmt.Errorf("--ctx-max %d and --gen-tokens %d: need a context of %d, more than %d, the DS4 context length", c.CtxMax, c.GenTokens, c.CtxMax+c.GenTokens+1, maxCtx)
	}
	ffn, attn, err := steering.Scales(f.steerFile, f.steerFFN, f.steerAttn, fs.Changed("dir-steering-ffn"), fs.Changed("dir-steering-attn"))
	if err != nil {
		return err
	}
	f.steerFFN, f.steerAttn = float64(ffn), float64(attn)
	inputs := []struct{ name, path string }{{"prompt-file", f.promptFile}, {"chat-prompt-file", f.chatFile}, {"model", f.model}}
	if ffn != 0 || attn != 0 {
		inputs = append(inputs, struct{ name, path string }{"dir-steering-file", f.steerFile})
	}
	for _, in := range inputs {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return err
		}
	}
	for _, out := range []struct{ name, path string }{{"csv", f.csvPath}, {"svg", f.svgPath}} {
		if err := cli.OutputFile(out.name, out.path); err != nil {
			return err
		}
	}
	return nil
}

// isChart reports whether path names a chart format plots can write.
func isChart(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".svg" || ext == ".png"
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, _, err := parseBench(args, stdout, stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	promptFile := f.promptFile
	if f.chatFile != "" {
		promptFile = f.chatFile
	}
	in, ids, err := harness.ReadBenchPrompt(tok, promptFile, f.chatFile != "", f.system)
	if err != nil {
		return cli.Usage(err)
	}
	if len(ids) < f.cfg.CtxMax {
		return cli.Usage(fmt.Errorf("--ctx-max %d: %s has only %d tokens, need at least --ctx-max=%d", f.cfg.CtxMax, in.PromptFile, len(ids), f.cfg.CtxMax))
	}

	// The arguments are all checked: load the model.
	m, modelPath, err := cli.OpenModel(f.model, false, "ds4-bench", stderr)
	if err != nil {
		return err
	}
	if m.File != nil {
		defer m.File.Close()
	}
	if max := m.Params.ContextLength; max > 0 && f.cfg.CtxAlloc > max {
		return cli.Usage(fmt.Errorf("--ctx-alloc %d: the model's context length is %d", f.cfg.CtxAlloc, max))
	}
	streamed, err := f.ssd.StartStreaming(m, modelPath, cli.StreamSetup{Context: f.cfg.CtxAlloc}, "ds4-bench", stderr)
	if err != nil {
		return err
	}
	defer streamed.Stop()
	if f.warm {
		m.WarmWeights(stderr, "ds4-bench")
	}
	if err := harness.CheckVocab(ids[:f.cfg.CtxMax], m.Params.Vocab); err != nil {
		return err
	}
	be := cpu.New(f.threads)
	defer be.Close()
	memBytes, rawRows, compRows := engine.ContextMemory(m.Params, f.cfg.CtxAlloc)
	fmt.Fprintf(stderr, "ds4-bench: context buffers %.2f MiB (ctx=%d, backend=cpu, prefill_chunk=whole interval, raw_kv_rows=%d, compressed_kv_rows=%d)\n",
		float64(memBytes)/(1<<20), f.cfg.CtxAlloc, rawRows, compRows)
	meta, err := harness.CollectMeta(harness.MetaOptions{
		Tool: "ds4-bench", ModelPath: modelPath, Model: m, Backend: "cpu", Threads: be.Workers(),
		Hash: harness.HashMode(f.hash), Args: append([]string{"ds4-bench"}, args...), Progress: stderr,
	})
	if err != nil {
		return err
	}
	steer, err := steering.Load(f.steerFile, float32(f.steerFFN), float32(f.steerAttn), m.Params.Layers, m.Params.Embd)
	if err != nil {
		return err
	}
	s, err := engine.NewSession(m, be, engine.Options{Context: f.cfg.CtxAlloc, Steering: steer})
	if err != nil {
		return err
	}
	rows, runErr := sweep(ctx, f, &harness.Bench{Session: s, Tokens: ids, EOS: tok.Special(tokenizer.EOS), Config: f.cfg,
		Experts: func() (expertcache.Stats, bool) { return cli.ExpertStats(m) }}, stdout, stderr)
	reportRows(stderr, rows, f.cfg.Repeat, streamed != nil)
	return errors.Join(runErr, writeBench(f, meta, in, rows, stderr))
}

// reportRows writes on w, for each frontier of rows, the spread of its
// repeat runs when there were several, and the expert cache's work when
// streaming.
func reportRows(w io.Writer, rows []harness.BenchRow, repeat int, streaming bool) {
	for _, r := range rows {
		if repeat > 1 {
			fmt.Fprintf(w, "ds4-bench: ctx %d: prefill %.2f ± %.2f t/s (95%% CI [%.2f, %.2f]), generation %.2f ± %.2f t/s (95%% CI [%.2f, %.2f]) (%d runs; ± the SD)\n",
				r.CtxTokens, r.PrefillTPS, r.PrefillTPSSD, r.PrefillTPSCILo, r.PrefillTPSCIHi, r.GenTPS, r.GenTPSSD, r.GenTPSCILo, r.GenTPSCIHi, repeat)
		}
		if streaming {
			fmt.Fprintf(w, "ds4-bench: ctx %d: ssd hit rate %.1f %%, %.2f MiB read/token, read p50 %.2f ms p99 %.2f ms\n",
				r.CtxTokens, 100*r.SSDHitRate, r.SSDBytesPerToken/(1<<20), r.SSDReadP50MS, r.SSDReadP99MS)
		}
	}
}

// sweep runs the sweep b, each row written to --csv or stdout as it is
// measured, under a progress bar unless --no-progress.
func sweep(ctx context.Context, f *benchFlags, b *harness.Bench, stdout, stderr io.Writer) ([]harness.BenchRow, error) {
	out := stdout
	if f.csvPath != "" {
		csvFile, err := os.Create(f.csvPath)
		if err != nil {
			return nil, err
		}
		defer csvFile.Close()
		out = csvFile
	}
	cw, err := harness.NewCSVWriter(out)
	if err != nil {
		return nil, err
	}
	b.Row = cw.Write
	if !f.noProgress {
		bar := progress.New(stderr, "ds4-bench", f.cfg.Work(), " tok")
		defer bar.Finish()
		b.Progress = func(n int) { bar.Add(int64(n)) }
		if isTerminal(stderr) && f.csvPath == "" {
			// A row on the terminal first clears the bar's line.
			b.Row = func(r harness.BenchRow) error {
				fmt.Fprint(stderr, "\r\x1b[K")
				return cw.Write(r)
			}
		}
	}
	return b.Run(ctx)
}

// writeBench writes the sweep's rows as Parquet under --parquet and their
// chart to --svg, where asked.
func writeBench(f *benchFlags, meta harness.RunMeta, in harness.BenchInput, rows []harness.BenchRow, stderr io.Writer) error {
	if f.parquetDir != "" && len(rows) > 0 {
		path, err := harness.WriteBenchRun(f.parquetDir, meta, in, f.cfg, rows)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-bench: wrote %s\n", path)
	}
	if f.svgPath == "" {
		return nil
	}
	if len(rows) < 2 {
		fmt.Fprintf(stderr, "ds4-bench: %s not drawn: the chart needs at least two frontiers\n", f.svgPath)
		return nil
	}
	title := f.title
	if title == "" && f.csvPath != "" {
		title = plots.DefaultSpeedTitle(f.csvPath)
	} else if title == "" {
		title = meta.ModelName + " t/s"
	}
	if err := drawSpeed([][]harness.BenchRow{rows}, []string{meta.ModelName}, title, 0, 0, f.svgPath); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4-bench: wrote %s\n", f.svgPath)
	return nil
}

func vgLen(n int) vg.Length { return vg.Length(n) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// drawSpeed draws the speed chart of one or several runs to path.
func drawSpeed(runs [][]harness.BenchRow, labels []string, title string, width, height int, path string) error {
	var series []plots.SpeedSeries
	for i, rows := range runs {
		s := plots.SpeedSeries{Label: labels[i]}
		for _, r := range rows {
			s.Ctx = append(s.Ctx, float64(r.CtxTokens))
			s.Prefill = append(s.Prefill, r.PrefillTPS)
			s.Gen = append(s.Gen, r.GenTPS)
		}
		series = append(series, s)
	}
	ch, err := plots.Speed(series, plots.SpeedOptions{Title: title, Width: vgLen(width), Height: vgLen(height)})
	if err != nil {
		return err
	}
	return ch.Save(path)
}

// runPlot is upstream's plot_speed: one CSV gives its speed chart, several
// a comparison.
func runPlot(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("ds4-bench plot", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	outPath := fs.StringP("output", "o", "", "output file, .svg or .png (default <first csv stem>_ts.svg)")
	title := fs.String("title", "", "chart title (default from the CSV name)")
	width := fs.Int("width", plots.DefaultWidth, "width in points (pixels in PNG)")
	height := fs.Int("height", plots.DefaultHeight, "height in points (pixels in PNG)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usage(errors.New("plot: give one or more ds4-bench CSV files"))
	}
	switch {
	case *width <= 0:
		return cli.Usage(fmt.Errorf("plot: %w", cli.FlagError(fs, "width", "must be at least 1")))
	case *height <= 0:
		return cli.Usage(fmt.Errorf("plot: %w", cli.FlagError(fs, "height", "must be at least 1")))
	case *outPath != "" && !isChart(*outPath):
		return cli.Usage(fmt.Errorf("plot: %w", cli.FlagError(fs, "output", "must end in .svg or .png")))
	}
	var runs [][]harness.BenchRow
	var labels []string
	for _, p := range fs.Args() {
		rows, err := harness.ReadCSVFile(p)
		if err != nil {
			return err
		}
		if len(rows) < 2 {
			return fmt.Errorf("%s: need at least two data rows", p)
		}
		runs = append(runs, rows)
		labels = append(labels, strings.TrimSuffix(plots.DefaultSpeedTitle(p), " t/s"))
	}
	first := fs.Arg(0)
	if *outPath == "" {
		*outPath = filepath.Join(filepath.Dir(first), strings.TrimSuffix(filepath.Base(first), filepath.Ext(first))+"_ts.svg")
	}
	if *title == "" {
		*title = plots.DefaultSpeedTitle(first)
		if len(runs) > 1 {
			*title = strings.Join(labels, " vs ") + " t/s"
		}
	}
	if err := drawSpeed(runs, labels, *title, *width, *height, *outPath); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *outPath)
	return nil
}
