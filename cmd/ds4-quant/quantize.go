package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
	"github.com/ds4-go/ds4/quant"
)

// quantizeFlags are the quantize command's flags.
type quantizeFlags struct {
	hf, in, config, recipe, imatrix, out string
	types                                []string
	strict, overwrite, dryRun, quiet     bool
	workers                              int
}

// parseQuantize parses and checks the quantize command line and returns
// the flags with the conversion options they ask for (without the
// imatrix, which is read once the output is known to be writable).
func parseQuantize(args []string) (*quantizeFlags, checkpoint.Options, error) {
	var q quantizeFlags
	fs := pflag.NewFlagSet("quantize", pflag.ContinueOnError)
	fs.StringVar(&q.hf, "hf", "", "checkpoint: a .safetensors file, or a directory with model.safetensors.index.json and shards")
	fs.StringVar(&q.in, "in", "", "a DS4 GGUF to requantize (instead of --hf)")
	fs.StringVar(&q.config, "config", "", "model config for --hf (default: config.json or hf_config.json beside the checkpoint)")
	fs.StringVar(&q.recipe, "recipe", "lossless", "tensor types: lossless (exact; a GGUF keeps its types), f32, q2 or q4 (the published mixes); alias --mode")
	fs.StringVar(&q.imatrix, "imatrix", "", "legacy .dat importance matrix (ds4 --imatrix-out) weighting the Q2_K, Q4_K and IQ2_XXS quantizers")
	fs.BoolVar(&q.strict, "imatrix-strict", false, "fail when a tensor quantized with importance has no imatrix entry")
	fs.StringArrayVar(&q.types, "tensor-type", nil, "NAME=TYPE: type of the tensors whose name starts with NAME (repeatable; the first match wins)")
	fs.StringVarP(&q.out, "out", "o", "", "output GGUF path (required unless --dry-run)")
	fs.BoolVar(&q.overwrite, "overwrite", false, "replace an existing output file")
	fs.IntVar(&q.workers, "workers", 0, "decoding and quantizing goroutines (0: one per CPU)")
	fs.BoolVar(&q.dryRun, "dry-run", false, "print the plan without writing")
	fs.BoolVarP(&q.quiet, "quiet", "q", false, "no progress on stderr")
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "mode" {
			name = "recipe"
		}
		return pflag.NormalizedName(name)
	})
	if err := cli.Parse(fs, args); err != nil {
		return nil, checkpoint.Options{}, err
	}
	opt, err := q.check(fs)
	return &q, opt, cli.Usage(err)
}

// check checks the flags before anything is read and returns the
// conversion options.
func (q *quantizeFlags) check(fs *pflag.FlagSet) (checkpoint.Options, error) {
	var opt checkpoint.Options
	if (q.hf == "") == (q.in == "") || (q.out == "" && !q.dryRun) || fs.NArg() != 0 {
		return opt, errors.New("need --hf CHECKPOINT, --out FILE and no positional arguments (--in MODEL.gguf instead of --hf requantizes a GGUF)")
	}
	m, err := checkpoint.ParseMode(q.recipe)
	if err != nil {
		return opt, err
	}
	switch {
	case q.workers < 0:
		return opt, fmt.Errorf("--workers %d: must not be negative", q.workers)
	case q.strict && q.imatrix == "":
		return opt, errors.New("--imatrix-strict needs --imatrix FILE")
	case q.hf == "" && q.config != "":
		return opt, errors.New("--config applies to --hf only (a GGUF carries its hyperparameters)")
	}
	if q.hf != "" {
		if _, err := os.Stat(q.hf); err != nil {
			return opt, fmt.Errorf("--hf %s: no such file or directory", q.hf)
		}
	}
	for _, f := range []struct{ name, path string }{{"in", q.in}, {"imatrix", q.imatrix}, {"config", q.config}} {
		if err := cli.InputFile(f.name, f.path); err != nil {
			return opt, err
		}
	}
	if !q.dryRun {
		if err := cli.OutputFile("out", q.out); err != nil {
			return opt, err
		}
	}
	opt = checkpoint.Options{Mode: m, Workers: q.workers, ImatrixStrict: q.strict}
	for _, s := range q.types {
		o, err := checkpoint.ParseOverride(s)
		if err != nil {
			return opt, err
		}
		opt.Overrides = append(opt.Overrides, o)
	}
	return opt, nil
}

// runQuantize is the quantize command (convert is the same command under
// its older name): an official checkpoint or a DS4 GGUF in, a DS4 GGUF
// with a recipe's types out.
func runQuantize(args []string, stdout, stderr io.Writer) error {
	q, opt, err := parseQuantize(args)
	if err != nil {
		return err
	}
	if !q.dryRun && !q.overwrite {
		if _, err := os.Stat(q.out); err == nil {
			return fmt.Errorf("%s exists (use --overwrite to replace it)", q.out)
		}
	}
	if q.imatrix != "" {
		if opt.Imatrix, err = quant.ReadImatrixFile(q.imatrix); err != nil {
			return err
		}
		opt.ImatrixPath = q.imatrix
		fmt.Fprintf(stdout, "imatrix: %s: %d entries, %d chunks, dataset %q\n", q.imatrix, len(opt.Imatrix.Entries), opt.Imatrix.Chunks, opt.Imatrix.Dataset)
	}
	src, err := checkpoint.OpenSource(q.hf, q.config, q.in)
	if err != nil {
		return err
	}
	defer src.Close()
	r, err := src.Plan(opt)
	if err != nil {
		return err
	}
	r.WritePlan(stdout)
	if q.dryRun {
		r.WriteSummary(stdout)
		return nil
	}
	var bar *progress.Bar
	switch {
	case q.quiet:
	case isTerminal(stderr):
		bar = progress.New(stderr, "quantize", r.Bytes, "B")
		opt.Progress = bar.Add
	default:
		opt.Log = stderr
	}
	start := time.Now()
	if r, err = src.WriteFile(q.out, opt); err != nil {
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	elapsed := time.Since(start)
	st, err := os.Stat(q.out)
	if err != nil {
		return err
	}
	r.WriteSummary(stdout)
	fmt.Fprintf(stdout, "wrote %s: %s, %d layers, mode %s, %d tensors, %d bytes in %.1fs\n",
		q.out, src.Params.Name, src.Params.Layers, opt.Mode, len(r.Tensors), st.Size(), elapsed.Seconds())
	if err := checkpoint.Verify(q.out); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "layout: ok")
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
