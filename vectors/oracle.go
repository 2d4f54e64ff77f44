package vectors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
)

// OracleCase is a directory of reference outputs from DeepSeek's reference
// implementation: a checkpoint in the official format (weights.safetensors
// and config.json), the tokens, and the logits files.
type OracleCase struct {
	Dir          string
	Name         string
	Params       layout.Params
	Tokens       []int
	PrefillSplit int
}

// LoadOracle reads the case in dir.
func LoadOracle(dir string) (*OracleCase, error) {
	c := &OracleCase{Dir: dir, Name: filepath.Base(filepath.Clean(dir))}
	p, err := checkpoint.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("vectors: oracle %s: %w", c.Name, err)
	}
	c.Params = p
	raw, err := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if err != nil {
		return nil, fmt.Errorf("vectors: oracle %s: %w", c.Name, err)
	}
	var tj struct {
		Tokens       []int `json:"tokens"`
		PrefillSplit int   `json:"prefill_split"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("vectors: oracle %s: tokens.json: %w", c.Name, err)
	}
	if len(tj.Tokens) == 0 || tj.PrefillSplit < 0 || tj.PrefillSplit > len(tj.Tokens) {
		return nil, fmt.Errorf("vectors: oracle %s: tokens.json: %d tokens, prefill split %d", c.Name, len(tj.Tokens), tj.PrefillSplit)
	}
	c.Tokens, c.PrefillSplit = tj.Tokens, tj.PrefillSplit
	return c, nil
}

// PathResult is the comparison of one engine path with the references.
type PathResult struct {
	Path       string  // prefill, decode or mixed
	VsF32Ref   Metrics // against f32ref_prefill_logits.bin
	VsOfficial Metrics // against the official logits of the same path
	// F32RefPositions holds every position's comparison against f32ref,
	// for paired comparisons of two conversions.
	F32RefPositions []PositionStat
}

// OracleResult gathers a case's comparisons for one conversion mode.
type OracleResult struct {
	Case  string
	Mode  checkpoint.Mode
	Paths []PathResult
	Conv  *checkpoint.Report
	Model *engine.Model // the converted model
}

// Check applies the oracle bars: bar A against f32ref and bar B against
// the official logits for the lossless and f32 conversions; quantized
// conversions are reported, not bounded.
func (r *OracleResult) Check() error {
	if r.Mode != checkpoint.ModeLossless && r.Mode != checkpoint.ModeF32 {
		return nil
	}
	for _, p := range r.Paths {
		if err := BarA.Check(p.VsF32Ref); err != nil {
			return fmt.Errorf("%s %s %s vs f32ref: %w", r.Case, r.Mode, p.Path, err)
		}
		if err := BarB.Check(p.VsOfficial); err != nil {
			return fmt.Errorf("%s %s %s vs official: %w", r.Case, r.Mode, p.Path, err)
		}
	}
	return nil
}

// Convert converts the case's checkpoint with opt (its mode, and an
// imatrix when one is set) into an in-memory GGUF and binds it.
func (c *OracleCase) Convert(opt checkpoint.Options) (*engine.Model, *checkpoint.Report, error) {
	src, err := checkpoint.Open(filepath.Join(c.Dir, "weights.safetensors"))
	if err != nil {
		return nil, nil, fmt.Errorf("vectors: oracle %s: %w", c.Name, err)
	}
	defer src.Close()
	var buf bytes.Buffer
	rep, err := checkpoint.Convert(&buf, src, c.Params, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("vectors: oracle %s: %w", c.Name, err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("vectors: oracle %s: %w", c.Name, err)
	}
	m, err := engine.Load(f)
	if err != nil {
		return nil, nil, fmt.Errorf("vectors: oracle %s: %w", c.Name, err)
	}
	return m, rep, nil
}

// RunOracle converts the case's checkpoint in mode, runs it through the
// engine on the prefill, decode and mixed paths, and compares the logits
// of every position with the references.
func RunOracle(c *OracleCase, mode checkpoint.Mode, be backends.Backend) (*OracleResult, error) {
	return RunOracleWith(c, checkpoint.Options{Mode: mode}, be)
}

// RunOracleWith is RunOracle with every conversion option, e.g. an
// imatrix for the quantized modes.
func RunOracleWith(c *OracleCase, copt checkpoint.Options, be backends.Backend) (*OracleResult, error) {
	mode := copt.Mode
	m, rep, err := c.Convert(copt)
	if err != nil {
		return nil, err
	}
	numerics := engine.NumericsDS4
	if mode == checkpoint.ModeLossless || mode == checkpoint.ModeF32 {
		numerics = engine.NumericsOfficial
	}
	vocab, n := c.Params.Vocab, len(c.Tokens)
	opt := engine.Options{Context: n, Numerics: numerics}
	newSession := func() (*engine.Session, error) { return engine.NewSession(m, be, opt) }

	runs := map[string][]float32{}
	// prefill: one pass over all tokens, logits of every position.
	s, err := newSession()
	if err != nil {
		return nil, err
	}
	all := make([]float32, n*vocab)
	if err := s.PrefillAll(c.Tokens, all); err != nil {
		return nil, err
	}
	runs["prefill"] = all
	// decode: one token per step.
	dec := make([]float32, n*vocab)
	s, _ = newSession()
	for i, t := range c.Tokens {
		if err := s.Decode(t); err != nil {
			return nil, err
		}
		copy(dec[i*vocab:], s.Logits())
	}
	runs["decode"] = dec
	// mixed: a prefill of the first PrefillSplit tokens, then decode.
	mixed := make([]float32, n*vocab)
	s, _ = newSession()
	if err := s.PrefillAll(c.Tokens[:c.PrefillSplit], mixed[:c.PrefillSplit*vocab]); err != nil {
		return nil, err
	}
	for i := c.PrefillSplit; i < n; i++ {
		if err := s.Decode(c.Tokens[i]); err != nil {
			return nil, err
		}
		copy(mixed[i*vocab:], s.Logits())
	}
	runs["mixed"] = mixed

	f32ref, err := ReadLogits(filepath.Join(c.Dir, "f32ref_prefill_logits.bin"), vocab)
	if err != nil {
		return nil, err
	}
	res := &OracleResult{Case: c.Name, Mode: mode, Conv: rep, Model: m}
	for _, path := range []string{"prefill", "decode", "mixed"} {
		official, err := ReadLogits(filepath.Join(c.Dir, path+"_logits.bin"), vocab)
		if err != nil {
			return nil, err
		}
		pr := PathResult{Path: path}
		if pr.VsF32Ref, pr.F32RefPositions, err = CompareTargets(f32ref, runs[path], vocab, nil); err != nil {
			return nil, err
		}
		if pr.VsOfficial, err = Compare(official, runs[path], vocab); err != nil {
			return nil, err
		}
		res.Paths = append(res.Paths, pr)
	}
	return res, nil
}
