package harness

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestExpertReadBlock checks that the disk probe reads one routed expert
// of the model at hand: 7.08 MB for Flash q2, 18.6 MB for Pro q2 (sparse
// 2-layer slices at the real shapes), rounded to whole MiB.
func TestExpertReadBlock(t *testing.T) {
	for _, tc := range []struct {
		preset string
		recipe layout.Recipe
		want   int64
	}{
		{"flash", layout.RecipeQ2, 7 << 20},
		{"flash", layout.RecipeQ4, 14 << 20},
		{"pro", layout.RecipeQ2, 18 << 20},
		{"pro", layout.RecipeQ4, 35 << 20},
	} {
		t.Run(tc.preset+"/"+tc.recipe.Name, func(t *testing.T) {
			p, err := synth.Preset(tc.preset, 2)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "slice.gguf")
			_, err = synth.WriteSparse(path, synth.Options{Params: p, Recipe: tc.recipe})
			require.NoError(t, err)
			m, err := engine.Open(path)
			require.NoError(t, err)
			defer m.File.Close()
			require.Equal(t, tc.want, ExpertReadBlock(m))
			require.Zero(t, ExpertReadBlock(m)%DiskAlign)
		})
	}
}
