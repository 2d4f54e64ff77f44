package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/steering"
	"github.com/ds4-go/ds4/steering/experiment"
)

// buildFlags are the options of ds4-steer build.
type buildFlags struct {
	model, good, bad, out, component, system string
	ctx, threads                             int
	think, pairNormalize, noOrthogonalize    bool
}

func runBuild(args []string, stdout, stderr io.Writer) error {
	var f buildFlags
	fs := pflag.NewFlagSet("ds4-steer build", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&f.model, "model", "m", "", cli.ModelUsage)
	fs.StringVar(&f.good, "good", "", "target prompts, one per line (required)")
	fs.StringVar(&f.bad, "bad", "", "contrast prompts, one per line (required)")
	fs.StringVar(&f.out, "out", "dir-steering/out/direction.json", "output path; <stem>.f32 and <stem>.json are written")
	fs.StringVar(&f.component, "component", "ffn_out", "captured sublayer output: ffn_out or attn_out")
	fs.BoolVar(&f.think, "think", false, "capture after <think> instead of </think>")
	fs.BoolVar(&f.pairNormalize, "pair-normalize", false, "average the normalized per-pair differences")
	fs.BoolVar(&f.noOrthogonalize, "no-orthogonalize", false, "keep the component along the contrast mean")
	fs.StringVar(&f.system, "system", cli.DefaultSystem, "system prompt (empty omits it)")
	fs.IntVar(&f.ctx, "ctx", 512, "context size in tokens")
	fs.IntVarP(&f.threads, "threads", "t", 0, "CPU worker threads (0: one per CPU)")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case f.good == "" || f.bad == "":
		return cli.Usage(errors.New("--good and --bad are required"))
	case f.component != "ffn_out" && f.component != "attn_out":
		return cli.Usage(cli.FlagError(fs, "component", "must be ffn_out or attn_out"))
	}
	if err := checkCommon(fs, f.model, f.ctx, f.threads); err != nil {
		return cli.Usage(err)
	}
	for _, in := range []struct{ name, path string }{{"good", f.good}, {"bad", f.bad}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return cli.Usage(err)
		}
	}
	if st, err := os.Stat(f.out); err == nil && st.IsDir() {
		return cli.Usage(cli.FlagError(fs, "out", "is a directory, not a file"))
	}
	return build(f, stdout, stderr)
}

// build builds the direction of the parsed flags and writes it.
func build(f buildFlags, stdout, stderr io.Writer) error {
	good, err := steering.ReadPrompts(f.good)
	if err != nil {
		return err
	}
	bad, err := steering.ReadPrompts(f.bad)
	if err != nil {
		return err
	}
	m, modelPath, err := cli.OpenModel(f.model, false, "ds4-steer", stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	be := cpu.New(f.threads)
	defer be.Close()
	d, err := experiment.BuildFromPrompts(context.Background(), m, be, tok, good, bad, experiment.CaptureOptions{
		System: f.system, Think: f.think, Attn: f.component == "attn_out", Context: f.ctx,
		Build: steering.BuildOptions{PairNormalize: f.pairNormalize, Orthogonalize: !f.noOrthogonalize},
		Pair:  func(i, n int) { fmt.Fprintf(stderr, "pair %d/%d\n", i+1, n) },
	})
	if err != nil {
		return err
	}
	meta := steering.Meta{
		Component: f.component, Thinking: f.think, PairNormalize: f.pairNormalize,
		OrthogonalizeControlMean: !f.noOrthogonalize, GoodFile: f.good, BadFile: f.bad, Model: cmp.Or(modelPath, "builtin:tiny"),
	}
	if err := os.MkdirAll(filepath.Dir(f.out), 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if err := steering.Write(f.out, d, meta); err != nil {
		return err
	}
	stem := strings.TrimSuffix(f.out, filepath.Ext(f.out))
	fmt.Fprintf(stdout, "wrote %s\nwrote %s\n", stem+".json", stem+".f32")
	return nil
}
