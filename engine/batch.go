package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// DecodeBatch evaluates tokens[i] at the next position of ss[i] in one forward pass; afterwards each
// session's Logits (and Tokens/Pos) equal what ss[i].Decode(tokens[i]) alone would have produced.
//
// The pass (docs/formats/model.md#batched-decode) has one row per session:
// every projection multiplies the N rows at once, so the dense weights are
// read once per step, and each routed expert multiplies all the rows
// routed to it, so the batch reads the union of its experts once (through
// the expert cache when the model streams them, Model.Stream). Attention,
// the compressors, the indexer and the cache pushes run per row on that
// row's session at its own position, with its own options (numerics,
// steering, capture, expert observer). Every result is bit-identical to
// the session's own Decode.
//
// The sessions must share one model and one backend and be distinct, and
// len(tokens) must equal len(ss); a session whose context is full
// (ErrContextFull) or a token outside the vocabulary is an error returned
// before any session changes. No sessions is a no-op, and one is its
// Decode. Each session's layer hook (SetLayerHook) runs once after each
// layer, the sessions in the order of ss. A step that fails reading the
// model (ErrModelFault, ErrExpertRead) resets every session of the batch.
//
// The pass runs in the workspace of one of the sessions, the first whose
// buffers hold N rows, else ss[0]'s, regrown; it adds N rows of logits to
// it. Steps over the same sessions therefore allocate nothing. DecodeBatch
// may run while no other goroutine uses the sessions of ss or their
// workspaces (Options.Workspace); batches over disjoint sessions with
// workspaces of their own may run concurrently.
func DecodeBatch(ss []*Session, tokens []int) error {
	if len(ss) != len(tokens) {
		return fmt.Errorf("engine: batch of %d sessions and %d tokens", len(ss), len(tokens))
	}
	var few [8][]int
	toks := few[:0]
	for i := range tokens {
		toks = append(toks, tokens[i:i+1])
	}
	return EvalBatch(ss, toks)
}

// EvalBatch evaluates toks[i] at the next positions of ss[i] in one
// forward pass; afterwards each session's Logits (and Tokens/Pos) equal
// what ss[i].Prefill(toks[i]) alone would have produced. It is
// DecodeBatch with any number of tokens per session: a step of
// continuous batching, where some sessions decode one token while others
// prefill a part of their prompt, and the weights are read once for all
// of them.
//
// The pass has one row per token, the rows of a session together and in
// order; every toks[i] must hold at least one token, and the rows are as
// many as the pass's buffers take: the workspace grows to them, so a
// caller keeps their sum within the prefill chunk it prefills with
// (PrefillChunk) to grow nothing. Every other rule of DecodeBatch holds:
// errors before any change, the layer hooks, a failed step resetting
// every session, the workspace and concurrency.
func EvalBatch(ss []*Session, toks [][]int) (err error) {
	if len(ss) != len(toks) {
		return fmt.Errorf("engine: batch of %d sessions and %d token lists", len(ss), len(toks))
	}
	if len(ss) == 0 {
		return nil
	}
	if err := checkBatch(ss, toks); err != nil {
		return err
	}
	if len(ss) == 1 {
		return ss[0].forward(toks[0], nil)
	}
	defer guardBatch(&err, debug.SetPanicOnFault(true), ss)
	n := 0
	for _, t := range toks {
		n += len(t)
	}
	ws := batchWorkspace(ss, n)
	p := ss[0].m.Params
	if ws.s.n < n {
		ws.s = newScratch(p, n)
	}
	sc := ws.s
	if len(sc.logits) < len(ss)*p.Vocab {
		sc.logits = make([]float32, len(ss)*p.Vocab)
	}
	rowToks := sc.toks[:0]
	for _, t := range toks {
		rowToks = append(rowToks, t...)
	}
	f := &ws.f
	f.begin(ss[0].m, ss[0].be, sc, rowToks)
	defer f.end()
	row := 0
	for i, s := range ss {
		for j := range toks[i] {
			f.own[row], f.pos[row] = s, len(s.tokens)+j
			row++
		}
		sc.last[i] = row - 1
	}
	if err := f.run(); err != nil {
		return err
	}
	f.head(sc.logits[:len(ss)*p.Vocab], sc.last[:len(ss)])
	for i, s := range ss {
		s.tokens = append(s.tokens, toks[i]...)
		copy(s.logits, sc.logits[i*p.Vocab:(i+1)*p.Vocab])
	}
	return nil
}

// errBatchSession reports a batch DecodeBatch cannot run together.
var errBatchSession = errors.New("engine: batched decode")

// checkBatch reports whether the sessions ss can evaluate toks together:
// one model and one backend, no session twice, at least one token for
// each and room for them, every token in the vocabulary.
func checkBatch(ss []*Session, toks [][]int) error {
	if ss[0] == nil {
		return fmt.Errorf("%w: session 0 is nil", errBatchSession)
	}
	m, be := ss[0].m, ss[0].be
	for i, s := range ss {
		switch {
		case s == nil:
			return fmt.Errorf("%w: session %d is nil", errBatchSession, i)
		case s.m != m:
			return fmt.Errorf("%w: session %d runs another model than session 0", errBatchSession, i)
		case s.be != be:
			return fmt.Errorf("%w: session %d runs on another backend than session 0", errBatchSession, i)
		case len(toks[i]) == 0:
			return fmt.Errorf("%w: session %d has no token", errBatchSession, i)
		case s.Pos()+len(toks[i]) > s.Context():
			return fmt.Errorf("%w: session %d: %d + %d tokens exceed %d", ErrContextFull, i, s.Pos(), len(toks[i]), s.Context())
		}
		for j := range i {
			if ss[j] == s {
				return fmt.Errorf("%w: sessions %d and %d are the same", errBatchSession, j, i)
			}
		}
		for _, t := range toks[i] {
			if err := m.checkToken(t); err != nil {
				return fmt.Errorf("session %d: %w", i, err)
			}
		}
	}
	return nil
}

// batchWorkspace returns the workspace a batch of ss over n rows runs in:
// the first of the sessions' whose buffers hold n rows, else ss[0]'s.
func batchWorkspace(ss []*Session, n int) *Workspace {
	for _, s := range ss {
		if s.ws.s.n >= n {
			return s.ws
		}
	}
	return ss[0].ws
}
