package harness

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

func TestFrontiers(t *testing.T) {
	for _, tc := range []struct {
		cfg  BenchConfig
		want []int
	}{
		{BenchConfig{CtxStart: 2048, CtxMax: 10000, StepIncr: 3000, StepMul: 1, GenTokens: 1}, []int{2048, 5048, 8048, 10000}},
		{BenchConfig{CtxStart: 1000, CtxMax: 5000, StepIncr: 1, StepMul: 1.5, GenTokens: 1}, []int{1000, 1500, 2250, 3375, 5000}},
		{BenchConfig{CtxStart: 2048, CtxMax: 8192, StepIncr: 2048, StepMul: 1, GenTokens: 1}, []int{2048, 4096, 6144, 8192}},
		{BenchConfig{CtxStart: 5, CtxMax: 5, StepIncr: 2048, StepMul: 1, GenTokens: 1}, []int{5}},
		// ceil(f·mul) <= f steps by one.
		{BenchConfig{CtxStart: 1, CtxMax: 4, StepMul: 1.1, GenTokens: 1}, []int{1, 2, 3, 4}},
		{BenchConfig{CtxStart: 100, CtxMax: math32, StepIncr: math32 - 50, StepMul: 1, GenTokens: 1}, []int{100, math32}},
	} {
		require.Equal(t, tc.want, tc.cfg.Frontiers(), "%+v", tc.cfg)
	}
}

const math32 = 1<<31 - 100

func TestNormalize(t *testing.T) {
	c := DefaultBenchConfig()
	require.NoError(t, c.Normalize())
	require.Equal(t, 32768+128+1, c.CtxAlloc)
	for _, tc := range []struct {
		mod  func(*BenchConfig)
		want string
	}{
		{func(c *BenchConfig) { c.CtxStart = 40000 }, "--ctx-start must be <= --ctx-max"},
		{func(c *BenchConfig) { c.StepMul = 0.5 }, "--step-mul must be >= 1"},
		{func(c *BenchConfig) { c.StepMul = nan() }, "finite"},
		{func(c *BenchConfig) { c.CtxAlloc = 32768 + 128 }, "--ctx-alloc must be greater"},
		{func(c *BenchConfig) { c.CtxMax = 1<<31 - 10 }, "too large"},
		{func(c *BenchConfig) { c.GenTokens = 0 }, "positive"},
	} {
		c := DefaultBenchConfig()
		tc.mod(&c)
		require.ErrorContains(t, c.Normalize(), tc.want)
	}
}

func nan() float64 { var z float64; return z / z }

func TestCSV(t *testing.T) {
	var err error
	rows := []BenchRow{
		{CtxTokens: 2048, PrefillTokens: 2048, PrefillTPS: 410.625, GenTokens: 128, GenTPS: 23.2249, KVCacheBytes: 52184460},
		{CtxTokens: 4096, PrefillTokens: 2048, PrefillTPS: 0, GenTokens: 128, GenTPS: 1e6 / 3, KVCacheBytes: 80373132},
	}
	var b strings.Builder
	require.NoError(t, WriteCSV(&b, rows))
	require.Equal(t, CSVHeader+"\n2048,2048,410.62,128,23.22,52184460\n4096,2048,0.00,128,333333.33,80373132\n", b.String())

	for _, name := range []string{"m2_ultra.csv", "m4_max.csv"} {
		rows, err := ReadCSVFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		require.Len(t, rows, 32, name)
		require.Equal(t, int64(2048), rows[0].CtxTokens)
		require.Equal(t, int64(65536), rows[31].CtxTokens)
		// kvcache_bytes is linear: 13764 bytes per token (docs/formats/harness.md#csv).
		for i, r := range rows {
			require.Equal(t, int64(52184460+28188672*i), r.KVCacheBytes, "%s row %d", name, i)
		}
	}
	// Re-writing the file ds4-bench wrote reproduces it byte for byte
	// (m4_max.csv went through a spreadsheet: BOM, CRLF, zeros dropped).
	raw, err := os.ReadFile(filepath.Join("testdata", "m2_ultra.csv"))
	require.NoError(t, err)
	rows, err = ReadCSV(strings.NewReader(string(raw)))
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, WriteCSV(&out, rows))
	require.Equal(t, string(raw), out.String())

	_, err = ReadCSV(strings.NewReader("ctx_tokens,gen_tps\n1,2\n"))
	require.ErrorContains(t, err, "missing column prefill_tps")
	_, err = ReadCSV(strings.NewReader("ctx_tokens,prefill_tps,gen_tps\n1,x,2\n"))
	require.ErrorContains(t, err, "line 2")
	rows, err = ReadCSV(strings.NewReader("ctx_tokens,prefill_tps,gen_tps\n20,1,2\n10,3,4"))
	require.NoError(t, err)
	require.Equal(t, []int64{10, 20}, []int64{rows[0].CtxTokens, rows[1].CtxTokens})
}

var tiny = sync.OnceValues(engine.OpenTiny)

// benchTokens is the plain-text tokenization of the tokenizer's Italian
// excerpt, cut to n tokens.
func benchTokens(t *testing.T, n int) []int {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	text, err := os.ReadFile("../engine/tokenizer/testdata/promessi_sposi_excerpt.txt")
	require.NoError(t, err)
	ids := tok.Encode(string(text[:4096]))
	require.GreaterOrEqual(t, len(ids), n)
	return ids[:n]
}

// TestBenchLoop runs a sweep on the tiny model and checks it against an
// uninterrupted run: for every frontier a fresh session prefilled in one
// go and decoded greedily gives the same probe tokens, and the state the
// sweep leaves after its restore equals a fresh prefill of the frontier.
func TestBenchLoop(t *testing.T) {
	m, err := tiny()
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	cfg := BenchConfig{CtxStart: 16, CtxMax: 64, StepIncr: 16, StepMul: 1, GenTokens: 4}
	require.NoError(t, cfg.Normalize())
	toks := benchTokens(t, 64)
	eos := 1
	s, err := engine.NewSession(m, be, engine.Options{Context: cfg.CtxAlloc})
	require.NoError(t, err)
	var streamed []BenchRow
	var work int64
	b := &Bench{Session: s, Tokens: toks, EOS: eos, Config: cfg,
		Row:      func(r BenchRow) error { streamed = append(streamed, r); return nil },
		Progress: func(n int) { work += int64(n) },
	}
	rows, err := b.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, rows, streamed)
	require.Equal(t, cfg.Work(), work)
	require.Len(t, rows, 4)
	for i, r := range rows {
		require.Equal(t, int64(16*(i+1)), r.CtxTokens)
		require.Equal(t, int64(16), r.PrefillTokens)
		require.Equal(t, int64(4), r.GenTokens)
		require.Greater(t, r.PrefillTPS, 0.0)
		require.Greater(t, r.GenTPS, 0.0)
		require.Len(t, r.Probe, 4)
		require.NotContains(t, r.Probe, eos)
		if i > 0 {
			require.Greater(t, r.KVCacheBytes, rows[i-1].KVCacheBytes)
		}
	}
	// The sweep ends restored to the last frontier.
	require.Equal(t, toks, s.Tokens())
	last := slices.Clone(s.Logits())

	// Uninterrupted reference.
	for _, r := range rows {
		f := int(r.CtxTokens)
		ref, err := engine.NewSession(m, be, engine.Options{Context: cfg.CtxAlloc})
		require.NoError(t, err)
		require.NoError(t, ref.Prefill(toks[:f]))
		if f == 64 {
			require.Equal(t, ref.Logits(), last, "state after the final restore")
		}
		n, err := ref.PayloadSize(engine.PayloadOptions{Version: engine.PayloadV1})
		require.NoError(t, err)
		require.Equal(t, n, r.KVCacheBytes)
		var probe []int
		for range 4 {
			tok := argmaxExcluding(ref.Logits(), eos)
			probe = append(probe, tok)
			require.NoError(t, ref.Decode(tok))
		}
		require.Equal(t, probe, r.Probe, "probe at %d", f)
	}

	// Repeats measure each frontier again from the previous one's state
	// and give the same probes.
	cfg.Repeat = 2
	b = &Bench{Session: s, Tokens: toks, EOS: eos, Config: cfg}
	rep, err := b.Run(context.Background())
	require.NoError(t, err)
	for i := range rows {
		require.Equal(t, rows[i].Probe, rep[i].Probe)
		require.Equal(t, rows[i].KVCacheBytes, rep[i].KVCacheBytes)
		require.Equal(t, int64(2), rep[i].Repeats)
		// Two runs: the 95% interval is the mean ± tan(0.475π)·SD/√2
		// (Student's t of one degree of freedom in closed form).
		half := math.Tan(0.475*math.Pi) * rep[i].PrefillTPSSD / math.Sqrt2
		require.InDelta(t, rep[i].PrefillTPS-half, rep[i].PrefillTPSCILo, 1e-9*rep[i].PrefillTPS)
		require.InDelta(t, rep[i].PrefillTPS+half, rep[i].PrefillTPSCIHi, 1e-9*rep[i].PrefillTPS)
		half = math.Tan(0.475*math.Pi) * rep[i].GenTPSSD / math.Sqrt2
		require.InDelta(t, rep[i].GenTPS-half, rep[i].GenTPSCILo, 1e-9*rep[i].GenTPS)
		require.InDelta(t, rep[i].GenTPS+half, rep[i].GenTPSCIHi, 1e-9*rep[i].GenTPS)
	}
	for _, r := range rows {
		require.Zero(t, r.PrefillTPSCILo+r.PrefillTPSCIHi+r.GenTPSCILo+r.GenTPSCIHi, "one run bounds nothing")
	}

	// Canceling stops the frontier under way: no row is measured from a
	// cut prefill or probe.
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Repeat = 1
	var streamedCanceled int
	b = &Bench{Session: s, Tokens: toks, EOS: eos, Config: cfg, Progress: func(int) { cancel() },
		Row: func(BenchRow) error { streamedCanceled++; return nil }}
	rows, err = b.Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, rows)
	require.Zero(t, streamedCanceled)

	// Errors: too few tokens.
	b = &Bench{Session: s, Tokens: toks[:10], EOS: eos, Config: cfg}
	_, err = b.Run(context.Background())
	require.ErrorContains(t, err, "need at least --ctx-max=64")
}

func TestArgmaxExcluding(t *testing.T) {
	l := []float32{1, 5, 5, 2}
	require.Equal(t, 1, argmaxExcluding(l, 3))
	require.Equal(t, 2, argmaxExcluding(l, 1))
	require.Equal(t, sample.Argmax(l), argmaxExcluding(l, -1))
	require.Equal(t, -1, argmaxExcluding([]float32{1}, 0))
}

func TestMeanSD(t *testing.T) {
	m, sd := meanSD([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	require.InDelta(t, 5, m, 1e-12)
	require.InDelta(t, 2.138089935, sd, 1e-9) // sample SD: sqrt(32/7)
	m, sd = meanSD([]float64{3})
	require.Equal(t, 3.0, m)
	require.Zero(t, sd)
}

// TestBenchSSDColumns runs a sweep whose Experts reports counters that
// grow by a fixed step per call: each row's ssd_ columns are the step's
// hit rate and bytes over the frontier's tokens, and the latency the
// cache reports; without Experts, or while it says the model does not
// stream, they stay 0.
func TestBenchSSDColumns(t *testing.T) {
	m, err := tiny()
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	cfg := BenchConfig{CtxStart: 16, CtxMax: 32, StepIncr: 16, StepMul: 1, GenTokens: 4, Repeat: 2}
	require.NoError(t, cfg.Normalize())
	toks := benchTokens(t, 32)
	for _, c := range []struct {
		name      string
		streaming bool
		set       bool
	}{
		{"streaming", true, true},
		{"not streaming", false, true},
		{"no experts", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := engine.NewSession(m, be, engine.Options{Context: cfg.CtxAlloc})
			require.NoError(t, err)
			b := &Bench{Session: s, Tokens: toks, EOS: 1, Config: cfg}
			var st expertcache.Stats
			if c.set {
				b.Experts = func() (expertcache.Stats, bool) {
					out := st
					// Each call (one before, one after a frontier)
					// moves the counters on: 3 hits, 1 miss, 4000 bytes.
					st.Hits, st.Misses, st.BytesRead = st.Hits+3, st.Misses+1, st.BytesRead+4000
					st.ReadP50, st.ReadP99 = 1500*time.Microsecond, 6*time.Millisecond
					return out, c.streaming
				}
			}
			rows, err := b.Run(context.Background())
			require.NoError(t, err)
			require.Len(t, rows, 2)
			for _, r := range rows {
				if !c.streaming {
					require.Zero(t, r.SSDHitRate+r.SSDBytesPerToken+r.SSDReadP50MS+r.SSDReadP99MS)
					continue
				}
				// 2 repeats of 16 prefilled and 4 generated tokens.
				require.InDelta(t, 0.75, r.SSDHitRate, 1e-12)
				require.InDelta(t, 4000.0/40, r.SSDBytesPerToken, 1e-12)
				require.InDelta(t, 1.5, r.SSDReadP50MS, 1e-12)
				require.InDelta(t, 6.0, r.SSDReadP99MS, 1e-12)
			}
		})
	}
}
