package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
)

func TestDefaults(t *testing.T) {
	require.Equal(t, Params{Temperature: 1, TopK: 0, TopP: 1, MinP: 0.05, Seed: 0}, Defaults())
	require.NoError(t, Defaults().Validate())
	require.Equal(t, Defaults(), Defaults().Normalize())
}

func TestArgmax(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		want   int
	}{
		{"empty", nil, -1},
		{"single", []float32{-3}, 0},
		{"max last", []float32{1, 2, 3}, 2},
		{"tie first wins", []float32{1, 5, 2, 5, 5}, 1},
		{"negative", []float32{-4, -1, -2}, 1},
		{"nan skipped", []float32{nan, 1, nan, 2}, 3},
		{"all -inf", []float32{-inf, -inf}, 0},
		{"all nan", []float32{nan, nan}, 0},
		{"+inf wins", []float32{1, inf, 2, inf}, 1},
		{"-inf then finite", []float32{-inf, -7}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Argmax(tt.logits))
		})
	}
}

func TestNormalize(t *testing.T) {
	f32 := func(v float64) float32 { return float32(v) }
	tests := []struct {
		name    string
		in, out Params
	}{
		{"defaults", Defaults(), Defaults()},
		{"negative temperature", Params{Temperature: -1, TopP: 1}, Params{Temperature: 0, TopP: 1}},
		{"nan temperature", Params{Temperature: nan, TopP: 1}, Params{Temperature: 0, TopP: 1}},
		{"top_k negative", Params{Temperature: 1, TopK: -5, TopP: 1}, Params{Temperature: 1, TopP: 1}},
		{"top_k capped", Params{Temperature: 1, TopK: 5000, TopP: 1}, Params{Temperature: 1, TopK: MaxTopK, TopP: 1}},
		{"top_k kept", Params{Temperature: 1, TopK: 40, TopP: 1}, Params{Temperature: 1, TopK: 40, TopP: 1}},
		{"top_p zero", Params{Temperature: 1, TopP: 0}, Params{Temperature: 1, TopP: 1}},
		{"top_p negative", Params{Temperature: 1, TopP: -0.5}, Params{Temperature: 1, TopP: 1}},
		{"top_p above one", Params{Temperature: 1, TopP: 1.5}, Params{Temperature: 1, TopP: 1}},
		{"top_p nan", Params{Temperature: 1, TopP: nan}, Params{Temperature: 1, TopP: 1}},
		{"top_p kept", Params{Temperature: 1, TopP: 0.9}, Params{Temperature: 1, TopP: f32(0.9)}},
		{"min_p negative", Params{Temperature: 1, TopP: 1, MinP: -0.1}, Params{Temperature: 1, TopP: 1}},
		{"min_p nan", Params{Temperature: 1, TopP: 1, MinP: nan}, Params{Temperature: 1, TopP: 1}},
		{"min_p kept", Params{Temperature: 1, TopP: 1, MinP: 0.2}, Params{Temperature: 1, TopP: 1, MinP: f32(0.2)}},
		{"min_p above one", Params{Temperature: 1, TopP: 1, MinP: 3}, Params{Temperature: 1, TopP: 1, MinP: 1}},
		{"seed kept", Params{Temperature: 1, TopP: 1, Seed: 42}, Params{Temperature: 1, TopP: 1, Seed: 42}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.out, tt.in.Normalize())
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Defaults()
	with := func(f func(*Params)) Params { p := ok; f(&p); return p }
	tests := []struct {
		name  string
		p     Params
		field string // "" means valid
	}{
		{"defaults", ok, ""},
		{"greedy", with(func(p *Params) { p.Temperature = 0 }), ""},
		{"max temperature", with(func(p *Params) { p.Temperature = MaxTemperature }), ""},
		{"bounds", Params{Temperature: 0.5, TopK: 5000, TopP: 0, MinP: 1}, ""},
		{"negative temperature", with(func(p *Params) { p.Temperature = -0.1 }), "temperature"},
		{"huge temperature", with(func(p *Params) { p.Temperature = 101 }), "temperature"},
		{"nan temperature", with(func(p *Params) { p.Temperature = nan }), "temperature"},
		{"inf temperature", with(func(p *Params) { p.Temperature = inf }), "temperature"},
		{"negative top_k", with(func(p *Params) { p.TopK = -1 }), "top_k"},
		{"negative top_p", with(func(p *Params) { p.TopP = -0.1 }), "top_p"},
		{"top_p above one", with(func(p *Params) { p.TopP = 1.01 }), "top_p"},
		{"nan top_p", with(func(p *Params) { p.TopP = nan }), "top_p"},
		{"negative min_p", with(func(p *Params) { p.MinP = -0.1 }), "min_p"},
		{"min_p above one", with(func(p *Params) { p.MinP = 2 }), "min_p"},
		{"inf min_p", with(func(p *Params) { p.MinP = -inf }), "min_p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.field)
		})
	}
}

// testLogits returns n reproducible logits shaped like a language model's:
// a wide bulk and a few strong candidates.
func testLogits(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2.5)
	}
	for range min(8, n) {
		l[r.IntN(n)] = 10 + float32(r.Float64()*6)
	}
	return l
}

// configs are parameter sets exercising every sampling path.
var configs = []struct {
	name string
	p    Params
}{
	{"default", Defaults()},
	{"no min_p", Params{Temperature: 1, TopP: 1}},
	{"hot", Params{Temperature: 2.5, TopP: 1, MinP: 0.01}},
	{"cold", Params{Temperature: 0.3, TopP: 1, MinP: 0.05}},
	{"top_k", Params{Temperature: 1, TopK: 40, TopP: 1, MinP: 0.05}},
	{"top_k top_p", Params{Temperature: 1.3, TopK: 200, TopP: 0.9}},
	{"top_p", Params{Temperature: 1, TopP: 0.95, MinP: 0.05}},
	{"top_p no min_p", Params{Temperature: 1.5, TopP: 0.9}},
}

func TestGreedy(t *testing.T) {
	logits := testLogits(1000, 1)
	logits[17], logits[900] = 50, 50
	for _, temp := range []float32{0, -1, nan} {
		for _, c := range configs {
			p := c.p
			p.Temperature = temp
			p.Seed = 7
			s := New(p)
			for range 10 {
				require.Equal(t, 17, s.Sample(logits), "%s T=%v", c.name, temp)
			}
			// Greedy draws consume no randomness.
			p.Temperature = 1
			require.Equal(t, New(p).Sample(logits), s.SampleWith(logits, p), c.name)
		}
	}
}

func TestTopKOne(t *testing.T) {
	logits := testLogits(5000, 2)
	logits[123], logits[4000] = 30, 30
	for seed := uint64(1); seed <= 20; seed++ {
		s := New(Params{Temperature: 5, TopK: 1, TopP: 1, MinP: 0, Seed: seed})
		require.Equal(t, 123, s.Sample(logits))
	}
}

func TestSeeded(t *testing.T) {
	logits := testLogits(4096, 3)
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			seq := func(seed uint64) []int {
				p := c.p
				p.Seed = seed
				p.Temperature = max(p.Temperature, 2) // spread the draws
				p.MinP = 0
				s := New(p)
				out := make([]int, 300)
				for i := range out {
					out[i] = s.Sample(logits)
				}
				return out
			}
			a := seq(12345)
			require.Equal(t, a, seq(12345))
			require.NotEqual(t, a, seq(12346))
		})
	}
}

func TestRandomSeed(t *testing.T) {
	a, b := New(Defaults()), New(Defaults())
	require.NotZero(t, a.Params().Seed)
	require.NotEqual(t, a.Params().Seed, b.Params().Seed)
	require.Equal(t, uint64(99), New(Params{Temperature: 1, Seed: 99}).Params().Seed)
}

// TestGenerator pins xorshift64*: these are upstream ds4's sample_rng_f32
// outputs for seed 1, so a seed means the same stream in both.
func TestGenerator(t *testing.T) {
	s := New(Params{Temperature: 1, Seed: 1})
	var got []float64
	for range 5 {
		got = append(got, s.uniform())
	}
	want := []float64{0x47e4cep-24, 0xabcfa6p-24, 0xb9d10dp-24, 0x4db418p-24, 0x0e6199p-24}
	require.Equal(t, want, got)
}

// reference returns the distribution the sampler should draw from, computed
// directly from the definition in float64.
func reference(logits []float32, p Params) []float64 {
	p = p.Normalize()
	var ids []int
	for i, v := range logits {
		if !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v)) {
			ids = append(ids, i)
		}
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	if p.TopK > 0 && len(ids) > p.TopK {
		ids = ids[:p.TopK]
	}
	probs := make([]float64, len(ids))
	var sum float64
	for i, id := range ids {
		probs[i] = math.Exp(float64(logits[id]-logits[ids[0]]) / float64(p.Temperature))
		sum += probs[i]
	}
	var kept float64
	n := 0
	for i := range ids {
		if i > 0 && probs[i] < probs[0]*float64(p.MinP) {
			break
		}
		kept += probs[i]
		n++
		if kept/sum >= float64(p.TopP) {
			break
		}
	}
	out := make([]float64, len(logits))
	for i := range n {
		out[ids[i]] = probs[i] / kept
	}
	return out
}

// chiSquareBound is the 0.1% critical value of the chi-square distribution
// with dof degrees of freedom (Wilson–Hilferty approximation).
func chiSquareBound(dof int) float64 {
	k := float64(dof)
	return k * math.Pow(1-2/(9*k)+3.09*math.Sqrt(2/(9*k)), 3)
}

func TestDistribution(t *testing.T) {
	logits := []float32{1, 2.5, 0.5, 3, -1, 0, 2.5, 1.5, -inf, 2.9, nan, -0.5}
	tests := []struct {
		name string
		p    Params
	}{
		{"full", Params{Temperature: 1, TopP: 1}},
		{"cold", Params{Temperature: 0.6, TopP: 1}},
		{"hot", Params{Temperature: 3, TopP: 1}},
		{"min_p", Params{Temperature: 1, TopP: 1, MinP: 0.2}},
		{"top_k", Params{Temperature: 1, TopK: 5, TopP: 1}},
		{"top_k all", Params{Temperature: 0.8, TopK: 100, TopP: 1}},
		{"top_k min_p", Params{Temperature: 1.2, TopK: 6, TopP: 1, MinP: 0.3}},
		{"top_p", Params{Temperature: 1, TopP: 0.8}},
		{"top_p min_p", Params{Temperature: 1.5, TopP: 0.9, MinP: 0.25}},
		{"top_k top_p", Params{Temperature: 1, TopK: 7, TopP: 0.7}},
	}
	const draws = 20000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := reference(logits, tt.p)
			p := tt.p
			p.Seed = 2024
			s := New(p)
			counts := make([]int, len(logits))
			for range draws {
				counts[s.Sample(logits)]++
			}
			var chi2 float64
			dof := -1
			for i, w := range want {
				if w == 0 {
					require.Zero(t, counts[i], "token %d has probability 0", i)
					continue
				}
				e := w * draws
				chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
				dof++
			}
			if dof > 0 {
				require.Less(t, chi2, chiSquareBound(dof), "counts %v, want %v", counts, want)
			}
		})
	}
}

// drawSet returns the set of tokens seen in n draws.
func drawSet(logits []float32, p Params, n int) map[int]int {
	s := New(p)
	seen := map[int]int{}
	for range n {
		seen[s.Sample(logits)]++
	}
	return seen
}

func TestMinP(t *testing.T) {
	// Relative to the top token (logit 5), min_p 0.1 keeps logits above
	// 5 + ln 0.1 ≈ 2.70: ids 0, 1, 3 and 5.
	logits := []float32{5, 2.8, 2.6, 4, -3, 2.75, 1, 2.65}
	want := []int{0, 1, 3, 5}
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"vocab", Params{Temperature: 1, TopP: 1, MinP: 0.1, Seed: 1}},
		{"top_k", Params{Temperature: 1, TopK: 6, TopP: 1, MinP: 0.1, Seed: 2}},
		{"top_p", Params{Temperature: 1, TopP: 0.9999, MinP: 0.1, Seed: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := drawSet(logits, c.p, 20000)
			require.ElementsMatch(t, want, keys(seen), "counts %v", seen)
		})
	}
	// min_p 1 leaves only the top token.
	seen := drawSet(logits, Params{Temperature: 1, TopP: 1, MinP: 1, Seed: 4}, 1000)
	require.Equal(t, map[int]int{0: 1000}, seen)
}

func TestTopP(t *testing.T) {
	// Probabilities 0.5, 0.3, 0.15, 0.05 (ids in shuffled order).
	ln := func(v float64) float32 { return float32(math.Log(v)) }
	logits := []float32{ln(0.15), ln(0.5), ln(0.05), ln(0.3)}
	tests := []struct {
		name string
		p    Params
		want []int
	}{
		{"top token only", Params{Temperature: 1, TopP: 0.4}, []int{1}},
		{"two", Params{Temperature: 1, TopP: 0.75}, []int{1, 3}},
		{"three", Params{Temperature: 1, TopP: 0.9}, []int{1, 3, 0}},
		{"all", Params{Temperature: 1, TopP: 0.99}, []int{1, 3, 0, 2}},
		{"top_k", Params{Temperature: 1, TopK: 3, TopP: 0.75}, []int{1, 3}},
		// Within top_k, top_p is measured on the renormalized k tokens:
		// 0.5/0.8 = 0.625 ≥ 0.6.
		{"top_k renormalized", Params{Temperature: 1, TopK: 2, TopP: 0.6}, []int{1}},
		{"with min_p", Params{Temperature: 1, TopP: 0.9, MinP: 0.4}, []int{1, 3}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.Seed = uint64(i + 1)
			seen := drawSet(logits, tt.p, 20000)
			require.ElementsMatch(t, tt.want, keys(seen), "counts %v", seen)
		})
	}
}

// naiveNucleus is sampleNucleus without buckets: all candidates sorted,
// the nucleus cut by a running sum, one draw.
func naiveNucleus(s *Sampler, logits []float32, p Params) int {
	maxV, _ := finiteMax(logits)
	var c []candidate
	var sum float64
	for i, v := range logits {
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
			continue
		}
		q := scaledProb(v-maxV, p.Temperature)
		if q < pFloor {
			continue
		}
		sum += float64(q)
		if q >= max(p.MinP, pFloor) {
			c = append(c, candidate{logit: v, p: q, id: int32(i)})
		}
	}
	slices.SortFunc(c, byProbDesc)
	var kept float64
	n := 0
	for _, x := range c {
		kept += float64(x.p)
		n++
		if kept/sum >= float64(p.TopP) {
			break
		}
	}
	return pick(c[:n], 0, s.uniform()*kept)
}

func TestNucleusLargeVocab(t *testing.T) {
	// Many candidates: the bucketed nucleus must draw exactly what sorting
	// them all would, from the reference distribution's support.
	logits := testLogits(8000, 5)
	logits[3], logits[9] = -inf, nan
	for _, p := range []Params{
		{Temperature: 1.5, TopP: 0.9},
		{Temperature: 3, TopP: 0.5},
		{Temperature: 2, TopP: 0.3},
		{Temperature: 4, TopP: 0.999, MinP: 0.001},
		{Temperature: 1, TopP: 0.95, MinP: 0.05},
		{Temperature: 0.5, TopP: 0.9},
	} {
		want := reference(logits, p)
		p.Seed = 77
		s, naive := New(p), New(p)
		for i := range 100 {
			got := s.Sample(logits)
			require.Equal(t, naiveNucleus(naive, logits, p), got, "draw %d, %+v", i, p)
			require.Positive(t, want[got], "token %d outside the nucleus for %+v", got, p)
		}
	}
}

func TestNonFinite(t *testing.T) {
	logits := []float32{-inf, 1, nan, inf, 0.5, -inf, 2, nan}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.Seed = 11
			p.MinP = 0
			p.Temperature = 3
			seen := drawSet(logits, p, 3000)
			for id := range seen {
				require.Contains(t, []int{1, 4, 6}, id)
			}
		})
	}
	// With no finite logit, sampling falls back to Argmax.
	for _, c := range configs {
		p := c.p
		p.Seed = 12
		s := New(p)
		require.Equal(t, 0, s.Sample([]float32{-inf, -inf, nan}), c.name)
		require.Equal(t, 2, s.Sample([]float32{-inf, nan, inf}), c.name)
		require.Equal(t, -1, s.Sample(nil), c.name)
	}
	// Extreme but finite logits do not overflow.
	big := []float32{3e38, -3e38, 3e38, 1}
	seen := drawSet(big, Params{Temperature: 1, TopP: 1, Seed: 5}, 1000)
	require.ElementsMatch(t, []int{0, 2}, keys(seen))
}

func TestNoAllocs(t *testing.T) {
	logits := testLogits(32768, 6)
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.Seed = 3
			s := New(p)
			s.Sample(logits)
			require.Zero(t, testing.AllocsPerRun(20, func() { s.Sample(logits) }))
			// Other parameters reuse the same buffers.
			other := Params{Temperature: 2, TopP: 0.5}
			require.Zero(t, testing.AllocsPerRun(5, func() { s.SampleWith(logits, other) }))
		})
	}
	dst := make([]TokenLogprob, 0, 20)
	require.Zero(t, testing.AllocsPerRun(5, func() { dst = TopLogprobs(logits, 20, dst) }))
}

func keys(m map[int]int) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// vocabSize is DeepSeek V4's vocabulary size.
const vocabSize = 129280

func BenchmarkSample(b *testing.B) {
	logits := testLogits(vocabSize, 42)
	for _, c := range append(configs[:len(configs):len(configs)], struct {
		name string
		p    Params
	}{"greedy", Params{Temperature: 0}}) {
		b.Run(c.name, func(b *testing.B) {
			p := c.p
			p.Seed = 1
			s := New(p)
			s.Sample(logits) // allocate the scratch buffers
			for b.Loop() {
				s.Sample(logits)
			}
		})
	}
}

func BenchmarkTopLogprobs(b *testing.B) {
	logits := testLogits(vocabSize, 42)
	dst := make([]TokenLogprob, 0, 20)
	for b.Loop() {
		dst = TopLogprobs(logits, 20, dst)
	}
}

// goldenLogits returns a reproducible vocabulary-sized logit vector built
// from a fixed formula: a uniform bulk in [-6, 6) and five strong tokens.
func goldenLogits() []float32 {
	l := make([]float32, vocabSize)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range l {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		l[i] = float32(float64(x>>11)/(1<<53)*12 - 6)
	}
	for j, id := range []int{7, 1000, 4242, 65000, 129279} {
		l[id] = 8 + 0.4*float32(j)
	}
	return l
}

// goldenCases pin seeded draws on goldenLogits. They equal upstream ds4's
// sample_top_p_min_p with the same seeds, when its float32 sums are made
// float64 and its sort stable (as is, it differs in 1 of the 128 draws).
var goldenCases = []struct {
	name string
	p    Params
	want []int
}{
	{"default", Params{Temperature: 1, TopP: 1, MinP: 0.05, Seed: 42}, []int{
		4242, 129279, 129279, 129279, 129279, 129279, 4242, 65000,
		4242, 129279, 65000, 4242, 129279, 1000, 7, 65000,
		4242, 4242, 129279, 4242, 65000, 129279, 65000, 4242,
		4242, 4242, 65000, 129279, 65000, 129279, 4242, 4242,
	}},
	{"warm", Params{Temperature: 1.5, TopP: 1, MinP: 0.05, Seed: 7}, []int{
		106120, 120255, 11269, 13880, 49981, 53909, 110633, 22587,
		48806, 102037, 88677, 94471, 84843, 116902, 16698, 44516,
		127598, 111021, 61842, 94904, 39845, 31952, 58028, 72956,
		87968, 1242, 65488, 121981, 82832, 76533, 24001, 22368,
	}},
	{"top_k", Params{Temperature: 1.2, TopK: 50, TopP: 0.9, MinP: 0.05, Seed: 1234}, []int{
		4242, 129279, 65000, 129279, 7, 129279, 65000, 129279,
		65000, 65000, 129279, 4242, 129279, 1000, 4242, 7,
		7, 1000, 65000, 129279, 129279, 129279, 4242, 129279,
		65000, 65000, 4242, 1000, 65000, 129279, 4242, 65000,
	}},
	{"top_p", Params{Temperature: 1.5, TopP: 0.8, MinP: 0.05, Seed: 99}, []int{
		95573, 94522, 28414, 81548, 116519, 29886, 2508, 81579,
		59654, 98592, 113123, 47701, 64843, 68869, 1244, 59165,
		114729, 39530, 88429, 7331, 76090, 7122, 11690, 118766,
		96142, 38785, 105409, 120831, 56724, 3882, 45165, 62057,
	}},
}

func TestGolden(t *testing.T) {
	logits := goldenLogits()
	for _, g := range goldenCases {
		t.Run(g.name, func(t *testing.T) {
			s := New(g.p)
			got := make([]int, len(g.want))
			for i := range got {
				got[i] = s.Sample(logits)
			}
			require.Equal(t, g.want, got)
		})
	}
}
