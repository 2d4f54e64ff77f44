package vectors

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine"
)

// streamPaths returns the logits of every position of toks through a
// prefill, decode steps, and a prefill of the first split tokens then
// decode steps.
func streamPaths(t *testing.T, m *engine.Model, be backends.Backend, toks []int, split int) map[string][]uint32 {
	t.Helper()
	v := m.Params.Vocab
	newSession := func() *engine.Session {
		s, err := engine.NewSession(m, be, engine.Options{Context: len(toks)})
		require.NoError(t, err)
		return s
	}
	bits := func(x []float32) []uint32 {
		out := make([]uint32, len(x))
		for i, f := range x {
			out[i] = math.Float32bits(f)
		}
		return out
	}
	all := make([]float32, len(toks)*v)
	require.NoError(t, newSession().PrefillAll(toks, all))
	dec := make([]float32, 0, len(toks)*v)
	s := newSession()
	for _, tok := range toks {
		require.NoError(t, s.Decode(tok))
		dec = append(dec, s.Logits()...)
	}
	mixed := make([]float32, split*v, len(toks)*v)
	s = newSession()
	require.NoError(t, s.PrefillAll(toks[:split], mixed))
	for _, tok := range toks[split:] {
		require.NoError(t, s.Decode(tok))
		mixed = append(mixed, s.Logits()...)
	}
	return map[string][]uint32{"prefill": bits(all), "decode": bits(dec), "mixed": bits(mixed)}
}

// TestOracleStreamBitIdentical converts each oracle case (q2, and the
// first one lossless too) to a file and checks that streaming its routed experts
// through a 2-slot cache and one holding them all gives the mapped
// logits bit for bit on the prefill, decode and mixed paths.
func TestOracleStreamBitIdentical(t *testing.T) {
	be := cpu.New(0)
	defer be.Close()
	for _, name := range oracleCases {
		for _, mode := range []checkpoint.Mode{checkpoint.ModeQ2, checkpoint.ModeLossless} {
			if mode == checkpoint.ModeLossless && name != oracleCases[0] {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", name, mode), func(t *testing.T) {
				c, err := LoadOracle(filepath.Join("testdata", "oracle", name))
				require.NoError(t, err)
				src, err := checkpoint.Open(filepath.Join(c.Dir, "weights.safetensors"))
				require.NoError(t, err)
				defer src.Close()
				path := filepath.Join(t.TempDir(), "case.gguf")
				out, err := os.Create(path)
				require.NoError(t, err)
				_, err = checkpoint.Convert(out, src, c.Params, checkpoint.Options{Mode: mode})
				require.NoError(t, err)
				require.NoError(t, out.Close())

				mapped, err := engine.Open(path)
				require.NoError(t, err)
				defer mapped.File.Close()
				want := streamPaths(t, mapped, be, c.Tokens, c.PrefillSplit)
				for _, slots := range []int{2, 1 << 20} {
					m, err := engine.Open(path)
					require.NoError(t, err)
					defer m.File.Close()
					require.NoError(t, m.Stream(path, engine.StreamOptions{Slots: slots, Direct: true}))
					for il := range m.Layers {
						l := &m.Layers[il]
						l.GateExps.Data, l.UpExps.Data, l.DownExps.Data = nil, nil, nil
					}
					got := streamPaths(t, m, be, c.Tokens, c.PrefillSplit)
					for _, p := range []string{"prefill", "decode", "mixed"} {
						require.Equal(t, want[p], got[p], "slots=%d %s", slots, p)
					}
				}
			})
		}
	}
}
