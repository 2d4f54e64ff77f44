package vectors

import (
	"github.com/ds4-go/ds4/convert/checkpoint"
)

// LoadOracles loads the oracle case of each of dirs, stopping at the first
// that does not load.
func LoadOracles(dirs []string) ([]*OracleCase, error) {
	cases := make([]*OracleCase, 0, len(dirs))
	for _, dir := range dirs {
		c, err := LoadOracle(dir)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// Verdict returns the result's word for a report: "MISSED", with Check's
// error, where a bar is missed; "reported" for a quantized conversion,
// which no bar bounds; else "ok".
func (r *OracleResult) Verdict() (string, error) {
	if err := r.Check(); err != nil {
		return "MISSED", err
	}
	if r.Mode != checkpoint.ModeLossless && r.Mode != checkpoint.ModeF32 {
		return "reported", nil
	}
	return "ok", nil
}

// FallbackTensors returns the names of the tensors the conversion stored
// in another type than its mode's.
func (r *OracleResult) FallbackTensors() []string {
	if r.Conv == nil {
		return nil
	}
	var names []string
	for _, f := range r.Conv.Fallbacks {
		names = append(names, f.Tensor)
	}
	return names
}
