package server

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
)

// Bounds of the tool-call replay memory (docs/formats/server.md#tool-call-replay-memory).
const (
	DefaultToolMemoryIDs   = 100000
	DefaultToolMemoryBytes = 512 << 20
	toolEntryOverhead      = 64 // accounted per id and per block besides its bytes
)

// toolMemory maps generated tool-call ids to the exact DSML block that was
// sampled for their turn, so that the next request renders the history
// byte for byte (docs/formats/server.md#tool-call-replay-memory). It is a bounded LRU over ids; blocks
// are shared by the ids of one turn and counted once. It is safe for
// concurrent use.
type toolMemory struct {
	mu       sync.Mutex
	maxIDs   int
	maxBytes int64
	bytes    int64
	ids      map[string]*list.Element // of *toolEntry
	lru      list.List                // front: most recently used
	blocks   map[string]*toolBlock
}

type toolEntry struct {
	id    string
	block *toolBlock
}

type toolBlock struct {
	text string
	ids  map[string]bool
}

// newToolMemory returns a memory bounded to maxIDs ids and maxBytes bytes;
// maxIDs ≤ 0 disables it.
func newToolMemory(maxIDs int, maxBytes int64) *toolMemory {
	return &toolMemory{maxIDs: maxIDs, maxBytes: maxBytes, ids: map[string]*list.Element{}, blocks: map[string]*toolBlock{}}
}

// put remembers that id was sampled as part of block.
func (m *toolMemory) put(id, block string) {
	if m == nil || m.maxIDs <= 0 || id == "" || block == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.ids[id]; ok {
		e := el.Value.(*toolEntry)
		m.lru.MoveToFront(el)
		if e.block.text == block {
			return
		}
		m.release(e.block, id)
		e.block = m.acquire(block, id)
	} else {
		e := &toolEntry{id: id, block: m.acquire(block, id)}
		m.ids[id] = m.lru.PushFront(e)
		m.bytes += int64(len(id)) + toolEntryOverhead
	}
	for m.lru.Len() > 0 && (m.lru.Len() > m.maxIDs || m.bytes > m.maxBytes) {
		m.remove(m.lru.Back())
	}
}

// get returns the block of id and marks it recently used.
func (m *toolMemory) get(id string) (string, bool) {
	if m == nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.ids[id]
	if !ok {
		return "", false
	}
	m.lru.MoveToFront(el)
	return el.Value.(*toolEntry).block.text, true
}

// has reports whether id is remembered, without touching it.
func (m *toolMemory) has(id string) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	return ok
}

// stats returns the number of ids and blocks and the accounted bytes.
func (m *toolMemory) stats() (ids, blocks int, bytes int64) {
	if m == nil {
		return 0, 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids), len(m.blocks), m.bytes
}

// idsOf returns the ids remembered for block.
func (m *toolMemory) idsOf(block string) []string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[block]
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(b.ids))
	for id := range b.ids {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (m *toolMemory) acquire(text, id string) *toolBlock {
	b, ok := m.blocks[text]
	if !ok {
		b = &toolBlock{text: text, ids: map[string]bool{}}
		m.blocks[text] = b
		m.bytes += int64(len(text)) + toolEntryOverhead
	}
	b.ids[id] = true
	return b
}

func (m *toolMemory) release(b *toolBlock, id string) {
	delete(b.ids, id)
	if len(b.ids) == 0 {
		delete(m.blocks, b.text)
		m.bytes -= int64(len(b.text)) + toolEntryOverhead
	}
}

func (m *toolMemory) remove(el *list.Element) {
	e := m.lru.Remove(el).(*toolEntry)
	delete(m.ids, e.id)
	m.bytes -= int64(len(e.id)) + toolEntryOverhead
	m.release(e.block, e.id)
}

// randomHex returns 2n lowercase hex digits from n bytes of crypto/rand.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// newCallID returns an unguessable tool-call id, prefix followed by 32 hex
// digits, that the memory does not know and taken does not hold.
func (m *toolMemory) newCallID(prefix string, taken map[string]bool) string {
	for {
		id := prefix + randomHex(16)
		if !taken[id] && !m.has(id) {
			return id
		}
	}
}
