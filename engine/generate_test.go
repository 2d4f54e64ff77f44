package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/sample"
)

// TestPrefillChunks checks chunked prefills against one Prefill of the
// same tokens: the logits must be bit-identical whatever the chunking, the
// chunks must end where Chunk and End say, and Progress must climb to the
// end through every layer.
func TestPrefillChunks(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(70, m.Params.Vocab)

	ref, err := NewSession(m, be, Options{Context: 128})
	require.NoError(t, err)
	require.NoError(t, ref.Prefill(toks))

	tests := []struct {
		name   string
		prefix int // tokens prefilled before the chunked call
		opt    PrefillOptions
		ends   []int // positions after each chunk
	}{
		{"one chunk", 0, PrefillOptions{}, []int{70}},
		{"chunk 32", 0, PrefillOptions{Chunk: 32}, []int{32, 64, 70}},
		{"chunk 32 after 5", 5, PrefillOptions{Chunk: 32}, []int{37, 69, 70}},
		{"aligned to 16", 5, PrefillOptions{Chunk: 64, End: func(pos int) int { return (pos/16 + 1) * 16 }}, []int{16, 32, 48, 64, 70}},
		{"End not after pos is ignored", 0, PrefillOptions{Chunk: 40, End: func(pos int) int { return pos }}, []int{40, 70}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(m, be, Options{Context: 128})
			require.NoError(t, err)
			require.NoError(t, s.Prefill(toks[:tc.prefix]))
			var ends, progress []int
			tc.opt.AfterChunk = func(pos int) error { ends = append(ends, pos); return nil }
			tc.opt.Progress = func(pos int) { progress = append(progress, pos) }
			require.NoError(t, s.PrefillChunks(context.Background(), toks[tc.prefix:], tc.opt))
			require.Equal(t, tc.ends, ends)
			require.Equal(t, ref.Logits(), s.Logits())
			require.Equal(t, toks, s.Tokens())
			require.Len(t, progress, len(tc.ends)*m.Params.Layers)
			require.True(t, slices.IsSorted(progress), "progress %v", progress)
			require.Equal(t, 70, progress[len(progress)-1])
			require.Greater(t, progress[0], tc.prefix)
		})
	}
}

// TestPrefillChunksStops checks that an AfterChunk error and a cancelled
// context stop the prefill between chunks, leaving the session with the
// chunks evaluated.
func TestPrefillChunksStops(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(50, m.Params.Vocab)
	s, err := NewSession(m, be, Options{Context: 64})
	require.NoError(t, err)

	stop := errors.New("enough")
	err = s.PrefillChunks(context.Background(), toks, PrefillOptions{Chunk: 20, AfterChunk: func(pos int) error {
		if pos >= 40 {
			return stop
		}
		return nil
	}})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 40, s.Pos())

	s.Reset()
	cause := errors.New("client left")
	ctx, cancel := context.WithCancelCause(context.Background())
	err = s.PrefillChunks(ctx, toks, PrefillOptions{Chunk: 20, AfterChunk: func(pos int) error {
		cancel(cause)
		return nil
	}})
	require.ErrorIs(t, err, cause)
	require.Equal(t, 20, s.Pos())
	require.NoError(t, s.PrefillChunks(context.Background(), toks[20:], PrefillOptions{}))
	require.Equal(t, toks, s.Tokens())
}

// layerless is a session that reports no layers, as a scripted test
// session may.
type layerless struct{ *Session }

func (layerless) Layers() int { return 0 }

// TestPrefillChunksLayerless checks PrefillChunks on an Evaluator other
// than *Session that reports no layers: a chunk counts as done at the first
// layer hook call instead of dividing by zero.
func TestPrefillChunksLayerless(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(30, m.Params.Vocab)
	s, err := NewSession(m, be, Options{Context: 64})
	require.NoError(t, err)
	var progress []int
	err = PrefillChunks(context.Background(), layerless{s}, toks, PrefillOptions{Chunk: 20, Progress: func(pos int) { progress = append(progress, pos) }})
	require.NoError(t, err)
	require.Equal(t, toks, s.Tokens())
	require.Len(t, progress, 2*m.Params.Layers)
	require.Equal(t, 20, progress[0])
	require.Equal(t, 30, progress[len(progress)-1])
}

// greedyByHand is the decode loop Generate replaces: the most likely token,
// evaluated, n times, stopping at eos.
func greedyByHand(t *testing.T, s *Session, n, eos int) []int {
	var out []int
	for range n {
		tok := sample.Argmax(s.Logits())
		if tok == eos {
			break
		}
		out = append(out, tok)
		require.NoError(t, s.Decode(tok))
	}
	return out
}

// TestGenerate checks Generate's tokens against a hand-written decode loop
// and its stop reasons, pending token and callbacks.
func TestGenerate(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	prompt := testTokens(12, m.Params.Vocab)
	fresh := func(ctx int) *Session {
		s, err := NewSession(m, be, Options{Context: ctx})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(prompt))
		return s
	}
	want := greedyByHand(t, fresh(64), 20, -1)
	require.Len(t, want, 20)

	t.Run("greedy to the limit", func(t *testing.T) {
		s := fresh(64)
		var got []int
		g, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 20, EOS: -1, Token: func(tok, n int) bool {
			got = append(got, tok)
			require.Equal(t, len(got), n)
			return false
		}})
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, StopLength, g.Reason)
		require.Equal(t, 20, g.Tokens)
		require.Equal(t, want[19], g.Pending)
		require.Equal(t, append(slices.Clone(prompt), want[:19]...), s.Tokens(), "the last token is left pending")
		require.Positive(t, g.Elapsed)
	})
	t.Run("context bounds the limit", func(t *testing.T) {
		s := fresh(len(prompt) + 5)
		g, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 20, EOS: -1})
		require.NoError(t, err)
		require.Equal(t, 5, g.Tokens)
		require.NoError(t, s.Decode(g.Pending), "the pending token still fits")
		require.Equal(t, s.Context(), s.Pos())
	})
	t.Run("EOS", func(t *testing.T) {
		s := fresh(64)
		g, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 20, EOS: want[3]})
		require.NoError(t, err)
		require.Equal(t, StopEOS, g.Reason)
		require.Equal(t, 3, g.Tokens)
		require.Equal(t, -1, g.Pending)
		require.Equal(t, len(prompt)+3, s.Pos())
	})
	t.Run("Token stops", func(t *testing.T) {
		s := fresh(64)
		g, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 20, EOS: -1, Token: func(tok, n int) bool { return n == 4 }})
		require.NoError(t, err)
		require.Equal(t, StopToken, g.Reason)
		require.Equal(t, 4, g.Tokens)
		require.Equal(t, want[3], g.Pending)
	})
	t.Run("Choose", func(t *testing.T) {
		// Forcing the second most likely token at step 2 must continue as
		// a hand loop from the same forced token does.
		s := fresh(64)
		var ns []int
		var alt int
		g, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 6, EOS: -1, Choose: func(logits []float32, n int) int {
			ns = append(ns, n)
			if n == 2 {
				alt = sample.TopLogprobs(logits, 2, nil)[1].ID
				return alt
			}
			return sample.Argmax(logits)
		}})
		require.NoError(t, err)
		require.Equal(t, []int{0, 1, 2, 3, 4, 5}, ns)
		h := fresh(64)
		for _, tok := range want[:2] {
			require.NoError(t, h.Decode(tok))
		}
		require.NoError(t, h.Decode(alt))
		rest := greedyByHand(t, h, 3, -1)
		require.Equal(t, append(append(slices.Clone(prompt), want[:2]...), append([]int{alt}, rest[:2]...)...), s.Tokens())
		require.Equal(t, rest[2], g.Pending)
	})
	t.Run("sampler", func(t *testing.T) {
		p := sample.Defaults()
		p.Temperature, p.Seed = 1, 7
		a, b := fresh(64), fresh(64)
		ga, err := a.Generate(context.Background(), GenerateOptions{MaxTokens: 8, EOS: -1, Sampler: sample.New(p)})
		require.NoError(t, err)
		sm := sample.New(p)
		var hand []int
		for range 8 {
			tok := sm.Sample(b.Logits())
			hand = append(hand, tok)
			require.NoError(t, b.Decode(tok))
		}
		require.Equal(t, append(slices.Clone(prompt), hand[:7]...), a.Tokens())
		require.Equal(t, hand[7], ga.Pending)
	})
	t.Run("cancelled", func(t *testing.T) {
		s := fresh(64)
		ctx, cancel := context.WithCancel(context.Background())
		g, err := s.Generate(ctx, GenerateOptions{MaxTokens: 20, EOS: -1, Token: func(tok, n int) bool {
			if n == 2 {
				cancel()
			}
			return false
		}})
		require.NoError(t, err)
		require.Equal(t, StopCancelled, g.Reason)
		require.Equal(t, 2, g.Tokens)
		require.Equal(t, -1, g.Pending)
		require.Equal(t, len(prompt)+2, s.Pos())
	})
	t.Run("evaluate error", func(t *testing.T) {
		s := fresh(64)
		bad := errors.New("disk full")
		g, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 20, EOS: -1, Evaluate: func(tok int) error {
			if s.Pos() == len(prompt)+3 {
				return bad
			}
			return s.Decode(tok)
		}})
		require.ErrorIs(t, err, bad)
		require.Equal(t, 4, g.Tokens)
	})
}

// TestGenerateAllocatesNothing keeps the loop itself free of allocations.
func TestGenerateAllocatesNothing(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 512})
	require.NoError(t, err)
	require.NoError(t, s.Prefill(testTokens(40, m.Params.Vocab)))
	require.NoError(t, s.Decode(3))
	opt := GenerateOptions{MaxTokens: 3, EOS: -1}
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := s.Generate(context.Background(), opt); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled {
		require.Zero(t, allocs)
	}
}
