package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Argmax returns the first index of the strictly largest value, ignoring
// NaNs; it returns 0 when no value exceeds -Inf and -1 for an empty slice.
func Argmax(logits []float32) int {
	if len(logits) == 0 {
		return -1
	}
	best, bestV := 0, float32(math.Inf(-1))
	for i := 0; i < len(logits); {
		if skipBlock(logits, i, bestV) {
			i += block
			continue
		}
		for end := min(i+block, len(logits)); i < end; i++ {
			if v := logits[i]; v > bestV {
				best, bestV = i, v
			}
		}
	}
	return best
}

// block is how many logits the scans test at once: most blocks hold no
// value above the current bound, and one combined test per block costs far
// less than a loop iteration per logit.
const block = 8

// skipBlock reports whether logits[i:i+block] exists and holds no value
// greater than t.
func skipBlock(logits []float32, i int, t float32) bool {
	if len(logits)-i < block {
		return false
	}
	x := (*[block]float32)(logits[i:])
	return !(x[0] > t || x[1] > t || x[2] > t || x[3] > t ||
		x[4] > t || x[5] > t || x[6] > t || x[7] > t)
}

// A Sampler draws tokens with its parameters and its own random generator.
//
// The generator is xorshift64* (Vigna, "An experimental exploration of
// Marsaglia's xorshift generators, scrambled", 2016: shifts 12, 25, 27 and
// multiplier 0x2545F4914F6CDD1D) with the seed as its initial state, the
// generator of upstream ds4; each non-greedy draw consumes one output, whose
// top 24 bits give a uniform float32 in [0, 1). All arithmetic is
// platform-independent, so a seed reproduces the same tokens across runs
// and machines, given the same logits.
//
// A Sampler keeps scratch buffers sized to the vocabulary, so Sample does
// not allocate after its first call. It is not safe for concurrent use.
type Sampler struct {
	params Params // normalized, with the effective seed
	state  uint64 // xorshift64* state
	cands  []candidate
	mass   [nBuckets]float64 // candidates' probability per bucket
}

// candidate is a token with its probability p = exp((logit-max)/T)
// relative to the most likely token.
type candidate struct {
	logit float32
	p     float32
	id    int32
}

// New returns a sampler for p after Normalize; a zero Seed is replaced by a
// random non-zero one, which Params reports so that the run can be replayed.
func New(p Params) *Sampler {
	p = p.Normalize()
	for p.Seed == 0 {
		p.Seed = rand.Uint64()
	}
	return &Sampler{params: p, state: p.Seed}
}

// Params returns the sampler's normalized parameters and effective seed.
func (s *Sampler) Params() Params { return s.params }

// Sample returns the token drawn from logits with the sampler's parameters.
// A temperature ≤ 0, or logits with no finite value, give Argmax(logits)
// and consume no randomness; empty logits give -1.
func (s *Sampler) Sample(logits []float32) int {
	return s.sample(logits, s.params)
}

// SampleWith is Sample with other parameters (normalized; Seed ignored) for
// this draw only, continuing the sampler's random sequence; it serves
// per-step overrides such as forced thinking-mode settings.
func (s *Sampler) SampleWith(logits []float32, p Params) int {
	return s.sample(logits, p.Normalize())
}

// sample follows upstream's order of operations: temperature ≤ 0 → argmax;
// otherwise the softmax of logits/T, the top-k cap, min-p relative to the
// most likely token, the cumulative top-p cut, then one draw. Candidates
// are ordered by decreasing probability (ties to the lower id), except
// without top-k and top-p, where as upstream they are drawn in vocabulary
// order.
func (s *Sampler) sample(logits []float32, p Params) int {
	if p.Temperature <= 0 {
		return Argmax(logits)
	}
	if cap(s.cands) < len(logits) {
		s.cands = make([]candidate, 0, len(logits))
	}
	tok := -1
	switch {
	case p.TopK > 0:
		tok = s.sampleTopK(logits, p)
	case p.TopP >= 1:
		tok = s.sampleMinP(logits, p)
	default:
		tok = s.sampleNucleus(logits, p)
	}
	if tok < 0 {
		return Argmax(logits) // no finite logit
	}
	return tok
}

// lnFloor is the scaled logit below which tokens are dropped: their
// probability relative to the top token, under e^-87, is below float32's
// smallest normal number and could not change a draw.
const lnFloor = -87

// pFloor is the smallest relative probability a candidate may have.
var pFloor = expNeg(lnFloor)

// threshold returns a logit below which a token's relative probability
// exp((logit-maxV)/t) is certainly under e^ln; the slack covers rounding,
// so that the exact test on the probability alone decides near the edge.
func threshold(maxV, t float32, ln float64) float32 {
	ln = max(ln, lnFloor)
	thr := maxV + t*float32(ln*(1+1e-5)-1e-6)
	return thr - (abs(maxV)+abs(thr))*0x1p-20
}

// sampleMinP draws for top_k = 0 and top_p = 1 from the tokens whose
// probability is at least min_p times the largest, in vocabulary order. One
// scan keeps the tokens above a threshold that follows the running maximum;
// a second pass over those few computes the probabilities.
func (s *Sampler) sampleMinP(logits []float32, p Params) int {
	t := p.Temperature
	minQ := max(p.MinP, pFloor)
	ln := math.Log(float64(minQ))
	c := s.cands[:0]
	maxV := float32(math.Inf(-1))
	thr := maxV // NaN and -Inf never pass it, +Inf is checked
	for i := 0; i < len(logits); {
		if skipBlock(logits, i, thr) {
			i += block
			continue
		}
		for end := min(i+block, len(logits)); i < end; i++ {
			v := logits[i]
			if !(v > thr) {
				continue
			}
			if v > maxV {
				if v > math.MaxFloat32 {
					continue
				}
				maxV = v
				thr = threshold(maxV, t, ln)
			}
			c = append(c, candidate{logit: v, id: int32(i)})
		}
	}
	n := 0
	var sum float64
	for _, x := range c {
		x.p = scaledProb(x.logit-maxV, t)
		if x.p >= minQ {
			c[n] = x
			n++
			sum += float64(x.p)
		}
	}
	s.cands = c[:n]
	if n == 0 {
		return -1
	}
	return pick(c[:n], 0, s.uniform()*sum)
}

// sampleTopK draws for top_k > 0: the k most likely tokens (ties to the
// lower id) are kept, and min_p and top_p apply within them.
func (s *Sampler) sampleTopK(logits []float32, p Params) int {
	k := min(p.TopK, len(logits))
	h := s.cands[:0]
	i := 0
	for ; i < len(logits) && len(h) < k; i++ {
		if v := logits[i]; v >= -math.MaxFloat32 && v <= math.MaxFloat32 {
			h = append(h, candidate{logit: v, id: int32(i)})
			siftUp(h, len(h)-1, worse)
		}
	}
	for i < len(logits) {
		// The root is the worst kept token, and finite: NaN and -Inf
		// fail the comparison.
		if skipBlock(logits, i, h[0].logit) {
			i += block
			continue
		}
		for end := min(i+block, len(logits)); i < end; i++ {
			if v := logits[i]; v > h[0].logit && v <= math.MaxFloat32 {
				h[0] = candidate{logit: v, id: int32(i)}
				siftDown(h, 0, worse)
			}
		}
	}
	s.cands = h
	if len(h) == 0 {
		return -1
	}
	maxV := h[0].logit
	for _, x := range h {
		maxV = max(maxV, x.logit)
	}
	var sum float64
	for i := range h {
		h[i].p = scaledProb(h[i].logit-maxV, p.Temperature)
		sum += float64(h[i].p)
	}
	slices.SortFunc(h, byProbDesc)

	// Keep the prefix passing min_p, up to the token whose cumulative
	// share reaches top_p.
	minProb := h[0].p * p.MinP
	var kept float64
	n := 0
	for i, x := range h {
		if i > 0 && x.p < minProb {
			break
		}
		kept += float64(x.p)
		n++
		if kept/sum >= float64(p.TopP) {
			break
		}
	}
	return pick(h[:n], 0, s.uniform()*kept)
}

// nBuckets is the number of probability buckets of the nucleus sampler:
// a relative probability's float32 bits shifted right by bucketShift,
// so that each spans 1/32 of a power of two.
const (
	bucketShift = 18
	nBuckets    = 0x3f800000>>bucketShift + 1 // up to probability 1
)

func bucket(p float32) int { return int(math.Float32bits(p) >> bucketShift) }

// sampleNucleus draws for top_k = 0 and top_p < 1. Top-p is measured
// against the mass of all tokens, so every probability is computed, but
// the candidates (those passing min_p) are not sorted: their mass is
// summed into narrow buckets of probability, and only the bucket where the
// nucleus ends and the one the draw lands in are sorted.
func (s *Sampler) sampleNucleus(logits []float32, p Params) int {
	maxV, ok := finiteMax(logits)
	if !ok {
		return -1
	}
	t, topP := p.Temperature, float64(p.TopP)
	minQ := max(p.MinP, pFloor)
	thr := threshold(maxV, t, lnFloor)
	mass := &s.mass
	*mass = [nBuckets]float64{}
	c := s.cands[:0]
	var sum float64
	for i, v := range logits {
		if !(v >= thr) || v > math.MaxFloat32 || v < -math.MaxFloat32 {
			continue // below the threshold, NaN or infinite
		}
		q := scaledProb(v-maxV, t)
		if q < pFloor {
			continue
		}
		sum += float64(q)
		if q >= minQ {
			c = append(c, candidate{logit: v, p: q, id: int32(i)})
			mass[bucket(q)] += float64(q)
		}
	}
	s.cands = c

	// Find the bucket where the cumulative share reaches top_p (or the
	// last one when min_p cuts first) and the mass above it.
	edge, above, acc := 0, 0.0, 0.0
	for b := nBuckets - 1; b >= 0; b-- {
		if mass[b] == 0 {
			continue
		}
		edge, above = b, acc
		acc += mass[b]
		if acc/sum >= topP {
			break
		}
	}
	// Move the tokens above the edge bucket to the front, then the edge
	// bucket's, which are sorted and cut where the share reaches top_p.
	nAbove := partition(c, func(x candidate) bool { return bucket(x.p) > edge })
	nEdge := partition(c[nAbove:], func(x candidate) bool { return bucket(x.p) == edge })
	edgeC := c[nAbove : nAbove+nEdge]
	slices.SortFunc(edgeC, byProbDesc)
	kept := above
	for i, x := range edgeC {
		kept += float64(x.p)
		if kept/sum >= topP {
			edgeC = edgeC[:i+1]
			break
		}
	}

	// Draw: walk the buckets above the edge by their mass, and sort only
	// the one the draw lands in.
	r := s.uniform() * kept
	acc = 0
	for b := nBuckets - 1; b > edge; b-- {
		if mass[b] == 0 {
			continue
		}
		if acc+mass[b] > r {
			in := c[:nAbove]
			in = in[:partition(in, func(x candidate) bool { return bucket(x.p) == b })]
			slices.SortFunc(in, byProbDesc)
			return pick(in, acc, r)
		}
		acc += mass[b]
	}
	return pick(edgeC, acc, r)
}

// pick returns the first candidate of c at which the running total of
// probabilities, starting from acc, exceeds r, or the last one if rounding
// leaves r unreached.
func pick(c []candidate, acc, r float64) int {
	for _, x := range c {
		acc += float64(x.p)
		if acc > r {
			return int(x.id)
		}
	}
	return int(c[len(c)-1].id)
}

// partition moves the candidates satisfying f to the front of c and
// returns their number.
func partition(c []candidate, f func(candidate) bool) int {
	n := 0
	for i, x := range c {
		if f(x) {
			c[i], c[n] = c[n], x
			n++
		}
	}
	return n
}

// uniform advances the xorshift64* generator and returns a uniform value
// in [0, 1) with 24 random bits, as upstream's sample_rng_f32.
func (s *Sampler) uniform() float64 {
	x := s.state
	if x == 0 {
		x = 0x9e3779b97f4a7c15
	}
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	s.state = x
	return float64((x*0x2545f4914f6cdd1d)>>40) / (1 << 24)
}

// scaledProb returns exp(d/t), the probability of a token d below the
// largest logit relative to that token's.
func scaledProb(d, t float32) float32 {
	return expNeg(d / t)
}

func abs(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// finiteMax returns the largest finite value of logits and whether any
// value is finite.
func finiteMax(logits []float32) (float32, bool) {
	m := float32(math.Inf(-1))
	for i := 0; i < len(logits); {
		if skipBlock(logits, i, m) {
			i += block
			continue
		}
		for end := min(i+block, len(logits)); i < end; i++ {
			if v := logits[i]; v > m && v <= math.MaxFloat32 {
				m = v
			}
		}
	}
	return m, m >= -math.MaxFloat32
}

// byProbDesc orders candidates by decreasing probability, ties by
// increasing id.
func byProbDesc(a, b candidate) int {
	switch {
	case a.p > b.p:
		return -1
	case a.p < b.p:
		return 1
	}
	return int(a.id - b.id)
}

// worse reports whether a ranks below b: a lower logit, or an equal one and
// a higher id. It orders the min-heap used for top-k selection.
func worse(a, b candidate) bool {
	return a.logit < b.logit || a.logit == b.logit && a.id > b.id
}

// siftUp restores the heap property of h (rooted at its worst element
// under less) after h[i] was set.
func siftUp[T any](h []T, i int, less func(a, b T) bool) {
	for i > 0 {
		parent := (i - 1) / 2
		if !less(h[i], h[parent]) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// siftDown restores the heap property of h after h[i] was replaced.
func siftDown[T any](h []T, i int, less func(a, b T) bool) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			m = r
		}
		if !less(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
