package vectors

import (
	"context"
	"fmt"
	"slices"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// ChatTokens encodes prompt as one user message with an empty system text
// and thinking off, as upstream's encode_chat_prompt does:
// BOS <｜User｜> prompt <｜Assistant｜> </think>, the prompt tokenized as
// plain text.
func ChatTokens(tok *tokenizer.Tokenizer, prompt string) []int {
	ids := []int{tok.Special(tokenizer.BOS), tok.Special(tokenizer.User)}
	ids = tok.AppendEncode(ids, prompt, false)
	return append(ids, tok.Special(tokenizer.Assistant), tok.Special(tokenizer.ThinkEnd))
}

// EngineSource runs cases on a local model, as upstream's runner does: a
// fresh session of the case's context, a prefill of the chat prompt, then
// argmax steps (the engine's generate loop, EOS not stopping it).
type EngineSource struct {
	Model     *engine.Model
	Backend   backends.Backend
	Tokenizer *tokenizer.Tokenizer
	Numerics  engine.Numerics
	// Logits, when set, receives a copy of each step's full logits (a
	// saved run for dense comparisons).
	Logits func(c VecCase, step int, logits []float32)
}

// Continue implements Source.
func (e *EngineSource) Continue(ctx context.Context, c VecCase, prompt string, steps, k int) ([]Step, error) {
	ids := ChatTokens(e.Tokenizer, prompt)
	for _, id := range ids {
		if id < 0 || id >= e.Model.Params.Vocab {
			return nil, fmt.Errorf("vectors: %s: prompt token %d outside the model's vocabulary (%d)", c.ID, id, e.Model.Params.Vocab)
		}
	}
	if len(ids)+steps > c.Ctx {
		return nil, fmt.Errorf("vectors: %s: %d prompt tokens and %d steps do not fit in context %d", c.ID, len(ids), steps, c.Ctx)
	}
	s, err := engine.NewSession(e.Model, e.Backend, engine.Options{Context: c.Ctx, Numerics: e.Numerics})
	if err != nil {
		return nil, fmt.Errorf("vectors: %s: %w", c.ID, err)
	}
	if err := s.PrefillChunks(ctx, ids, engine.PrefillOptions{}); err != nil {
		return nil, fmt.Errorf("vectors: %s: prefill: %w", c.ID, err)
	}
	out := make([]Step, 0, steps)
	g, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: steps, EOS: -1, Choose: func(logits []float32, i int) int {
		if e.Logits != nil {
			e.Logits(c, i, slices.Clone(logits))
		}
		id := sample.Argmax(logits)
		st := Step{Selected: TopToken{ID: id, Bytes: e.Tokenizer.TokenBytes(id), Logprob: float64(sample.Logprob(logits, id))}}
		for _, t := range sample.TopLogprobs(logits, k, nil) {
			st.Top = append(st.Top, TopToken{ID: t.ID, Bytes: e.Tokenizer.TokenBytes(t.ID), Logprob: float64(t.Logprob)})
		}
		out = append(out, st)
		return id
	}})
	if err != nil {
		return out, fmt.Errorf("vectors: %s: %w", c.ID, err)
	}
	if g.Reason == engine.StopCancelled {
		return out, context.Cause(ctx)
	}
	return out, nil
}
