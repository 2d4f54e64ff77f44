package harness

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
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

// TestProjectTrafficPro projects the decode traffic of Pro slices (sparse
// files at the real shape) to the 61 layers of Pro's schedule and checks
// it against the full model's own: exact but for the routing tables of
// the layers projected from hash-routed ones, and refused from a slice
// without a ratio-4 layer.
func TestProjectTrafficPro(t *testing.T) {
	full := layout.Pro()
	traffic := func(p layout.Params) []Traffic {
		path := filepath.Join(t.TempDir(), "m.gguf")
		_, err := synth.WriteSparse(path, synth.Options{Params: p, Recipe: layout.RecipeQ2})
		require.NoError(t, err)
		f, err := gguf.Open(path)
		require.NoError(t, err)
		defer f.Close()
		parts, err := DecodeTraffic(f, p)
		require.NoError(t, err)
		return parts
	}
	want := traffic(full)
	require.Len(t, want, 61+3)
	total := want[len(want)-1]
	// A hash-routed layer reads 6 expert ids (24 bytes) where a learned one
	// reads 384 biases (1536 bytes).
	const hashDelta = 384*4 - 6*4
	for _, tc := range []struct {
		layers   int
		hashLike int // projected layers that copy a hash-routed one
		err      string
	}{
		{2, 0, "the slice has no layer of compression ratio 4"},
		{3, 58, ""}, // layers 1 (ratio 128) and 2 (ratio 4) are hash-routed
		{4, 29, ""}, // layer 2 (ratio 4) is hash-routed, layer 3 not
		{61, 0, ""},
	} {
		t.Run(fmt.Sprint(tc.layers), func(t *testing.T) {
			p := layout.Pro()
			p.SetLayers(tc.layers)
			proj, err := ProjectTraffic(traffic(p), full.CompressRatios)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			got := proj[len(proj)-1]
			require.Equal(t, total.ExpertBytes, got.ExpertBytes)
			require.Equal(t, total.MACsInt8, got.MACsInt8)
			require.Equal(t, total.IndexerBytes, got.IndexerBytes)
			require.Equal(t, total.Bytes-int64(tc.hashLike*hashDelta), got.Bytes)
		})
	}
}
