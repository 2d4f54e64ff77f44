package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine/checkpoint"
	"github.com/ds4-go/ds4/engine/gguf"
	"github.com/ds4-go/ds4/engine/layout"
)

func runConvert(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("convert", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	hf := fs.String("hf", "", "checkpoint: a .safetensors file, or a directory with model.safetensors.index.json and shards (required)")
	config := fs.String("config", "", "model config (default: config.json or hf_config.json beside the checkpoint)")
	mode := fs.String("mode", "lossless", "tensor types: lossless (exact BF16/F32), f32, q2 or q4 (the published mixes)")
	out := fs.StringP("out", "o", "", "output GGUF path (required)")
	workers := fs.Int("workers", 0, "decoding and quantizing goroutines (0: one per CPU)")
	dryRun := fs.Bool("dry-run", false, "print the plan without writing")
	quiet := fs.BoolP("quiet", "q", false, "no per-tensor log lines")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *hf == "" || (*out == "" && !*dryRun) || fs.NArg() != 0 {
		return usageError{fmt.Errorf("need --hf CHECKPOINT, --out FILE and no positional arguments")}
	}
	m, err := checkpoint.ParseMode(*mode)
	if err != nil {
		return usageError{err}
	}
	if *workers < 0 {
		return usageError{fmt.Errorf("--workers %d: must not be negative", *workers)}
	}
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

	if *dryRun {
		r, err := checkpoint.Plan(src, p, m)
		if err != nil {
			return err
		}
		for _, t := range r.Tensors {
			fmt.Fprintf(stdout, "%s %v %v <- %s (%s)\n", t.Name, t.Type, t.Dims, t.Source, t.Format)
		}
		summarize(stdout, r)
		return nil
	}
	opt := checkpoint.Options{Mode: m, Workers: *workers}
	if !*quiet {
		opt.Log = stderr
	}
	start := time.Now()
	r, err := checkpoint.ConvertFile(*out, src, p, opt)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	summarize(stdout, r)
	fmt.Fprintf(stdout, "wrote %s: %s, %d layers, mode %s, %d tensors, %d bytes in %.1fs\n",
		*out, p.Name, p.Layers, m, len(r.Tensors), st.Size(), elapsed.Seconds())

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
