package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/plots"
	"github.com/ds4-go/ds4/steering"
	"github.com/ds4-go/ds4/steering/experiment"
)

// sweepFlags are the options of ds4-steer sweep.
type sweepFlags struct {
	model, direction, prompts, scales, parquetDir, svg, hash string
	tokens, ctx, threads                                     int
	attnScale                                                float64
	nothink                                                  bool
}

// parseScales parses a comma-separated list of scales in [−100, 100].
func parseScales(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("--scales: %q is not a number", f)
		}
		if err := checkScale("--scales", v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// checkScale reports whether v lies in [−MaxScale, MaxScale].
func checkScale(name string, v float64) error {
	if math.IsNaN(v) || v < -steering.MaxScale || v > steering.MaxScale {
		return fmt.Errorf("%s %v outside [-%d, %d]", name, v, steering.MaxScale, steering.MaxScale)
	}
	return nil
}

func runSweep(args []string, stdout, stderr io.Writer) error {
	var f sweepFlags
	fs := pflag.NewFlagSet("ds4-steer sweep", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&f.model, "model", "m", "", cli.ModelUsage)
	fs.StringVar(&f.direction, "direction", "", "steering direction .f32 (required)")
	fs.StringVar(&f.prompts, "prompts", "", "neutral prompts, one per line (required)")
	fs.StringVar(&f.scales, "scales", "-2,-1,-0.5,0,0.5,1,2", "comma-separated FFN scales in [-100, 100]")
	fs.IntVarP(&f.tokens, "tokens", "n", 160, "maximum output tokens per generation")
	fs.IntVar(&f.ctx, "ctx", 4096, "context size in tokens")
	fs.Float64Var(&f.attnScale, "attn-scale", 0, "attention-output scale in [-100, 100] for every run")
	fs.BoolVar(&f.nothink, "nothink", false, "end the prompt with </think> instead of <think>")
	fs.IntVarP(&f.threads, "threads", "t", 0, "CPU worker threads (0: one per CPU)")
	fs.StringVar(&f.parquetDir, "parquet", "", "write the rows as Parquet under DIR (hive-style partitions)")
	fs.StringVar(&f.svg, "svg", "", "draw mean effect against scale to FILE (.svg, or .png)")
	fs.StringVar(&f.hash, "hash", string(harness.DefaultHash), "model fingerprint in the Parquet metadata: sha256, quick or none")
	if err := parse(fs, args); err != nil {
		return err
	}
	scales, err := parseScales(f.scales)
	switch {
	case err != nil:
		return cli.Usage(err)
	case f.direction == "" || f.prompts == "":
		return cli.Usage(errors.New("--direction and --prompts are required"))
	case f.tokens <= 0:
		return cli.Usage(cli.FlagError(fs, "tokens", "must be at least 1"))
	}
	if err := checkCommon(fs, f.model, f.ctx, f.threads); err != nil {
		return cli.Usage(err)
	}
	if err := checkScale("--attn-scale", f.attnScale); err != nil {
		return cli.Usage(err)
	}
	if !harness.HashMode(f.hash).Valid() {
		return cli.Usage(cli.FlagError(fs, "hash", "must be sha256, quick or none"))
	}
	for _, in := range []struct{ name, path string }{{"direction", f.direction}, {"prompts", f.prompts}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return cli.Usage(err)
		}
	}
	if err := cli.OutputFile("svg", f.svg); err != nil {
		return cli.Usage(err)
	}
	return sweep(f, scales, args, stdout, stderr)
}

// sweep runs the sweep of the parsed flags and writes its results.
func sweep(f sweepFlags, scales []float64, args []string, stdout, stderr io.Writer) error {
	prompts, err := steering.ReadPrompts(f.prompts)
	if err != nil {
		return err
	}
	m, modelPath, err := cli.OpenModel(f.model, false, "ds4-steer", stderr)
	if err != nil {
		return err
	}
	dir, err := steering.Read(f.direction, m.Params.Layers, m.Params.Embd)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	be := cpu.New(f.threads)
	defer be.Close()
	meta, err := harness.CollectMeta(harness.MetaOptions{
		Tool: "ds4-steer sweep", ModelPath: modelPath, Model: m, Backend: "cpu", Threads: be.Workers(),
		Hash: harness.HashMode(f.hash), Args: append([]string{"ds4-steer", "sweep"}, args...), Progress: stderr,
	})
	if err != nil {
		return err
	}
	rule := func(c byte) string { return strings.Repeat(string(c), 80) }
	rows, err := experiment.Sweep(context.Background(), m, be, tok, prompts, experiment.SweepOptions{
		Direction: dir, DirectionName: f.direction, Scales: scales, AttnScale: f.attnScale,
		System: cli.DefaultSystem, Think: !f.nothink, Tokens: f.tokens, Context: f.ctx,
		Prompt: func(_ int, prompt string) { fmt.Fprintf(stdout, "%s\nPROMPT: %s\n", rule('='), prompt) },
		Row: func(r *experiment.SweepRow) {
			fmt.Fprintf(stdout, "%s\nFFN scale: %g\n%s\n[%d tokens, first-token KL %.6g]\n", rule('-'), r.FFNScale, r.Output, r.OutputTokens, r.FirstKL)
		},
	})
	if err != nil {
		return err
	}
	if f.parquetDir != "" {
		path, err := harness.WriteRun(f.parquetDir, "steering", meta, rows)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-steer: wrote %s\n", path)
	}
	if f.svg == "" {
		return nil
	}
	var pts []plots.SteeringPoint
	for _, e := range experiment.MeanEffects(rows) {
		pts = append(pts, plots.SteeringPoint{Scale: e.Scale, Tokens: e.Tokens, KL: e.KL})
	}
	ch, err := plots.SteeringSweep(pts, plots.SteeringOptions{
		Title: fmt.Sprintf("Steering sweep: %d prompts, %s", len(prompts), m.Params.Name),
	})
	if err != nil {
		return err
	}
	if err := ch.Save(f.svg); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4-steer: wrote %s\n", f.svg)
	return nil
}
