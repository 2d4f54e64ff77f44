package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// payloadModel is the tiny model with a short vocabulary, a window of 16
// and ratios 4/8/4/16 so that a few dozen tokens cross every window and
// compression boundary; it is built once per test binary.
var payloadModel = sync.OnceValues(func() (*Model, error) {
	p := layout.Tiny()
	p.Vocab = 1024
	p.CompressRatios = []int{0, 0, 4, 8, 4, 16}
	tab, err := tables()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := synth.Write(&buf, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 5, Tables: tab}); err != nil {
		return nil, err
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return nil, err
	}
	return Load(f)
})

var payloadBackend = sync.OnceValue(func() backends.Backend { return cpu.New(2) })

func newPayloadSession(t testing.TB, ctx int, num Numerics) *Session {
	t.Helper()
	m, err := payloadModel()
	require.NoError(t, err)
	s, err := NewSession(m, payloadBackend(), Options{Context: ctx, Numerics: num})
	require.NoError(t, err)
	return s
}

// payloadRef returns the reference logits of every position of
// testTokens(payloadRefLen) for the given numerics, computed once.
const payloadRefLen = 72

var payloadRefs sync.Map // Numerics → []float32

func payloadRef(t testing.TB, num Numerics) ([]int, []float32) {
	m, err := payloadModel()
	require.NoError(t, err)
	toks := testTokens(payloadRefLen, m.Params.Vocab)
	if r, ok := payloadRefs.Load(num); ok {
		return toks, r.([]float32)
	}
	s := newPayloadSession(t, 128, num)
	ref := make([]float32, len(toks)*m.Params.Vocab)
	require.NoError(t, s.PrefillAll(toks, ref))
	payloadRefs.Store(num, ref)
	return toks, ref
}

func writePayload(t testing.TB, s *Session, opt PayloadOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := s.WritePayload(&buf, opt)
	require.NoError(t, err)
	require.EqualValues(t, buf.Len(), n)
	size, err := s.PayloadSize(opt)
	require.NoError(t, err)
	require.EqualValues(t, size, n)
	return buf.Bytes()
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

// continueAndCompare runs the tokens after the restored prefix and checks
// every logit against the reference run.
func continueAndCompare(t *testing.T, s *Session, toks []int, ref []float32, what string) {
	t.Helper()
	v := s.m.Params.Vocab
	cut := s.Pos()
	requireBits(t, ref[(cut-1)*v:cut*v], s.Logits(), what+" (stored logits)")
	end := min(len(toks), cut+2)
	all := make([]float32, (end-cut)*v)
	require.NoError(t, s.PrefillAll(toks[cut:end], all))
	requireBits(t, ref[cut*v:end*v], all, what+" (continued)")
}

var payloadFormats = []struct {
	name string
	opt  PayloadOptions
}{
	{"v1", PayloadOptions{Version: PayloadV1}},
	{"go-f32", PayloadOptions{}},
	{"go-f16", PayloadOptions{F16: true}},
}

// TestPayloadRoundTrip saves the session at cut points on both sides of
// every window and compression boundary, restores each payload into a
// fresh session and checks that continuing gives bit-identical logits to
// never having saved, for both numerics and every layout.
func TestPayloadRoundTrip(t *testing.T) {
	for _, num := range []Numerics{NumericsDS4, NumericsOfficial} {
		toks, ref := payloadRef(t, num)
		src := newPayloadSession(t, 128, num)
		dst := newPayloadSession(t, 128, num)
		big := newPayloadSession(t, 256, num) // a larger context takes the payload too
		cuts := []int{1, 4, 5, 16, 17, 33, 47, 48, 64}
		if num == NumericsOfficial {
			cuts = []int{5, 17, 33}
		}
		prev := 0
		for i, cut := range cuts {
			require.NoError(t, src.Prefill(toks[prev:cut]))
			prev = cut
			for _, f := range payloadFormats {
				if f.opt.F16 && num != NumericsDS4 {
					_, err := src.WritePayload(io.Discard, f.opt)
					require.ErrorContains(t, err, "NumericsDS4")
					continue
				}
				p := writePayload(t, src, f.opt)
				targets := []*Session{dst}
				if i%3 == 1 {
					targets = append(targets, big)
				}
				for _, s := range targets {
					require.NoError(t, s.ReadPayload(bytes.NewReader(p), int64(len(p))))
					require.Equal(t, toks[:cut], s.Tokens())
					continueAndCompare(t, s, toks, ref, f.name)
				}
			}
		}
	}
}

// TestPayloadChain writes a root payload and two deltas, restores the
// chain (and a v1 root followed by a delta) and checks the continuation.
func TestPayloadChain(t *testing.T) {
	toks, ref := payloadRef(t, NumericsDS4)
	src := newPayloadSession(t, 128, NumericsDS4)
	cuts := []int{21, 38, 67}
	var parts [][]byte
	var v1root []byte
	for i, cut := range cuts {
		require.NoError(t, src.Prefill(toks[src.Pos():cut]))
		base := 0
		if i > 0 {
			base = cuts[i-1]
		}
		parts = append(parts, writePayload(t, src, PayloadOptions{Base: base, F16: i%2 == 0}))
		if i == 0 {
			v1root = writePayload(t, src, PayloadOptions{Version: PayloadV1})
		}
	}
	full := writePayload(t, src, PayloadOptions{})
	require.Less(t, len(parts[2]), len(full), "a delta is smaller than a full payload")

	chain := func(ps ...[]byte) []PayloadPart {
		out := make([]PayloadPart, len(ps))
		for i, p := range ps {
			out[i] = PayloadPart{bytes.NewReader(p), int64(len(p))}
		}
		return out
	}
	dst := newPayloadSession(t, 128, NumericsDS4)
	for n := 1; n <= 3; n++ {
		require.NoError(t, dst.ReadPayloadChain(chain(parts[:n]...)))
		require.Equal(t, toks[:cuts[n-1]], dst.Tokens())
		continueAndCompare(t, dst, toks, ref, "chain")
	}
	require.NoError(t, dst.ReadPayloadChain(chain(v1root, parts[1])))
	continueAndCompare(t, dst, toks, ref, "v1 root")

	// Broken chains are refused before the session is touched.
	require.NoError(t, dst.ReadPayload(bytes.NewReader(full), int64(len(full))))
	for _, bad := range [][][]byte{{parts[1]}, {parts[0], parts[2]}, {parts[1], parts[2]}, {parts[0], v1root}} {
		err := dst.ReadPayloadChain(chain(bad...))
		require.ErrorIs(t, err, ErrPayloadIncompatible)
		require.Equal(t, toks[:cuts[2]], dst.Tokens())
	}
}

// TestPayloadSizeFormula checks the v1 size against docs/formats/kvcache.md#session-payload for
// the Flash shape and the per-token growth of both layouts.
func TestPayloadSizeFormula(t *testing.T) {
	p := layout.Flash()
	const ctx = 32768
	for _, T := range []int{1, 100, 128, 129, 4096, 10000} {
		R := int64(min(T, 128))
		want := int64(52 + 4*T + 517120 + 172 + 172)
		want += 43 * R * 2048
		want += 21 * (int64(T/4)*2048 + 2*32768 + int64(T/4)*512 + 2*8192)
		want += 20 * (int64(T/128)*2048 + 2*262144)
		require.Equal(t, want, PayloadSizeFor(p, ctx, T, PayloadOptions{Version: PayloadV1}), "T=%d", T)
	}
	perToken := func(opt PayloadOptions) int64 {
		return (PayloadSizeFor(p, ctx, 8192+1024, opt) - PayloadSizeFor(p, ctx, 1024, opt)) / 8192
	}
	require.EqualValues(t, 13764, perToken(PayloadOptions{Version: PayloadV1}))
	require.EqualValues(t, 13764, perToken(PayloadOptions{}))
	require.EqualValues(t, 6884, perToken(PayloadOptions{F16: true}))
}

// resealGo recomputes the header CRC of a PayloadGo payload after an edit.
func resealGo(p []byte) {
	binary.LittleEndian.PutUint32(p[60:], crc32.Checksum(p[:60], castagnoli))
}

func TestPayloadValidation(t *testing.T) {
	src := newPayloadSession(t, 64, NumericsDS4)
	v := src.m.Params.Vocab
	toks := testTokens(40, v)
	require.NoError(t, src.Prefill(toks))
	v1 := writePayload(t, src, PayloadOptions{Version: PayloadV1})
	gp := writePayload(t, src, PayloadOptions{F16: true})

	dst := newPayloadSession(t, 64, NumericsDS4)
	prior := testTokens(9, v)
	require.NoError(t, dst.Prefill(prior))
	priorSnap := dst.Snapshot()
	load := func(p []byte, size int64) error {
		require.NoError(t, dst.Restore(priorSnap))
		return dst.ReadPayload(bytes.NewReader(p), size)
	}
	edit := func(p []byte, word int, val uint32, reseal bool) []byte {
		q := bytes.Clone(p)
		binary.LittleEndian.PutUint32(q[4*word:], val)
		if reseal {
			resealGo(q)
		}
		return q
	}
	// Header problems leave the session as it was.
	headerCases := []struct {
		name string
		p    []byte
		is   error
		msg  string
	}{
		{"magic", edit(v1, 0, 1, false), ErrPayloadCorrupt, "bad magic"},
		{"version", edit(v1, 1, 2, false), ErrPayloadIncompatible, "unsupported version 0x2"},
		{"layers", edit(v1, 8, 43, false), ErrPayloadIncompatible, "different layout"},
		{"vocab", edit(v1, 11, 129280, false), ErrPayloadIncompatible, "different layout"},
		{"ctx", edit(v1, 2, 128, false), ErrPayloadIncompatible, "do not fit current context 64"},
		{"tokens", edit(v1, 7, 65, false), ErrPayloadCorrupt, "65 tokens for context 64"},
		{"window", edit(v1, 5, 8, false), ErrPayloadIncompatible, "raw window 8"},
		{"raw rows", edit(v1, 12, 15, false), ErrPayloadCorrupt, "15 raw rows"},
		{"comp cap", edit(v1, 6, 1000, false), ErrPayloadIncompatible, "compressed capacity 1000"},
		{"go header crc", edit(gp, 7, 39, false), ErrPayloadCorrupt, "header checksum"},
		{"go numerics", edit(gp, 14, flagRowsF16|flagOfficial, true), ErrPayloadIncompatible, "other numerics"},
		{"go flags", edit(gp, 14, 4, true), ErrPayloadCorrupt, "unknown flags"},
		{"go delta without parent", edit(gp, 13, 20, true), ErrPayloadIncompatible, "no parent"},
		{"size", v1, ErrPayloadCorrupt, "header implies"},
	}
	for _, c := range headerCases {
		size := int64(len(c.p))
		if c.name == "size" {
			size++
		}
		err := load(c.p, size)
		require.ErrorIs(t, err, c.is, c.name)
		require.ErrorContains(t, err, c.msg, c.name)
		require.Equal(t, prior, dst.Tokens(), c.name)
	}
	// Body problems reset the session.
	countOff := 4 * (v1HeaderWords + len(toks) + v)
	bodyCases := []struct {
		name string
		p    []byte
		msg  string
	}{
		{"token", edit(v1, v1HeaderWords+3, uint32(v), false), "outside the vocabulary"},
		{"comp count", edit(v1, countOff/4+2, 11, false), "layer 2 holds 11 compressed"},
		{"index count", edit(v1, countOff/4+6+3, 1, false), "layer 3 holds 5 compressed and 1 indexer"},
		{"trailing", append(bytes.Clone(v1), 0), "header implies"},
	}
	for _, c := range bodyCases {
		err := load(c.p, int64(len(c.p)))
		require.ErrorIs(t, err, ErrPayloadCorrupt, c.name)
		require.ErrorContains(t, err, c.msg, c.name)
	}
	// A reader that runs dry before the declared size is a truncation.
	for _, p := range [][]byte{v1, gp} {
		for cut := 0; cut < len(p); cut += 1 + cut/16 {
			err := load(p[:cut], int64(len(p)))
			require.ErrorIs(t, err, ErrPayloadCorrupt, "cut %d", cut)
			require.ErrorContains(t, err, "truncated")
			require.True(t, dst.Pos() == 0 || cut < 4*goHeaderWords, "cut %d left %d tokens", cut, dst.Pos())
		}
	}
	// Every single-bit flip of a PayloadGo payload is caught by a checksum.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		q := bytes.Clone(gp)
		i := rng.IntN(len(q))
		q[i] ^= 1 << rng.IntN(8)
		require.Error(t, load(q, int64(len(q))), "flip at %d", i)
	}
	// The session stays usable after every failure.
	require.NoError(t, dst.Prefill(toks[:5]))
}

// fakeSession returns a session of a weightless model with the payload
// model's ratios and very narrow rows, holding n tokens and random (binary16-exact) state; it
// can be serialized and restored but not run.
func fakeSession(t testing.TB, ctx, n int, seed uint64) *Session {
	p := layout.Tiny()
	p.Vocab, p.HeadDim, p.IndexerDim, p.Window = 16, 4, 2, 4
	p.CompressRatios = []int{0, 0, 4, 8, 4, 16}
	s, err := NewSession(&Model{Params: p}, nil, Options{Context: ctx})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(seed, 7))
	rnd := func(x []float32) {
		for i := range x {
			x[i] = quant.RoundF16(float32(rng.NormFloat64()))
		}
	}
	s.tokens = testTokens(n, p.Vocab)
	rnd(s.logits)
	for il := range s.layers {
		st := &s.layers[il]
		rnd(st.raw)
		st.rawLen, st.rawStart = min(n, s.rawCap), n%s.rawCap
		if r := p.Ratio(il); r != 0 {
			st.compLen = n / r
			rnd(st.comp[:st.compLen*p.HeadDim])
			rnd(st.skv)
			rnd(st.ssc)
			if r == 4 {
				st.icompLen = n / 4
				rnd(st.icomp[:st.icompLen*p.IndexerDim])
				rnd(st.iskv)
				rnd(st.issc)
			}
		}
	}
	return s
}

// FuzzReadPayload feeds arbitrary bytes to the payload reader: it must
// return a classified error, or restore a state that serializes back to
// the same body.
func FuzzReadPayload(f *testing.F) {
	for i, n := range []int{1, 9, 20} {
		s := fakeSession(f, 32, n, uint64(i))
		for _, o := range payloadFormats {
			f.Add(writePayload(f, s, o.opt))
		}
	}
	dst := fakeSession(f, 32, 3, 9)
	f.Fuzz(func(t *testing.T, b []byte) {
		err := dst.ReadPayload(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrPayloadCorrupt) && !errors.Is(err, ErrPayloadIncompatible) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		version := binary.LittleEndian.Uint32(b[4:])
		opt, hdr := PayloadOptions{Version: PayloadV1}, 4*v1HeaderWords
		if version == PayloadGo {
			opt, hdr = PayloadOptions{F16: b[56]&flagRowsF16 != 0}, 4*goHeaderWords
		}
		var out bytes.Buffer
		_, err = dst.WritePayload(&out, opt)
		require.NoError(t, err)
		require.Equal(t, b[hdr:], out.Bytes()[hdr:])
	})
}
