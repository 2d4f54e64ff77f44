package kvcache

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestKeySHA(t *testing.T) {
	require.Equal(t, "a9993e364706816aba3e25717850c26c9cd0d89d", KeySHA([]byte("abc")))
	sha, ok := parseName("A9993E364706816ABA3E25717850C26C9CD0D89D.kv")
	require.True(t, ok)
	require.Equal(t, "a9993e364706816aba3e25717850c26c9cd0d89d", sha)
	for _, bad := range []string{"a9993e364706816aba3e25717850c26c9cd0d89d.kv.tmp.12", "x9993e364706816aba3e25717850c26c9cd0d89d.kv", "abc.kv", "a9993e364706816aba3e25717850c26c9cd0d89d.kvc"} {
		_, ok := parseName(bad)
		require.False(t, ok, bad)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	up := Header{Version: VersionUpstream, QuantBits: 4, Reason: ReasonEvict, Ext: ExtToolMap | ExtResponsesVisible,
		Tokens: 600, Hits: 3, Ctx: 4096, Created: 11, LastUsed: 12, PayloadBytes: 1000, KeyLen: 7}
	b := up.encode()
	require.Len(t, b, 52)
	require.Equal(t, "KVC\x01\x04\x03\x03\x00", string(b[:8]))
	got, err := decodeHeader(b, 52+7+1000+5)
	require.NoError(t, err)
	up.statsOK = true
	require.Equal(t, up, got)

	g := Header{Version: VersionGo, QuantBits: 2, Reason: ReasonCold, Ext: ExtThinkingVisible, Numerics: numF16,
		Tokens: 900, Hits: 5, Ctx: 8192, Created: 21, LastUsed: 22, PayloadBytes: 5000, KeyLen: 9,
		SectionBytes: 30, SectionCRC: 77, FileID: 123, ParentID: 456, ParentTokens: 600}
	g.ParentSHA[0], g.TokensDigest[19] = 1, 2
	b = g.encode()
	require.Len(t, b, goHeaderSize)
	got, err = decodeHeader(b, 128+9+5000+30)
	require.NoError(t, err)
	g.statsOK = true
	require.Equal(t, g, got)

	// A torn stats block only forgets the stats.
	b[113] ^= 1
	got, err = decodeHeader(b, 128+9+5000+30)
	require.NoError(t, err)
	require.False(t, got.statsOK)
	require.Zero(t, got.Hits)

	cases := []struct {
		name string
		edit func([]byte) []byte
		size int64
		msg  string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, 5167, "not a KVC"},
		{"version", func(b []byte) []byte { b[3] = 2; return b }, 5167, "unsupported KVC version 2"},
		{"header crc", func(b []byte) []byte { b[20] ^= 4; return b }, 5167, "header checksum"},
		{"short", func(b []byte) []byte { return b[:100] }, 100, "shorter than a header"},
		{"truncated", func(b []byte) []byte { return b }, 5166, "the header needs 5167"},
		{"trailing", func(b []byte) []byte { return b }, 5168, "the header describes 5167"},
	}
	for _, c := range cases {
		_, err := decodeHeader(c.edit(g.encode()), c.size)
		require.ErrorContains(t, err, c.msg, c.name)
	}
	bad := up
	bad.QuantBits = 3
	_, err = decodeHeader(bad.encode(), 2000)
	require.ErrorContains(t, err, "quant bits 3")
	bad = up
	bad.Tokens = 0
	_, err = decodeHeader(bad.encode(), 2000)
	require.ErrorContains(t, err, "zero tokens")
	_, err = decodeHeader(up.encode(), 1058)
	require.ErrorContains(t, err, "truncated")
	bad = up
	bad.Reason = 9
	got, err = decodeHeader(bad.encode(), 2000)
	require.NoError(t, err)
	require.Equal(t, ReasonUnknown, got.Reason)
}

func TestPolicy(t *testing.T) {
	p := DefaultPolicy()
	require.Equal(t, 10240, p.StoreLen(11011))
	require.Equal(t, 1695, p.StoreLen(1695))
	require.Equal(t, 3000, Policy{MinTokens: 512, AlignTokens: 1000}.StoreLen(3500))
	require.Equal(t, 3468, Policy{MinTokens: 512, TrimTokens: 32}.StoreLen(3500))

	require.Equal(t, 10240, p.ContinuedStep())
	c := Continued{Policy: p}
	require.False(t, c.Target(10239))
	require.True(t, c.Target(10240))
	c.Note(10240)
	require.False(t, c.Target(10240))
	require.False(t, c.Target(18432))
	require.True(t, c.Target(20480))
	c.Reset()
	require.True(t, c.Target(10240))
	p.AlignTokens = 0
	require.Equal(t, 10000, p.ContinuedStep())
	p.ContinuedInterval = 0
	require.Zero(t, p.ContinuedStep())

	// Suppress marks a cold boundary that is also a continued frontier.
	c = Continued{Policy: DefaultPolicy()}
	old := c.Suppress(20480)
	require.False(t, c.Target(20480))
	c.Restore(old)
	require.True(t, c.Target(20480))
	c.Suppress(1000)
	require.Zero(t, c.Last)

	const user, asst = 7, 9
	toks := make([]int, 2100)
	toks[600], toks[700], toks[900], toks[1000] = user, user, asst, user
	p = DefaultPolicy()
	require.Equal(t, 700, p.ChatAnchor(toks, user, asst))
	require.Equal(t, 700, p.ColdBoundary(toks, user, asst))
	toks[700] = 0
	toks[600] = 0
	toks[100] = user
	require.Equal(t, -1, p.ChatAnchor(toks, user, asst))
	require.Equal(t, 2048, p.ColdBoundary(toks, user, asst))
	require.Equal(t, 1200, p.ColdBoundary(toks[:1200], user, asst)) // 1168 aligns below min: the whole prompt
	require.Zero(t, p.ColdBoundary(toks[:500], user, asst))
	p.ColdMaxTokens = 2000
	require.Zero(t, p.ColdBoundary(toks, user, asst))
}

func TestToolMap(t *testing.T) {
	text := []byte("a\n\n<｜DSML｜tool_calls>X</｜DSML｜tool_calls>b<tool_calls>Y</tool_calls><DSML｜tool_calls>Z" +
		"\n\n<｜DSML｜tool_calls>X</｜DSML｜tool_calls><tool_calls>open")
	blocks := DSMLBlocks(text)
	require.Equal(t, []string{"\n\n<｜DSML｜tool_calls>X</｜DSML｜tool_calls>", "<tool_calls>Y</tool_calls>",
		"\n\n<｜DSML｜tool_calls>X</｜DSML｜tool_calls>"}, []string{string(blocks[0]), string(blocks[1]), string(blocks[2])})
	require.Len(t, blocks, 3)

	ids := map[string][]string{string(blocks[0]): {"call_1", "call_2"}, string(blocks[1]): {"call_3"}}
	entries := ToolEntriesFor(text, func(b string) []string { return ids[b] })
	require.Len(t, entries, 3) // the repeated block is written once
	sec := encodeToolMap(append(entries, ToolEntry{ID: "", DSML: "x"}))
	require.Equal(t, "KTM\x01", string(sec[:4]))
	require.EqualValues(t, 3, binary.LittleEndian.Uint32(sec[4:]))
	require.Equal(t, entries, decodeToolMap(sec, 0, nil))
	require.Equal(t, entries[2:], decodeToolMap(sec, 0, func(id string) bool { return id == "call_3" }))
	require.Nil(t, decodeToolMap(sec, 2, nil), "count above the bound")
	require.Equal(t, entries[:2], decodeToolMap(sec[:len(sec)-3], 0, nil), "a short read keeps earlier entries")
	bad := append([]byte{}, sec...)
	bad[3] = 2
	require.Nil(t, decodeToolMap(bad, 0, nil))
	require.Nil(t, encodeToolMap(nil))
}

// fakeFile writes a cache file whose payload is filler: enough for the
// index and eviction, not for loading.
func fakeFile(t *testing.T, dir string, key string, h Header, payload int) *Entry {
	t.Helper()
	h.KeyLen, h.PayloadBytes = uint32(len(key)), uint64(payload)
	if h.QuantBits == 0 {
		h.QuantBits = 2
	}
	if h.Version == VersionGo && h.FileID == 0 {
		h.FileID = newFileID()
	}
	b := append(h.encode(), key...)
	b = append(b, make([]byte, payload)...)
	sha := KeySHA([]byte(key))
	path := filepath.Join(dir, fileName(sha))
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return &Entry{SHA: sha, Path: path, Header: h, Size: int64(len(b))}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestEviction mirrors the upstream eviction tests (docs/formats/kvcache.md#eviction) and
// checks how chains of deltas are scored and removed.
func TestEviction(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	open := func(dir string, budget int64) *Cache {
		return openCache(t, dir, func(o *Options) { o.Budget = budget; o.Now = clock })
	}
	unix := uint64(now.Unix())
	t.Run("tokens per byte", func(t *testing.T) {
		dir := t.TempDir()
		big := fakeFile(t, dir, "short", Header{Version: VersionUpstream, Tokens: 512, Created: unix}, 20000)
		good := fakeFile(t, dir, "long", Header{Version: VersionUpstream, Tokens: 2048, Created: unix}, 10000)
		c := open(dir, 25000)
		require.False(t, exists(big.Path))
		require.True(t, exists(good.Path))
		require.EqualValues(t, 1, c.Stats().Evictions)
	})
	t.Run("protected new file", func(t *testing.T) {
		dir := t.TempDir()
		old := fakeFile(t, dir, "old", Header{Version: VersionUpstream, Tokens: 4000, Hits: 5, Created: unix, LastUsed: unix}, 10000)
		c := open(dir, 1<<20)
		c.budget = 15000
		nw := fakeFile(t, dir, "new", Header{Version: VersionUpstream, Tokens: 600, Created: unix}, 10000)
		c.mu.Lock()
		c.entries[nw.SHA] = nw
		c.evict(nw.SHA)
		c.mu.Unlock()
		require.True(t, exists(nw.Path))
		require.False(t, exists(old.Path))
	})
	t.Run("oversize new file", func(t *testing.T) {
		dir := t.TempDir()
		old := fakeFile(t, dir, "old", Header{Version: VersionUpstream, Tokens: 4000, Created: unix}, 1000)
		c := open(dir, 1<<20)
		c.budget = 5000
		nw := fakeFile(t, dir, "new", Header{Version: VersionUpstream, Tokens: 600, Created: unix}, 9000)
		c.mu.Lock()
		c.entries[nw.SHA] = nw
		c.evict(nw.SHA)
		c.mu.Unlock()
		require.False(t, exists(nw.Path))
		require.True(t, exists(old.Path))
	})
	t.Run("decayed hits", func(t *testing.T) {
		dir := t.TempDir()
		long := unix - 14*halfLife
		stale := fakeFile(t, dir, "stale", Header{Version: VersionUpstream, Tokens: 1000, Hits: 10, Created: long, LastUsed: long}, 10000)
		fresh := fakeFile(t, dir, "fresh", Header{Version: VersionUpstream, Tokens: 1100, Created: unix}, 10000)
		open(dir, 15000)
		require.False(t, exists(stale.Path))
		require.True(t, exists(fresh.Path))
		// Recent hits keep the file.
		dir = t.TempDir()
		hot := fakeFile(t, dir, "hot", Header{Version: VersionUpstream, Tokens: 1000, Hits: 10, Created: unix - 10, LastUsed: unix - 10}, 10000)
		fresh = fakeFile(t, dir, "fresh", Header{Version: VersionUpstream, Tokens: 1100, Created: unix}, 10000)
		open(dir, 15000)
		require.True(t, exists(hot.Path))
		require.False(t, exists(fresh.Path))
	})
	t.Run("equal scores", func(t *testing.T) {
		dir := t.TempDir()
		older := fakeFile(t, dir, "older", Header{Version: VersionUpstream, Tokens: 1000, Created: unix - 100}, 10000)
		newer := fakeFile(t, dir, "newer", Header{Version: VersionUpstream, Tokens: 1000, Created: unix - 10}, 10000)
		open(dir, 15000)
		require.False(t, exists(older.Path))
		require.True(t, exists(newer.Path))
	})
	t.Run("chains", func(t *testing.T) {
		dir := t.TempDir()
		root := fakeFile(t, dir, "root", Header{Version: VersionGo, Tokens: 1000, Created: unix}, 10000)
		mid := fakeFile(t, dir, "root+mid", Header{Version: VersionGo, Tokens: 1500, Created: unix,
			ParentID: root.Header.FileID, ParentTokens: 1000, ParentSHA: sha1Bytes(root.SHA)}, 2000)
		leaf := fakeFile(t, dir, "root+mid+leaf", Header{Version: VersionGo, Tokens: 2500, Created: unix,
			ParentID: mid.Header.FileID, ParentTokens: 1500, ParentSHA: sha1Bytes(mid.SHA)}, 3000)
		other := fakeFile(t, dir, "other", Header{Version: VersionGo, Tokens: 1200, Created: unix}, 10000)
		c := open(dir, 1<<30)
		es := map[string]*Entry{}
		for _, e := range c.Entries() {
			es[e.SHA] = e
		}
		require.Len(t, es, 4)
		require.Equal(t, 2, es[leaf.SHA].Depth())
		require.Equal(t, es[mid.SHA], es[leaf.SHA].Parent())
		require.EqualValues(t, root.Size+mid.Size+leaf.Size, es[leaf.SHA].ChainBytes())
		// The leaf's tokens per chain byte (2500/15k) beat "other"
		// (1200/10k) and lend their score to the chain: "other" goes.
		c.mu.Lock()
		c.budget = root.Size + mid.Size + leaf.Size + 100
		c.evict("")
		c.mu.Unlock()
		require.False(t, exists(other.Path))
		require.True(t, exists(root.Path) && exists(mid.Path) && exists(leaf.Path))
		// Evicting the root takes its deltas with it.
		c.mu.Lock()
		c.budget = 5000
		c.evict("")
		c.mu.Unlock()
		require.Empty(t, kvFiles(t, dir))
		require.EqualValues(t, 4, c.Stats().Evictions)
	})
	t.Run("dangling and damaged files", func(t *testing.T) {
		dir := t.TempDir()
		root := fakeFile(t, dir, "root", Header{Version: VersionGo, Tokens: 1000, Created: unix}, 100)
		orphan := fakeFile(t, dir, "root+x", Header{Version: VersionGo, Tokens: 1500, Created: unix,
			ParentID: root.Header.FileID + 1, ParentTokens: 1000, ParentSHA: sha1Bytes(root.SHA)}, 100)
		damaged := fakeFile(t, dir, "damaged", Header{Version: VersionGo, Tokens: 1000, Created: unix}, 100)
		require.NoError(t, os.Truncate(damaged.Path, damaged.Size-1))
		foreign := fakeFile(t, dir, "foreign", Header{Version: VersionUpstream, Tokens: 1000, Created: unix}, 100)
		b, _ := os.ReadFile(foreign.Path)
		b[3] = 7 // an unknown version: not ours to delete
		require.NoError(t, os.WriteFile(foreign.Path, b, 0o600))
		tmp := root.Path + ".tmp.4242"
		require.NoError(t, os.WriteFile(tmp, []byte("partial"), 0o600))
		c := open(dir, 1<<30)
		require.Len(t, c.Entries(), 1)
		require.True(t, exists(root.Path))
		require.False(t, exists(orphan.Path))
		require.False(t, exists(damaged.Path))
		require.True(t, exists(foreign.Path))
		require.False(t, exists(tmp))
		require.Equal(t, map[string]int64{"dangling": 1, "corrupt": 1, "stale-temp": 1}, c.Stats().Removed)
	})
}
