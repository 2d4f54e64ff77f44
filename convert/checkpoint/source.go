package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
)

// Source is the input of a conversion: an official checkpoint with its
// config, or a DS4 GGUF to requantize.
type Source struct {
	// Params are the input's hyperparameters.
	Params layout.Params

	ckpt *Checkpoint
	file *gguf.File
}

// OpenSource opens the checkpoint hf with the config at config (a file or
// a directory; "" for the config.json or hf_config.json beside hf) or,
// when hf is "", the DS4 GGUF in.
func OpenSource(hf, config, in string) (*Source, error) {
	switch {
	case (hf == "") == (in == ""):
		return nil, errors.New("checkpoint: give a checkpoint or a GGUF, not both or neither")
	case hf == "" && config != "":
		return nil, errors.New("checkpoint: a config applies to a checkpoint only (a GGUF carries its hyperparameters)")
	case in != "":
		f, err := gguf.Open(in)
		if err != nil {
			return nil, err
		}
		p, err := layout.FromGGUF(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", in, err)
		}
		return &Source{Params: p, file: f}, nil
	}
	if config == "" {
		config = hf
		if st, err := os.Stat(hf); err == nil && !st.IsDir() {
			config = filepath.Dir(hf)
		}
	}
	p, err := LoadConfig(config)
	if err != nil {
		return nil, err
	}
	c, err := Open(hf)
	if err != nil {
		return nil, err
	}
	return &Source{Params: p, ckpt: c}, nil
}

// Plan plans the conversion of s with opt without writing it.
func (s *Source) Plan(opt Options) (*Report, error) {
	if s.ckpt != nil {
		return Plan(s.ckpt, s.Params, opt)
	}
	return PlanRequantize(s.file, opt)
}

// WriteFile converts s with opt to a DS4 GGUF at path.
func (s *Source) WriteFile(path string, opt Options) (*Report, error) {
	if s.ckpt != nil {
		return ConvertFile(path, s.ckpt, s.Params, opt)
	}
	return RequantizeFile(path, s.file, opt)
}

// Close releases the input.
func (s *Source) Close() error {
	if s.ckpt != nil {
		return s.ckpt.Close()
	}
	return s.file.Close()
}

// Verify reads the GGUF at path back as the engine will and checks the
// DS4 layout.
func Verify(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := layout.Check(f).Err(); err != nil {
		return fmt.Errorf("%s: not a valid DS4 file: %w", path, err)
	}
	return nil
}

// WritePlan writes every planned tensor of r with its size, then the plan
// summary of docs/formats/harness.md#plan-output: a type_change line per tensor whose
// type differs from its base (the input GGUF's type, or the published
// mix's for a checkpoint) and the sizes.
func (r *Report) WritePlan(w io.Writer) {
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

// WriteSummary writes r's fallbacks, warnings and ignored tensors and a
// one-line count.
func (r *Report) WriteSummary(w io.Writer) {
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
