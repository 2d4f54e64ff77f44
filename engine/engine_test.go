package engine

import (
	"bytes"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/gguf"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/synth"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

var tables = sync.OnceValues(tokenizer.DeepSeekV4)

// tinyModel synthesizes the tiny preset (vocabulary shortened to keep tests
// fast) with the given recipe and binds it.
func tinyModel(t testing.TB, r layout.Recipe, edit func(*layout.Params)) *Model {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = 1024
	if edit != nil {
		edit(&p)
	}
	tab, err := tables()
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = synth.Write(&buf, synth.Options{Params: p, Recipe: r, Seed: 5, Tables: tab})
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	m, err := Load(f)
	require.NoError(t, err)
	return m
}

func testTokens(n, vocab int) []int {
	toks := make([]int, n)
	for i := range toks {
		toks[i] = (i*7919 + 13) % vocab
	}
	return toks
}

// TestPrefillMatchesDecode runs the same tokens as one prefill (in chunks,
// crossing window and compression boundaries) and one token at a time: the
// logits must be bit-identical at every position.
func TestPrefillMatchesDecode(t *testing.T) {
	for _, r := range []layout.Recipe{layout.RecipeQ2, layout.RecipeQ4} {
		t.Run(r.Name, func(t *testing.T) {
			m := tinyModel(t, r, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 16, 4, 128} })
			be := cpu.New(2)
			defer be.Close()
			toks := testTokens(150, m.Params.Vocab)
			v := m.Params.Vocab

			pre, err := NewSession(m, be, Options{Context: 256})
			require.NoError(t, err)
			all := make([]float32, len(toks)*v)
			require.NoError(t, pre.PrefillAll(toks, all))

			dec, err := NewSession(m, be, Options{Context: 256})
			require.NoError(t, err)
			for i, tok := range toks {
				require.NoError(t, dec.Decode(tok))
				got := dec.Logits()
				want := all[i*v : (i+1)*v]
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("position %d logit %d: decode %v, prefill %v", i, j, got[j], want[j])
					}
					require.False(t, math.IsNaN(float64(got[j])), "NaN logit at %d", i)
				}
			}
			require.Equal(t, pre.Logits(), dec.Logits())
		})
	}
}

// TestSnapshotRestore checks that restoring a snapshot and continuing gives
// the same logits as never having stopped, across window and compression
// boundaries, and that a bad snapshot is refused.
func TestSnapshotRestore(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 8, 4, 8} })
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(60, m.Params.Vocab)
	ref, _ := NewSession(m, be, Options{Context: 128})
	require.NoError(t, ref.Prefill(toks))

	s, _ := NewSession(m, be, Options{Context: 128})
	require.NoError(t, s.Prefill(toks[:23]))
	snap := s.Snapshot()
	require.NoError(t, s.Prefill(toks[23:41])) // diverge the live state
	require.NoError(t, s.Restore(snap))
	require.Equal(t, toks[:23], s.Tokens())
	require.NoError(t, s.Prefill(toks[23:]))
	require.Equal(t, ref.Logits(), s.Logits())

	other, _ := NewSession(m, be, Options{Context: 64})
	require.Error(t, other.Restore(snap))
}

func TestContextAndTokenErrors(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(1)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 8})
	require.NoError(t, err)
	require.ErrorIs(t, s.Prefill(testTokens(9, m.Params.Vocab)), ErrContextFull)
	require.NoError(t, s.Prefill(testTokens(8, m.Params.Vocab)))
	require.ErrorIs(t, s.Decode(1), ErrContextFull)
	s.Reset()
	require.ErrorContains(t, s.Decode(m.Params.Vocab), "outside the vocabulary")
	require.ErrorContains(t, s.Decode(-1), "outside the vocabulary")
	_, err = NewSession(m, be, Options{Context: 1 << 30})
	require.ErrorContains(t, err, "exceeds the model's")
}
