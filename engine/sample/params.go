// Package sample picks the next token from a vector of logits: greedy
// argmax, or a random draw after temperature scaling and top-k, min-p and
// top-p (nucleus) filtering, in the order used by upstream ds4. It also
// computes log-probabilities for diagnostics and logprob dumps.
//
// Non-finite logits (±Inf, NaN) mark impossible tokens: they are never drawn
// and never reported by [TopLogprobs]. Only when no logit is finite does
// sampling fall back to [Argmax].
package sample

import "fmt"

// Limits applied by [Params.Normalize] and checked by [Params.Validate].
const (
	MaxTopK        = 1024 // larger top_k values are capped to this
	MaxTemperature = 100  // largest temperature Validate accepts
)

// Params configure sampling; the zero value is NOT the default — use Defaults.
type Params struct {
	// Temperature divides the logits before the softmax; ≤ 0 means greedy.
	Temperature float32
	// TopK keeps only the TopK (at most MaxTopK) most likely tokens; 0
	// means no cap.
	TopK int
	// TopP keeps the smallest most-likely prefix whose probability mass
	// reaches TopP; values outside (0, 1] mean 1 (no nucleus cut).
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one.
	MinP float32
	// Seed is the random generator's initial state; 0 means a random seed.
	Seed uint64
}

// Defaults returns the default parameters: temperature 1, no top-k cap,
// top_p 1, min_p 0.05 and a random seed.
func Defaults() Params {
	return Params{Temperature: 1, TopK: 0, TopP: 1, MinP: 0.05}
}

// Normalize returns p with the engine's clamping rules applied: a
// temperature ≤ 0 (or NaN) becomes 0 (greedy), a negative top_k becomes 0,
// top_k above MaxTopK becomes MaxTopK, top_p outside (0, 1] becomes 1, a
// negative (or NaN) min_p becomes 0 and one above 1 becomes 1.
func (p Params) Normalize() Params {
	if !(p.Temperature > 0) {
		p.Temperature = 0
	}
	p.TopK = min(max(p.TopK, 0), MaxTopK)
	if !(p.TopP > 0 && p.TopP <= 1) {
		p.TopP = 1
	}
	if !(p.MinP >= 0) {
		p.MinP = 0
	}
	p.MinP = min(p.MinP, 1)
	return p
}

// Validate reports the first parameter outside its user-facing range:
// temperature in [0, MaxTemperature], top_k ≥ 0, top_p and min_p in [0, 1],
// none of them NaN or infinite.
func (p Params) Validate() error {
	switch {
	case !(p.Temperature >= 0 && p.Temperature <= MaxTemperature):
		return fmt.Errorf("sample: invalid temperature %v: must be in [0, %d]", p.Temperature, MaxTemperature)
	case p.TopK < 0:
		return fmt.Errorf("sample: invalid top_k %d: must not be negative", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("sample: invalid top_p %v: must be in [0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("sample: invalid min_p %v: must be in [0, 1]", p.MinP)
	}
	return nil
}
