package kvcache

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/prompt"
)

// TestAgentTurnsWriteLess runs a scripted 20-turn agent conversation (each
// turn appends a tool result and a reply) and checkpoints the session at
// the end of every turn into three caches: upstream's format (a full
// rewrite each time), ds4-go self-contained files, and ds4-go deltas. The
// bytes written per turn must shrink in that order. cmd/ds4-kvbench runs
// the same comparison at realistic sizes.
func TestAgentTurnsWriteLess(t *testing.T) {
	tk := tok(t)
	pol := testPolicy()
	up := openCache(t, t.TempDir(), func(o *Options) { o.Format = VersionUpstream })
	full := openCache(t, t.TempDir(), func(o *Options) { o.MaxChain = -1 })
	delta := openCache(t, t.TempDir(), nil)
	m := NewManager(newSession(t, 512), ManagerOptions{Tokenizer: tk, Policy: pol})
	text := prompt.BOS + "You are an agent with a shell tool." + prompt.User + "Tidy the repo." + prompt.Assistant + "</think>"
	var totals [3]int64
	for turn := 1; turn <= 20; turn++ {
		if turn > 1 {
			text += prompt.User + prompt.ToolResultOpen + fmt.Sprintf("ok %d", turn) + prompt.ToolResultClose + prompt.Assistant + "</think>"
		}
		r, err := m.Sync(Request{Text: text})
		require.NoError(t, err)
		if turn > 1 {
			require.Equal(t, SourceMemoryText, r.Source)
		}
		reply := fmt.Sprintf("Step %d.", turn)
		// The reply enters the session as decoding would put it there
		// (prefill is bit-identical to decoding, and faster here).
		require.NoError(t, m.Session().Prefill(tk.EncodeSpecial(reply)))
		text += reply + prompt.EOS
		var wrote [3]int64
		for i, c := range []*Cache{up, full, delta} {
			before := c.Stats().BytesWritten
			st, err := c.Store(m.Session(), ReasonEvict, Key{}, nil)
			require.NoError(t, err)
			require.Empty(t, st.Skipped)
			wrote[i] = c.Stats().BytesWritten - before
			totals[i] += wrote[i]
		}
		t.Logf("turn %2d: %4d tokens: upstream %7d B, ds4-go full %7d B, ds4-go delta %7d B", turn, m.Session().Pos(), wrote[0], wrote[1], wrote[2])
		require.Less(t, wrote[1], wrote[0])
		if turn > 1 {
			require.Less(t, wrote[2], wrote[1])
		}
	}
	t.Logf("total: upstream %d B, ds4-go full %d B, ds4-go delta %d B", totals[0], totals[1], totals[2])
	// Every checkpoint of the chain restores exactly.
	s := newSession(t, 512)
	ld, err := delta.Load(s, []byte(text))
	require.NoError(t, err)
	require.Equal(t, 16, ld.Files, "chains are capped at MaxChain files")
	require.Equal(t, m.Session().Tokens(), s.Tokens())
	requireBits(t, m.Session().Logits(), s.Logits(), "restored chain")
}
