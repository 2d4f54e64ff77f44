package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ds4-go/ds4/engine/sample"
)

// PrefillOptions control Session.PrefillChunks.
type PrefillOptions struct {
	// Chunk is the most tokens evaluated between two checks of the
	// context and calls of AfterChunk; 0 means PrefillChunk.
	Chunk int
	// End, when set, returns the absolute position at which the chunk
	// starting at pos ends (a checkpoint frontier, say); the chunk is
	// then the shorter of that and Chunk tokens. A value not after pos is
	// ignored.
	End func(pos int) int
	// Progress, when set, is called after each layer of each chunk with
	// the absolute position counted as reached: a chunk's tokens count in
	// proportion to the layers done. A chunk of a large model takes
	// minutes on a small machine, too long for a bar or a keep-alive that
	// moves once a chunk. Progress must not use the session.
	Progress func(pos int)
	// AfterChunk, when set, is called after each chunk with the session's
	// position; an error stops the prefill and is returned as it is.
	AfterChunk func(pos int) error
}

// Evaluator is a session as the prefill and generate loops drive it:
// *Session implements it, and so can a session behind another interface
// (the server's test sessions, say). Logits must return the session's own
// slice, which a GenerateOptions.Choose may change and restore.
type Evaluator interface {
	Context() int
	Pos() int
	Prefill(tokens []int) error
	Decode(token int) error
	Logits() []float32
	SetLayerHook(f func())
	// Layers is the number of layer hook calls per evaluation.
	Layers() int
}

// Layers returns the number of layers, the layer hook calls of each
// evaluation.
func (s *Session) Layers() int { return s.m.Params.Layers }

// PrefillChunks evaluates tokens at the next positions in chunks, as
// Prefill does, checking ctx between chunks: when ctx is done it returns
// context.Cause(ctx) and the session holds the chunks evaluated so far.
// The result does not depend on how the tokens are split.
func (s *Session) PrefillChunks(ctx context.Context, tokens []int, opt PrefillOptions) error {
	return PrefillChunks(ctx, s, tokens, opt)
}

// PrefillChunks is Session.PrefillChunks on any Evaluator.
func PrefillChunks(ctx context.Context, s Evaluator, tokens []int, opt PrefillOptions) error {
	chunk := opt.Chunk
	if chunk <= 0 {
		chunk = PrefillChunk
	}
	if opt.Progress != nil {
		defer s.SetLayerHook(nil)
	}
	layers := max(1, s.Layers())
	for done := 0; done < len(tokens); {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		pos := s.Pos()
		n := min(chunk, len(tokens)-done)
		if opt.End != nil {
			if end := opt.End(pos); end > pos {
				n = min(n, end-pos)
			}
		}
		if opt.Progress != nil {
			layer := 0
			s.SetLayerHook(func() {
				layer++
				opt.Progress(pos + n*min(layer, layers)/layers)
			})
		}
		if err := s.Prefill(tokens[done : done+n]); err != nil {
			return err
		}
		done += n
		if opt.AfterChunk != nil {
			if err := opt.AfterChunk(s.Pos()); err != nil {
				return err
			}
		}
	}
	return nil
}

// StopReason says why Generate stopped.
type StopReason int

const (
	// StopLength: the token limit (or the context) was reached.
	StopLength StopReason = iota
	// StopEOS: the end-of-sequence token was chosen.
	StopEOS
	// StopToken: the Token callback asked to stop.
	StopToken
	// StopCancelled: the context was done before the next token.
	StopCancelled
)

// String returns the reason as a word: "length", "eos", "stop" or
// "cancelled".
func (r StopReason) String() string {
	switch r {
	case StopLength:
		return "length"
	case StopEOS:
		return "eos"
	case StopToken:
		return "stop"
	case StopCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// GenerateOptions control Session.Generate.
type GenerateOptions struct {
	// MaxTokens is the most tokens to generate; Generate also stops where
	// the next token would not fit in the context.
	MaxTokens int
	// EOS is the end-of-sequence token, which stops generation without
	// being counted; a negative value means none.
	EOS int
	// Choose picks the next token from the logits of the last evaluated
	// one; n is the number of tokens generated before it. Nil means
	// Sampler, and with no Sampler the most likely token. Choose may
	// change the logits only if it restores them before returning.
	Choose func(logits []float32, n int) int
	// Sampler picks the next token when Choose is nil.
	Sampler *sample.Sampler
	// Token, when set, sees each generated token (not EOS) before it is
	// evaluated, with the number generated so far including it; returning
	// true stops generation after that token.
	Token func(token, n int) (stop bool)
	// Evaluate evaluates a generated token; nil means Session.Decode.
	Evaluate func(token int) error
}

// Generation is what Session.Generate did.
type Generation struct {
	Tokens int        // tokens generated, EOS not counted
	Reason StopReason // why it stopped
	// Pending is the last generated token, which Generate does not
	// evaluate (a caller that stops there need not pay for it), or -1
	// when every generated token was evaluated.
	Pending    int
	FirstToken time.Duration // from the call to the first token chosen
	Elapsed    time.Duration // from the call to its return
}

// Generate generates tokens after the session's last one until
// MaxTokens, the context's end, EOS, the Token callback or ctx stops it,
// evaluating each token but the last (Generation.Pending). It returns an
// error only when evaluating a token fails; the Generation then counts
// the token that failed, which the session does not hold.
func (s *Session) Generate(ctx context.Context, opt GenerateOptions) (Generation, error) {
	return Generate(ctx, s, opt)
}

// Generate is Session.Generate on any Evaluator.
func Generate(ctx context.Context, s Evaluator, opt GenerateOptions) (Generation, error) {
	t0 := time.Now()
	g := Generation{Reason: StopLength, Pending: -1}
	// k tokens evaluate k-1 of them: the session ends at Pos()+k-1, and at
	// Pos()+k once the pending token is evaluated.
	limit := min(opt.MaxTokens, s.Context()-s.Pos())
	for g.Tokens < limit {
		if ctx.Err() != nil {
			g.Reason = StopCancelled
			break
		}
		var tok int
		switch logits := s.Logits(); {
		case opt.Choose != nil:
			tok = opt.Choose(logits, g.Tokens)
		case opt.Sampler != nil:
			tok = opt.Sampler.Sample(logits)
		default:
			tok = sample.Argmax(logits)
		}
		if g.Tokens == 0 {
			g.FirstToken = time.Since(t0)
		}
		if tok == opt.EOS && opt.EOS >= 0 {
			g.Reason = StopEOS
			break
		}
		g.Tokens++
		if opt.Token != nil && opt.Token(tok, g.Tokens) {
			g.Reason = StopToken
			g.Pending = tok
			break
		}
		if g.Tokens == limit {
			g.Pending = tok
			break
		}
		var err error
		if opt.Evaluate != nil {
			err = opt.Evaluate(tok)
		} else {
			err = s.Decode(tok)
		}
		if err != nil {
			g.Elapsed = time.Since(t0)
			return g, fmt.Errorf("engine: evaluating generated token %d: %w", g.Tokens, err)
		}
	}
	g.Elapsed = time.Since(t0)
	return g, nil
}
