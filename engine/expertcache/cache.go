// Package expertcache keeps a bounded set of a model's routed experts in
// memory and reads the others from the model file on demand: the expert
// cache of SSD streaming (docs/streaming.md).
//
// A slot holds one expert's gate, up and down slices of one layer. The
// cache's memory is one buffer of Slots·SlotBytes allocated at Open, on
// transparent huge pages where the kernel grants them, into which direct
// reads go as far fewer device requests than into small pages; it never
// grows. Request pins a set of experts and starts reading the missing
// ones with positioned reads straight into free slots (O_DIRECT where the
// file system allows it); Arrived hands them over as they become
// resident, and Release unpins them.
// Eviction takes an unpinned slot by Options.Policy: by default one of the
// layer whose turn in the cycle over the layers comes last.
package expertcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ds4-go/ds4/internal/mmap"
)

// Span is one expert's slice of one tensor in the file.
type Span struct{ Offset, Bytes int64 }

// Layer gives the slices of expert 0 of one layer's three routed-expert
// tensors; expert e's slice of a tensor starts at Offset + e·Bytes. A
// layer with no routed experts has Experts == 0.
type Layer struct {
	Gate, Up, Down Span
	Experts        int
}

// Options configure a cache.
type Options struct {
	Slots   int    // capacity in experts, at least 1
	Direct  bool   // read with O_DIRECT where the file system allows it
	Readers int    // positioned reads in flight; 0 means DefaultReaders
	Policy  Policy // which unpinned slot a miss takes; the zero value is Layered
}

// DefaultReaders is how many reads a cache runs at once unless told:
// few, so that the queue's first experts, which the next layer waits
// for, arrive first. One expert's read is already large (7 MB on Flash
// q2), which the kernel splits into many requests in flight on the
// device; on the disks measured (docs/streaming.md#prefetch), more reads
// at once did not read faster and delayed the first ones.
const DefaultReaders = 2

// Policy is an eviction policy: which unpinned slot a miss refills.
type Policy int

const (
	// Layered, the default, evicts an expert of the layer whose turn
	// comes last in the forward pass's cycle over the layers (the layer
	// being acquired, then the one before it...), the least recently used
	// among equals. For a cycle over more experts than the cache holds it
	// keeps what the next layers need where LRU keeps nothing; measured
	// on the tiny model it had the best hit rate at every cache size
	// (docs/streaming.md#eviction).
	Layered Policy = iota
	// LRU evicts the least recently used expert.
	LRU
	// LFU evicts the expert asked least often lately (counts halve every
	// 8·Slots experts asked), the least recently used among equals.
	LFU
)

func (p Policy) String() string {
	switch p {
	case LRU:
		return "lru"
	case LFU:
		return "lfu"
	case Layered:
		return "layered"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Expert is a resident expert's gate, up and down bytes, valid until the
// Release that matches the Request (or Acquire) that pinned it.
type Expert struct{ Gate, Up, Down []byte }

// Stats are a cache's counters since Open. An expert Prefetch read ahead
// counts as a hit when acquired, so Hits/(Hits+Misses) is the share of
// acquired experts no Request had to wait to read; the experts read from
// the file are Misses+Prefetched.
type Stats struct {
	Hits, Misses     int64         // experts a Request found resident (or being prefetched) or had to read
	Prefetched       int64         // experts read by Prefetch
	PrefetchUsed     int64         // prefetched experts a Request then asked for
	BytesRead        int64         // bytes read from the file (alignment padding included)
	ReadP50, ReadP99 time.Duration // latency of one expert's read, over recent reads
	Busy             time.Duration // time during which at least one read was in flight
	Direct           bool          // whether reads bypass the page cache (O_DIRECT)
	Slots            int
	SlotBytes        int64
}

// align is the alignment of O_DIRECT offsets, lengths and buffers: the
// logical block size of every common file system is a divisor of it.
const align = 4096

// latencies is how many recent read latencies Stats' percentiles cover.
const latencies = 4096

func alignDown(n int64) int64 { return n &^ (align - 1) }
func alignUp(n int64) int64   { return (n + align - 1) &^ (align - 1) }

// spanRoom is the bytes a slot reserves for a slice of b bytes read with
// aligned offsets and lengths: its aligned length plus one block of slack
// for a start that is not aligned.
func spanRoom(b int64) int64 {
	if b == 0 {
		return 0
	}
	return alignUp(b) + align
}

// SlotBytes returns the bytes of one slot for layers: the largest gate,
// up and down of any layer, each with room for aligned reads.
func SlotBytes(layers []Layer) int64 {
	var most int64
	for _, l := range layers {
		if l.Experts == 0 {
			continue
		}
		most = max(most, spanRoom(l.Gate.Bytes)+spanRoom(l.Up.Bytes)+spanRoom(l.Down.Bytes))
	}
	return most
}

// slot states.
const (
	slotEmpty   = iota
	slotLoading // pinned by the caller reading it
	slotReady
	slotFailed // its read failed; kept until its waiters unpin it
)

type slot struct {
	state int
	layer int
	exp   int
	pins  int
	used  uint64 // tick of the last Request that wanted it, for LRU
	ahead bool   // read by Prefetch and not yet acquired
	// wanted: asked for by a Prefetch and not yet acquired (or its
	// layer's turn came without it): a Prefetch never evicts it, and an
	// Request only when every unpinned slot is wanted.
	wanted bool
	view   Expert
	err    error // slotFailed: why
}

// Cache is an expert cache over one model file. Its methods are safe for
// concurrent use.
type Cache struct {
	path      string
	layers    []Layer
	slotBytes int64
	readers   int
	buf       []byte
	free      func() error

	mu        sync.Mutex
	cond      *sync.Cond
	direct    *os.File // nil when O_DIRECT is off or was refused
	plain     *os.File
	slots     []slot
	where     [][]int32 // layer, expert → slot, -1 when not resident
	policy    Policy
	cur       int        // the layer being acquired, for Layered
	freq      [][]uint32 // LFU: layer, expert → times asked lately
	asked     int        // LFU: experts asked since the counts last halved
	tick      uint64
	closed    bool
	hits      int64
	misses    int64
	fetched   int64                       // experts read by Prefetch
	usedAhead int64                       // of those, experts a Request then asked for
	queue     []queued                    // Prefetch's reads not started yet, in the order asked
	known     []bool                      // per layer: a Prefetch asked for its experts since its last Request
	active    int                         // Prefetch's readers running
	onRead    func(il, e int, ahead bool) // tests: called as a read starts, ahead for Prefetch's
	bg        sync.WaitGroup              // the readers of Prefetch and of Request
	read      int64
	reading   int             // reads in flight
	busySince time.Time       // when reading last rose from 0
	busy      time.Duration   // time with reads in flight, until busySince
	lat       []time.Duration // ring of recent read latencies
	latNext   int
}

// Open opens the model file at path for reading layers' experts into a
// cache of opt.Slots slots.
func Open(path string, layers []Layer, opt Options) (*Cache, error) {
	return open(path, layers, opt, openDirect)
}

// open is Open with the function that opens path for O_DIRECT reads, or
// returns nil where the file system refuses them.
func open(path string, layers []Layer, opt Options, openDirect func(string) *os.File) (*Cache, error) {
	if opt.Slots < 1 {
		return nil, fmt.Errorf("expertcache: %d slots, want at least 1", opt.Slots)
	}
	if opt.Readers <= 0 {
		opt.Readers = DefaultReaders
	}
	sb := SlotBytes(layers)
	if sb == 0 {
		return nil, errors.New("expertcache: no layer has routed experts")
	}
	plain, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("expertcache: %w", err)
	}
	st, err := plain.Stat()
	if err != nil {
		plain.Close()
		return nil, fmt.Errorf("expertcache: %w", err)
	}
	for il, l := range layers {
		for _, s := range []Span{l.Gate, l.Up, l.Down} {
			if l.Experts > 0 && (s.Offset < 0 || s.Bytes <= 0 || s.Offset+int64(l.Experts)*s.Bytes > st.Size()) {
				plain.Close()
				return nil, fmt.Errorf("expertcache: %s: layer %d: experts at %d+%d×%d outside the file's %d bytes", path, il, s.Offset, l.Experts, s.Bytes, st.Size())
			}
		}
	}
	// Anon faults the slots in now, not while a step waits on a read, and
	// a cache too large for the memory shows at start rather than in the
	// middle of a request.
	buf, free, err := mmap.Anon(int(int64(opt.Slots) * sb))
	if err != nil {
		plain.Close()
		return nil, fmt.Errorf("expertcache: %d slots of %d bytes: %w", opt.Slots, sb, err)
	}
	c := &Cache{path: path, layers: slices.Clone(layers), slotBytes: sb, readers: opt.Readers, buf: buf, free: free, plain: plain,
		slots: make([]slot, opt.Slots), where: make([][]int32, len(layers)), known: make([]bool, len(layers)), lat: make([]time.Duration, 0, latencies)}
	c.cond = sync.NewCond(&c.mu)
	// Until a layer is acquired, the pass to come starts at layer 0.
	c.policy, c.cur = opt.Policy, len(layers)-1
	if opt.Policy == LFU {
		c.freq = make([][]uint32, len(layers))
	}
	for il, l := range layers {
		if c.freq != nil {
			c.freq[il] = make([]uint32, l.Experts)
		}
		c.where[il] = make([]int32, l.Experts)
		for e := range c.where[il] {
			c.where[il][e] = -1
		}
	}
	if opt.Direct {
		c.direct = openDirect(path) // nil where the file system refuses
	}
	return c, nil
}

// Close releases the cache's memory and file; no view may be used after,
// and no Request may run during it.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.bg.Wait() // Prefetch's reads write into the buffer
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.plain.Close()
	if c.direct != nil {
		err = errors.Join(err, c.direct.Close())
	}
	c.slots, c.where = nil, nil
	c.cond.Broadcast()
	return errors.Join(err, c.free())
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	st := Stats{Hits: c.hits, Misses: c.misses, Prefetched: c.fetched, PrefetchUsed: c.usedAhead, BytesRead: c.read, Busy: c.busy, Direct: c.direct != nil, Slots: len(c.slots), SlotBytes: c.slotBytes}
	if c.reading > 0 {
		st.Busy += time.Since(c.busySince)
	}
	lat := slices.Clone(c.lat)
	c.mu.Unlock()
	if len(lat) > 0 {
		slices.Sort(lat)
		st.ReadP50 = lat[(len(lat)-1)*50/100]
		st.ReadP99 = lat[(len(lat)-1)*99/100]
	}
	return st
}

// Prefetch starts reading those of layer il's experts that are not
// resident into free slots, without waiting for the reads or pinning the
// experts: a Request of them soon after finds them resident, or waits
// for the read in flight, or reads them itself if their turn has not
// come. The reads start in the order Prefetch asked for them, after
// those asked before, at most Options.Readers at once. The experts
// asked for, read or resident, are held until their layer's Request: no
// Prefetch evicts them, and a Request only when nothing else is left.
// It reads only as many as it can place without evicting a held expert
// or, under Layered, one of a layer that runs before il and whose
// experts no Prefetch has asked for since its last Request; it ignores
// experts out of range.
func (c *Cache) Prefetch(il int, experts []int) {
	if il < 0 || il >= len(c.layers) {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	// The experts asked for that are resident stay until their Request.
	for _, e := range experts {
		if e >= 0 && e < c.layers[il].Experts {
			if si := c.where[il][e]; si >= 0 {
				c.slots[si].wanted = true
			}
		}
	}
	c.known[il] = true
	for _, e := range experts {
		if e < 0 || e >= c.layers[il].Experts || c.where[il][e] >= 0 {
			continue
		}
		si := c.choose(il)
		if si < 0 {
			break // every slot is pinned, wanted or needed before il
		}
		s := &c.slots[si]
		if s.state != slotEmpty {
			c.where[s.layer][s.exp] = -1
		}
		c.tick++
		*s = slot{state: slotLoading, layer: il, exp: e, pins: 1, used: c.tick, ahead: true, wanted: true}
		c.where[il][e] = int32(si)
		c.fetched++
		c.queue = append(c.queue, queued{il: il, ld: load{s: si, exp: e}})
	}
	for c.active < c.readers && c.active < len(c.queue) {
		c.active++
		c.bg.Add(1)
		go c.prefetchReader()
	}
	c.mu.Unlock()
}

// queued is a read Prefetch asked for: expert ld.exp of layer il into
// slot ld.s, which it pins.
type queued struct {
	il int
	ld load
}

// prefetchReader reads the queue's experts, first asked first read,
// until the queue is empty. Reading in the order asked, rather than all
// at once, finishes the reads of the layer that runs first first: a
// layer's Request waits only for its own experts, not for a share of the
// disk with later layers'.
func (c *Cache) prefetchReader() {
	defer c.bg.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) > 0 && !c.closed {
		q := c.queue[0]
		c.queue = slices.Delete(c.queue, 0, 1)
		c.readCounted(q.il, &q.ld, true)
	}
	c.active--
}

// takeQueued moves the reads of layer il's experts still in Prefetch's
// queue to loads: the Request that wants them reads them at once rather
// than wait for their turn. They keep the queue's pin, which their reader
// drops; c.mu is held.
func (c *Cache) takeQueued(il int, experts []int, loads []load) []load {
	c.queue = slices.DeleteFunc(c.queue, func(q queued) bool {
		if q.il != il || !slices.Contains(experts, q.ld.exp) {
			return false
		}
		loads = append(loads, q.ld)
		return true
	})
	return loads
}

// distance is how many layers the forward pass runs, after the layer
// being acquired, before layer il's turn: the Layered policy's order.
func (c *Cache) distance(il int) int {
	n := len(c.layers)
	return (il - c.cur - 1 + n) % n
}

// readCounted reads ld, an expert of layer il (ahead: for Prefetch), for one
// of the readers, counting the time reads are in flight; c.mu is held,
// and released during the read.
func (c *Cache) readCounted(il int, ld *load, ahead bool) {
	if c.reading == 0 {
		c.busySince = time.Now()
	}
	c.reading++
	c.mu.Unlock()
	if c.onRead != nil {
		c.onRead(il, ld.exp, ahead)
	}
	c.readOne(il, ld)
	c.mu.Lock()
	if c.reading--; c.reading == 0 {
		c.busy += time.Since(c.busySince)
	}
	c.finish(ld)
}

// finish marks ld's slot ready, or failed, counts its read, drops its
// reader's pin and wakes the waiters; c.mu is held.
func (c *Cache) finish(ld *load) {
	s := &c.slots[ld.s]
	if ld.err != nil {
		s.state, s.err = slotFailed, ld.err
	} else {
		s.state, s.view = slotReady, ld.view
		c.read += ld.bytes
		c.record(ld.dur)
	}
	s.pins--
	c.cond.Broadcast()
}

// load is one expert to read into slot s.
type load struct {
	s     int
	exp   int
	view  Expert
	err   error
	dur   time.Duration
	bytes int64 // read from the file, alignment padding included
}

// Acquire makes layer il's experts resident, pins them and sets dst[i] to
// expert experts[i]'s bytes, valid until Release(il, experts): Request,
// then a wait for every read. On a read error no expert stays pinned and
// the error names the layer, the expert and the offset.
func (c *Cache) Acquire(il int, experts []int, dst []Expert) error {
	if len(dst) < len(experts) {
		return fmt.Errorf("expertcache: %d views for %d experts", len(dst), len(experts))
	}
	if err := c.Request(il, experts); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return errors.New("expertcache: closed")
		}
		waiting := false
		for _, e := range experts {
			switch s := &c.slots[c.where[il][e]]; s.state {
			case slotFailed:
				return c.abandon(il, experts, s.err)
			case slotLoading:
				waiting = true
			}
		}
		if !waiting {
			break
		}
		c.cond.Wait()
	}
	for i, e := range experts {
		dst[i] = c.slots[c.where[il][e]].view
	}
	return nil
}

// Request pins layer il's experts and starts reading the missing ones,
// at most Options.Readers at once beside Prefetch's reads, and returns
// without waiting for them: Arrived then hands the experts over as they
// become resident, so that a caller computes with the first while the
// others are read. The experts must be distinct and at most Slots; after
// every one has arrived, Release(il, experts) unpins them.
func (c *Cache) Request(il int, experts []int) error {
	if il < 0 || il >= len(c.layers) {
		return fmt.Errorf("expertcache: layer %d of %d", il, len(c.layers))
	}
	for i, e := range experts {
		if e < 0 || e >= c.layers[il].Experts {
			return fmt.Errorf("expertcache: layer %d: expert %d of %d", il, e, c.layers[il].Experts)
		}
		if slices.Contains(experts[:i], e) {
			return fmt.Errorf("expertcache: layer %d: expert %d asked twice", il, e)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(experts) > len(c.slots) {
		return fmt.Errorf("expertcache: %d experts asked at once, the cache holds %d", len(experts), len(c.slots))
	}
	var loads []load
	for {
		if c.closed {
			return errors.New("expertcache: closed")
		}
		var ok bool
		if loads, ok = c.claim(il, experts, loads[:0]); ok {
			break
		}
		c.cond.Wait() // too few unpinned slots: wait for a Release
	}
	// The reader holds a pin of its own on each slot it fills, as
	// Prefetch's do, so that an error that unpins the caller's experts
	// leaves no slot free while it is read into.
	for _, ld := range loads {
		c.slots[ld.s].pins++
	}
	if loads = c.takeQueued(il, experts, loads); len(loads) > 0 {
		c.bg.Add(1)
		go c.readLoads(il, loads)
	}
	return nil
}

// Arrived waits, after a Request of layer il's experts, until one of
// those got does not mark yet is resident; it then sets dst[i] and got[i]
// for each such expert resident now and returns their indices appended
// to fresh. Once got marks every expert it returns at once with none. On
// a read error no expert stays pinned, none is to be released, and the
// error names the layer, the expert and the offset.
func (c *Cache) Arrived(il int, experts []int, dst []Expert, got []bool, fresh []int) ([]int, error) {
	if len(dst) < len(experts) || len(got) < len(experts) {
		return fresh, fmt.Errorf("expertcache: %d views and %d marks for %d experts", len(dst), len(got), len(experts))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return fresh, errors.New("expertcache: closed")
		}
		n, waiting := len(fresh), false
		for i, e := range experts {
			if got[i] {
				continue
			}
			switch s := &c.slots[c.where[il][e]]; s.state {
			case slotFailed:
				return fresh[:n], c.abandon(il, experts, s.err)
			case slotLoading:
				waiting = true
			default:
				dst[i], got[i] = s.view, true
				fresh = append(fresh, i)
			}
		}
		if len(fresh) > n || !waiting {
			return fresh, nil
		}
		c.cond.Wait()
	}
}

// abandon waits for the reads of layer il's experts in flight, so that
// none outlives the failed call, unpins the experts and returns err; c.mu
// is held.
func (c *Cache) abandon(il int, experts []int, err error) error {
	for !c.closed && slices.ContainsFunc(experts, func(e int) bool { return c.slots[c.where[il][e]].state == slotLoading }) {
		c.cond.Wait()
	}
	if !c.closed {
		c.unpin(il, experts)
	}
	return err
}

// readLoads reads loads, at most c.readers at once, marking each slot
// ready (or failed) and dropping the reader's pin as its read ends.
func (c *Cache) readLoads(il int, loads []load) {
	defer c.bg.Done()
	one := func(ld *load) {
		c.mu.Lock()
		c.readCounted(il, ld, false)
		c.mu.Unlock()
	}
	if len(loads) == 1 {
		one(&loads[0])
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.readers)
	for i := range loads {
		sem <- struct{}{}
		wg.Go(func() {
			one(&loads[i])
			<-sem
		})
	}
	wg.Wait()
}

// claim pins experts' slots, choosing a victim slot (marked loading) for
// each missing one and appending it to loads. It pins nothing and returns
// false when too few slots are free; c.mu is held.
func (c *Cache) claim(il int, experts []int, loads []load) ([]load, bool) {
	need := 0
	for _, e := range experts {
		if c.where[il][e] < 0 {
			need++
		}
	}

	if need > 0 {
		free := 0
		for i := range c.slots {
			if c.slots[i].pins == 0 {
				free++
			}
		}
		// Resident experts asked for may sit in unpinned slots a victim
		// search must not take; count them out.
		for _, e := range experts {
			if si := c.where[il][e]; si >= 0 && c.slots[si].pins == 0 {
				free--
			}
		}
		if free < need {
			return loads, false
		}
	}
	c.tick++
	c.cur = il
	// Layer il's turn: what a Prefetch asked for of it is settled, taken
	// now or not at all.
	c.known[il] = false
	for i := range c.slots {
		if c.slots[i].layer == il {
			c.slots[i].wanted = false
		}
	}
	if c.freq != nil {
		for _, e := range experts {
			c.freq[il][e]++
		}
		if c.asked += len(experts); c.asked >= 8*len(c.slots) {
			c.asked = 0
			for _, f := range c.freq {
				for e := range f {
					f[e] /= 2
				}
			}
		}
	}
	// Resident experts first: pinned, no victim search can take them.
	for _, e := range experts {
		si := int(c.where[il][e])
		if si < 0 {
			continue
		}
		s := &c.slots[si]
		if s.state == slotFailed && s.pins == 0 {
			// Its last read failed and nobody waits on it: read again.
			*s = slot{state: slotLoading, layer: il, exp: e, pins: 1, used: c.tick}
			c.misses++
			loads = append(loads, load{s: si, exp: e})
			continue
		}
		s.pins++
		s.used = c.tick
		c.hits++
		if s.ahead {
			s.ahead = false
			c.usedAhead++
		}
	}
	for _, e := range experts {
		if c.where[il][e] >= 0 {
			continue
		}
		si := c.victim()
		s := &c.slots[si]
		if s.state != slotEmpty {
			c.where[s.layer][s.exp] = -1
		}
		*s = slot{state: slotLoading, layer: il, exp: e, pins: 1, used: c.tick}
		c.where[il][e] = int32(si)
		c.misses++
		loads = append(loads, load{s: si, exp: e})
	}
	return loads, true
}

// victim returns the unpinned slot a Request fills next: an empty one,
// else the one the policy evicts first, experts a Prefetch holds last;
// c.mu is held and one exists.
func (c *Cache) victim() int { return c.choose(-1) }

// choose returns an empty or failed unpinned slot, else the unpinned one
// the policy evicts first (evictsBefore). For a Prefetch of layer il (il
// >= 0) it skips the experts a Prefetch holds and, under the Layered
// policy, those of a layer that runs before il and whose experts no
// Prefetch has asked for since its last turn: they may be needed sooner.
// It returns -1 when no slot qualifies; c.mu is held.
func (c *Cache) choose(il int) int {
	best := -1
	for i := range c.slots {
		s := &c.slots[i]
		if s.pins != 0 {
			continue
		}
		if s.state == slotEmpty || s.state == slotFailed {
			return i
		}
		if il >= 0 && (s.wanted || (c.policy == Layered && s.layer != il && !c.known[s.layer] && c.distance(s.layer) < c.distance(il))) {
			continue
		}
		if best < 0 || c.evictsBefore(s, &c.slots[best]) {
			best = i
		}
	}
	return best
}

// evictsBefore reports whether the policy evicts a before b; c.mu is
// held.
func (c *Cache) evictsBefore(a, b *slot) bool {
	if a.wanted != b.wanted {
		return b.wanted // what a Prefetch holds goes last
	}
	if c.policy == Layered {
		// Layers after cur come soonest; cur itself comes last.
		if da, db := c.distance(a.layer), c.distance(b.layer); da != db {
			return da > db
		}
	}
	if c.freq != nil {
		fa, fb := c.freq[a.layer][a.exp], c.freq[b.layer][b.exp]
		if fa != fb {
			return fa < fb
		}
	}
	return a.used < b.used
}

// unpin drops one pin of each of layer il's experts that is resident;
// c.mu is held.
func (c *Cache) unpin(il int, experts []int) {
	for _, e := range experts {
		if si := c.where[il][e]; si >= 0 && c.slots[si].pins > 0 {
			c.slots[si].pins--
		}
	}
	c.cond.Broadcast()
}

// Release unpins layer il's experts after the Request that pinned them.
func (c *Cache) Release(il int, experts []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.unpin(il, experts)
}

// record adds a read latency to the ring; c.mu is held.
func (c *Cache) record(d time.Duration) {
	if len(c.lat) < latencies {
		c.lat = append(c.lat, d)
		return
	}
	c.lat[c.latNext] = d
	c.latNext = (c.latNext + 1) % latencies
}

// readOne reads one expert's three slices into its slot. The slot is
// loading and pinned by the caller, so nothing else touches its bytes.
func (c *Cache) readOne(il int, ld *load) {
	start := time.Now()
	l := c.layers[il]
	mem := c.buf[int64(ld.s)*c.slotBytes : int64(ld.s+1)*c.slotBytes]
	var views [3][]byte
	var at int64
	for i, sp := range []Span{l.Gate, l.Up, l.Down} {
		off := sp.Offset + int64(ld.exp)*sp.Bytes
		room := mem[at : at+spanRoom(sp.Bytes)]
		at += spanRoom(sp.Bytes)
		v, n, err := c.readSpan(room, off, sp.Bytes)
		ld.bytes += n
		if err != nil {
			ld.err = fmt.Errorf("expertcache: %s: layer %d expert %d: reading %d bytes at offset %d: %w", c.path, il, ld.exp, sp.Bytes, off, err)
			return
		}
		views[i] = v
	}
	ld.view = Expert{Gate: views[0], Up: views[1], Down: views[2]}
	ld.dur = time.Since(start)
}

// errShort reports a file shorter than the model's layout says: it was
// truncated or replaced after Open.
var errShort = errors.New("short read: the file was truncated or changed")

// readSpan reads the n bytes at off into room and returns them and the
// bytes it read.
func (c *Cache) readSpan(room []byte, off, n int64) ([]byte, int64, error) {
	if fd := c.direct; fd != nil {
		lo := alignDown(off)
		hi := alignUp(off + n)
		got, err := fd.ReadAt(room[:hi-lo], lo)
		if int64(got) >= off+n-lo {
			return room[off-lo : off-lo+n : off-lo+n], int64(got), nil
		}
		if err != nil && !isEOF(err) {
			return nil, int64(got), err
		}
		return nil, int64(got), errShort
	}
	got, err := c.plain.ReadAt(room[:n], off)
	if int64(got) == n {
		return room[:n:n], n, nil
	}
	if err != nil && !isEOF(err) {
		return nil, int64(got), err
	}
	return nil, int64(got), errShort
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// Sub returns the counters of s less those of before, the work between
// the two snapshots; the other fields are s's.
func (s Stats) Sub(before Stats) Stats {
	s.Hits -= before.Hits
	s.Misses -= before.Misses
	s.Prefetched -= before.Prefetched
	s.PrefetchUsed -= before.PrefetchUsed
	s.BytesRead -= before.BytesRead
	s.Busy -= before.Busy
	return s
}

// HitRate returns the share of the requested experts that needed
// no read from the file: an expert Prefetch read counts as read, since it
// cost the disk as much as a miss. It is 0 with no requests.
func (s Stats) HitRate() float64 {
	n := s.Hits + s.Misses
	if n <= 0 {
		return 0
	}
	return max(0, 1-float64(s.Misses+s.Prefetched)/float64(n))
}

// NeedRate returns the share of the requested experts that the cache had
// to read for them: the misses and the prefetched experts then
// requested, but not the prefetches no Request asked for (a wrong guess
// costs the disk a read that a perfect guess would not). It is 0 with
// no requests.
func (s Stats) NeedRate() float64 {
	n := s.Hits + s.Misses
	if n <= 0 {
		return 0
	}
	return min(1, float64(s.Misses+s.PrefetchUsed)/float64(n))
}
