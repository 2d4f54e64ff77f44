package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
)

// runSynth is the synth command: a synthetic DS4 model with seeded random
// weights.
func runSynth(args []string, stdout, stderr io.Writer) error {
	opt, out, err := parseSynth(args)
	if err != nil {
		return err
	}
	bar := progress.New(stderr, "synth", synth.TensorBytes(opt), "B")
	opt.Progress = bar.Add
	start := time.Now()
	infos, err := synth.WriteFile(out, opt)
	if err != nil {
		return err
	}
	bar.Finish()
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d layers, recipe %s, %d tensors, %d bytes in %.1fs\n",
		out, opt.Params.Name, opt.Params.Layers, opt.Recipe.Name, len(infos), st.Size(), time.Since(start).Seconds())
	return nil
}

// parseSynth parses and checks the synth command line and returns the
// model to write and the output path.
func parseSynth(args []string) (synth.Options, string, error) {
	var opt synth.Options
	fs := pflag.NewFlagSet("synth", pflag.ContinueOnError)
	preset := fs.String("preset", "tiny", "model shape: tiny, flash (V4 Flash) or pro (V4 Pro)")
	out := fs.StringP("out", "o", "", "output GGUF path (required)")
	recipe := fs.String("recipe", "q2", "routed expert types: q2 (IQ2_XXS gate/up, Q2_K down) or q4 (Q4_K)")
	fs.Uint64Var(&opt.Seed, "seed", 1, "random seed")
	fs.IntVar(&opt.Workers, "workers", 0, "generator goroutines (0: one per CPU)")
	layers := fs.Int("layers", 0, "number of layers (0: the preset's), the released ratio schedule")
	// Dimension overrides: 0 keeps the preset's value.
	dims := synth.Dimensions()
	vals := make([]int, len(dims))
	for i, d := range dims {
		fs.IntVar(&vals[i], d.Name, 0, "override "+d.Key)
	}
	ratios := fs.IntSlice("ratios", nil, "per-layer compression ratios (overrides the schedule; one per layer)")
	if err := cli.Parse(fs, args); err != nil {
		return opt, "", err
	}
	switch {
	case *out == "" || fs.NArg() != 0:
		return opt, "", cli.Usage(fmt.Errorf("need --out FILE and no positional arguments"))
	case opt.Workers < 0:
		return opt, "", cli.Usage(cli.FlagError(fs, "workers", "must be at least 0 (0: one per CPU)"))
	case !slices.Contains(synth.PresetNames(), *preset):
		return opt, "", cli.Usage(cli.FlagError(fs, "preset", "must be tiny, flash or pro"))
	case *layers < 0:
		return opt, "", cli.Usage(cli.FlagError(fs, "layers", "must be at least 0 (0: the preset's)"))
	}
	if err := cli.OutputFile("out", *out); err != nil {
		return opt, "", cli.Usage(err)
	}
	p, err := synth.Preset(*preset, *layers)
	if err != nil {
		return opt, "", cli.Usage(err)
	}
	for i, d := range dims {
		if fs.Changed(d.Name) {
			d.Set(&p, vals[i])
		}
	}
	if fs.Changed("ratios") {
		p.CompressRatios = *ratios
	}
	r, err := layout.ParseRecipe(*recipe)
	if err == nil {
		err = p.Validate()
	}
	if err == nil {
		err = p.CheckRecipe(r)
	}
	opt.Params, opt.Recipe = p, r
	return opt, *out, cli.Usage(err)
}
