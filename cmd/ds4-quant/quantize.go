package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
	"github.com/ds4-go/ds4/quant"
)

// runQuantize is the quantize command (convert is the same command under
// its older name): an official checkpoint or a DS4 GGUF in, a DS4 GGUF
// with a recipe's types out.
func runQuantize(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("quantize", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	hf := fs.String("hf", "", "checkpoint: a .safetensors file, or a directory with model.safetensors.index.json and shards")
	in := fs.String("in", "", "a DS4 GGUF to requantize (instead of --hf)")
	config := fs.String("config", "", "model config for --hf (default: config.json or hf_config.json beside the checkpoint)")
	recipe := fs.String("recipe", "lossless", "tensor types: lossless (exact; a GGUF keeps its types), f32, q2 or q4 (the published mixes); alias --mode")
	imatrix := fs.String("imatrix", "", "legacy .dat importance matrix (ds4 --imatrix-out) weighting the Q2_K, Q4_K and IQ2_XXS quantizers")
	strict := fs.Bool("imatrix-strict", false, "fail when a tensor quantized with importance has no imatrix entry")
	types := fs.StringArray("tensor-type", nil, "NAME=TYPE: type of the tensors whose name starts with NAME (repeatable; the first match wins)")
	out := fs.StringP("out", "o", "", "output GGUF path (required unless --dry-run)")
	overwrite := fs.Bool("overwrite", false, "replace an existing output file")
	workers := fs.Int("workers", 0, "decoding and quantizing goroutines (0: one per CPU)")
	dryRun := fs.Bool("dry-run", false, "print the plan without writing")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "mode" {
			name = "recipe"
		}
		return pflag.NormalizedName(name)
	})
	if err := cli.Parse(fs, args); err != nil {
		return cli.Usage(err)
	}
	if (*hf == "") == (*in == "") || (*out == "" && !*dryRun) || fs.NArg() != 0 {
		return cli.Usage(errors.New("need --hf CHECKPOINT, --out FILE and no positional arguments (--in MODEL.gguf instead of --hf requantizes a GGUF)"))
	}
	m, err := checkpoint.ParseMode(*recipe)
	if err != nil {
		return cli.Usage(err)
	}
	if *workers < 0 {
		return cli.Usage(fmt.Errorf("--workers %d: must not be negative", *workers))
	}
	if *strict && *imatrix == "" {
		return cli.Usage(errors.New("--imatrix-strict needs --imatrix FILE"))
	}
	if *hf == "" && *config != "" {
		return cli.Usage(errors.New("--config applies to --hf only (a GGUF carries its hyperparameters)"))
	}
	if *hf != "" {
		if _, err := os.Stat(*hf); err != nil {
			return cli.Usage(fmt.Errorf("--hf %s: no such file or directory", *hf))
		}
	}
	for _, f := range []struct{ name, path string }{{"in", *in}, {"imatrix", *imatrix}, {"config", *config}} {
		if err := cli.InputFile(f.name, f.path); err != nil {
			return cli.Usage(err)
		}
	}
	if !*dryRun {
		if err := cli.OutputFile("out", *out); err != nil {
			return cli.Usage(err)
		}
	}
	opt := checkpoint.Options{Mode: m, Workers: *workers, ImatrixStrict: *strict}
	for _, s := range *types {
		o, err := checkpoint.ParseOverride(s)
		if err != nil {
			return cli.Usage(err)
		}
		opt.Overrides = append(opt.Overrides, o)
	}
	if !*dryRun && !*overwrite {
		if _, err := os.Stat(*out); err == nil {
			return fmt.Errorf("%s exists (use --overwrite to replace it)", *out)
		}
	}
	if *imatrix != "" {
		if opt.Imatrix, err = quant.ReadImatrixFile(*imatrix); err != nil {
			return err
		}
		opt.ImatrixPath = *imatrix
		fmt.Fprintf(stdout, "imatrix: %s: %d entries, %d chunks, dataset %q\n", *imatrix, len(opt.Imatrix.Entries), opt.Imatrix.Chunks, opt.Imatrix.Dataset)
	}

	// The input: a checkpoint with its config, or a GGUF.
	var (
		name, layers string
		planFn       func() (*checkpoint.Report, error)
		writeFn      func() (*checkpoint.Report, error)
	)
	if *hf != "" {
		cfg := *config
		if cfg == "" {
			cfg = *hf
			if st, err := os.Stat(*hf); err == nil && !st.IsDir() {
				cfg = filepath.Dir(*hf)
			}
		}
		p, err := checkpoint.LoadConfig(cfg)
		if err != nil {
			return err
		}
		src, err := checkpoint.Open(*hf)
		if err != nil {
			return err
		}
		defer src.Close()
		name, layers = p.Name, fmt.Sprint(p.Layers)
		planFn = func() (*checkpoint.Report, error) { return checkpoint.Plan(src, p, opt) }
		writeFn = func() (*checkpoint.Report, error) { return checkpoint.ConvertFile(*out, src, p, opt) }
	} else {
		src, err := gguf.Open(*in)
		if err != nil {
			return err
		}
		defer src.Close()
		p, err := layout.FromGGUF(src)
		if err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		name, layers = p.Name, fmt.Sprint(p.Layers)
		planFn = func() (*checkpoint.Report, error) { return checkpoint.PlanRequantize(src, opt) }
		writeFn = func() (*checkpoint.Report, error) { return checkpoint.RequantizeFile(*out, src, opt) }
	}

	r, err := planFn()
	if err != nil {
		return err
	}
	printPlan(stdout, r)
	if *dryRun {
		summarize(stdout, r)
		return nil
	}

	var bar *progress.Bar
	switch {
	case *quiet:
	case isTerminal(stderr):
		bar = progress.New(stderr, "quantize", r.Bytes, "B")
		opt.Progress = bar.Add
	default:
		opt.Log = stderr
	}
	start := time.Now()
	r, err = writeFn()
	if err != nil {
		return err
	}
	if bar != nil {
		bar.Finish()
	}
	elapsed := time.Since(start)
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	summarize(stdout, r)
	fmt.Fprintf(stdout, "wrote %s: %s, %s layers, mode %s, %d tensors, %d bytes in %.1fs\n",
		*out, name, layers, m, len(r.Tensors), st.Size(), elapsed.Seconds())

	// Read the result back as the engine will.
	f, err := gguf.Open(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := layout.Check(f).Err(); err != nil {
		return fmt.Errorf("%s: not a valid DS4 file: %w", *out, err)
	}
	fmt.Fprintln(stdout, "layout: ok")
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printPlan prints every planned tensor with its size, then the plan
// summary of spec/harness.md §8.8: a type_change line per tensor whose
// type differs from its base (the input GGUF's type, or the published
// mix's for a checkpoint) and the sizes.
func printPlan(w io.Writer, r *checkpoint.Report) {
	changes := 0
	for _, t := range r.Tensors {
		fmt.Fprintf(w, "%s %v %v <- %s (%s), %d bytes%s\n", t.Name, t.Type, t.Dims, t.Source, t.Format, t.Bytes, t.Note())
	}
	for _, t := range r.Tensors {
		if t.Type != t.Base {
			fmt.Fprintf(w, "type_change: %s %v -> %v\n", t.Name, t.Base, t.Type)
			changes++
		}
	}
	fmt.Fprintf(w, "n_tensors: %d\nmeta_bytes: %d\ntensor_bytes_unpadded: %d\napprox_file_bytes: %d\ntype_changes: %d\n",
		len(r.Tensors), r.DataOffset, r.Bytes, r.FileBytes, changes)
}

// summarize prints a conversion report's notes.
func summarize(w io.Writer, r *checkpoint.Report) {
	for _, f := range r.Fallbacks {
		fmt.Fprintf(w, "fallback: %s\n", f)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	for _, s := range r.Ignored {
		fmt.Fprintf(w, "ignored: %s\n", s)
	}
	fmt.Fprintf(w, "tensors: %d, %d bytes of tensor data, %d fallbacks, %d ignored, %d mtp.* tensors skipped\n",
		len(r.Tensors), r.Bytes, len(r.Fallbacks), len(r.Ignored), r.MTP)
}
