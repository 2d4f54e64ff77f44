package engine

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestReleasedSlicesLoadAndDecode loads 2-layer slices of the released
// models at their real shape (sparse files: every weight zero, no disk
// used) with both published recipes and decodes two tokens: every buffer
// is sized from the metadata, whatever the model.
func TestReleasedSlicesLoadAndDecode(t *testing.T) {
	be := cpu.New(0)
	defer be.Close()
	for _, tc := range []struct {
		preset string
		recipe layout.Recipe
		ratios []int
	}{
		{"flash", layout.RecipeQ2, []int{0, 0}},
		{"pro", layout.RecipeQ2, []int{128, 128}},
		{"pro", layout.RecipeQ4, []int{128, 128}},
	} {
		t.Run(tc.preset+"/"+tc.recipe.Name, func(t *testing.T) {
			p, err := synth.Preset(tc.preset, 2)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "slice.gguf")
			_, err = synth.WriteSparse(path, synth.Options{Params: p, Recipe: tc.recipe})
			require.NoError(t, err)
			m, err := Open(path)
			require.NoError(t, err)
			defer m.File.Close()
			require.Equal(t, p, m.Params)
			require.Equal(t, tc.ratios, m.Params.CompressRatios)
			model, ok := m.Params.Model()
			require.True(t, ok)
			require.Equal(t, "DeepSeek-V4-"+map[string]string{"flash": "Flash", "pro": "Pro"}[tc.preset], model.Name)

			s, err := NewSession(m, be, Options{Context: 64})
			require.NoError(t, err)
			for _, tok := range []int{1, 2} {
				require.NoError(t, s.Decode(tok))
			}
			logits := s.Logits()
			require.Len(t, logits, p.Vocab)
			for i, v := range logits {
				require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "logit %d = %v", i, v)
			}
		})
	}
}
