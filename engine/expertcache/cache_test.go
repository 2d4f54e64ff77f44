package expertcache

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// byteAt is the test file's content at offset o.
func byteAt(o int64) byte { return byte(o*2654435761>>13) ^ byte(o) }

// testFile writes a file holding three layers of experts at unaligned
// offsets (the middle one without routed experts) and returns its path
// and layout.
func testFile(t testing.TB, dir string) (string, []Layer) {
	t.Helper()
	layers := []Layer{
		{Gate: Span{1000, 1500}, Up: Span{13000, 1500}, Down: Span{25000, 3000}, Experts: 8},
		{},
		{Gate: Span{50001, 777}, Up: Span{60003, 777}, Down: Span{70005, 999}, Experts: 8},
	}
	size := int64(70005 + 8*999)
	b := make([]byte, size)
	for o := range b {
		b[o] = byteAt(int64(o))
	}
	path := filepath.Join(dir, "experts.bin")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path, layers
}

// openTestCache writes testFile in a temporary directory and opens a
// cache over it with opt, closed when the test ends.
func openTestCache(t testing.TB, opt Options) (*Cache, string, []Layer) {
	t.Helper()
	path, layers := testFile(t, t.TempDir())
	c, err := Open(path, layers, opt)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, path, layers
}

// acquireChecked acquires the experts exps of layer il into dst, checks
// their views against the file and releases them.
func acquireChecked(t testing.TB, c *Cache, layers []Layer, il int, exps []int, dst []Expert, msgAndArgs ...any) {
	t.Helper()
	require.NoError(t, c.Acquire(il, exps, dst), msgAndArgs...)
	for i, e := range exps {
		checkView(t, layers[il], e, dst[i])
	}
	c.Release(il, exps)
}

// checkView fails unless v is expert e of layer l's bytes in the file.
func checkView(t testing.TB, l Layer, e int, v Expert) {
	t.Helper()
	for i, p := range []struct {
		sp Span
		b  []byte
	}{{l.Gate, v.Gate}, {l.Up, v.Up}, {l.Down, v.Down}} {
		off := p.sp.Offset + int64(e)*p.sp.Bytes
		if int64(len(p.b)) != p.sp.Bytes {
			t.Fatalf("expert %d tensor %d: %d bytes, want %d", e, i, len(p.b), p.sp.Bytes)
		}
		for j, c := range p.b {
			if c != byteAt(off+int64(j)) {
				t.Fatalf("expert %d tensor %d: byte %d differs", e, i, j)
			}
		}
	}
}

// pinned counts the cache's pinned slots.
func pinned(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.slots {
		if s.pins != 0 {
			n++
		}
	}
	return n
}

func TestCacheReadsExperts(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			c, _, layers := openTestCache(t, Options{Slots: 4, Direct: direct})
			if !direct {
				require.False(t, c.Stats().Direct)
			}
			dst := make([]Expert, 3)
			for _, il := range []int{0, 2} {
				exps := []int{7, 0, 3}
				acquireChecked(t, c, layers, il, exps, dst)
			}
			st := c.Stats()
			require.Equal(t, int64(6), st.Misses)
			require.Equal(t, SlotBytes(layers), st.SlotBytes)
			require.Equal(t, 4, st.Slots)
			require.Positive(t, st.ReadP99)
			require.GreaterOrEqual(t, st.BytesRead, int64(3*(1500+1500+3000)+3*(777+777+999)))
			require.Zero(t, pinned(c))
		})
	}
}

func TestCacheArgumentErrors(t *testing.T) {
	path, layers := testFile(t, t.TempDir())
	_, err := Open(path, layers, Options{Slots: 0})
	require.Error(t, err)
	bad := append([]Layer(nil), layers...)
	bad[2].Down.Bytes = 5000
	_, err = Open(path, bad, Options{Slots: 1})
	require.ErrorContains(t, err, "outside the file")
	c, err := Open(path, layers, Options{Slots: 2})
	require.NoError(t, err)
	defer c.Close()
	dst := make([]Expert, 3)
	require.ErrorContains(t, c.Acquire(0, []int{0, 1, 2}, dst), "holds 2")
	require.Error(t, c.Acquire(0, []int{1, 1}, dst))
	require.Error(t, c.Acquire(0, []int{8}, dst))
	require.Error(t, c.Acquire(1, []int{0}, dst))
	require.Error(t, c.Acquire(3, []int{0}, dst))
	require.Zero(t, pinned(c))
}

// TestCacheEvictsLRU runs a 2-slot cache through a sequence whose hits
// and misses only least-recently-used eviction explains.
func TestCacheEvictsLRU(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 2, Policy: LRU})
	dst := make([]Expert, 2)
	steps := []struct {
		il   int
		exps []int
		hits int64 // cumulative
	}{
		{0, []int{0, 1}, 0},
		{0, []int{0}, 1}, // 1 is now the least recently used
		{0, []int{2}, 1}, // evicts 1
		{0, []int{0}, 2},
		{0, []int{1}, 2}, // evicts 2
		{2, []int{1}, 2}, // another layer's expert 1: evicts 0
		{0, []int{1}, 3},
		{0, []int{0, 2}, 3},
	}
	for i, st := range steps {
		acquireChecked(t, c, layers, st.il, st.exps, dst, "step %d", i)
		require.Equal(t, st.hits, c.Stats().Hits, "step %d", i)
	}
	require.Equal(t, int64(10-3), c.Stats().Misses)
}

// TestCacheEvictsLFU checks the frequency-aware policy keeps an expert
// asked often over one asked once more recently.
func TestCacheEvictsLFU(t *testing.T) {
	path, layers := testFile(t, t.TempDir())
	for _, pol := range []Policy{LRU, LFU} {
		c, err := Open(path, layers, Options{Slots: 2, Policy: pol})
		require.NoError(t, err)
		dst := make([]Expert, 1)
		for _, e := range []int{0, 0, 0, 1, 2, 0} {
			acquireChecked(t, c, layers, 0, []int{e}, dst)
		}
		// LFU keeps 0 when 2 comes; LRU evicts it.
		want := map[Policy]int64{LRU: 2, LFU: 3}[pol]
		require.Equal(t, want, c.Stats().Hits, "%v", pol)
		require.NoError(t, c.Close())
	}
}

// TestCacheEvictsLayered checks the default policy evicts experts of
// the layer whose turn comes last: after layer 2, layer 0 comes next.
func TestCacheEvictsLayered(t *testing.T) {
	c, _, _ := openTestCache(t, Options{Slots: 3})
	dst := make([]Expert, 2)
	steps := []struct {
		il   int
		exps []int
		hits int64 // cumulative
	}{
		{0, []int{0}, 0},
		{2, []int{0, 1}, 0},
		{2, []int{2}, 0}, // evicts a layer 2 expert (LRU: layer 0's)
		{0, []int{0}, 1},
	}
	for i, st := range steps {
		require.NoError(t, c.Acquire(st.il, st.exps, dst), "step %d", i)
		c.Release(st.il, st.exps)
		require.Equal(t, st.hits, c.Stats().Hits, "step %d", i)
	}
}

// TestCachePinnedNeverEvicted holds one expert while others stream
// through the remaining slot, and checks an Acquire needing the pinned
// slot waits for its Release.
func TestCachePinnedNeverEvicted(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 2})
	held := make([]Expert, 1)
	require.NoError(t, c.Acquire(0, []int{5}, held))
	dst := make([]Expert, 2)
	for e := range 8 {
		if e == 5 {
			continue
		}
		require.NoError(t, c.Acquire(2, []int{e}, dst))
		c.Release(2, []int{e})
		checkView(t, layers[0], 5, held[0])
	}
	done := make(chan error)
	go func() {
		err := c.Acquire(0, []int{1, 2}, dst)
		if err == nil {
			c.Release(0, []int{1, 2})
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Acquire of 2 experts returned (%v) while 1 of 2 slots was pinned", err)
	default:
	}
	checkView(t, layers[0], 5, held[0])
	c.Release(0, []int{5})
	require.NoError(t, <-done)
	require.Zero(t, pinned(c))
}

// TestCacheConcurrent acquires and releases random experts from several
// goroutines (run it with -race), checking every view.
func TestCacheConcurrent(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 6, Direct: true, Readers: 3})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			dst := make([]Expert, 3)
			for range 300 {
				il := []int{0, 2}[r.IntN(2)]
				exps := r.Perm(8)[:1+r.IntN(3)]
				if err := c.Acquire(il, exps, dst); err != nil {
					t.Error(err)
					return
				}
				for i, e := range exps {
					checkView(t, layers[il], e, dst[i])
				}
				_ = c.Stats()
				c.Release(il, exps)
			}
		})
	}
	wg.Wait()
	require.Zero(t, pinned(c))
	st := c.Stats()
	require.Positive(t, st.Hits)
	require.Positive(t, st.Misses)
}

// TestCacheNoLeakedSlots runs 10,000 random acquires and releases, then
// checks no slot stayed pinned and the whole capacity can be acquired.
func TestCacheNoLeakedSlots(t *testing.T) {
	c, _, _ := openTestCache(t, Options{Slots: 3})
	r := rand.New(rand.NewPCG(7, 7))
	dst := make([]Expert, 3)
	asked := int64(3)
	for range 10000 {
		il := []int{0, 2}[r.IntN(2)]
		exps := r.Perm(8)[:1+r.IntN(3)]
		asked += int64(len(exps))
		require.NoError(t, c.Acquire(il, exps, dst))
		c.Release(il, exps)
	}
	require.Zero(t, pinned(c))
	require.NoError(t, c.Acquire(2, []int{5, 6, 7}, dst))
	require.Equal(t, 3, pinned(c))
	c.Release(2, []int{5, 6, 7})
	st := c.Stats()
	require.Equal(t, asked, st.Hits+st.Misses)
	require.Equal(t, 3, st.Slots)
}

// TestCacheTruncatedFile truncates the file under an open cache: reading
// the experts that lay past the new end fails with an error naming the
// layer, the expert and the offset and pins nothing; the others still
// read, and the failed ones read again once the file is whole.
func TestCacheTruncatedFile(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			path, layers := testFile(t, t.TempDir())
			whole, err := os.ReadFile(path)
			require.NoError(t, err)
			c, err := Open(path, layers, Options{Slots: 3, Direct: direct})
			require.NoError(t, err)
			defer c.Close()
			dst := make([]Expert, 3)
			require.NoError(t, os.Truncate(path, 70005+6*999+10)) // cuts layer 2's experts 6 and 7
			err = c.Acquire(2, []int{1, 7}, dst)
			require.ErrorContains(t, err, "layer 2 expert 7")
			require.ErrorContains(t, err, fmt.Sprint("offset ", 70005+7*999))
			require.ErrorContains(t, err, "truncated")
			require.Zero(t, pinned(c))
			require.Error(t, c.Acquire(2, []int{6}, dst))
			require.Zero(t, pinned(c))
			for _, il := range []int{0, 2} {
				exps := []int{0, 1, 2}
				acquireChecked(t, c, layers, il, exps, dst)
			}
			require.NoError(t, os.WriteFile(path, whole, 0o644))
			acquireChecked(t, c, layers, 2, []int{6, 7}, dst)
			require.Zero(t, pinned(c))
		})
	}
}

// TestCacheDirectFallback asks for O_DIRECT on a file system that
// refuses it (tmpfs on older kernels; refused here by the opener): the
// cache falls back to buffered reads and says so.
func TestCacheDirectFallback(t *testing.T) {
	refuse := func(string) *os.File { return nil }
	dir := t.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "expertcache"); err == nil {
		defer os.RemoveAll(shm)
		dir = shm
	}
	path, layers := testFile(t, dir)
	c, err := open(path, layers, Options{Slots: 2, Direct: true}, refuse)
	require.NoError(t, err)
	defer c.Close()
	require.False(t, c.Stats().Direct)
	dst := make([]Expert, 2)
	acquireChecked(t, c, layers, 0, []int{3, 4}, dst)
	require.Equal(t, int64(2*(1500+1500+3000)), c.Stats().BytesRead, "buffered reads read no padding")
	if fd := openDirect(path); fd != nil {
		fd.Close()
		t.Logf("%s accepts O_DIRECT", dir)
	}
}

// TestCacheDirectInUse checks Stats reports O_DIRECT where the file
// system accepts it, and that direct reads count their padding.
func TestCacheDirectInUse(t *testing.T) {
	path, layers := testFile(t, t.TempDir())
	fd := openDirect(path)
	if fd == nil {
		t.Skip("the temporary directory's file system refuses O_DIRECT")
	}
	fd.Close()
	c, err := Open(path, layers, Options{Slots: 2, Direct: true})
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.Stats().Direct)
	dst := make([]Expert, 1)
	require.NoError(t, c.Acquire(0, []int{3}, dst))
	checkView(t, layers[0], 3, dst[0])
	c.Release(0, []int{3})
	require.Equal(t, int64(4*align), c.Stats().BytesRead, "expert 3's down spans two blocks")
}

// TestCachePrefetch checks prefetched experts are then acquired as hits
// with the right bytes, and a prefetch's read error reaches the Acquire
// that waits on it.
func TestCachePrefetch(t *testing.T) {
	path, layers := testFile(t, t.TempDir())
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := Open(path, layers, Options{Slots: 4})
	require.NoError(t, err)
	defer c.Close()
	c.Prefetch(2, []int{1, 5, 1, 9, -1})
	dst := make([]Expert, 2)
	require.NoError(t, c.Acquire(2, []int{5, 1}, dst))
	checkView(t, layers[2], 5, dst[0])
	checkView(t, layers[2], 1, dst[1])
	c.Release(2, []int{5, 1})
	st := c.Stats()
	require.Equal(t, [4]int64{2, 0, 2, 2}, [4]int64{st.Hits, st.Misses, st.Prefetched, st.PrefetchUsed})
	c.Prefetch(2, []int{3})
	require.NoError(t, c.Acquire(2, []int{5, 3}, dst))
	c.Release(2, []int{5, 3})
	st = c.Stats()
	require.Equal(t, [4]int64{4, 0, 3, 3}, [4]int64{st.Hits, st.Misses, st.Prefetched, st.PrefetchUsed}, "a prefetch counts as used once")

	require.NoError(t, os.Truncate(path, 70005+6*999+10))
	c.Prefetch(2, []int{7})
	err = c.Acquire(2, []int{7}, dst)
	require.ErrorContains(t, err, "layer 2 expert 7")
	require.ErrorContains(t, err, "truncated")
	require.Zero(t, pinned(c))
	require.NoError(t, os.WriteFile(path, whole, 0o644))
	c.Prefetch(2, []int{7})
	require.NoError(t, c.Acquire(2, []int{7}, dst))
	checkView(t, layers[2], 7, dst[0])
	c.Release(2, []int{7})
	require.Zero(t, pinned(c))
}

// TestCachePrefetchKeepsSoonerLayers checks that with the Layered
// policy a prefetch evicts no expert needed before its own layer's, nor
// a pinned one.
func TestCachePrefetchKeepsSoonerLayers(t *testing.T) {
	c, _, _ := openTestCache(t, Options{Slots: 2})
	dst := make([]Expert, 1)
	require.NoError(t, c.Acquire(2, []int{0}, dst))
	c.Release(2, []int{0})
	require.NoError(t, c.Acquire(0, []int{0}, dst)) // pinned
	// The layer being run is 0: layer 2 comes before layer 0 again.
	c.Prefetch(0, []int{3, 4})
	c.Release(0, []int{0})
	st := c.Stats()
	require.Zero(t, st.Prefetched)
	require.NoError(t, c.Acquire(2, []int{0}, dst))
	c.Release(2, []int{0})
	require.Equal(t, int64(1), c.Stats().Hits)
}

// TestCachePrefetchOwnLayer checks that with the Layered policy a
// prefetch of a layer may evict that layer's other experts, as its
// Acquire would, but not the ones asked for.
func TestCachePrefetchOwnLayer(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 3})
	dst := make([]Expert, 3)
	acquireChecked(t, c, layers, 2, []int{0, 1, 2}, dst) // the cache holds layer 2's 0, 1, 2
	c.Prefetch(2, []int{0, 5, 2})
	c.bg.Wait()
	st := c.Stats()
	require.Equal(t, int64(1), st.Prefetched, "expert 5 evicts expert 1, not 0 or 2")
	acquireChecked(t, c, layers, 2, []int{0, 5, 2}, dst)
	st = c.Stats()
	require.Equal(t, [3]int64{3, 3, 1}, [3]int64{st.Hits, st.Misses, st.Prefetched})
}

// TestCachePrefetchKnownLayers checks that a prefetch may evict the
// experts of an earlier layer that a Prefetch asked for others of since
// its last turn (its needs are known; the rest wait for a later pass),
// but never those asked for.
func TestCachePrefetchKnownLayers(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 3})
	dst := make([]Expert, 2)
	acquireChecked(t, c, layers, 0, []int{0, 1}, dst)
	require.NoError(t, c.Acquire(2, []int{0}, dst)) // pinned; layer 0 runs next
	c.Prefetch(0, []int{0})                         // layer 0 will want 0, not 1
	c.Prefetch(2, []int{3, 4})                      // 3 may take 1's slot; 4 finds none
	c.bg.Wait()
	c.Release(2, []int{0})
	require.Equal(t, int64(1), c.Stats().Prefetched)
	acquireChecked(t, c, layers, 0, []int{0}, dst)
	acquireChecked(t, c, layers, 2, []int{3}, dst)
	st := c.Stats()
	require.Equal(t, [3]int64{2, 3, 1}, [3]int64{st.Hits, st.Misses, st.Prefetched})
}

// TestCachePrefetchFirstPass checks that before any layer has run a
// forward pass starts at layer 0: the first evaluation's prefetches of
// later layers do not evict layer 0's, whose reads have already ended.
func TestCachePrefetchFirstPass(t *testing.T) {
	c, _, _ := openTestCache(t, Options{Slots: 2})
	c.Prefetch(0, []int{1, 2})
	c.bg.Wait() // layer 0's experts are resident and unpinned
	c.Prefetch(2, []int{3, 4})
	c.bg.Wait()
	dst := make([]Expert, 2)
	require.NoError(t, c.Acquire(0, []int{1, 2}, dst))
	c.Release(0, []int{1, 2})
	st := c.Stats()
	require.Equal(t, [3]int64{2, 0, 2}, [3]int64{st.Hits, st.Misses, st.Prefetched})
}

// TestCachePrefetchOrder checks that prefetched experts are read in the
// order asked, across calls and layers, so that the layer that runs first
// gets its experts first.
func TestCachePrefetchOrder(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 8, Readers: 1})
	var order [][2]int
	c.onRead = func(il, e int, _ bool) { order = append(order, [2]int{il, e}) } // one reader: no race
	c.Prefetch(0, []int{1, 2})
	c.Prefetch(2, []int{3})
	c.Prefetch(0, []int{4, 1})
	c.Prefetch(2, []int{0})
	c.bg.Wait()
	require.Equal(t, [][2]int{{0, 1}, {0, 2}, {2, 3}, {0, 4}, {2, 0}}, order)
	dst := make([]Expert, 3)
	acquireChecked(t, c, layers, 0, []int{4, 2, 1}, dst)
	acquireChecked(t, c, layers, 2, []int{0, 3}, dst)
	st := c.Stats()
	require.Equal(t, [3]int64{5, 0, 5}, [3]int64{st.Hits, st.Misses, st.Prefetched})
}

// TestCacheBusy checks that Stats.Busy counts the time reads are in
// flight once however many run at once: at least the reads' time one
// after the other, no more than the wall time with several together, and
// nothing while every expert hits.
func TestCacheBusy(t *testing.T) {
	const pause = 5 * time.Millisecond
	for _, readers := range []int{1, 3} {
		c, _, layers := openTestCache(t, Options{Slots: 8, Readers: readers})
		c.onRead = func(int, int, bool) { time.Sleep(pause) }
		dst := make([]Expert, 3)
		start := time.Now()
		acquireChecked(t, c, layers, 2, []int{0, 4, 6}, dst)
		wall := time.Since(start)
		busy := c.Stats().Busy
		require.LessOrEqual(t, busy, wall, "readers %d", readers)
		require.GreaterOrEqual(t, busy, 3*pause/time.Duration(readers), "readers %d", readers)
		acquireChecked(t, c, layers, 2, []int{6, 0}, dst)
		require.Equal(t, busy, c.Stats().Busy, "readers %d: hits read nothing", readers)
		require.Equal(t, time.Duration(0), c.Stats().Sub(c.Stats()).Busy)
	}
}

// TestCacheAcquireTakesQueued checks that an Acquire of experts whose
// prefetch has not started reads them itself, with the right bytes, and
// that the queue's pins are dropped once read.
func TestCacheAcquireTakesQueued(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 8, Readers: 1})
	started, resume := make(chan int, 8), make(chan struct{})
	c.onRead = func(_, e int, ahead bool) {
		if !ahead {
			return
		}
		started <- e
		<-resume
	}
	c.Prefetch(2, []int{1, 2, 3})
	require.Equal(t, 1, <-started) // the one reader holds expert 1's read
	dst := make([]Expert, 2)
	require.NoError(t, c.Acquire(2, []int{3, 5}, dst))
	checkView(t, layers[2], 3, dst[0])
	checkView(t, layers[2], 5, dst[1])
	c.Release(2, []int{3, 5})
	close(resume)
	c.bg.Wait()
	require.Equal(t, 2, <-started)
	require.Empty(t, started, "expert 3 was read by the Acquire, not the queue")
	require.Zero(t, pinned(c))
	acquireChecked(t, c, layers, 2, []int{1, 2}, dst)
	st := c.Stats()
	require.Equal(t, [3]int64{3, 1, 3}, [3]int64{st.Hits, st.Misses, st.Prefetched})
}

// TestCacheArrived checks that Request and Arrived hand experts over as
// they become resident: the resident one at once, each missing one as its
// read ends, with the right bytes, and nothing pinned after Release.
func TestCacheArrived(t *testing.T) {
	c, _, layers := openTestCache(t, Options{Slots: 8, Readers: 1})
	dst := make([]Expert, 3)
	acquireChecked(t, c, layers, 2, []int{5}, dst)
	gate := make(chan struct{})
	c.onRead = func(int, int, bool) { <-gate } // one reader: reads end one by one
	exps := []int{3, 5, 1}
	require.NoError(t, c.Request(2, exps))
	got, fresh := make([]bool, 3), make([]int, 0, 3)
	fresh, err := c.Arrived(2, exps, dst, got, fresh[:0])
	require.NoError(t, err)
	require.Equal(t, []int{1}, fresh, "expert 5 was resident")
	checkView(t, layers[2], 5, dst[1])
	var order []int
	for range 2 {
		gate <- struct{}{}
		fresh, err = c.Arrived(2, exps, dst, got, fresh[:0])
		require.NoError(t, err)
		require.Len(t, fresh, 1, "the reads end one at a time")
		order = append(order, fresh[0])
	}
	require.Equal(t, []int{0, 2}, order, "read in the order asked")
	for i, e := range exps {
		checkView(t, layers[2], e, dst[i])
	}
	fresh, err = c.Arrived(2, exps, dst, got, fresh[:0])
	require.NoError(t, err)
	require.Empty(t, fresh)
	c.Release(2, exps)
	c.bg.Wait()
	require.Zero(t, pinned(c))
	st := c.Stats()
	require.Equal(t, [2]int64{1, 3}, [2]int64{st.Hits, st.Misses})
}

// TestCacheArrivedError checks that a read error reaches Arrived, naming
// the expert, after the request's other reads have ended, and leaves
// nothing pinned.
func TestCacheArrivedError(t *testing.T) {
	c, path, _ := openTestCache(t, Options{Slots: 4})
	require.NoError(t, os.Truncate(path, 70005+6*999+10)) // cuts layer 2's experts 6 and 7
	exps, dst, got := []int{1, 7, 2}, make([]Expert, 3), make([]bool, 3)
	require.NoError(t, c.Request(2, exps))
	var (
		fresh []int
		err   error
	)
	for err == nil && !(got[0] && got[1] && got[2]) {
		fresh, err = c.Arrived(2, exps, dst, got, fresh[:0])
	}
	require.ErrorContains(t, err, "layer 2 expert 7")
	require.False(t, got[1])
	require.Zero(t, pinned(c))
	_, err = c.Arrived(2, exps, dst[:1], got, nil)
	require.ErrorContains(t, err, "views")
}

// TestCachePrefetchConcurrent mixes prefetches, acquires and a Close
// with reads in flight (run it with -race).
func TestCachePrefetchConcurrent(t *testing.T) {
	path, layers := testFile(t, t.TempDir())
	c, err := Open(path, layers, Options{Slots: 5, Direct: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			dst := make([]Expert, 2)
			for range 200 {
				il := []int{0, 2}[r.IntN(2)]
				c.Prefetch(il, r.Perm(8)[:3])
				exps := r.Perm(8)[:1+r.IntN(2)]
				if err := c.Acquire(il, exps, dst); err != nil {
					t.Error(err)
					return
				}
				for i, e := range exps {
					checkView(t, layers[il], e, dst[i])
				}
				c.Release(il, exps)
			}
		})
	}
	wg.Wait()
	c.bg.Wait() // prefetches pin their slots while reading
	require.Zero(t, pinned(c))
	c.Prefetch(0, []int{0, 1, 2, 3, 4})
	require.NoError(t, c.Close())
	c.Prefetch(0, []int{5})
}

// TestCacheAcquireHitsAllocateNothing checks that acquiring resident
// experts allocates nothing, at once or through Request and Arrived, as a
// decode step needs.
func TestCacheAcquireHitsAllocateNothing(t *testing.T) {
	c, _, _ := openTestCache(t, Options{Slots: 4})
	exps, dst := []int{1, 2, 3}, make([]Expert, 3)
	require.NoError(t, c.Acquire(0, exps, dst))
	c.Release(0, exps)
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.Acquire(0, exps, dst); err != nil {
			t.Fatal(err)
		}
		c.Release(0, exps)
	})
	require.Zero(t, allocs)
	got, fresh := make([]bool, 3), make([]int, 0, 3)
	allocs = testing.AllocsPerRun(100, func() {
		if err := c.Request(0, exps); err != nil {
			t.Fatal(err)
		}
		clear(got)
		var err error
		if fresh, err = c.Arrived(0, exps, dst, got, fresh[:0]); err != nil || len(fresh) != 3 {
			t.Fatal(fresh, err)
		}
		c.Release(0, exps)
	})
	require.Zero(t, allocs)
}

// TestStatsHitRate checks HitRate, which counts every prefetch as a
// read, NeedRate, which counts only those an Acquire used, and Sub.
func TestStatsHitRate(t *testing.T) {
	for _, c := range []struct {
		name       string
		st         Stats
		hit, needs float64
	}{
		{"none", Stats{}, 0, 0},
		{"all hits", Stats{Hits: 10}, 1, 0},
		{"misses", Stats{Hits: 3, Misses: 1}, 0.75, 0.25},
		{"prefetched hits were read", Stats{Hits: 8, Misses: 2, Prefetched: 4, PrefetchUsed: 4}, 0.4, 0.6},
		{"a prefetch unused", Stats{Hits: 8, Misses: 2, Prefetched: 4, PrefetchUsed: 3}, 0.4, 0.5},
		{"prefetches never used", Stats{Hits: 1, Misses: 1, Prefetched: 5}, 0, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.st.HitRate(); math.Abs(got-c.hit) > 1e-12 {
				t.Errorf("HitRate = %v, want %v", got, c.hit)
			}
			if got := c.st.NeedRate(); math.Abs(got-c.needs) > 1e-12 {
				t.Errorf("NeedRate = %v, want %v", got, c.needs)
			}
		})
	}
	d := Stats{Hits: 9, Misses: 4, Prefetched: 2, PrefetchUsed: 2, BytesRead: 700, Slots: 3}.Sub(Stats{Hits: 4, Misses: 1, Prefetched: 1, PrefetchUsed: 1, BytesRead: 100, Slots: 3})
	if d != (Stats{Hits: 5, Misses: 3, Prefetched: 1, PrefetchUsed: 1, BytesRead: 600, Slots: 3}) {
		t.Errorf("Sub = %+v", d)
	}
}
