package engine

import (
	"hash/fnv"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// expertLog records, per layer, every routed-expert evaluation as the
// expert and hashes of its input and output rows.
type expertLog struct {
	layers [][][3]uint64
	k      int
}

func rowHash(v []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, f := range v {
		u := math.Float32bits(f)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return h.Sum64()
}

func (l *expertLog) ObserveExpert(il, e int, in, mid []float32) {
	l.layers[il] = append(l.layers[il], [3]uint64{uint64(e), rowHash(in), rowHash(mid)})
}

// TestExpertObserverPrefillMatchesDecode checks that a prefill in chunks
// of any size, whose experts run grouped by expert, gives the logits of
// decoding bit for bit and shows the observer the same evaluations in the
// same order per layer (token by token, experts in routing order).
func TestExpertObserverPrefillMatchesDecode(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	p := m.Params
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(100, p.Vocab)
	// chunk 0 decodes token by token.
	run := func(chunk int) (*expertLog, []float32) {
		log := &expertLog{layers: make([][][3]uint64, p.Layers)}
		s, err := NewSession(m, be, Options{Context: 128, Experts: log})
		require.NoError(t, err)
		if chunk > 0 {
			s.chunk = chunk
			require.NoError(t, s.Prefill(toks))
		} else {
			for _, tok := range toks {
				require.NoError(t, s.Decode(tok))
			}
		}
		return log, s.Logits()
	}
	dec, logits := run(0)
	for _, chunk := range []int{7, PrefillChunk, 100} {
		pre, got := run(chunk)
		require.Equal(t, bitsOf32(logits), bitsOf32(got), "chunk %d: logits", chunk)
		for il := range p.Layers {
			require.Equal(t, dec.layers[il], pre.layers[il], "chunk %d: layer %d", chunk, il)
		}
	}
	for il := range p.Layers {
		require.Len(t, dec.layers[il], len(toks)*p.ExpertsUsed, "layer %d", il)
		// Within a token, consecutive evaluations share the input row.
		for i := range len(toks) {
			ev := dec.layers[il][i*p.ExpertsUsed : (i+1)*p.ExpertsUsed]
			for _, r := range ev {
				require.Equal(t, ev[0][1], r[1], "layer %d token %d", il, i)
			}
		}
	}
}

func bitsOf32(v []float32) []uint32 {
	b := make([]uint32, len(v))
	for i, f := range v {
		b[i] = math.Float32bits(f)
	}
	return b
}
