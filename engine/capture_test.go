package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestCapturePrefillMatchesDecode captures the last token's sublayer
// outputs once from a prefill and once while decoding token by token: the
// rows must be identical, non-zero, and taken before any steering edit.
func TestCapturePrefillMatchesDecode(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	p := m.Params
	toks := testTokens(21, p.Vocab)
	for _, attn := range []bool{false, true} {
		pre := &Capture{Attn: attn}
		s, err := NewSession(m, be, Options{Context: 64, Capture: pre})
		require.NoError(t, err)
		require.Len(t, pre.Rows, p.Layers*p.Embd)
		require.NoError(t, s.Prefill(toks))

		dec := &Capture{Attn: attn}
		d, err := NewSession(m, be, Options{Context: 64, Capture: dec})
		require.NoError(t, err)
		for _, tok := range toks {
			require.NoError(t, d.Decode(tok))
		}
		require.Equal(t, pre.Rows, dec.Rows, "attn=%v", attn)
		for l := range p.Layers {
			var nz bool
			for _, v := range pre.Layer(l, p.Embd) {
				nz = nz || v != 0
			}
			require.True(t, nz, "layer %d captured zeros", l)
		}

		// With steering on, each captured row is the row before the edit.
		dir := unitDirs(p, 3)
		st := &Steering{Dir: dir, FFN: 1, Attn: 1}
		sc := &Capture{Attn: attn}
		ss, err := NewSession(m, be, Options{Context: 64, Capture: sc, Steering: st})
		require.NoError(t, err)
		before := make([][]float32, p.Layers)
		ss.observeSteer = func(il int, a, after bool, y []float32) {
			if a == attn && !after {
				before[il] = append(before[il][:0], y...)
			}
		}
		require.NoError(t, ss.Decode(toks[0]))
		for l := range p.Layers {
			require.Equal(t, before[l], sc.Layer(l, p.Embd), "layer %d", l)
		}
	}
}

// TestCaptureDecodeAllocatesNothing checks that a capturing session still
// decodes without allocating.
func TestCaptureDecodeAllocatesNothing(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 128, Capture: &Capture{}})
	require.NoError(t, err)
	require.NoError(t, s.Prefill(testTokens(10, m.Params.Vocab)))
	allocs := testing.AllocsPerRun(10, func() {
		if err := s.Decode(5); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled {
		require.Zero(t, allocs)
	}
}
