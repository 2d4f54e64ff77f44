// Package experiment builds steering directions from contrasting prompt
// pairs and sweeps their effect on greedy generation
// (docs/steering.md), for ds4-steer; the runtime side of steering is package steering.
package experiment

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/steering"
	"github.com/ds4-go/ds4/vectors"
)

// Render returns the prompt tokens of docs/steering.md#building-a-direction: BOS, the
// system text (if any), <｜User｜>, the prompt, <｜Assistant｜>, and
// <think> when think is set, else </think>.
func Render(tok *tokenizer.Tokenizer, system, prompt string, think bool) []int {
	ids := []int{tok.Special(tokenizer.BOS)}
	if system != "" {
		ids = tok.AppendEncode(ids, system, false)
	}
	ids = append(ids, tok.Special(tokenizer.User))
	ids = tok.AppendEncode(ids, prompt, false)
	ids = append(ids, tok.Special(tokenizer.Assistant))
	if think {
		return append(ids, tok.Special(tokenizer.ThinkOpen))
	}
	return append(ids, tok.Special(tokenizer.ThinkEnd))
}

// checkVocab reports whether every token of ids is in a vocabulary of
// vocab tokens.
func checkVocab(ids []int, vocab int) error {
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("experiment: prompt token %d is outside the model's vocabulary (%d)", id, vocab)
		}
	}
	return nil
}

// CaptureOptions configure BuildFromPrompts.
type CaptureOptions struct {
	System  string // system prompt; "" omits it
	Think   bool   // end each prompt with <think> instead of </think>
	Attn    bool   // capture the attention outputs instead of the FFN outputs
	Context int    // session context in tokens
	Build   steering.BuildOptions
	// Pair, when set, is called before pair i (0-based) of n is captured.
	Pair func(i, n int)
}

// BuildFromPrompts renders each good and bad prompt (Render), prefills it
// in one session on m and be, captures every layer's last-token sublayer
// output and builds the direction from the pairs (steering.Build); the lists are
// truncated to the shorter one.
func BuildFromPrompts(ctx context.Context, m *engine.Model, be backends.Backend, tok *tokenizer.Tokenizer, good, bad []string, o CaptureOptions) (*steering.Direction, error) {
	n := min(len(good), len(bad))
	if n == 0 {
		return nil, errors.New("experiment: no prompt pairs")
	}
	capt := &engine.Capture{Attn: o.Attn}
	s, err := engine.NewSession(m, be, engine.Options{Context: o.Context, Capture: capt})
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	p := m.Params
	// activation prefills prompt and returns a copy of the captured rows,
	// indexed [layer][embd].
	activation := func(prompt string) ([][]float32, error) {
		ids := Render(tok, o.System, prompt, o.Think)
		if err := checkVocab(ids, p.Vocab); err != nil {
			return nil, err
		}
		if len(ids) > o.Context {
			return nil, fmt.Errorf("experiment: prompt of %d tokens exceeds the context of %d: %q", len(ids), o.Context, prompt)
		}
		s.Reset()
		if err := s.PrefillChunks(ctx, ids, engine.PrefillOptions{}); err != nil {
			return nil, fmt.Errorf("experiment: prefill %q: %w", prompt, err)
		}
		rows := slices.Clone(capt.Rows)
		out := make([][]float32, p.Layers)
		for l := range out {
			out[l] = rows[l*p.Embd : (l+1)*p.Embd]
		}
		return out, nil
	}
	goodAct, badAct := make([][][]float32, n), make([][][]float32, n)
	for i := range n {
		if o.Pair != nil {
			o.Pair(i, n)
		}
		if goodAct[i], err = activation(good[i]); err != nil {
			return nil, err
		}
		if badAct[i], err = activation(bad[i]); err != nil {
			return nil, err
		}
	}
	return steering.Build(goodAct, badAct, o.Build)
}

// SweepRow is one generation of a steering sweep, a row of the Parquet
// table "steering".
type SweepRow struct {
	Direction    string  `parquet:"direction"`
	PromptIndex  int64   `parquet:"prompt_index"`
	Prompt       string  `parquet:"prompt"`
	PromptTokens int64   `parquet:"prompt_tokens"`
	FFNScale     float64 `parquet:"ffn_scale"`
	AttnScale    float64 `parquet:"attn_scale"`
	Thinking     bool    `parquet:"thinking"`
	MaxTokens    int64   `parquet:"max_tokens"`
	Output       string  `parquet:"output"`
	OutputTokens int64   `parquet:"output_tokens"`
	StoppedEOS   bool    `parquet:"stopped_eos"`
	FirstKL      float64 `parquet:"first_token_kl"`
}

// SweepOptions configure Sweep.
type SweepOptions struct {
	Direction     *steering.Direction
	DirectionName string    // the Direction column of the rows
	Scales        []float64 // FFN scales, one run each per prompt
	AttnScale     float64   // attention scale of every run
	System        string    // system prompt; "" omits it
	Think         bool      // end each prompt with <think> instead of </think>
	Tokens        int       // most tokens generated per run
	Context       int       // session context in tokens
	// Prompt, when set, is called before prompt i is run; Row, when set,
	// with each row as it is measured.
	Prompt func(i int, prompt string)
	Row    func(r *SweepRow)
}

// Sweep generates greedily for every prompt and FFN scale, each run in a
// fresh session on m and be, and returns a row per run with the output
// and the KL divergence of its first next-token distribution from the
// unsteered run's. A scale of 0 with no attention scale is the unsteered
// run itself.
func Sweep(ctx context.Context, m *engine.Model, be backends.Backend, tok *tokenizer.Tokenizer, prompts []string, o SweepOptions) ([]SweepRow, error) {
	var rows []SweepRow
	eos := tok.Special(tokenizer.EOS)
	for pi, prompt := range prompts {
		if o.Prompt != nil {
			o.Prompt(pi, prompt)
		}
		ids := Render(tok, o.System, prompt, o.Think)
		if err := checkVocab(ids, m.Params.Vocab); err != nil {
			return rows, err
		}
		ref, err := greedy(ctx, m, be, ids, nil, o.Context, o.Tokens, eos)
		if err != nil {
			return rows, fmt.Errorf("experiment: prompt %d unsteered: %w", pi+1, err)
		}
		for _, sc := range o.Scales {
			res := ref
			if sc != 0 || o.AttnScale != 0 {
				st := &engine.Steering{Dir: o.Direction.V, FFN: float32(sc), Attn: float32(o.AttnScale)}
				if res, err = greedy(ctx, m, be, ids, st, o.Context, o.Tokens, eos); err != nil {
					return rows, fmt.Errorf("experiment: prompt %d scale %g: %w", pi+1, sc, err)
				}
			}
			rows = append(rows, SweepRow{
				Direction: o.DirectionName, PromptIndex: int64(pi), Prompt: prompt, PromptTokens: int64(len(ids)),
				FFNScale: sc, AttnScale: o.AttnScale, Thinking: o.Think, MaxTokens: int64(o.Tokens),
				Output: string(tok.Decode(res.tokens)), OutputTokens: int64(len(res.tokens)), StoppedEOS: res.eos,
				FirstKL: vectors.KL(ref.first, res.first),
			})
			if o.Row != nil {
				o.Row(&rows[len(rows)-1])
			}
		}
	}
	return rows, nil
}

// generation is one greedy generation.
type generation struct {
	first  []float32 // logits of the first next-token distribution
	tokens []int     // generated tokens, without the end of sentence
	eos    bool      // stopped at the end-of-sentence token
}

// greedy prefills ids in a fresh session of size tokens with steering st
// and generates up to limit tokens greedily (temperature 0), stopping at
// eos or a full context.
func greedy(ctx context.Context, m *engine.Model, be backends.Backend, ids []int, st *engine.Steering, size, limit, eos int) (generation, error) {
	var r generation
	if len(ids) >= size {
		return r, fmt.Errorf("prompt of %d tokens leaves no room in the context of %d", len(ids), size)
	}
	s, err := engine.NewSession(m, be, engine.Options{Context: size, Steering: st})
	if err != nil {
		return r, err
	}
	if err := s.PrefillChunks(ctx, ids, engine.PrefillOptions{}); err != nil {
		return r, err
	}
	r.first = slices.Clone(s.Logits())
	g, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: limit, EOS: eos, Token: func(t, _ int) bool {
		r.tokens = append(r.tokens, t)
		return false
	}})
	if err != nil {
		return r, err
	}
	if g.Reason == engine.StopCancelled {
		return r, ctx.Err()
	}
	r.eos = g.Reason == engine.StopEOS
	return r, nil
}

// Effect is the mean effect of one FFN scale over a sweep's prompts.
type Effect struct {
	Scale  float64
	Tokens float64 // mean output length in tokens
	KL     float64 // mean first-token KL divergence from the unsteered run
}

// MeanEffects averages the output length and first-token KL of the rows
// per FFN scale, in ascending scale order.
func MeanEffects(rows []SweepRow) []Effect {
	scales := make([]float64, len(rows))
	for i, r := range rows {
		scales[i] = r.FFNScale
	}
	slices.Sort(scales)
	scales = slices.Compact(scales)
	out := make([]Effect, len(scales))
	var tokens, kl []float64
	for i, sc := range scales {
		tokens, kl = tokens[:0], kl[:0]
		for _, r := range rows {
			if r.FFNScale == sc {
				tokens = append(tokens, float64(r.OutputTokens))
				kl = append(kl, r.FirstKL)
			}
		}
		out[i] = Effect{Scale: sc, Tokens: stat.Mean(tokens, nil), KL: stat.Mean(kl, nil)}
	}
	return out
}
