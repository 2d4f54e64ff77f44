package engine

import (
	"errors"
	"slices"

	"github.com/ds4-go/ds4/engine/sample"
)

// Snapshot is a copy of a session's complete state: tokens, caches,
// compressor and indexer frontiers and the last logits.
type Snapshot struct {
	m       *Model
	context int
	tokens  []int
	layers  []layerState
	logits  []float32
}

// Snapshot copies the session's state.
func (s *Session) Snapshot() *Snapshot {
	snap := &Snapshot{m: s.m, context: s.opt.Context, tokens: slices.Clone(s.tokens), logits: slices.Clone(s.logits)}
	snap.layers = make([]layerState, len(s.layers))
	for i, st := range s.layers {
		c := st
		c.raw = slices.Clone(st.raw)
		c.comp = slices.Clone(st.comp)
		c.skv, c.ssc = slices.Clone(st.skv), slices.Clone(st.ssc)
		c.icomp = slices.Clone(st.icomp)
		c.iskv, c.issc = slices.Clone(st.iskv), slices.Clone(st.issc)
		snap.layers[i] = c
	}
	return snap
}

// Tokens returns the tokens the snapshot holds.
func (snap *Snapshot) Tokens() []int { return snap.tokens }

// Restore replaces the session's state with snap's, which must come from
// a session of the same model and context size.
func (s *Session) Restore(snap *Snapshot) error {
	if snap.m != s.m || snap.context != s.opt.Context {
		return errors.New("engine: snapshot is from another model or context size")
	}
	s.tokens = append(s.tokens[:0], snap.tokens...)
	s.epoch++
	copy(s.logits, snap.logits)
	for i := range s.layers {
		dst, src := &s.layers[i], &snap.layers[i]
		copy(dst.comp, src.comp)
		copy(dst.icomp, src.icomp)
		copyFrontier(dst, src)
	}
	return nil
}

// TopLogprobs returns the k most probable next tokens after the last
// evaluated token, with their log-probabilities, most probable first.
func (s *Session) TopLogprobs(k int) []sample.TokenLogprob {
	return sample.TopLogprobs(s.logits, k, nil)
}
