package harness

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

func TestEncodeEvalPrompts(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	cases := []EvalCase{{Source: "T", ID: "a", Question: "One?", Kind: AnswerInteger}, {Source: "T", ID: "b", Question: "Two?", Kind: AnswerInteger}}
	prompts, err := EncodeEvalPrompts(tok, cases, true, tok.VocabSize())
	require.NoError(t, err)
	for i := range cases {
		require.Equal(t, EncodeEvalPrompt(tok, &cases[i], true), prompts[i])
	}
	// BOS is a special token near the top of the vocabulary.
	bos := tok.Special(tokenizer.BOS)
	_, err = EncodeEvalPrompts(tok, cases, true, bos)
	require.ErrorContains(t, err, "case T/a: prompt token")
	require.ErrorContains(t, err, "outside the model's vocabulary")
}

func TestNewEvalSampler(t *testing.T) {
	c := EvalConfig{Temperature: 0.5, TopP: 0.9, MinP: 0.1, Seed: 42}
	s := NewEvalSampler(&c)
	require.Equal(t, uint64(42), c.Seed)
	p := s.Params()
	require.Equal(t, []float32{0.5, 0.9, 0.1}, []float32{p.Temperature, p.TopP, p.MinP})
	c.Seed = 0
	s = NewEvalSampler(&c)
	require.NotZero(t, c.Seed, "a drawn seed is recorded")
	require.Equal(t, s.Params().Seed, c.Seed)
}

// TestEvaluatorRunAll runs three cases on the tiny model: every result is
// seen once, in order; an error from the callback and a canceled context
// stop the run, leaving the rest PENDING.
func TestEvaluatorRunAll(t *testing.T) {
	m, tok, be := tinyRig(t, 2)
	cases := []EvalCase{
		{Source: "T", ID: "a", Question: "One?", Answer: "1", Kind: AnswerInteger},
		{Source: "T", ID: "b", Question: "Two?", Answer: "2", Kind: AnswerInteger},
		{Source: "T", ID: "c", Question: "Three?", Answer: "3", Kind: AnswerInteger},
	}
	prompts, err := EncodeEvalPrompts(tok, cases, false, m.Params.Vocab)
	require.NoError(t, err)
	ctxSize, _, _, err := EvalContext(prompts, 4)
	require.NoError(t, err)
	s, err := engine.NewSession(m, be, engine.Options{Context: ctxSize})
	require.NoError(t, err)
	cfg := EvalConfig{Tokens: 4, SoftBudget: 2, HardBudget: 1, SoftRank: 1, TopP: 1}
	e := &Evaluator{Session: s, Tok: tok, Config: cfg, Sampler: NewEvalSampler(&cfg)}

	var seen []int
	results, runtime, err := e.RunAll(context.Background(), cases, prompts, func(r *EvalResult) error {
		seen = append(seen, r.Index)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2}, seen)
	require.Positive(t, runtime)
	for i, r := range results {
		require.Equal(t, i, r.Index)
		require.Equal(t, &cases[i], r.Case)
		require.Equal(t, 4, r.Generated)
		require.Contains(t, []EvalStatus{StatusPassed, StatusFailed}, r.Status)
	}

	stop := errors.New("trace full")
	results, _, err = e.RunAll(context.Background(), cases, prompts, func(r *EvalResult) error {
		if r.Index == 1 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.NotEqual(t, StatusPending, results[1].Status)
	require.Equal(t, StatusPending, results[2].Status)
	require.Equal(t, len(prompts[2]), results[2].PromptTokens)

	ctx, cancel := context.WithCancel(context.Background())
	results, _, err = e.RunAll(ctx, cases, prompts, func(r *EvalResult) error {
		cancel()
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, []EvalStatus{StatusPassed, StatusFailed}, results[0].Status)
	require.Equal(t, []EvalStatus{StatusPending, StatusPending}, []EvalStatus{results[1].Status, results[2].Status})
}

// tinyRig opens the built-in tiny model, the tokenizer and a CPU backend
// of threads workers (0: one per CPU), closed when the test ends.
func tinyRig(t *testing.T, threads int) (*engine.Model, *tokenizer.Tokenizer, *cpu.Backend) {
	t.Helper()
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	be := cpu.New(threads)
	t.Cleanup(be.Close)
	return m, tok, be
}
