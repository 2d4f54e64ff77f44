//go:build unix

package engine

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// TestTruncatedModelFile maps a tiny model, truncates the file under the
// mapping and steps the session: the step must fail with an error naming
// the size change instead of the process dying of SIGBUS, on the calling
// goroutine (the embedding) and on the backend's helpers (a layer's
// weights), and the model must work again once the file is restored.
func TestTruncatedModelFile(t *testing.T) {
	p := layout.Tiny()
	p.Vocab = 1024 // tinyFile's
	path := tinyFile(t, layout.RecipeQ2)
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := Open(path)
	require.NoError(t, err)
	defer m.File.Close()
	be := cpu.New(4)
	defer be.Close()
	s, err := NewSession(m, be, Options{Context: 64})
	require.NoError(t, err)
	require.NoError(t, s.Prefill(testTokens(5, p.Vocab)))
	want := slices.Clone(s.Logits())

	page := int64(os.Getpagesize())
	at := func(name string) int64 { // the page where tensor name starts
		ti, ok := m.File.Tensor(name)
		require.True(t, ok, name)
		return int64(m.File.DataOffset+ti.Offset) / page * page
	}
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"no weights left", at("token_embd.weight")},
		{"last layer's experts gone", at(fmt.Sprintf("blk.%d.ffn_down_exps.weight", p.Layers-1))},
		{"output head gone", at("output.weight")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.Truncate(path, tc.size))
			s.Reset()
			err := s.Prefill(testTokens(5, p.Vocab))
			require.ErrorIs(t, err, ErrModelFault)
			require.ErrorContains(t, err, fmt.Sprintf("model file changed size: was %d, now %d", len(orig), tc.size))
			require.Zero(t, s.Pos(), "the session is reset after a fault")
			require.ErrorIs(t, s.Decode(1), ErrModelFault)

			require.NoError(t, os.WriteFile(path, orig, 0o644)) // same inode: the mapping sees it
			require.NoError(t, m.File.CheckSize())
			s.Reset()
			require.NoError(t, s.Prefill(testTokens(5, p.Vocab)))
			require.Equal(t, want, s.Logits())
		})
	}
}

// TestDecodeBatchFaults checks that a batched step that faults reading a
// truncated model file, or cannot read a streamed expert, fails with
// ErrModelFault or ErrExpertRead and resets every session of the batch,
// and that the sessions step again once the file is back.
func TestDecodeBatchFaults(t *testing.T) {
	be := cpu.New(4)
	defer be.Close()
	for _, c := range []struct {
		name string
		open func(t *testing.T, path string) *Model
		want error
	}{
		{"mapped", func(t *testing.T, path string) *Model {
			m, err := Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { m.File.Close() })
			return m
		}, ErrModelFault},
		{"streaming", func(t *testing.T, path string) *Model {
			return openStreamed(t, path, OpenInMemory, StreamOptions{Slots: 1})
		}, ErrExpertRead},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := tinyFile(t, layout.RecipeQ2)
			orig, err := os.ReadFile(path)
			require.NoError(t, err)
			m := c.open(t, path)
			var ss []*Session
			for i := range 3 {
				s, err := NewSession(m, be, Options{Context: 64})
				require.NoError(t, err)
				require.NoError(t, s.Prefill(testTokens(4+3*i, m.Params.Vocab)))
				ss = append(ss, s)
			}
			down, ok := m.File.Tensor(m.Layers[len(m.Layers)-1].DownExps.Name)
			require.True(t, ok)
			require.NoError(t, os.Truncate(path, int64(m.File.DataOffset+down.Offset)+100))
			err = DecodeBatch(ss, []int{1, 2, 3})
			require.ErrorIs(t, err, c.want)
			for i, s := range ss {
				require.Zero(t, s.Pos(), "session %d is reset", i)
			}
			require.NoError(t, os.WriteFile(path, orig, 0o644))
			require.NoError(t, DecodeBatch(ss, []int{1, 2, 3}))
			for i, s := range ss {
				require.Equal(t, 1, s.Pos(), "session %d", i)
			}
		})
	}
}
