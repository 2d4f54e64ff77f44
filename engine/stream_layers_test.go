package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestExpertLayers checks that the spans ExpertLayers computes hold, in
// the file, the bytes the mapped model's matrices give for every expert,
// and that ResidentTensors leaves out exactly the routed stacks.
func TestExpertLayers(t *testing.T) {
	p := layout.Tiny()
	p.Vocab = 1024
	tab, err := tables()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err = synth.WriteFile(path, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 5, Tables: tab})
	require.NoError(t, err)
	m, err := Open(path)
	require.NoError(t, err)
	defer m.File.Close()
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()

	layers := ExpertLayers(m)
	require.Len(t, layers, p.Layers)
	for il, l := range layers {
		require.Equal(t, p.Experts, l.Experts)
		ml := &m.Layers[il]
		for _, c := range []struct {
			name string
			span int64
			size int64
			get  func(e int) []byte
		}{
			{"gate", l.Gate.Offset, l.Gate.Bytes, func(e int) []byte { return ml.GateExps.Expert(e).Data }},
			{"up", l.Up.Offset, l.Up.Bytes, func(e int) []byte { return ml.UpExps.Expert(e).Data }},
			{"down", l.Down.Offset, l.Down.Bytes, func(e int) []byte { return ml.DownExps.Expert(e).Data }},
		} {
			for e := range l.Experts {
				want := c.get(e)
				require.Equal(t, int64(len(want)), c.size, "layer %d %s", il, c.name)
				got := make([]byte, c.size)
				_, err := fd.ReadAt(got, c.span+int64(e)*c.size)
				require.NoError(t, err)
				require.Equal(t, want, got, "layer %d %s expert %d", il, c.name, e)
			}
		}
	}

	resident := ResidentTensors(m)
	require.Len(t, resident, len(m.File.Tensors)-3*p.Layers)
	var sum int64
	for _, ti := range resident {
		require.NotContains(t, ti.Name, "_exps.")
		sum += int64(ti.Size)
	}
	require.Equal(t, sum, ResidentBytes(m))
}
