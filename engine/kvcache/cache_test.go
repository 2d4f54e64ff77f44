package kvcache

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine"
)

// fixture is a conversation prefilled once, with the logits at a few
// positions, shared by the tests of this file.
type fixture struct {
	text   string
	tokens []int
	cuts   []int             // checkpoint positions: root, delta, end
	logits map[int][]float32 // reference logits after n tokens
}

var fixtureOnce sync.Once
var fixtureVal *fixture

func getFixture(t *testing.T) *fixture {
	fixtureOnce.Do(func() {
		tk := tok(t)
		f := &fixture{text: conversation(2), logits: map[int][]float32{}}
		f.tokens = tk.EncodeSpecial(f.text)
		f.cuts = []int{21, 38, len(f.tokens)}
		s := newSession(t, 128)
		for _, c := range f.cuts {
			require.NoError(t, s.Prefill(f.tokens[s.Pos():c]))
			f.logits[c] = slices.Clone(s.Logits())
		}
		fixtureVal = f
	})
	require.NotNil(t, fixtureVal)
	return fixtureVal
}

// storeChain stores a self-contained checkpoint at cuts[0] and a delta at
// cuts[1] into c, returning both results.
func (f *fixture) storeChain(t *testing.T, c *Cache) (root, leaf Stored) {
	s := newSession(t, 128)
	require.NoError(t, s.Prefill(f.tokens[:f.cuts[0]]))
	root, err := c.Store(s, ReasonCold, Key{}, nil)
	require.NoError(t, err)
	require.Empty(t, root.Skipped)
	require.NoError(t, s.Prefill(f.tokens[f.cuts[0]:f.cuts[1]]))
	leaf, err = c.Store(s, ReasonContinued, Key{}, []ToolEntry{{ID: "call_1", DSML: "<tool_calls>x</tool_calls>"}})
	require.NoError(t, err)
	require.Empty(t, leaf.Skipped)
	return root, leaf
}

// checkLoaded checks a session restored to n tokens against the reference.
func (f *fixture) checkLoaded(t *testing.T, s *engine.Session, n int) {
	t.Helper()
	require.Equal(t, f.tokens[:n], s.Tokens())
	requireBits(t, f.logits[n], s.Logits(), "restored logits")
}

// TestStoreLoad stores a root and a delta, reopens the cache and restores
// each into fresh sessions: the logits are bit-identical to never having
// saved, before and after continuing the prompt.
func TestStoreLoad(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	m, err := testModel()
	require.NoError(t, err)
	require.Equal(t, 2, QuantBits(m))
	c := openCache(t, dir, nil)
	root, leaf := f.storeChain(t, c)
	require.Empty(t, root.Parent)
	require.Equal(t, root.SHA, leaf.Parent)
	full, _ := f.storeChain(t, openCache(t, t.TempDir(), func(o *Options) { o.MaxChain = -1 }))
	_, fullLeaf := f.storeChain(t, openCache(t, t.TempDir(), func(o *Options) { o.MaxChain = -1 }))
	require.Equal(t, root.Bytes, full.Bytes)
	require.Less(t, leaf.Bytes, fullLeaf.Bytes, "the delta holds only the new rows and the tail state")
	st := c.Stats()
	require.EqualValues(t, 1, st.DeltaStores)
	require.EqualValues(t, root.Bytes+leaf.Bytes, st.BytesWritten)
	require.Equal(t, map[string]int64{"cold": 1, "continued": 1}, st.Stores)

	c = openCache(t, dir, nil) // a restart rebuilds the index and the chain
	require.Len(t, c.Entries(), 2)
	s := newSession(t, 128)
	ld, err := c.Load(s, []byte(f.text))
	require.NoError(t, err)
	require.Equal(t, leaf.SHA, ld.SHA)
	require.Equal(t, 2, ld.Files)
	require.Equal(t, []ToolEntry{{ID: "call_1", DSML: "<tool_calls>x</tool_calls>"}}, ld.Tools)
	f.checkLoaded(t, s, f.cuts[1])
	require.Equal(t, len(tok(t).Decode(f.tokens[:f.cuts[1]])), ld.KeyLen)
	suffix := tok(t).EncodeSpecial(f.text[ld.KeyLen:])
	require.Equal(t, f.tokens[f.cuts[1]:], suffix, "suffix re-tokenization")
	require.NoError(t, s.Prefill(suffix))
	requireBits(t, f.logits[f.cuts[2]], s.Logits(), "continued after restore")

	// A prompt that diverges after the root finds the root.
	other := string(tok(t).Decode(f.tokens[:f.cuts[0]])) + " something else"
	ld, err = c.Load(s, []byte(other))
	require.NoError(t, err)
	require.Equal(t, root.SHA, ld.SHA)
	f.checkLoaded(t, s, f.cuts[0])
	_, err = c.Load(s, []byte("unrelated"))
	require.ErrorIs(t, err, ErrNoCheckpoint)

	// Hits are counted on every file of the chain and survive a restart.
	c = openCache(t, dir, nil)
	for _, e := range c.Entries() {
		want := 1
		if e.SHA == root.SHA {
			want = 2
		}
		require.EqualValues(t, want, e.Header.Hits, e.Path)
	}

	// Storing the same checkpoint again writes nothing.
	s2 := newSession(t, 128)
	require.NoError(t, s2.Prefill(f.tokens[:f.cuts[0]]))
	again, err := c.Store(s2, ReasonEvict, Key{}, nil)
	require.NoError(t, err)
	require.True(t, again.Reused)
	require.Zero(t, again.Bytes)

	// A session of another context size may load the checkpoints too.
	big := newSession(t, 256)
	_, err = c.Load(big, []byte(f.text))
	require.NoError(t, err)
	f.checkLoaded(t, big, f.cuts[1])
	// One smaller than the context they were written with may not.
	_, err = c.Load(newSession(t, 64), []byte(f.text))
	require.ErrorIs(t, err, ErrNoCheckpoint)
}

// TestUpstreamFormat writes and reads upstream's v1 layout.
func TestUpstreamFormat(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	c := openCache(t, dir, func(o *Options) { o.Format = VersionUpstream })
	root, leaf := f.storeChain(t, c)
	require.Empty(t, leaf.Parent, "upstream files are self-contained")
	require.Greater(t, leaf.Bytes, root.Bytes)
	b, err := os.ReadFile(leaf.Path)
	require.NoError(t, err)
	require.Equal(t, "KVC\x01\x02\x02\x01\x00", string(b[:8])) // v1, 2-bit, continued, tool map
	require.EqualValues(t, f.cuts[1], binary.LittleEndian.Uint32(b[8:]))
	keyLen := binary.LittleEndian.Uint32(b[48:])
	key := b[52 : 52+keyLen]
	require.Equal(t, leaf.SHA, KeySHA(key))
	payload := b[52+keyLen:]
	require.Equal(t, "DSV4\x01\x00\x00\x00", string(payload[:8]))
	psize := binary.LittleEndian.Uint64(b[40:])
	require.Equal(t, "KTM\x01", string(payload[psize:psize+4]))

	s := newSession(t, 128)
	ld, err := c.Load(s, []byte(f.text))
	require.NoError(t, err)
	require.Equal(t, 1, ld.Files)
	f.checkLoaded(t, s, f.cuts[1])
	require.Len(t, ld.Tools, 1)

	// Upstream files have no checksums: a truncated payload makes the file
	// structurally invalid (ignored, as upstream does, not deleted); a cut
	// in the tool map keeps the entries before it.
	trunc := t.TempDir()
	copyDir(t, dir, trunc)
	cutLeaf := filepath.Join(trunc, filepath.Base(leaf.Path))
	require.NoError(t, os.Truncate(cutLeaf, int64(len(b))-1))
	cutRoot := filepath.Join(trunc, filepath.Base(root.Path))
	require.NoError(t, os.Truncate(cutRoot, root.Bytes-100))
	tc := openCache(t, trunc, func(o *Options) { o.Format = VersionUpstream })
	require.Len(t, tc.Entries(), 1)
	require.True(t, exists(cutRoot))
	ld, err = tc.Load(s, []byte(f.text))
	require.NoError(t, err)
	require.Empty(t, ld.Tools)
	f.checkLoaded(t, s, f.cuts[1])

	// Nor do they detect a flipped payload byte (here in the last layer's
	// frontier tensors): the file loads (documented in the package doc
	// and at ds4-server's --kv-cache-upstream-format).
	flip := t.TempDir()
	copyDir(t, dir, flip)
	flipped := append([]byte(nil), b...)
	flipped[52+int(keyLen)+int(psize)-2] ^= 0x40
	require.NoError(t, os.WriteFile(filepath.Join(flip, filepath.Base(leaf.Path)), flipped, 0o600))
	fc := openCache(t, flip, func(o *Options) { o.Format = VersionUpstream })
	ld, err = fc.Load(s, []byte(f.text))
	require.NoError(t, err, "an upstream file with a flipped payload byte loads")
	require.Equal(t, leaf.SHA, ld.SHA)

	// A ds4-go cache reads the upstream files and writes deltas on its own.
	g := openCache(t, dir, nil)
	require.Len(t, g.Entries(), 2)
	require.NoError(t, s.Prefill(f.tokens[f.cuts[1]:]))
	st, err := g.Store(s, ReasonEvict, Key{}, nil)
	require.NoError(t, err)
	require.Empty(t, st.Parent, "upstream files are not parents")
	s2 := newSession(t, 128)
	ld, err = g.Load(s2, []byte(f.text))
	require.NoError(t, err)
	require.Equal(t, st.SHA, ld.SHA)
	f.checkLoaded(t, s2, f.cuts[2])
}

// TestKeysAndTools stores visible-keyed checkpoints and tool maps.
func TestKeysAndTools(t *testing.T) {
	f := getFixture(t)
	c := openCache(t, t.TempDir(), nil)
	s := newSession(t, 128)
	require.NoError(t, s.Prefill(f.tokens[:f.cuts[0]]))
	visible := []byte("<｜begin▁of▁sentence｜>visible transcript")
	tools := []ToolEntry{{ID: "a", DSML: "<tool_calls>1</tool_calls>"}, {ID: "b", DSML: "<tool_calls>2</tool_calls>"}}
	st, err := c.Store(s, ReasonEvict, Key{Kind: KeyResponsesVisible, Text: visible}, tools)
	require.NoError(t, err)
	require.Equal(t, KeySHA(visible), st.SHA)
	ld, err := c.Load(newSession(t, 128), append(slices.Clone(visible), " and more"...))
	require.NoError(t, err)
	require.Equal(t, KeyResponsesVisible, ld.Kind)
	require.Equal(t, tools, ld.Tools)
	require.Equal(t, tools[1:], c.ToolEntries(func(id string) bool { return id == "b" }))

	// A changed tool map rewrites the file, atomically.
	tools = append(tools, ToolEntry{ID: "c", DSML: "<tool_calls>3</tool_calls>"})
	st, err = c.Store(s, ReasonShutdown, Key{Kind: KeyResponsesVisible, Text: visible}, tools)
	require.NoError(t, err)
	require.True(t, st.Reused)
	require.NotZero(t, st.Bytes)
	c = openCache(t, c.Dir(), nil)
	ld, err = c.Load(newSession(t, 128), visible)
	require.NoError(t, err)
	require.Equal(t, tools, ld.Tools)

	// Short checkpoints and oversize ones are skipped.
	short := newSession(t, 128)
	require.NoError(t, short.Prefill(f.tokens[:5]))
	st, err = c.Store(short, ReasonEvict, Key{}, nil)
	require.NoError(t, err)
	require.Equal(t, "below min tokens", st.Skipped)
	tiny := openCache(t, t.TempDir(), func(o *Options) { o.Budget = 1000 })
	st, err = tiny.Store(s, ReasonEvict, Key{}, nil)
	require.NoError(t, err)
	require.Equal(t, "larger than the disk budget", st.Skipped)
}

// boundaries returns the truncation points of a ds4-go cache file: every
// section boundary and its neighbours.
func boundaries(t *testing.T, path string) []int64 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	h, err := decodeHeader(b, int64(len(b)))
	require.NoError(t, err)
	key := h.dataOffset() + int64(h.KeyLen)
	pend := key + int64(h.PayloadBytes)
	toks := key + 64 + 4*int64(h.Tokens-h.ParentTokens)
	var out []int64
	for _, x := range []int64{0, 3, goHeaderSize, key, key + 64, toks, pend - 4, pend, int64(len(b))} {
		for _, d := range []int64{-1, 0, 1} {
			if y := x + d; y >= 0 && y < int64(len(b)) && !slices.Contains(out, y) {
				out = append(out, y)
			}
		}
	}
	return out
}

// TestTruncation truncates the delta and the root at every section
// boundary, before and after the cache indexed them: the damage is found,
// the file (and any delta on it) leaves the index and the disk, and the
// session ends up either exact or empty.
func TestTruncation(t *testing.T) {
	f := getFixture(t)
	good := t.TempDir()
	root, leaf := f.storeChain(t, openCache(t, good, nil))
	s := newSession(t, 128)
	for _, victim := range []Stored{leaf, root} {
		name := filepath.Base(victim.Path)
		for _, cut := range boundaries(t, victim.Path) {
			for _, indexed := range []bool{false, true} {
				dir := t.TempDir()
				copyDir(t, good, dir)
				path := filepath.Join(dir, name)
				var c *Cache
				if indexed {
					c = openCache(t, dir, nil)
				}
				require.NoError(t, os.Truncate(path, cut))
				if !indexed {
					c = openCache(t, dir, nil)
				}
				ld, err := c.Load(s, []byte(f.text))
				require.False(t, exists(path), "cut %d: the damaged file is deleted", cut)
				if victim == leaf {
					require.NoError(t, err, "cut %d", cut)
					require.Equal(t, root.SHA, ld.SHA)
					f.checkLoaded(t, s, f.cuts[0])
				} else {
					require.Error(t, err, "cut %d", cut)
					require.Empty(t, kvFiles(t, dir), "the delta goes with its root")
				}
				if indexed {
					require.Equal(t, "corrupt", ld.Failures[0].Cause)
				}
			}
		}
	}
}

// TestBitFlips flips random bits of both files. A load never gives a
// wrong state: it is exact, or it fails and the session is empty. Every
// flip is caught by a checksum (or the key hash) when the flipped file is
// loaded, except in the advisory stats block; a flip in a parent's tail,
// which a delta's restore does not read, is caught when the parent itself
// is loaded; one in the tool map loses only the tool map.
func TestBitFlips(t *testing.T) {
	f := getFixture(t)
	good := t.TempDir()
	root, leaf := f.storeChain(t, openCache(t, good, nil))
	rng := rand.New(rand.NewPCG(7, 8))
	s := newSession(t, 128)
	load := func(c *Cache, text string) (Loaded, error) {
		ld, err := c.Load(s, []byte(text))
		if err != nil {
			require.Zero(t, s.Pos())
		} else {
			f.checkLoaded(t, s, ld.Tokens)
		}
		return ld, err
	}
	for i := range 60 {
		victim := []Stored{root, leaf}[i%2]
		dir := t.TempDir()
		copyDir(t, good, dir)
		path := filepath.Join(dir, filepath.Base(victim.Path))
		c := openCache(t, dir, nil)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		off := rng.IntN(len(b))
		if i < 6 {
			off = 112 + rng.IntN(16) // the stats block
		}
		b[off] ^= 1 << rng.IntN(8)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		if i%3 == 0 {
			c = openCache(t, dir, nil) // found by the scan instead
		}
		load(c, f.text)
		ld, err := load(c, string(tok(t).Decode(f.tokens[:victim.Tokens])))
		stats := off >= 112 && off < 128
		toolMap := victim == leaf && off >= int(leaf.Bytes)-48
		if stats || toolMap {
			require.NoError(t, err, "flip at %d", off)
			require.Equal(t, victim.SHA, ld.SHA)
			if victim == leaf {
				require.Equal(t, toolMap, len(ld.Tools) == 0)
			}
			continue
		}
		require.False(t, exists(path), "flip at %d of %s", off, filepath.Base(path))
		require.False(t, exists(filepath.Join(dir, filepath.Base(leaf.Path))) && victim == root, "a damaged root takes its delta along")
	}
}

// TestCrash simulates a crash at every stage of a write: after a restart
// the old files are intact, the temporary file is gone and the new
// checkpoint simply does not exist.
func TestCrash(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	c := openCache(t, dir, nil)
	s := newSession(t, 128)
	require.NoError(t, s.Prefill(f.tokens[:f.cuts[0]]))
	root, err := c.Store(s, ReasonCold, Key{}, nil)
	require.NoError(t, err)
	require.NoError(t, s.Prefill(f.tokens[f.cuts[0]:f.cuts[1]]))
	rootBytes, err := os.ReadFile(root.Path)
	require.NoError(t, err)
	for _, at := range []int64{0, 1, 64, 128, 500, 5000, 60000} {
		c := openCache(t, dir, nil)
		c.crashAt = at
		_, err := c.Store(s, ReasonContinued, Key{}, nil)
		require.ErrorIs(t, err, errCrash)
		tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp.*"))
		require.Len(t, tmps, 1, "the crash leaves its temporary file")

		c = openCache(t, dir, nil) // restart
		tmps, _ = filepath.Glob(filepath.Join(dir, "*.tmp.*"))
		require.Empty(t, tmps)
		require.Len(t, kvFiles(t, dir), 1)
		b, err := os.ReadFile(root.Path)
		require.NoError(t, err)
		require.Equal(t, rootBytes[:112], b[:112])
		ld, err := c.Load(newSession(t, 128), []byte(f.text))
		require.NoError(t, err)
		require.Equal(t, root.SHA, ld.SHA)
	}
	// A crash while a file is replaced (a tool-map rewrite) keeps the old one.
	c = openCache(t, dir, nil)
	s2 := newSession(t, 128)
	require.NoError(t, s2.Prefill(f.tokens[:f.cuts[0]]))
	c.crashAt = 200
	_, err = c.Store(s2, ReasonEvict, Key{}, []ToolEntry{{ID: "x", DSML: "<tool_calls>y</tool_calls>"}})
	require.ErrorIs(t, err, errCrash)
	c = openCache(t, dir, nil)
	ld, err := c.Load(newSession(t, 128), []byte(f.text))
	require.NoError(t, err)
	require.Empty(t, ld.Tools)
	f.checkLoaded(t, newSessionLoaded(t, c, f.text), f.cuts[0])
}

func newSessionLoaded(t *testing.T, c *Cache, text string) *engine.Session {
	s := newSession(t, 128)
	_, err := c.Load(s, []byte(text))
	require.NoError(t, err)
	return s
}

// TestIncompatible checks that a file another model wrote is refused
// without touching the live session, and leaves the index.
func TestIncompatible(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	c := openCache(t, dir, nil)
	s := newSession(t, 128)
	require.NoError(t, s.Prefill(f.tokens[:f.cuts[0]]))
	st, err := c.Store(s, ReasonCold, Key{}, nil)
	require.NoError(t, err)
	// Rewrite the payload's layer count (and its header CRC): a file of
	// another layout.
	b, err := os.ReadFile(st.Path)
	require.NoError(t, err)
	h, err := decodeHeader(b, int64(len(b)))
	require.NoError(t, err)
	p := b[h.payloadOffset():]
	binary.LittleEndian.PutUint32(p[32:], 43)
	binary.LittleEndian.PutUint32(p[60:], crc32c(p[:60]))
	require.NoError(t, os.WriteFile(st.Path, b, 0o600))
	live := newSession(t, 128)
	require.NoError(t, live.Prefill(f.tokens[:3]))
	ld, err := c.Load(live, []byte(f.text))
	require.Error(t, err)
	require.True(t, errors.Is(err, engine.ErrPayloadIncompatible))
	require.Equal(t, "incompatible", ld.Failures[0].Cause)
	require.Equal(t, f.tokens[:3], live.Tokens(), "the live session is untouched")
	require.True(t, exists(st.Path), "kept for the build that wrote it")
	require.Empty(t, c.Entries())
}
