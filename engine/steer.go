package engine

import (
	"fmt"
	"math"

	"github.com/ds4-go/ds4/engine/layout"
)

// maxSteerScale bounds the steering scales (docs/steering.md#applying-a-direction).
const maxSteerScale = 100

// Steering is a directional steering edit applied to the attention and FFN
// sublayer outputs of every layer (docs/steering.md#applying-a-direction).
type Steering struct {
	Dir  []float32 // layers × embd unit directions, layer-major
	FFN  float32   // scale at the FFN output (routed + shared experts)
	Attn float32   // scale at the attention output (after the output projection)
}

// Validate reports whether the steering fits a model with parameters p.
func (st *Steering) Validate(p layout.Params) error {
	if want := p.Layers * p.Embd; len(st.Dir) != want {
		return fmt.Errorf("engine: steering direction has %d values, want %d (%d layers × %d)", len(st.Dir), want, p.Layers, p.Embd)
	}
	for _, c := range []struct {
		name string
		v    float32
	}{{"ffn", st.FFN}, {"attn", st.Attn}} {
		f := float64(c.v)
		if math.IsNaN(f) || math.IsInf(f, 0) || f < -maxSteerScale || f > maxSteerScale {
			return fmt.Errorf("engine: steering %s scale %v outside [-%d, %d]", c.name, c.v, maxSteerScale, maxSteerScale)
		}
	}
	return nil
}

// steer applies y := y − scale·v·dot(v, y) to each row of the scratch
// sublayer outputs with layer il's direction of the row's session's
// steering; a zero scale or no steering leaves a row untouched.
func (f *pass) steer(il int, attn bool) {
	e := f.m.Params.Embd
	for i, s := range f.own {
		st := s.opt.Steering
		if st == nil {
			continue
		}
		scale := st.FFN
		if attn {
			scale = st.Attn
		}
		if scale == 0 {
			continue
		}
		v := st.Dir[il*e : (il+1)*e]
		y := f.sc.y[i*e : (i+1)*e]
		if s.observeSteer != nil {
			s.observeSteer(il, attn, false, y)
		}
		steerRow(y, v, scale)
		if s.observeSteer != nil {
			s.observeSteer(il, attn, true, y)
		}
	}
}

// steerRow applies y := y − s·v·dot(v, y) in float32, sequentially; the
// conversions keep products rounded so no platform fuses them.
func steerRow(y, v []float32, s float32) {
	var d float32
	for j, vj := range v {
		d += float32(vj * y[j])
	}
	k := s * d
	for j, vj := range v {
		y[j] -= float32(k * vj)
	}
}
