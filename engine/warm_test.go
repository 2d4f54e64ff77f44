package engine

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestWarmWeights warms a mapped model file and the built-in tiny model
// and checks the progress they report: the whole data section, done.
func TestWarmWeights(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: 5})
	require.NoError(t, err)
	mapped, err := Open(path)
	require.NoError(t, err)
	defer mapped.File.Close()
	tiny, err := OpenTiny()
	require.NoError(t, err)
	for _, m := range []*Model{mapped, tiny} {
		f := m.File
		var tensors int64
		for _, ti := range f.Tensors {
			tensors += int64(ti.Size)
		}
		require.GreaterOrEqual(t, f.DataBytes(), tensors)
		require.Equal(t, f.Size(), int64(f.DataOffset)+f.DataBytes())

		var out bytes.Buffer
		m.WarmWeights(&out, "test")
		mib := fmt.Sprintf("%.1fMiB", float64(f.DataBytes())/(1<<20))
		require.Contains(t, out.String(), "test: warming the weights 100.0% "+mib+"/"+mib)
	}
	var out bytes.Buffer
	(&Model{}).WarmWeights(&out, "test")
	require.Empty(t, out.String(), "a model without a file has nothing to warm")
}
