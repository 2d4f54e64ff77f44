package engine

import "errors"

// CopyFrom replaces the session's state with src's: tokens, caches,
// compressor and indexer frontiers and the last logits. src must be a
// session of the same model and context size; only the rows src holds are
// copied, so the cost grows with src's position, not with the context.
func (s *Session) CopyFrom(src *Session) error {
	if src.m != s.m || src.opt.Context != s.opt.Context {
		return errors.New("engine: copying a session of another model or context size")
	}
	if src == s {
		return nil
	}
	p := s.m.Params
	s.tokens = append(s.tokens[:0], src.tokens...)
	s.epoch++
	copy(s.logits, src.logits)
	for i := range s.layers {
		dst, from := &s.layers[i], &src.layers[i]
		copy(dst.comp[:from.compLen*p.HeadDim], from.comp)
		copy(dst.icomp[:from.icompLen*p.IndexerDim], from.icomp)
		copyFrontier(dst, from)
	}
	return nil
}
