package tokenizer

import (
	"fmt"
	"math/bits"
)

// noRank marks a pair of symbols that has no merge.
const noRank = ^uint32(0)

// pairTable maps a pair of token ids to its merge rank and the id of the
// merged token. It is an open-addressing hash table with linear probing,
// built once and read-only afterwards. Each slot packs the pair and the rank
// into one word (left<<idBits | right)<<rankBits | rank+1, 0 when empty, so
// the table stays small enough to be cache friendly; merged ids are stored
// by rank.
type pairTable struct {
	slots    []uint64
	shift    uint    // 64 - log2(len(slots))
	idBits   uint    // bits of a token id
	rankBits uint    // bits of rank+1
	merged   []int32 // merged token id by rank
}

// newPairTable sizes a table for n merges over a vocabulary of vocab ids.
func newPairTable(vocab, n int) (pairTable, error) {
	idBits := uint(bits.Len(uint(vocab)))
	rankBits := uint(bits.Len(uint(n + 1)))
	if 2*idBits+rankBits > 64 {
		return pairTable{}, fmt.Errorf("tokenizer: %d tokens and %d merges exceed the pair table", vocab, n)
	}
	size := 1 << bits.Len(uint(2*n+1)) // load factor <= 1/2
	return pairTable{
		slots:    make([]uint64, size),
		shift:    uint(64 - bits.TrailingZeros(uint(size))),
		idBits:   idBits,
		rankBits: rankBits,
		merged:   make([]int32, n),
	}, nil
}

func (t *pairTable) key(left, right int32) uint64 {
	return uint64(uint32(left))<<t.idBits | uint64(uint32(right))
}

func (t *pairTable) hash(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// insert adds a pair; it reports false if the pair is already present.
func (t *pairTable) insert(left, right int32, rank uint32, id int32) bool {
	key := t.key(left, right)
	mask := uint64(len(t.slots) - 1)
	for i := t.hash(key); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = key<<t.rankBits | uint64(rank+1)
			t.merged[rank] = id
			return true
		}
		if s>>t.rankBits == key {
			return false
		}
	}
}

// rank returns the merge rank of a pair, or noRank.
func (t *pairTable) rank(left, right int32) uint32 {
	key := t.key(left, right)
	mask := uint64(len(t.slots) - 1)
	for i := t.hash(key); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return noRank
		}
		if s>>t.rankBits == key {
			return uint32(s&(1<<t.rankBits-1)) - 1
		}
	}
}

// smallPiece is the largest piece handled by the quadratic array BPE; longer
// pieces use the O(n log n) heap BPE.
const smallPiece = 48

// bpe appends the ids of one pre-tokenized piece (docs/formats/tokenizer.md#bpe-merges): starting from
// one symbol per byte, repeatedly merge the adjacent pair with the lowest
// rank (leftmost on ties) until no pair has a merge.
func (t *Tokenizer) bpe(dst []int, piece string, sc *bpeScratch) []int {
	switch n := len(piece); {
	case n == 0:
		return dst
	case n == 1:
		return append(dst, int(t.byteID[piece[0]]))
	case n <= smallPiece:
		return t.bpeSmall(dst, piece, sc)
	default:
		return t.bpeHeap(dst, piece)
	}
}

// bpeScratch holds the working arrays of bpeSmall, reused across pieces.
type bpeScratch struct {
	sym  [smallPiece]int32
	rank [smallPiece]uint32
}

// bpeSmall is the direct algorithm on fixed-size arrays: rank[i] is the
// merge rank of the pair (sym[i], sym[i+1]).
func (t *Tokenizer) bpeSmall(dst []int, piece string, sc *bpeScratch) []int {
	sym, rank := &sc.sym, &sc.rank
	n := len(piece)
	for i := 0; i < n; i++ {
		sym[i] = t.byteID[piece[i]]
	}
	for i := 0; i+1 < n; i++ {
		rank[i] = t.pairs.rank(sym[i], sym[i+1])
	}
	for n > 1 {
		best, bestRank := -1, noRank
		for i, r := range rank[:n-1] {
			if r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		sym[best] = t.pairs.merged[bestRank]
		copy(sym[best+1:n-1], sym[best+2:n])
		if best+2 < n {
			copy(rank[best+1:n-2], rank[best+2:n-1])
		}
		n--
		if best > 0 {
			rank[best-1] = t.pairs.rank(sym[best-1], sym[best])
		}
		if best+1 < n {
			rank[best] = t.pairs.rank(sym[best], sym[best+1])
		}
	}
	for _, id := range sym[:n] {
		dst = append(dst, int(id))
	}
	return dst
}

// bpeHeap is the same procedure on a doubly linked list of symbols with a
// min-heap of candidate pairs keyed by (rank, position), so ties go to the
// leftmost pair. Entries are validated lazily when popped: a symbol's id
// only ever grows longer, so a stale entry never matches its pair's rank.
// Positions are int32: a single piece must be shorter than 2 GiB.
func (t *Tokenizer) bpeHeap(dst []int, piece string) []int {
	n := len(piece)
	sym := make([]int32, n) // -1 once merged into its left neighbour
	prev := make([]int32, n)
	next := make([]int32, n) // n marks the end
	h := make(pairHeap, 0, n)
	for i := 0; i < n; i++ {
		sym[i] = t.byteID[piece[i]]
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	for i := 0; i+1 < n; i++ {
		if r := t.pairs.rank(sym[i], sym[i+1]); r != noRank {
			h = append(h, uint64(r)<<32|uint64(i))
		}
	}
	h.init()
	for len(h) > 0 {
		top := h.pop()
		rank, pos := uint32(top>>32), int32(uint32(top))
		if sym[pos] < 0 {
			continue
		}
		nx := next[pos]
		if int(nx) >= n {
			continue
		}
		if t.pairs.rank(sym[pos], sym[nx]) != rank {
			continue
		}
		id := t.pairs.merged[rank]
		sym[pos] = id
		sym[nx] = -1
		nn := next[nx]
		next[pos] = nn
		if int(nn) < n {
			prev[nn] = pos
			if r := t.pairs.rank(id, sym[nn]); r != noRank {
				h.push(uint64(r)<<32 | uint64(pos))
			}
		}
		if pv := prev[pos]; pv >= 0 {
			if r := t.pairs.rank(sym[pv], id); r != noRank {
				h.push(uint64(r)<<32 | uint64(pv))
			}
		}
	}
	for i := int32(0); int(i) < n; i = next[i] {
		dst = append(dst, int(sym[i]))
	}
	return dst
}

// pairHeap is a binary min-heap of rank<<32 | position keys.
type pairHeap []uint64

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(v uint64) {
	*h = append(*h, v)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p] <= v {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = v
}

func (h *pairHeap) pop() uint64 {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h pairHeap) down(i int) {
	n := len(h)
	v := h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && h[r] < h[l] {
			l = r
		}
		if v <= h[l] {
			break
		}
		h[i] = h[l]
		i = l
	}
	h[i] = v
}
