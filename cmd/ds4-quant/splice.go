package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/convert/splice"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
	"github.com/ds4-go/ds4/quant"
)

// runSplice is the splice command: a base GGUF with the routed experts of
// chosen layers taken from a donor GGUF.
func runSplice(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("splice", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	basePath := fs.String("base", "", "GGUF giving the metadata and every tensor not taken from the donor (required)")
	donorPath := fs.String("donor", "", "GGUF giving the routed experts of the selected layers (required)")
	out := fs.StringP("out", "o", "", "output GGUF path (required unless --dry-run)")
	spec := fs.String("q4-layers", "", `layers whose routed experts come from the donor: ids and inclusive ranges, "37-42" or "0-2,40-42" (required)`)
	dryRun := fs.Bool("dry-run", false, "print the plan without writing")
	force := fs.Bool("force", false, "replace an existing output file")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	if err := cli.Parse(fs, args); err != nil {
		return cli.Usage(err)
	}
	if *basePath == "" || *donorPath == "" || *spec == "" || (*out == "" && !*dryRun) || fs.NArg() != 0 {
		return cli.Usage(errors.New("need --base FILE, --donor FILE, --q4-layers SPEC, --out FILE and no positional arguments"))
	}
	layers, err := splice.ParseLayers(*spec)
	if err != nil {
		return cli.Usage(fmt.Errorf("--q4-layers %s: %w", *spec, err))
	}
	for _, f := range []struct{ name, path string }{{"base", *basePath}, {"donor", *donorPath}} {
		if err := cli.InputFile(f.name, f.path); err != nil {
			return cli.Usage(err)
		}
	}
	if !*dryRun {
		if err := cli.OutputFile("out", *out); err != nil {
			return cli.Usage(err)
		}
	}
	if !*dryRun && !*force {
		if _, err := os.Stat(*out); err == nil {
			return fmt.Errorf("%s exists (use --force to replace it)", *out)
		}
	}
	base, err := gguf.Open(*basePath)
	if err != nil {
		return err
	}
	defer base.Close()
	donor, err := gguf.Open(*donorPath)
	if err != nil {
		return err
	}
	defer donor.Close()
	p, err := splice.NewPlan(base, donor, layers)
	if err != nil {
		return err
	}
	summarizeSplice(stdout, p)
	if *dryRun {
		return nil
	}

	var bar *progress.Bar
	if !*quiet {
		var total int64
		for _, t := range p.Tensors {
			total += int64(t.Size)
		}
		bar = progress.New(stderr, "splice", total, "B")
	}
	start := time.Now()
	var add func(int64)
	if bar != nil {
		add = bar.Add
	}
	if err := p.WriteFile(*out, *force, add); err != nil {
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	f, err := gguf.Open(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(stdout, "wrote %s: %d bytes in %.1fs\n", *out, f.Size(), time.Since(start).Seconds())
	if err := layout.Check(f).Err(); err != nil {
		return fmt.Errorf("%s: not a valid DS4 file: %w", *out, err)
	}
	fmt.Fprintln(stdout, "layout: ok")
	return nil
}

// summarizeSplice prints the plan: the layers, the donor tensors by type
// and the payload sizes.
func summarizeSplice(w io.Writer, p *splice.Plan) {
	fmt.Fprintf(w, "layers from the donor: %v\n", p.Layers)
	types := make([]quant.Type, 0, len(p.DonorTypes))
	for t := range p.DonorTypes {
		types = append(types, t)
	}
	slices.Sort(types)
	fmt.Fprintf(w, "donor tensors: %d", p.Donors)
	for _, t := range types {
		fmt.Fprintf(w, ", %d %v", p.DonorTypes[t], t)
	}
	fmt.Fprintln(w)
	const gib = 1 << 30
	delta := p.MixedBytes - p.BaseBytes
	fmt.Fprintf(w, "base payload: %d bytes (%.3f GiB)\n", p.BaseBytes, float64(p.BaseBytes)/gib)
	fmt.Fprintf(w, "mixed payload: %d bytes (%.3f GiB)\n", p.MixedBytes, float64(p.MixedBytes)/gib)
	fmt.Fprintf(w, "delta: %+d bytes (%+.3f GiB)\n", delta, float64(delta)/gib)
	fmt.Fprintf(w, "file: %d bytes\n", p.DataOffset+p.MixedBytes)
}
