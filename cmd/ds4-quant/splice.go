package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/convert/splice"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
)

// spliceFlags are the splice command's flags.
type spliceFlags struct {
	base, donor, out     string
	layers               []int
	dryRun, force, quiet bool
}

// parseSplice parses and checks the splice command line.
func parseSplice(args []string) (*spliceFlags, error) {
	var f spliceFlags
	fs := pflag.NewFlagSet("splice", pflag.ContinueOnError)
	fs.StringVar(&f.base, "base", "", "GGUF giving the metadata and every tensor not taken from the donor (required)")
	fs.StringVar(&f.donor, "donor", "", "GGUF giving the routed experts of the selected layers (required)")
	fs.StringVarP(&f.out, "out", "o", "", "output GGUF path (required unless --dry-run)")
	spec := fs.String("q4-layers", "", `layers whose routed experts come from the donor: ids and inclusive ranges, "37-42" or "0-2,40-42" (required)`)
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plan without writing")
	fs.BoolVar(&f.force, "force", false, "replace an existing output file")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress on stderr")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if f.base == "" || f.donor == "" || *spec == "" || (f.out == "" && !f.dryRun) || fs.NArg() != 0 {
		return nil, cli.Usage(errors.New("need --base FILE, --donor FILE, --q4-layers SPEC, --out FILE and no positional arguments"))
	}
	var err error
	if f.layers, err = splice.ParseLayers(*spec); err != nil {
		return nil, cli.Usage(fmt.Errorf("--q4-layers %s: %w", *spec, err))
	}
	for _, in := range []struct{ name, path string }{{"base", f.base}, {"donor", f.donor}} {
		if err := cli.InputFile(in.name, in.path); err != nil {
			return nil, cli.Usage(err)
		}
	}
	if !f.dryRun {
		if err := cli.OutputFile("out", f.out); err != nil {
			return nil, cli.Usage(err)
		}
	}
	return &f, nil
}

// runSplice is the splice command: a base GGUF with the routed experts of
// chosen layers taken from a donor GGUF.
func runSplice(args []string, stdout, stderr io.Writer) error {
	f, err := parseSplice(args)
	if err != nil {
		return err
	}
	if !f.dryRun && !f.force {
		if _, err := os.Stat(f.out); err == nil {
			return fmt.Errorf("%s exists (use --force to replace it)", f.out)
		}
	}
	base, err := gguf.Open(f.base)
	if err != nil {
		return err
	}
	defer base.Close()
	donor, err := gguf.Open(f.donor)
	if err != nil {
		return err
	}
	defer donor.Close()
	p, err := splice.NewPlan(base, donor, f.layers)
	if err != nil {
		return err
	}
	p.WriteSummary(stdout)
	if f.dryRun {
		return nil
	}
	var add func(int64)
	var bar *progress.Bar
	if !f.quiet {
		bar = progress.New(stderr, "splice", p.TensorBytes(), "B")
		add = bar.Add
	}
	start := time.Now()
	if err := p.WriteFile(f.out, f.force, add); err != nil {
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	st, err := os.Stat(f.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d bytes in %.1fs\n", f.out, st.Size(), time.Since(start).Seconds())
	if err := checkpoint.Verify(f.out); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "layout: ok")
	return nil
}
