package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestCheckpointRewind checks that rewinding to a checkpoint and going on
// gives the same logits as never having left it, whether the tokens
// evaluated in between stay inside the raw window or wrap it and close
// compression windows, and that a checkpoint is reusable.
func TestCheckpointRewind(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 8, 4, 8} })
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(90, m.Params.Vocab)
	other := testTokens(100, m.Params.Vocab)[50:] // not toks' continuation
	ref, err := NewSession(m, be, Options{Context: 128})
	require.NoError(t, err)
	require.NoError(t, ref.Prefill(toks))
	require.Less(t, m.Params.Window, 40, "the long detour wraps the window")

	for _, tc := range []struct {
		name          string
		at, detour    int
		detourDecodes bool
	}{
		{"empty session", 0, 7, false},
		{"inside the window", 23, 3, true},
		{"across compression windows", 23, 18, false},
		{"wrapping the window", 37, 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(m, be, Options{Context: 128})
			require.NoError(t, err)
			require.NoError(t, s.Prefill(toks[:tc.at]))
			var cp Checkpoint
			require.Equal(t, -1, cp.Pos())
			s.Checkpoint(&cp)
			require.Equal(t, tc.at, cp.Pos())
			for range 2 { // the checkpoint survives a rewind
				if tc.detourDecodes {
					for _, tok := range other[:tc.detour] {
						require.NoError(t, s.Decode(tok))
					}
				} else {
					require.NoError(t, s.Prefill(other[:tc.detour]))
				}
				require.NoError(t, s.Rewind(&cp))
				require.Equal(t, toks[:tc.at], s.Tokens())
			}
			require.NoError(t, s.Prefill(toks[tc.at:]))
			require.Equal(t, ref.Logits(), s.Logits())
		})
	}
}

// TestCheckpointRefused checks that Rewind refuses the checkpoints whose
// state the session no longer extends and leaves the session as it was.
func TestCheckpointRefused(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(30, m.Params.Vocab)
	newSession := func() *Session {
		s, err := NewSession(m, be, Options{Context: 64})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(toks[:10]))
		return s
	}
	for _, tc := range []struct {
		name  string
		after func(s *Session, cp *Checkpoint) *Session // returns the session to rewind
	}{
		{"another session", func(s *Session, cp *Checkpoint) *Session { return newSession() }},
		{"reset", func(s *Session, cp *Checkpoint) *Session {
			s.Reset()
			require.NoError(t, s.Prefill(toks[:20]))
			return s
		}},
		{"restored", func(s *Session, cp *Checkpoint) *Session {
			snap := s.Snapshot()
			require.NoError(t, s.Restore(snap))
			return s
		}},
		{"rewound before it", func(s *Session, cp *Checkpoint) *Session {
			var early Checkpoint
			s.Checkpoint(&early)
			require.NoError(t, s.Prefill(toks[10:15]))
			s.Checkpoint(cp) // at 15
			require.NoError(t, s.Rewind(&early))
			require.NoError(t, s.Prefill(toks[20:30])) // another path past 15
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession()
			var cp Checkpoint
			s.Checkpoint(&cp)
			s = tc.after(s, &cp)
			before := append([]int(nil), s.Tokens()...)
			logits := append([]float32(nil), s.Logits()...)
			require.Error(t, s.Rewind(&cp))
			require.Equal(t, before, s.Tokens())
			require.Equal(t, logits, s.Logits())
		})
	}
}
