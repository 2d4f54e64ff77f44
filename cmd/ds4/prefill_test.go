package main

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
)

// prefillTokens returns n in-vocabulary tokens for the tiny model.
func prefillTokens(n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 13) % vocab
	}
	return ids
}

// TestPrefillSteps checks that prefilling in steps leaves the same logits
// as one whole prefill, and that a context cancelled after a step ends it
// there.
func TestPrefillSteps(t *testing.T) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	be := cpu.New(0)
	defer be.Close()
	ids := prefillTokens(2*prefillStep+5, m.Params.Vocab)
	whole, err := engine.NewSession(m, be, engine.Options{Context: 4 * prefillStep})
	require.NoError(t, err)
	require.NoError(t, whole.Prefill(ids))
	stepped, err := engine.NewSession(m, be, engine.Options{Context: 4 * prefillStep})
	require.NoError(t, err)
	require.NoError(t, prefill(context.Background(), stepped, ids, io.Discard, func(int) {}))
	require.Equal(t, whole.Logits(), stepped.Logits())

	stepped.Reset()
	asked := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = prefill(ctx, stepped, ids, io.Discard, func(int) {
		if asked++; asked == 2 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2*prefillStep, stepped.Pos())

	stepped.Reset()
	err = prefill(context.Background(), stepped, append(ids, m.Params.Vocab), io.Discard, nil)
	require.ErrorContains(t, err, "prefill: engine: token")
}

// TestPrefillProgress checks that the progress of a prefill moves layer by
// layer, adding up to each step's tokens, and that no progress is told
// after it (the layer hook is removed).
func TestPrefillProgress(t *testing.T) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	be := cpu.New(0)
	defer be.Close()
	ids := prefillTokens(prefillStep+prefillStep/2, m.Params.Vocab)
	s, err := engine.NewSession(m, be, engine.Options{Context: 2*prefillStep + 8})
	require.NoError(t, err)
	var adds []int64
	require.NoError(t, prefillSteps(context.Background(), s, ids, func(n int64) { adds = append(adds, n) }, nil))
	layers := m.Params.Layers
	require.Len(t, adds, 2*layers, "one report per layer of each step")
	var first, second int64
	for i, n := range adds {
		require.Positive(t, n)
		if i < layers {
			first += n
		} else {
			second += n
		}
	}
	require.Equal(t, int64(prefillStep), first)
	require.Equal(t, int64(prefillStep/2), second)
	require.NoError(t, s.Decode(ids[0]))
	require.Len(t, adds, 2*layers, "a decode after the prefill reports nothing")
}

// BenchmarkPrefill compares prefilling four steps' worth of tokens in
// steps of prefillStep (with the progress bar) against one Prefill call:
// the ratio of the two should stay near 1.
func BenchmarkPrefill(b *testing.B) {
	m, err := engine.OpenTiny()
	require.NoError(b, err)
	be := cpu.New(0)
	defer be.Close()
	ids := prefillTokens(4*prefillStep, m.Params.Vocab)
	s, err := engine.NewSession(m, be, engine.Options{Context: 8 * prefillStep})
	require.NoError(b, err)
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			s.Reset()
			if err := s.Prefill(ids); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stepped", func(b *testing.B) {
		for b.Loop() {
			s.Reset()
			if err := prefill(context.Background(), s, ids, io.Discard, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
