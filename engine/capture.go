package engine

import "fmt"

// Capture records, for every layer, the last row of each forward pass at
// one sublayer output, before any steering edit (docs/steering.md#building-a-direction).
type Capture struct {
	Attn bool      // capture attn_out (after the output projection) instead of ffn_out
	Rows []float32 // layers × embd, layer-major; NewSession allocates it when its size is wrong
}

// Layer returns the captured row of layer l for embedding width embd.
func (c *Capture) Layer(l, embd int) []float32 { return c.Rows[l*embd : (l+1)*embd] }

// prepare sizes the capture rows for layers × embd values.
func (c *Capture) prepare(layers, embd int) error {
	if layers <= 0 || embd <= 0 {
		return fmt.Errorf("engine: capture shape %d×%d", layers, embd)
	}
	if len(c.Rows) != layers*embd {
		c.Rows = make([]float32, layers*embd)
	}
	return nil
}

// capture copies the last row of each session of the pass from the
// scratch sublayer outputs into layer il's capture row, where the session
// captures that sublayer.
func (f *pass) capture(il int, attn bool) {
	e := f.m.Params.Embd
	for i, s := range f.own {
		c := s.opt.Capture
		if c == nil || c.Attn != attn || (i+1 < f.n && f.own[i+1] == s) {
			continue
		}
		copy(c.Rows[il*e:(il+1)*e], f.sc.y[i*e:(i+1)*e])
	}
}

// ExpertObserver sees every routed-expert evaluation of a forward pass
// (docs/formats/harness.md#collection): in is the FFN-normalized input row of the token,
// mid the clamped SwiGLU output of expert e of layer il times its routing
// weight. The slices are valid only during the call.
type ExpertObserver interface {
	ObserveExpert(il, e int, in, mid []float32)
}
