package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestContextMemory checks ContextMemory against the buffers NewSession
// actually allocates, for contexts below, at and above the window and not
// multiples of any ratio.
func TestContextMemory(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(1)
	defer be.Close()
	p := m.Params
	require.Contains(t, p.CompressRatios, 4, "the tiny model has a ratio-4 layer")
	for _, ctx := range []int{2, p.Window - 1, p.Window, 129, 1000} {
		s, err := NewSession(m, be, Options{Context: ctx})
		require.NoError(t, err)
		var floats, comp int
		for il, st := range s.layers {
			for _, b := range [][]float32{st.raw, st.comp, st.skv, st.ssc, st.icomp, st.iskv, st.issc} {
				floats += cap(b)
			}
			if p.Ratio(il) == 4 {
				comp = cap(st.icomp) / p.IndexerDim
				require.Equal(t, comp, cap(st.comp)/p.HeadDim)
			}
		}
		bytes, raw, compRows := ContextMemory(p, ctx)
		require.Equal(t, int64(4*floats), bytes, "ctx %d", ctx)
		require.Equal(t, s.rawCap, raw, "ctx %d", ctx)
		require.Equal(t, cap(s.layers[0].raw)/p.HeadDim, raw)
		require.Equal(t, comp, compRows, "ctx %d", ctx)
	}
}
