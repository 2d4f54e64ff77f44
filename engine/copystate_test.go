package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestCopyFrom checks that a session copied from another at any position
// (inside the window, across compression windows, wrapping the window)
// continues exactly as the original does, over a destination that held
// other tokens.
func TestCopyFrom(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 8, 4, 8} })
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(90, m.Params.Vocab)
	other := testTokens(100, m.Params.Vocab)[30:]
	ref, err := NewSession(m, be, Options{Context: 128})
	require.NoError(t, err)
	require.NoError(t, ref.Prefill(toks))
	for _, at := range []int{1, 23, 41, 77} {
		src, err := NewSession(m, be, Options{Context: 128})
		require.NoError(t, err)
		require.NoError(t, src.Prefill(toks[:at]))
		dst, err := NewSession(m, be, Options{Context: 128})
		require.NoError(t, err)
		require.NoError(t, dst.Prefill(other))
		require.NoError(t, dst.CopyFrom(src))
		require.Equal(t, src.Tokens(), dst.Tokens())
		require.Equal(t, src.Logits(), dst.Logits())
		require.NoError(t, dst.Prefill(toks[at:]))
		require.Equal(t, ref.Logits(), dst.Logits(), "copied at %d", at)
	}
	small, err := NewSession(m, be, Options{Context: 64})
	require.NoError(t, err)
	require.Error(t, small.CopyFrom(ref))
}
