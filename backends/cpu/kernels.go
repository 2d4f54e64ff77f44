package cpu

import (
	"math"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) · w (w nil: no weight), with
// the sum of squares accumulated in float64 as the reference does.
func RMSNorm(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	s := rmsScale(ss, len(x), eps)
	dst = dst[:len(x)]
	if w == nil {
		mulTo(dst, s, x)
		return
	}
	mulMulTo(dst, s, x, w)
}

// rmsScale is RMSNorm's factor for a sum of squares ss of n values.
func rmsScale(ss float64, n int, eps float32) float32 {
	mean := float32(ss / float64(n))
	return 1 / sqrtf(mean+eps)
}

// RMSNormHeads sets each of the len(x)/dim rows of x to RMSNorm(row, row,
// nil, eps). Each row's sum of squares is the same sequential float64
// sum, but four rows' sums run in one loop: the add latency that bounds
// one sum is hidden by the others.
func RMSNormHeads(x []float32, dim int, eps float32) {
	rows := len(x) / dim
	r := 0
	for ; r+4 <= rows; r += 4 {
		a := x[r*dim : (r+1)*dim]
		b := x[(r+1)*dim : (r+2)*dim]
		c := x[(r+2)*dim : (r+3)*dim]
		d := x[(r+3)*dim : (r+4)*dim]
		b, c, d = b[:len(a)], c[:len(a)], d[:len(a)]
		var sa, sb, sc, sd float64
		for i, v := range a {
			sa += float64(v) * float64(v)
			sb += float64(b[i]) * float64(b[i])
			sc += float64(c[i]) * float64(c[i])
			sd += float64(d[i]) * float64(d[i])
		}
		mulTo(a, rmsScale(sa, dim, eps), a)
		mulTo(b, rmsScale(sb, dim, eps), b)
		mulTo(c, rmsScale(sc, dim, eps), c)
		mulTo(d, rmsScale(sd, dim, eps), d)
	}
	for ; r < rows; r++ {
		row := x[r*dim : (r+1)*dim]
		RMSNorm(row, row, nil, eps)
	}
}

// ApplyRoPE rotates adjacent pairs of tail (len r.Dims) for position pos;
// inverse rotates by −θ. Angles come from the iterative product
// θ_k = pos·step^k, as the reference computes them.
func ApplyRoPE(r backends.RoPE, tail []float32, pos int, inverse bool) {
	ApplyRoPEHeads(r, tail, len(tail), 0, pos, inverse)
}

// ropeMaxPairs bounds the rotation table ApplyRoPEHeads keeps on the
// stack; DS4's tails have 32 pairs.
const ropeMaxPairs = 64

// ApplyRoPEHeads is ApplyRoPE of the r.Dims floats from off of each of the
// len(x)/stride rows of x: the angles' cosines and sines are computed
// once for all rows.
func ApplyRoPEHeads(r backends.RoPE, x []float32, stride, off, pos int, inverse bool) {
	pairs := r.Dims / 2
	if stride <= 0 {
		panic("cpu: RoPE of rows of no width")
	}
	var buf [2 * ropeMaxPairs]float32
	cs := buf[:]
	if pairs > ropeMaxPairs {
		cs = make([]float32, 2*pairs)
	}
	te := float32(pos)
	for k := range pairs {
		ti := r.FreqScale * te
		theta := ti
		if r.YaRN {
			ramp := 1 - min(1, max(0, (float32(k)-r.Lo)/max(0.001, r.Hi-r.Lo)))
			theta = float32(ti*(1-ramp)) + float32(te*ramp)
		}
		c, s := cosf(theta), sinf(theta)
		if inverse {
			s = -s
		}
		cs[2*k], cs[2*k+1] = c, s
		te *= r.ThetaStep
	}
	for h := 0; h+stride <= len(x); h += stride {
		tail := x[h+off : h+off+2*pairs]
		for k := range pairs {
			c, s := cs[2*k], cs[2*k+1]
			x0, x1 := tail[2*k], tail[2*k+1]
			tail[2*k] = float32(x0*c) - float32(x1*s)
			tail[2*k+1] = float32(x0*s) + float32(x1*c)
		}
	}
}

// e4m3Values lists the non-negative E4M3FN magnitudes of codes 0..126.
var e4m3Values = func() (v [127]float32) {
	for c := range v {
		e, m := c>>3, c&7
		if e == 0 {
			v[c] = float32(m) / 512
		} else {
			v[c] = (1 + float32(m)/8) * float32(math.Ldexp(1, e-7))
		}
	}
	return v
}()

// roundE4M3 rounds v to the nearest E4M3FN value, ties to the even code.
func roundE4M3(v float32) float32 {
	a := float32(math.Abs(float64(v)))
	// largest code whose value is ≤ a
	lo, hi := 0, 126
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if e4m3Values[mid] <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	c := lo
	if c < 126 {
		dn, up := a-e4m3Values[c], e4m3Values[c+1]-a
		if up < dn || (up == dn && (c+1)%2 == 0) {
			c++
		}
	}
	if v < 0 {
		return -e4m3Values[c]
	}
	return e4m3Values[c]
}

// pow2Scale returns 2^ceil(log2(amax/qmax)) with the exponent computed from
// a float32 log2, as the reference does.
func pow2Scale(amax, qmax float32) float32 {
	e := math.Ceil(float64(log2f(amax / qmax)))
	return float32(math.Ldexp(1, int(e)))
}

// FP8Sim simulates E4M3FN storage of x in blocks of 64 with power-of-two
// block scales (the KV cache's FP8 round trip).
func FP8Sim(x []float32) {
	for b := 0; b < len(x); b += 64 {
		blk := x[b:min(b+64, len(x))]
		amax := float32(1e-4)
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := pow2Scale(amax, 448)
		for i, v := range blk {
			blk[i] = roundE4M3(min(448, max(-448, v/s))) * s
		}
	}
}

var e2m1Values = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// roundE2M1 rounds v to the nearest E2M1 value, ties to the even index.
func roundE2M1(v float32) float32 {
	a := float32(math.Abs(float64(v)))
	best := 0
	bestD := a
	for i := 1; i < len(e2m1Values); i++ {
		d := float32(math.Abs(float64(a - e2m1Values[i])))
		if d < bestD || (d == bestD && i%2 == 0 && best%2 == 1) {
			best, bestD = i, d
		}
	}
	if v < 0 {
		return -e2m1Values[best]
	}
	return e2m1Values[best]
}

// FP4Sim simulates E2M1 storage of x in blocks of 32 with power-of-two
// block scales.
func FP4Sim(x []float32) {
	for b := 0; b < len(x); b += 32 {
		blk := x[b:min(b+32, len(x))]
		amax := float32(7.052966104933725e-38)
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := pow2Scale(amax, 6)
		for i, v := range blk {
			blk[i] = roundE2M1(min(6, max(-6, v/s))) * s
		}
	}
}

// Hadamard applies the normalized Walsh–Hadamard transform to x (length a
// power of two) in place.
func Hadamard(x []float32) {
	n := len(x)
	for stride := 1; stride < n; stride *= 2 {
		for base := 0; base < n; base += 2 * stride {
			for i := range stride {
				a, b := x[base+i], x[base+stride+i]
				x[base+i] = a + b
				x[base+stride+i] = a - b
			}
		}
	}
	norm := float32(1 / math.Sqrt(float64(n)))
	for i := range x {
		x[i] *= norm
	}
}

// QAT is the indexer's quantization-aware rounding: Hadamard, then FP4.
func QAT(x []float32) {
	Hadamard(x)
	FP4Sim(x)
}

// RoundF16 rounds every element to binary16 precision.
func RoundF16(x []float32) {
	for i, v := range x {
		x[i] = quant.RoundF16(v)
	}
}

// Sinkhorn turns the n×n logits z (c[a + n·b], a = output stream, b =
// input stream) into a doubly-stochastic mixing matrix in place: a softmax
// over a per column plus eps, then alternating row and column
// normalizations for iters rounds in total.
func Sinkhorn(c []float32, n, iters int, eps float32) {
	// The softmax subtracts every column's maximum first so that one
	// expfs call does all n² exps; the float operations and their order
	// per column are those of a column-by-column loop.
	c = c[:n*n]
	for b := range n {
		col := c[n*b : n*b+n]
		m := col[0]
		for _, v := range col[1:] {
			m = max(m, v)
		}
		for a := range col {
			col[a] -= m
		}
	}
	expfs(c, c)
	for b := range n {
		col := c[n*b : n*b+n]
		var s float32
		for _, v := range col {
			s += v
		}
		r := 1 / s
		for a := range col {
			col[a] = float32(col[a]*r) + eps
		}
	}
	rows := func() {
		for a := range n {
			var s float32
			for b := range n {
				s += c[a+n*b]
			}
			r := 1 / (s + eps)
			for b := range n {
				c[a+n*b] *= r
			}
		}
	}
	cols := func() {
		for b := range n {
			col := c[n*b : n*b+n]
			var s float32
			for _, v := range col {
				s += v
			}
			r := 1 / (s + eps)
			for a := range col {
				col[a] *= r
			}
		}
	}
	rows()
	for range iters - 1 {
		cols()
		rows()
	}
}

// HCPost mixes the sublayer output y back into the hyper-connection state:
// X'[a] = y·post[a] + Σ_b comb[a + n·b]·X[b], for n streams of width d.
// dst and x must not overlap.
func HCPost(dst, x, y, post, comb []float32, n int) {
	d := len(y)
	for a := range n {
		// Per element: y·post[a] first, then the streams b = 0..n−1 in
		// order, each product rounded before it is added.
		out := dst[a*d : (a+1)*d]
		mulTo(out, post[a], y)
		for b := range n {
			mulAdd(out, comb[a+n*b], x[b*d:(b+1)*d])
		}
	}
}

// Dot is a sequential float32 dot product.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i, v := range a {
		s += float32(v * b[i])
	}
	return s
}

// Axpy adds w·x to acc.
func Axpy(acc []float32, w float32, x []float32) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] += float32(w * x[i])
	}
}
