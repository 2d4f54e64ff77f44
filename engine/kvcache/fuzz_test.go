package kvcache

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
)

// narrowSession returns a session of a weightless model with narrow rows:
// it can restore and serialize payloads but not run.
func narrowSession(t testing.TB) *engine.Session {
	p := layout.Tiny()
	p.Vocab, p.HeadDim, p.IndexerDim, p.Window = 16, 4, 2, 4
	p.SetLayers(4)
	p.CompressRatios = []int{0, 0, 4, 8}
	s, err := engine.NewSession(&engine.Model{Params: p}, nil, engine.Options{Context: 32})
	require.NoError(t, err)
	return s
}

// v1Payload builds a valid upstream payload of n tokens for narrowSession
// by hand (zero state).
func v1Payload(n int) []byte {
	const vocab, head, idx, window, ctx = 16, 4, 2, 4, 32
	ratios := []int{0, 0, 4, 8}
	var b []byte
	u32 := func(v int) { b = binary.LittleEndian.AppendUint32(b, uint32(v)) }
	zeros := func(floats int) { b = append(b, make([]byte, 4*floats)...) }
	R := min(n, window)
	for _, v := range []int{0x34565344, 1, ctx, ctx, window, window, ctx/4 + 2, n, len(ratios), head, idx, vocab, R} {
		u32(v)
	}
	for i := range n {
		u32(i % vocab)
	}
	zeros(vocab)
	for _, r := range ratios {
		if r == 0 {
			u32(0)
		} else {
			u32(n / r)
		}
	}
	for _, r := range ratios {
		if r == 4 {
			u32(n / 4)
		} else {
			u32(0)
		}
	}
	for _, r := range ratios {
		zeros(R * head)
		if r == 0 {
			continue
		}
		slots, w := r, head
		if r == 4 {
			slots, w = 8, 2*head
		}
		zeros(n/r*head + 2*slots*w)
		if r == 4 {
			zeros(n/4*idx + 2*8*2*idx)
		}
	}
	return b
}

// fuzzSeeds returns valid cache files (both formats, with tool maps, and
// a delta on the first one) for narrowSession.
func fuzzSeeds(t testing.TB) [][]byte {
	s := narrowSession(t)
	var seeds [][]byte
	for _, n := range []int{9, 13} {
		p := v1Payload(n)
		require.NoError(t, s.ReadPayload(bytes.NewReader(p), int64(len(p))))
		key := bytes.Repeat([]byte{'k'}, n)
		tools := encodeToolMap([]ToolEntry{{ID: "call", DSML: "<tool_calls>x</tool_calls>"}})
		up := Header{Version: VersionUpstream, QuantBits: 2, Reason: ReasonEvict, Ext: ExtToolMap, Tokens: uint32(n),
			Ctx: 32, PayloadBytes: uint64(len(p)), KeyLen: uint32(n)}
		seeds = append(seeds, bytes.Join([][]byte{up.encode(), key, p, tools}, nil))
		var gp bytes.Buffer
		_, err := s.WritePayload(&gp, engine.PayloadOptions{F16: true})
		require.NoError(t, err)
		g := Header{Version: VersionGo, QuantBits: 2, Reason: ReasonCold, Ext: ExtToolMap, Numerics: numF16, Tokens: uint32(n),
			Ctx: 32, PayloadBytes: uint64(gp.Len()), KeyLen: uint32(n), SectionBytes: uint64(len(tools)),
			SectionCRC: crc32.Checksum(tools, castagnoli), FileID: 1, TokensDigest: TokensDigest(s.Tokens())}
		seeds = append(seeds, bytes.Join([][]byte{g.encode(), key, gp.Bytes(), tools}, nil))
	}
	return seeds
}

// FuzzCacheFile puts arbitrary bytes in a cache directory (named after
// the key they contain, when they have one), opens the cache and loads
// from it: nothing may panic, and a load either fails or restores exactly
// the tokens the header promises.
func FuzzCacheFile(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	s := narrowSession(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		name, text := fileName(KeySHA(nil)), []byte("text")
		if h, err := decodeHeader(b[:min(len(b), headerPrefix)], int64(len(b))); err == nil {
			key := b[h.dataOffset():h.payloadOffset()]
			name, text = fileName(KeySHA(key)), append(bytes.Clone(key), "tail"...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
		c, err := Open(Options{Dir: dir, QuantBits: 2, Policy: Policy{MinTokens: 1}})
		require.NoError(t, err)
		ld, err := c.Load(s, text)
		if err == nil {
			require.Equal(t, ld.Tokens, s.Pos())
		}
		c.ToolEntries(nil)
	})
}
