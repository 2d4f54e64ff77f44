package engine

import (
	"errors"
	"fmt"
)

// Checkpoint records a session's state at one position so that the
// session can return to it after evaluating more tokens. Unlike a
// Snapshot it copies only what evaluating further tokens overwrites: the
// raw window ring, the compressor and indexer frontiers and the last
// logits. Compressed rows are only ever appended, so their counts suffice,
// and a checkpoint's size does not grow with the context (22.9 MiB on
// Flash, half of it the compressor frontiers of the ratio-128 layers).
// It keeps its session alive. The zero value is ready for
// Session.Checkpoint.
type Checkpoint struct {
	s      *Session
	epoch  int
	pos    int
	logits []float32
	layers []layerState
}

// Pos returns the number of tokens the checkpoint holds, or -1 when it
// holds none.
func (cp *Checkpoint) Pos() int {
	if cp.s == nil {
		return -1
	}
	return cp.pos
}

// Checkpoint records the session's current state into cp, reusing cp's
// buffers when it held an earlier checkpoint of the same session.
func (s *Session) Checkpoint(cp *Checkpoint) {
	if cp.s != s {
		*cp = Checkpoint{s: s, logits: make([]float32, len(s.logits)), layers: make([]layerState, len(s.layers))}
		for i, st := range s.layers {
			cp.layers[i] = layerState{
				raw: make([]float32, len(st.raw)),
				skv: make([]float32, len(st.skv)), ssc: make([]float32, len(st.ssc)),
				iskv: make([]float32, len(st.iskv)), issc: make([]float32, len(st.issc)),
			}
		}
	}
	cp.epoch, cp.pos = s.epoch, len(s.tokens)
	copy(cp.logits, s.logits)
	for i := range s.layers {
		copyFrontier(&cp.layers[i], &s.layers[i])
	}
}

// Rewind returns the session to the state cp recorded, dropping the
// tokens evaluated since; cp stays usable and the session's other
// checkpoints are voided. It refuses a checkpoint of another session or
// one taken before the session was reset, restored or rewound, leaving the
// session unchanged.
func (s *Session) Rewind(cp *Checkpoint) error {
	switch {
	case cp.s != s:
		return errors.New("engine: checkpoint is from another session")
	case cp.epoch != s.epoch || cp.pos > len(s.tokens):
		return fmt.Errorf("engine: checkpoint at %d tokens no longer matches the session", cp.pos)
	}
	s.tokens = s.tokens[:cp.pos]
	s.epoch++
	cp.epoch = s.epoch
	copy(s.logits, cp.logits)
	for i := range s.layers {
		copyFrontier(&s.layers[i], &cp.layers[i])
	}
	return nil
}

// copyFrontier copies the parts of a layer's state that evaluating a
// token overwrites, and the row counts, from src to dst.
func copyFrontier(dst, src *layerState) {
	copy(dst.raw, src.raw)
	copy(dst.skv, src.skv)
	copy(dst.ssc, src.ssc)
	copy(dst.iskv, src.iskv)
	copy(dst.issc, src.issc)
	dst.rawStart, dst.rawLen = src.rawStart, src.rawLen
	dst.compLen, dst.icompLen = src.compLen, src.icompLen
}
