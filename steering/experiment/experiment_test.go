package experiment

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/steering"
)

func TestMeanEffects(t *testing.T) {
	// Scale 1: tokens (4+8+6)/3 = 6, KL (0.5+1.5+1)/3 = 1; scale -0.5:
	// tokens (3+6)/2 = 4.5, KL (0.25+0.75)/2 = 0.5; scale 0: one row.
	got := MeanEffects([]SweepRow{
		{FFNScale: 1, OutputTokens: 4, FirstKL: 0.5},
		{FFNScale: 0, OutputTokens: 10},
		{FFNScale: -0.5, OutputTokens: 3, FirstKL: 0.25},
		{FFNScale: 1, OutputTokens: 8, FirstKL: 1.5},
		{FFNScale: -0.5, OutputTokens: 6, FirstKL: 0.75},
		{FFNScale: 1, OutputTokens: 6, FirstKL: 1},
	})
	require.Equal(t, []Effect{{-0.5, 4.5, 0.5}, {0, 10, 0}, {1, 6, 1}}, got)
	require.Empty(t, MeanEffects(nil))
}

// tinyRig opens the built-in tiny model with the default tokenizer.
func tinyRig(t *testing.T) (*engine.Model, *cpu.Backend, *tokenizer.Tokenizer) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	be := cpu.New(2)
	t.Cleanup(be.Close)
	return m, be, tok
}

// TestBuildFromPrompts checks the captured activations of a shared,
// reset session against a fresh session per prompt.
func TestBuildFromPrompts(t *testing.T) {
	m, be, tok := tinyRig(t)
	good := []string{"Be brief.", "One word."}
	bad := []string{"Explain in detail.", "Explain why, at length.", "unpaired"}
	o := CaptureOptions{System: "Sys.", Context: 64, Build: steering.BuildOptions{Orthogonalize: true}}
	var pairs []int
	o.Pair = func(i, n int) { require.Equal(t, 2, n); pairs = append(pairs, i) }
	d, err := BuildFromPrompts(context.Background(), m, be, tok, good, bad, o)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, pairs)

	p := m.Params
	fresh := func(prompt string) [][]float32 {
		capt := &engine.Capture{}
		s, err := engine.NewSession(m, be, engine.Options{Context: 64, Capture: capt})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(Render(tok, "Sys.", prompt, false)))
		out := make([][]float32, p.Layers)
		for l := range out {
			out[l] = slices.Clone(capt.Rows[l*p.Embd : (l+1)*p.Embd])
		}
		return out
	}
	var ga, ba [][][]float32
	for i := range 2 {
		ga, ba = append(ga, fresh(good[i])), append(ba, fresh(bad[i]))
	}
	want, err := steering.Build(ga, ba, o.Build)
	require.NoError(t, err)
	require.Equal(t, want, d)

	o.Context = 4
	_, err = BuildFromPrompts(context.Background(), m, be, tok, good, bad, o)
	require.ErrorContains(t, err, "exceeds the context of 4")
	_, err = BuildFromPrompts(context.Background(), m, be, tok, nil, bad, o)
	require.ErrorContains(t, err, "no prompt pairs")
}

// TestSweep runs a sweep on the tiny model and checks its generations
// against a hand-written greedy loop.
func TestSweep(t *testing.T) {
	m, be, tok := tinyRig(t)
	p := m.Params
	dir := &steering.Direction{Layers: p.Layers, Embd: p.Embd, V: make([]float32, p.Layers*p.Embd)}
	for l := range p.Layers {
		dir.Layer(l)[l%p.Embd] = 1
	}
	prompts := []string{"What does DNS do?", "Why use indexes?"}
	var events []string
	o := SweepOptions{Direction: dir, DirectionName: "d.f32", Scales: []float64{0, 50}, Tokens: 4, Context: 64,
		Prompt: func(i int, prompt string) { events = append(events, "prompt "+prompt) },
		Row:    func(r *SweepRow) { events = append(events, "row "+r.Prompt) },
	}
	rows, err := Sweep(context.Background(), m, be, tok, prompts, o)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	require.Equal(t, []string{"prompt " + prompts[0], "row " + prompts[0], "row " + prompts[0],
		"prompt " + prompts[1], "row " + prompts[1], "row " + prompts[1]}, events)

	eos := tok.Special(tokenizer.EOS)
	hand := func(ids []int, st *engine.Steering) []int {
		s, err := engine.NewSession(m, be, engine.Options{Context: 64, Steering: st})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(ids))
		var out []int
		for len(out) < 4 {
			id := sample.Argmax(s.Logits())
			if id == eos {
				break
			}
			out = append(out, id)
			require.NoError(t, s.Decode(id))
		}
		return out
	}
	for i, r := range rows {
		ids := Render(tok, "", prompts[i/2], false)
		require.Equal(t, int64(i/2), r.PromptIndex)
		require.Equal(t, int64(len(ids)), r.PromptTokens)
		require.Equal(t, "d.f32", r.Direction)
		var st *engine.Steering
		if r.FFNScale != 0 {
			st = &engine.Steering{Dir: dir.V, FFN: float32(r.FFNScale)}
			require.Positive(t, r.FirstKL)
		} else {
			require.Zero(t, r.FirstKL)
		}
		want := hand(ids, st)
		require.Equal(t, string(tok.Decode(want)), r.Output, "row %d", i)
		require.Equal(t, int64(len(want)), r.OutputTokens)
		require.Equal(t, len(want) < 4, r.StoppedEOS)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Sweep(ctx, m, be, tok, prompts, o)
	require.ErrorIs(t, err, context.Canceled)
}
