package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
)

// tinyFile writes the tiny model (vocabulary shortened) to a file and
// returns its path.
func tinyFile(t testing.TB, r layout.Recipe) string {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = 1024
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: p, Recipe: r, Seed: 5})
	require.NoError(t, err)
	return path
}

// openStreamed opens path with open and switches it to streaming with
// opt; the routed experts' matrices of the mapping are then unbound, so
// that any use of them panics.
func openStreamed(t testing.TB, path string, open func(string) (*Model, error), opt StreamOptions) *Model {
	t.Helper()
	m, err := open(path)
	require.NoError(t, err)
	t.Cleanup(func() { m.File.Close() })
	require.NoError(t, m.Stream(path, opt))
	for il := range m.Layers {
		l := &m.Layers[il]
		l.GateExps.Data, l.UpExps.Data, l.DownExps.Data = nil, nil, nil
	}
	return m
}

// runPaths returns the logits of every position of toks evaluated as one
// prefill (in chunks of chunk tokens), token by token, and as a prefill
// of the first half then decode steps.
func runPaths(t testing.TB, m *Model, be backends.Backend, toks []int, chunk int) map[string][]float32 {
	t.Helper()
	v := m.Params.Vocab
	out := map[string][]float32{}
	s, err := NewSession(m, be, Options{Context: 256})
	require.NoError(t, err)
	s.chunk = chunk
	all := make([]float32, len(toks)*v)
	require.NoError(t, s.PrefillAll(toks, all))
	out["prefill"] = all
	s.Reset()
	var dec []float32
	for _, tok := range toks {
		require.NoError(t, s.Decode(tok))
		dec = append(dec, s.Logits()...)
	}
	out["decode"] = dec
	s.Reset()
	half := len(toks) / 2
	mixed := make([]float32, half*v)
	require.NoError(t, s.PrefillAll(toks[:half], mixed))
	for _, tok := range toks[half:] {
		require.NoError(t, s.Decode(tok))
		mixed = append(mixed, s.Logits()...)
	}
	out["mixed"] = mixed
	return out
}

// TestStreamLogitsBitIdentical checks that streaming the routed experts
// through caches of 2 slots (evicting constantly, experts run in groups),
// 7 slots and room for all gives the mapped path's logits bit for bit on
// the prefill, decode and mixed paths, with the mapping's expert matrices
// unbound.
func TestStreamLogitsBitIdentical(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	for _, r := range []layout.Recipe{layout.RecipeQ2, layout.RecipeQ4} {
		path := tinyFile(t, r)
		mapped, err := Open(path)
		require.NoError(t, err)
		defer mapped.File.Close()
		toks := testTokens(40, mapped.Params.Vocab)
		want := runPaths(t, mapped, be, toks, 16)
		for _, slots := range []int{2, 7, 1 << 20} {
			for _, opt := range []StreamOptions{{Slots: slots}, {Slots: slots, Direct: true}, {Slots: slots, NoPrefetch: true, Policy: expertcache.LRU}} {
				t.Run(fmt.Sprintf("%s/%+v", r.Name, opt), func(t *testing.T) {
					m := openStreamed(t, path, Open, opt)
					got := runPaths(t, m, be, toks, 16)
					for _, path := range []string{"prefill", "decode", "mixed"} {
						require.Equal(t, bitsOf32(want[path]), bitsOf32(got[path]), path)
					}
					st := m.ExpertCache().Stats()
					require.LessOrEqual(t, st.Slots, 6*8)
					require.Positive(t, st.Misses+st.Prefetched)
					if slots >= 6*8 {
						require.LessOrEqual(t, st.Misses+st.Prefetched, int64(6*8), "with room for all, each expert is read once")
					}
				})
			}
		}
	}
}

// TestStreamPrefetchesRoutedLayers checks that a decode step on a cold
// cache reads ahead not only the hash layers' experts, which its token
// names, but also, for each routed layer, the experts its router picks
// from the layer's input, and that the step then uses some of those;
// NoPrefetch turns both off.
func TestStreamPrefetchesRoutedLayers(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	for _, tok := range testTokens(4, 1024) {
		for _, noPrefetch := range []bool{false, true} {
			m := openStreamed(t, path, Open, StreamOptions{Slots: 48, NoPrefetch: noPrefetch})
			s, err := NewSession(m, be, Options{Context: 256})
			require.NoError(t, err)
			require.NoError(t, s.Decode(tok))
			st := m.ExpertCache().Stats()
			k := m.Params.ExpertsUsed
			hash, routed := 0, 0
			for _, l := range m.Layers {
				if l.Tid2Eid == nil {
					routed++
					continue
				}
				seen := map[int32]bool{}
				for _, e := range l.Tid2Eid[tok*k : (tok+1)*k] {
					seen[e] = true
				}
				hash += len(seen)
			}
			require.Positive(t, routed)
			if noPrefetch {
				require.Zero(t, st.Prefetched)
				require.Zero(t, st.Hits)
				continue
			}
			require.Equal(t, int64(hash+routed*k), st.Prefetched, "token %d: every hash expert and k guesses a routed layer", tok)
			require.Greater(t, st.Hits, int64(hash), "token %d: some guesses are used", tok)
			t.Logf("token %d: %d of %d routed experts guessed", tok, st.Hits-int64(hash), routed*k)
		}
	}
}

// TestStreamPrefillReadsEachExpertOnce checks that one prefill chunk
// reads each expert it needs once, whatever the cache size: the groups of
// a layer are disjoint, no expert is asked twice, and the hash layers'
// prefetch reads the first group's experts only.
func TestStreamPrefillReadsEachExpertOnce(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	for _, opt := range []StreamOptions{{Slots: 1}, {Slots: 2}, {Slots: 3}, {Slots: 8}, {Slots: 48}, {Slots: 3, NoPrefetch: true}} {
		slots := opt.Slots
		m := openStreamed(t, path, Open, opt)
		log := &expertLog{layers: make([][][3]uint64, m.Params.Layers)}
		s, err := NewSession(m, be, Options{Context: 256, Experts: log})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(testTokens(50, m.Params.Vocab)))
		distinct := 0
		for _, evals := range log.layers {
			seen := map[uint64]bool{}
			for _, ev := range evals {
				seen[ev[0]] = true
			}
			distinct += len(seen)
		}
		st := m.ExpertCache().Stats()
		require.Equal(t, int64(distinct), st.Misses+st.Prefetched, "slots=%d", slots)
		require.Equal(t, st.Prefetched, st.Hits, "slots=%d: only prefetched experts are hits", slots)
	}
}

// TestStreamExpertObserver checks the expert observer sees the same
// evaluations streaming (in groups) as mapped.
func TestStreamExpertObserver(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	var logs [2]*expertLog
	for i, slots := range []int{0, 2} {
		var m *Model
		if slots == 0 {
			var err error
			m, err = Open(path)
			require.NoError(t, err)
			defer m.File.Close()
		} else {
			m = openStreamed(t, path, Open, StreamOptions{Slots: slots})
		}
		logs[i] = &expertLog{layers: make([][][3]uint64, m.Params.Layers)}
		s, err := NewSession(m, be, Options{Context: 256, Experts: logs[i]})
		require.NoError(t, err)
		toks := testTokens(30, m.Params.Vocab)
		require.NoError(t, s.Prefill(toks[:20]))
		for _, tok := range toks[20:] {
			require.NoError(t, s.Decode(tok))
		}
	}
	require.Equal(t, logs[0].layers, logs[1].layers)
}

// TestStreamTruncatedFile truncates the file under a streaming model read
// into memory: a step then fails with ErrExpertRead and resets the
// session, and once the file is whole again the model gives the mapped
// logits.
func TestStreamTruncatedFile(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	mapped, err := OpenInMemory(path)
	require.NoError(t, err)
	defer mapped.File.Close()
	toks := testTokens(12, mapped.Params.Vocab)
	want := runPaths(t, mapped, be, toks, 16)

	m := openStreamed(t, path, OpenInMemory, StreamOptions{Slots: 4})
	down, ok := m.File.Tensor(m.Layers[5].DownExps.Name)
	require.True(t, ok)
	require.NoError(t, os.Truncate(path, int64(m.File.DataOffset+down.Offset)+100))
	s, err := NewSession(m, be, Options{Context: 256})
	require.NoError(t, err)
	err = s.Prefill(toks)
	require.ErrorIs(t, err, ErrExpertRead)
	require.ErrorContains(t, err, "layer 5 expert")
	require.Zero(t, s.Pos())
	require.NoError(t, os.WriteFile(path, whole, 0o644))
	got := runPaths(t, m, be, toks, 16)
	require.Equal(t, bitsOf32(want["decode"]), bitsOf32(got["decode"]))
	require.Equal(t, bitsOf32(want["prefill"]), bitsOf32(got["prefill"]))
}

// TestStreamManyTokensLeakNothing decodes many tokens through a 5-slot
// cache, then checks no slot stayed pinned: all five can be acquired at
// once.
func TestStreamManyTokensLeakNothing(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	m := openStreamed(t, path, Open, StreamOptions{Slots: 5})
	s, err := NewSession(m, be, Options{Context: 1024})
	require.NoError(t, err)
	toks := testTokens(600, m.Params.Vocab)
	require.NoError(t, s.Prefill(toks[:100]))
	for _, tok := range toks[100:] {
		require.NoError(t, s.Decode(tok))
	}
	c := m.ExpertCache()
	done := make(chan error, 1)
	go func() {
		exps := []int{0, 1, 2, 3, 4}
		err := c.Acquire(1, exps, make([]expertcache.Expert, 5))
		if err == nil {
			c.Release(1, exps)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a slot stayed pinned: acquiring every slot blocks")
	}
	st := c.Stats()
	require.Equal(t, 5, st.Slots)
	require.Positive(t, st.Misses)
}

// TestStreamDecodeAllocatesNothing checks a streaming decode step whose
// experts are resident allocates nothing.
func TestStreamDecodeAllocatesNothing(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	path := tinyFile(t, layout.RecipeQ2)
	m := openStreamed(t, path, Open, StreamOptions{Slots: 1 << 20})
	s, err := NewSession(m, be, Options{Context: 512})
	require.NoError(t, err)
	require.NoError(t, s.Prefill(testTokens(40, m.Params.Vocab)))
	require.NoError(t, s.Decode(5))
	s.Reset()
	require.NoError(t, s.Decode(3))
	allocs := testing.AllocsPerRun(20, func() {
		s.Reset()
		if err := s.Decode(3); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled {
		require.Zero(t, allocs)
	}
}

// TestStreamLifecycle checks Stream's argument errors, that warming a
// streaming model skips its routed experts, and that closing the file
// closes the cache.
func TestStreamLifecycle(t *testing.T) {
	path := tinyFile(t, layout.RecipeQ2)
	m, err := Open(path)
	require.NoError(t, err)
	require.Nil(t, m.ExpertCache())
	other := tinyFile(t, layout.RecipeQ4)
	require.ErrorContains(t, m.Stream(other, StreamOptions{Slots: 2}), "not the file")
	require.Error(t, m.Stream(path, StreamOptions{Slots: 0}))
	require.NoError(t, m.Stream(path, StreamOptions{Slots: 3, Direct: true}))
	require.Error(t, m.Stream(path, StreamOptions{Slots: 3}), "streams already")
	var routed int64
	for _, l := range m.Layers {
		routed += int64(len(l.GateExps.Data) + len(l.UpExps.Data) + len(l.DownExps.Data))
	}
	var resident int64
	for _, b := range m.ResidentData() {
		resident += int64(len(b))
	}
	var tensors int64
	for _, ti := range m.File.Tensors {
		tensors += int64(ti.Size)
	}
	require.Equal(t, tensors-routed, resident)
	var out strings.Builder
	m.WarmWeights(&out, "test")
	mib := fmt.Sprintf("%.1fMiB", float64(resident)/(1<<20))
	require.Contains(t, out.String(), "test: warming the resident weights 100.0% "+mib+"/"+mib)
	c := m.ExpertCache()
	require.NoError(t, m.File.Close())
	require.Nil(t, m.ExpertCache())
	require.Error(t, c.Acquire(0, []int{0}, make([]expertcache.Expert, 1)))
}

// BenchmarkStreamDecode compares a tiny-model decode step on the mapped
// experts with one streaming them (O_DIRECT) from a cache that holds them
// all (every Acquire a hit), from a 24-slot cache of the 48 experts with
// and without the hash layers' prefetch, and from a 4-slot cache.
func BenchmarkStreamDecode(b *testing.B) {
	be := cpu.New(0)
	defer be.Close()
	path := tinyFile(b, layout.RecipeQ2)
	for _, c := range []struct {
		name string
		opt  StreamOptions
	}{
		{"mapped", StreamOptions{}},
		{"stream-all", StreamOptions{Slots: 1 << 20, Direct: true}},
		{"stream-24", StreamOptions{Slots: 24, Direct: true}},
		{"stream-24-noprefetch", StreamOptions{Slots: 24, Direct: true, NoPrefetch: true}},
		{"stream-4", StreamOptions{Slots: 4, Direct: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var m *Model
			if c.opt.Slots == 0 {
				var err error
				m, err = Open(path)
				require.NoError(b, err)
				defer m.File.Close()
			} else {
				m = openStreamed(b, path, Open, c.opt)
			}
			s, err := NewSession(m, be, Options{Context: 4096})
			require.NoError(b, err)
			toks := testTokens(64, m.Params.Vocab)
			require.NoError(b, s.Prefill(toks))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if s.Pos() == s.Context() {
					s.Reset()
				}
				if err := s.Decode(toks[i%len(toks)]); err != nil {
					b.Fatal(err)
				}
			}
			if ec := m.ExpertCache(); ec != nil {
				st := ec.Stats()
				b.ReportMetric(float64(st.Hits)/float64(st.Hits+st.Misses), "hit-rate")
				b.ReportMetric(float64(st.Misses+st.Prefetched)/float64(b.N), "reads/token")
			}
		})
	}
}

// BenchmarkStreamPolicy measures the decode hit rate of each eviction
// policy at several cache sizes on the tiny model (6 layers of 8 experts,
// 3 used): a 64-token prompt, then 128 decode steps; run it with
// -benchtime 1x.
func BenchmarkStreamPolicy(b *testing.B) {
	be := cpu.New(0)
	defer be.Close()
	path := tinyFile(b, layout.RecipeQ2)
	toks := testTokens(192, 1024)
	for _, slots := range []int{6, 12, 18, 24, 36} {
		for _, pol := range []expertcache.Policy{expertcache.LRU, expertcache.LFU, expertcache.Layered} {
			b.Run(fmt.Sprintf("slots=%d/%v", slots, pol), func(b *testing.B) {
				m := openStreamed(b, path, Open, StreamOptions{Slots: slots, Policy: pol})
				s, err := NewSession(m, be, Options{Context: 256})
				require.NoError(b, err)
				var hits, misses int64
				for b.Loop() {
					s.Reset()
					require.NoError(b, s.Prefill(toks[:64]))
					st0 := m.ExpertCache().Stats()
					for _, tok := range toks[64:] {
						require.NoError(b, s.Decode(tok))
					}
					st := m.ExpertCache().Stats()
					hits += st.Hits - st0.Hits
					misses += st.Misses - st0.Misses
				}
				b.ReportMetric(float64(hits)/float64(hits+misses), "hit-rate")
			})
		}
	}
}

// BenchmarkStreamFlash decodes a real-shape Flash slice, the GGUF named by
// DS4_FLASH_STREAM (e.g. ds4-quant synth --preset flash --layers 4),
// streaming its experts at several cache sizes: a 64-token prompt, then
// 64 decode steps; run it with -benchtime 1x. It reports prefill and decode tokens/s,
// the decode hit rate, MB read per decoded token and read latencies.
func BenchmarkStreamFlash(b *testing.B) {
	path := os.Getenv("DS4_FLASH_STREAM")
	if path == "" {
		b.Skip("DS4_FLASH_STREAM names no GGUF")
	}
	be := cpu.New(0)
	defer be.Close()
	for _, c := range []struct {
		name string
		opt  StreamOptions
	}{
		{"slots=150", StreamOptions{Slots: 150, Direct: true}},
		{"slots=150/readers=1", StreamOptions{Slots: 150, Direct: true, Readers: 1}},
		{"slots=150/readers=2", StreamOptions{Slots: 150, Direct: true, Readers: 2}},
		{"slots=150/readers=4", StreamOptions{Slots: 150, Direct: true, Readers: 4}},
		{"slots=150/noprefetch", StreamOptions{Slots: 150, Direct: true, NoPrefetch: true}},
		{"slots=150/lru", StreamOptions{Slots: 150, Direct: true, Policy: expertcache.LRU}},
		{"slots=150/buffered", StreamOptions{Slots: 150}},
		{"slots=400", StreamOptions{Slots: 400, Direct: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m, err := Open(path)
			require.NoError(b, err)
			defer m.File.Close()
			require.NoError(b, m.Stream(path, c.opt))
			s, err := NewSession(m, be, Options{Context: 256})
			require.NoError(b, err)
			toks := testTokens(128, m.Params.Vocab)
			for b.Loop() {
				s.Reset()
				start := time.Now()
				require.NoError(b, s.Prefill(toks[:64]))
				b.ReportMetric(64/time.Since(start).Seconds(), "prefill-tok/s")
				st0 := m.ExpertCache().Stats()
				start = time.Now()
				for _, tok := range toks[64:] {
					require.NoError(b, s.Decode(tok))
				}
				el := time.Since(start)
				st := m.ExpertCache().Stats()
				b.ReportMetric(64/el.Seconds(), "tok/s")
				b.ReportMetric(float64(st.Hits-st0.Hits)/float64(st.Hits-st0.Hits+st.Misses-st0.Misses), "hit-rate")
				b.ReportMetric(float64(st.BytesRead-st0.BytesRead)/64/1e6, "MB/tok")
				b.ReportMetric(float64(st.ReadP50.Microseconds()), "p50-µs")
				b.ReportMetric(float64(st.ReadP99.Microseconds()), "p99-µs")
				b.Logf("%+v", st)
			}
		})
	}
}
