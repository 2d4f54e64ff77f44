package kvcache

import (
	"bytes"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
)

// testModel is a four-layer tiny model (ratios 0, 0, 4, 8; window 16)
// with the full vocabulary, so real tokenized text runs through it and a
// few dozen tokens cross every boundary. It is built once per binary.
var testModel = sync.OnceValues(func() (*engine.Model, error) {
	p := layout.Tiny()
	p.SetLayers(4)
	p.CompressRatios = []int{0, 0, 4, 8}
	var buf bytes.Buffer
	if _, err := synth.Write(&buf, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 3}); err != nil {
		return nil, err
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, err
	}
	return engine.Load(f)
})

var (
	testBackend = sync.OnceValue(func() backends.Backend { return cpu.New(2) })
	testTok     = sync.OnceValues(tokenizer.Default)
)

func tok(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tk, err := testTok()
	require.NoError(t, err)
	return tk
}

func newSession(t testing.TB, ctx int) *engine.Session {
	t.Helper()
	m, err := testModel()
	require.NoError(t, err)
	s, err := engine.NewSession(m, testBackend(), engine.Options{Context: ctx})
	require.NoError(t, err)
	return s
}

// testPolicy has small thresholds so that short prompts exercise every
// save moment.
func testPolicy() Policy {
	return Policy{MinTokens: 8, ColdMaxTokens: 400, ContinuedInterval: 48, TrimTokens: 4, AlignTokens: 16}
}

func openCache(t testing.TB, dir string, edit func(*Options)) *Cache {
	t.Helper()
	opt := Options{Dir: dir, QuantBits: 2, Policy: testPolicy(), Detokenize: tok(t).Decode}
	if edit != nil {
		edit(&opt)
	}
	c, err := Open(opt)
	require.NoError(t, err)
	return c
}

// conversation returns a rendered chat prompt: a system prompt, then
// turns of user text, assistant replies and tool results.
func conversation(turns int) string {
	var b bytes.Buffer
	b.WriteString(prompt.BOS + "You are a careful agent. Use tools when needed.")
	for i := range turns {
		b.WriteString(prompt.User + "Step " + string(rune('A'+i%26)) + ": list the files and count them.")
		b.WriteString(prompt.Assistant + "</think>Running ls for step " + string(rune('a'+i%26)) + "." + prompt.EOS)
	}
	b.WriteString(prompt.User + "Done?" + prompt.Assistant)
	return b.String()
}

func requireBits(t testing.TB, want, got []float32, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s: logit %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// kvFiles returns the cache files of a directory by name.
func kvFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.kv"))
	require.NoError(t, err)
	return m
}

// copyDir copies a flat directory.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	des, err := os.ReadDir(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dst, 0o700))
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, de.Name()), b, 0o600))
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
