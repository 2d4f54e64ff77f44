package tokenizer

import (
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// naiveBPE is docs/formats/tokenizer.md#bpe-merges on strings, as upstream bpe_emit_piece does it: merge
// ranks looked up by "LEFT RIGHT", lowest rank first, leftmost on ties.
type naiveBPE struct {
	rank map[string]int
	ids  map[string]int
	enc  [256]rune
}

var loadNaive = sync.OnceValues(func() (*naiveBPE, error) {
	tab, err := DeepSeekV4()
	if err != nil {
		return nil, err
	}
	nb := &naiveBPE{rank: make(map[string]int, len(tab.Merges)), ids: make(map[string]int, len(tab.Tokens)), enc: byteEncoder()}
	for i, m := range tab.Merges {
		nb.rank[m] = i
	}
	for i, tok := range tab.Tokens {
		nb.ids[tok] = i
	}
	return nb, nil
})

func (nb *naiveBPE) piece(piece string) []int {
	var sym []string
	for i := 0; i < len(piece); i++ {
		sym = append(sym, string(nb.enc[piece[i]]))
	}
	for {
		best, bestRank := -1, int(^uint(0)>>1)
		for i := 0; i+1 < len(sym); i++ {
			if r, ok := nb.rank[sym[i]+" "+sym[i+1]]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		sym[best] += sym[best+1]
		sym = append(sym[:best+1], sym[best+2:]...)
	}
	out := make([]int, 0, len(sym))
	for _, s := range sym {
		out = append(out, nb.ids[s])
	}
	return out
}

func (nb *naiveBPE) encode(text string) []int {
	out := []int{}
	for _, p := range refPretokenize(text) {
		out = append(out, nb.piece(p)...)
	}
	return out
}

func naive(t testing.TB) *naiveBPE {
	t.Helper()
	nb, err := loadNaive()
	require.NoError(t, err)
	return nb
}

// Both BPE variants equal the naive procedure, on pieces around the
// threshold between them and on long pieces.
func TestBPEVariantsMatchNaive(t *testing.T) {
	tk := defaultTok(t)
	nb := naive(t)
	r := rand.New(rand.NewPCG(5, 6))
	alphabets := []string{"ab", "abcdefghijklmnopqrstuvwxyz", "the quick brown fox", "aeiou lnrst", "èàò«»"}
	for i := 0; i < 3000; i++ {
		alpha := alphabets[r.IntN(len(alphabets))]
		n := 2 + r.IntN(2*smallPiece)
		if i%100 == 0 {
			n = 300 + r.IntN(300)
		}
		var b strings.Builder
		for b.Len() < n {
			b.WriteByte(alpha[r.IntN(len(alpha))])
		}
		p := b.String()
		want := nb.piece(p)
		require.Equal(t, want, tk.bpe(nil, p, new(bpeScratch)), "%q", p)
		require.Equal(t, want, tk.bpeHeap(nil, p), "heap %q", p)
		if len(p) <= smallPiece {
			require.Equal(t, want, tk.bpeSmall(nil, p, new(bpeScratch)), "small %q", p)
		}
	}
}

// The whole encoder equals the independent reference (literal regex
// transcription + naive BPE) on random mixed-script text and the corpus.
func TestEncodeMatchesNaive(t *testing.T) {
	tk := defaultTok(t)
	nb := naive(t)
	r := rand.New(rand.NewPCG(7, 8))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for i := 0; i < n; i++ {
		s := randomMixed(r, 40)
		require.Equal(t, nb.encode(s), tk.Encode(s), "%q", s)
	}
	raw, err := os.ReadFile("testdata/promessi_sposi_excerpt.txt")
	require.NoError(t, err)
	text := string(raw[:60000])
	require.Equal(t, nb.encode(text), tk.Encode(text))
}

func longWord(n int, random bool) string {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(9, 10))
	for i := range b {
		if random {
			b[i] = 'a' + byte(r.IntN(26))
		} else {
			b[i] = 'a'
		}
	}
	return string(b)
}

// A 1 MiB piece (no spaces) must not be quadratic: the heap BPE takes well
// under a second on an idle core (see BenchmarkEncodeLongWord); the bound
// here is loose for loaded shared machines, a quadratic BPE would take hours.
func TestLongWord(t *testing.T) {
	if testing.Short() {
		t.Skip("long input")
	}
	tk := defaultTok(t)
	for _, random := range []bool{false, true} {
		s := longWord(1<<20, random)
		start := time.Now()
		ids := tk.Encode(s)
		el := time.Since(start)
		require.Equal(t, s, string(tk.Decode(ids)))
		require.Less(t, el, time.Minute)
		t.Logf("random=%v: 1 MiB -> %d tokens in %v", random, len(ids), el)
	}
}
