package cpu

import (
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

// --- RMSNorm (docs/formats/model.md#rmsnorm) ---

// rmsNormSpecF32 is the spec's recipe written out with its rounding points:
// f64 sum of squares, f32(ss/n), float32 add/sqrt/div, y = (x*s)*w.
func rmsNormSpecF32(x, w []float32, eps float32) []float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	mean := float32(ss / float64(len(x)))
	sum := mean + eps
	s := 1 / float32(math.Sqrt(float64(sum)))
	y := make([]float32, len(x))
	for i, v := range x {
		t := float32(v * s)
		if w != nil {
			t = float32(t * w[i])
		}
		y[i] = t
	}
	return y
}

func TestRMSNorm(t *testing.T) {
	r := newRand(1)
	const eps = float32(1e-6)
	cases := []struct {
		name    string
		n       int
		scale   float64
		weight  bool
		inPlace bool
	}{
		{"n1", 1, 1, false, false},
		{"n7_weight", 7, 3, true, false},
		{"n512_noweight", 512, 0.01, false, false},
		{"n512_weight", 512, 10, true, false},
		{"n4096_weight", 4096, 1, true, false},
		{"n16384_noweight", 16384, 100, false, false},
		{"n512_weight_inplace", 512, 1, true, true},
		{"n128_noweight_inplace", 128, 1e-3, false, true},
		{"tiny_values_eps_dominates", 64, 1e-5, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := randVec(r, c.n, c.scale)
			var w []float32
			if c.weight {
				w = randVec(r, c.n, 1)
			}
			orig := append([]float32(nil), x...)
			var got []float32
			if c.inPlace {
				RMSNorm(x, x, w, eps)
				got = x
			} else {
				got = make([]float32, c.n)
				RMSNorm(got, x, w, eps)
				require.Equal(t, orig, x, "input modified")
			}

			// float64 reference: y = x / sqrt(mean(x²)+eps) · w.
			var ss float64
			for _, v := range orig {
				ss += float64(v) * float64(v)
			}
			s := 1 / math.Sqrt(ss/float64(c.n)+float64(eps))
			for i, v := range orig {
				want := float64(v) * s
				if w != nil {
					want *= float64(w[i])
				}
				// f32 mean, add, sqrt, div, two products: ≤ 6 roundings.
				tol := 6*ulp32(want) + 1e-45
				require.InDelta(t, want, float64(got[i]), tol, "element %d", i)
			}

			// The spec's rounding points exactly.
			require.Equal(t, rmsNormSpecF32(orig, w, eps), got)
		})
	}
}

func TestRMSNormZeroVector(t *testing.T) {
	x := make([]float32, 16)
	dst := make([]float32, 16)
	for i := range dst {
		dst[i] = 42
	}
	RMSNorm(dst, x, nil, 1e-6)
	require.Equal(t, make([]float32, 16), dst)
}

// --- scalar functions (docs/formats/model.md#scalar-functions) ---

func sigmoid64(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// scalarTol allows a few float32 roundings relative to want, plus two
// subnormal steps for results in the subnormal range.
func scalarTol(want float64, ulps float64) float64 {
	return ulps*ulp32(want) + 2*math.SmallestNonzeroFloat32
}

var scalarInputs = []float32{
	0, 1e-8, -1e-8, 0.1, -0.1, 0.5, -0.5, 1, -1, 2, -2, 3.75, -3.75, 8, -8,
	15, -15, 19.99, -19.99, 20, -20, 20.01, -20.01, 30, -30, 50, -50, 87, -87,
}

func TestSigmoidStable(t *testing.T) {
	for _, z := range append(scalarInputs, 100, -100, 104, -104, 200, -200) {
		want := sigmoid64(float64(z))
		got := SigmoidStable(z)
		require.InDelta(t, want, float64(got), scalarTol(want, 3), "z=%v", z)
	}
	// The negative branch keeps tiny results instead of flushing to 0.
	require.Greater(t, SigmoidStable(-100), float32(0))
	require.Equal(t, float32(1), SigmoidStable(100))
	require.Equal(t, float32(0.5), SigmoidStable(0))
}

func TestSigmoidPlain(t *testing.T) {
	for _, z := range append(scalarInputs, 100, 200) {
		want := sigmoid64(float64(z))
		got := SigmoidPlain(z)
		require.InDelta(t, want, float64(got), scalarTol(want, 3), "z=%v", z)
	}
	// Spec formula 1/(1+expf(-z)): expf(100) overflows float32 to +Inf,
	// so the plain form gives exactly 0 where the stable one does not.
	require.Equal(t, float32(0), SigmoidPlain(-100))
	require.False(t, math.IsNaN(float64(SigmoidPlain(-1000))))
}

func TestSiLU(t *testing.T) {
	for _, x := range append(scalarInputs, 100, -100) {
		want := float64(x) * sigmoid64(float64(x))
		got := SiLU(x)
		// x·sigmoid(x) rounds the subnormal sigmoid of x ≪ 0 before the
		// product, so allow |x| subnormal steps besides the ulps.
		tol := scalarTol(want, 4) + math.Abs(float64(x))*math.SmallestNonzeroFloat32
		require.InDelta(t, want, float64(got), tol, "x=%v", x)
	}
}

func TestSoftplus(t *testing.T) {
	for _, x := range scalarInputs {
		want := math.Log1p(math.Exp(float64(x)))
		got := Softplus(x)
		require.InDelta(t, want, float64(got), scalarTol(want, 3), "x=%v", x)
	}
	// Cutoffs at ±20 (docs/formats/model.md#numeric-constants): x > 20 returns x itself, x < −20 returns
	// expf(x) (no log1p); 20 and −20 themselves take the log1p path.
	for _, x := range []float32{20.0001, 21, 50, 100, 1e10, 3e38} {
		require.Equal(t, x, Softplus(x), "x=%v", x)
	}
	for _, x := range []float32{-20.0001, -21, -50, -100} {
		require.Equal(t, float32(math.Exp(float64(x))), Softplus(x), "x=%v", x)
	}
	require.Equal(t, float32(math.Log1p(float64(float32(math.Exp(20))))), Softplus(20))
	require.Equal(t, float32(math.Log1p(float64(float32(math.Exp(-20))))), Softplus(-20))
}

// --- Hadamard (docs/formats/model.md#fp4-e2m1-rounding-and-the-hadamard-transform) ---

// sylvester returns the normalized Sylvester Hadamard matrix of order n:
// H[i][j] = (−1)^popcount(i&j) / sqrt(n).
func sylvester(n int) [][]float64 {
	h := make([][]float64, n)
	norm := 1 / math.Sqrt(float64(n))
	for i := range h {
		h[i] = make([]float64, n)
		for j := range h[i] {
			if bits.OnesCount(uint(i&j))%2 == 0 {
				h[i][j] = norm
			} else {
				h[i][j] = -norm
			}
		}
	}
	return h
}

func TestHadamard(t *testing.T) {
	r := newRand(2)
	for _, n := range []int{1, 2, 8, 32, 128} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := sylvester(n)
			for trial := range 5 {
				x := randVec(r, n, math.Pow(10, float64(trial-2)))
				orig := append([]float32(nil), x...)
				Hadamard(x)
				var sumAbs float64
				for _, v := range orig {
					sumAbs += math.Abs(float64(v))
				}
				// log2(n) levels of float32 butterflies plus the scaling.
				tol := float64(bits.Len(uint(n))+1) * 0x1p-24 * sumAbs
				for i := range n {
					var want float64
					for j := range n {
						want += h[i][j] * float64(orig[j])
					}
					require.InDelta(t, want, float64(x[i]), tol, "n=%d i=%d", n, i)
				}
				// H is symmetric and orthogonal: applying it twice is the identity.
				Hadamard(x)
				for i := range n {
					require.InDelta(t, float64(orig[i]), float64(x[i]), 2*tol, "twice n=%d i=%d", n, i)
				}
			}
		})
	}
}

func TestHadamardBasisVectors(t *testing.T) {
	// Column j of H: e_j maps to ±1/sqrt(n) with the Sylvester signs, exactly.
	const n = 128
	h := sylvester(n)
	for _, j := range []int{0, 1, 5, 64, 127} {
		x := make([]float32, n)
		x[j] = 1
		Hadamard(x)
		for i := range n {
			require.Equal(t, float32(h[i][j]), x[i], "i=%d j=%d", i, j)
		}
	}
	// The normalization constant of docs/formats/model.md#numeric-constants for n = 128.
	x := make([]float32, n)
	x[0] = 1
	Hadamard(x)
	require.Equal(t, uint32(0x3DB504F3), math.Float32bits(x[0]))
}

// --- Sinkhorn (docs/formats/model.md#hc-pre) ---

// sinkhorn64 is the spec's SINKHORN in float64: c[a + n·b], softmax over a
// per column b plus eps, one row normalization, then iters−1 rounds of
// column then row normalization, each dividing by (sum + eps).
func sinkhorn64(z []float32, n, iters int, eps float64) []float64 {
	c := make([]float64, len(z))
	for b := range n {
		m := math.Inf(-1)
		for a := range n {
			m = math.Max(m, float64(z[a+n*b]))
		}
		var s float64
		for a := range n {
			c[a+n*b] = math.Exp(float64(z[a+n*b]) - m)
			s += c[a+n*b]
		}
		for a := range n {
			c[a+n*b] = c[a+n*b]/s + eps
		}
	}
	rows := func() {
		for a := range n {
			var s float64
			for b := range n {
				s += c[a+n*b]
			}
			for b := range n {
				c[a+n*b] /= s + eps
			}
		}
	}
	cols := func() {
		for b := range n {
			var s float64
			for a := range n {
				s += c[a+n*b]
			}
			for a := range n {
				c[a+n*b] /= s + eps
			}
		}
	}
	rows()
	for range iters - 1 {
		cols()
		rows()
	}
	return c
}

func TestSinkhorn(t *testing.T) {
	r := newRand(3)
	const iters, eps = 20, float32(1e-6)
	for _, n := range []int{1, 2, 4, 8} {
		for _, scale := range []float64{0.1, 1, 2} {
			t.Run(fmt.Sprintf("n%d_scale%g", n, scale), func(t *testing.T) {
				for range 50 {
					z := randVec(r, n*n, scale)
					want := sinkhorn64(z, n, iters, float64(eps))
					c := append([]float32(nil), z...)
					Sinkhorn(c, n, iters, eps)
					for i := range c {
						require.InDelta(t, want[i], float64(c[i]), 1e-6, "entry %d", i)
						require.Greater(t, c[i], float32(0))
					}
					// The last step normalizes rows: each sums to s/(s+eps).
					for a := range n {
						var s float64
						for b := range n {
							s += float64(c[a+n*b])
						}
						require.InDelta(t, 1, s, 1e-5, "row %d", a)
					}
					// Columns are off by what 20 rounds leave unconverged, which
					// exact arithmetic shares: the float32 column sums track the
					// float64 reference's. Mild logits (spread 0.1) converge to
					// the eps level; spread 1–2 logits can stay a few percent
					// off after 20 rounds even in exact arithmetic.
					colTol := map[float64]float64{0.1: 1e-5, 1: 0.03, 2: 0.08}[scale]
					for b := range n {
						var s, s64 float64
						for a := range n {
							s += float64(c[a+n*b])
							s64 += want[a+n*b]
						}
						require.InDelta(t, s64, s, 1e-5, "col %d vs float64", b)
						require.InDelta(t, 1, s, colTol, "col %d", b)
					}
				}
			})
		}
	}
}

func TestSinkhornConverges(t *testing.T) {
	// With enough rounds the result is doubly stochastic to the eps level.
	r := newRand(7)
	for _, n := range []int{2, 4, 8} {
		for range 20 {
			c := randVec(r, n*n, 1)
			Sinkhorn(c, n, 2000, 1e-6)
			for i := range n {
				var row, col float64
				for j := range n {
					row += float64(c[i+n*j])
					col += float64(c[j+n*i])
				}
				require.InDelta(t, 1, row, 1e-5, "n=%d row %d", n, i)
				require.InDelta(t, 1, col, 1e-4, "n=%d col %d", n, i)
			}
		}
	}
}

// sinkhornSpecF32 is docs/formats/model.md#hc-pre transcribed with its float32 rounding points:
// expf rounded from float64, sums in ascending index, one reciprocal per
// row/column, products rounded before the +eps.
func sinkhornSpecF32(z []float32, n, iters int, eps float32) []float32 {
	c := append([]float32(nil), z...)
	at := func(a, b int) *float32 { return &c[a+n*b] }
	for b := range n {
		m := *at(0, b)
		for a := 1; a < n; a++ {
			if v := *at(a, b); v > m {
				m = v
			}
		}
		var s float32
		for a := range n {
			*at(a, b) = float32(math.Exp(float64(*at(a, b) - m)))
			s += *at(a, b)
		}
		r := 1 / s
		for a := range n {
			*at(a, b) = float32(*at(a, b)*r) + eps
		}
	}
	norm := func(byRow bool) {
		for i := range n {
			var s float32
			for j := range n {
				if byRow {
					s += *at(i, j)
				} else {
					s += *at(j, i)
				}
			}
			r := 1 / (s + eps)
			for j := range n {
				if byRow {
					*at(i, j) *= r
				} else {
					*at(j, i) *= r
				}
			}
		}
	}
	norm(true)
	for range iters - 1 {
		norm(false)
		norm(true)
	}
	return c
}

func TestSinkhornSpecRounding(t *testing.T) {
	r := newRand(8)
	for _, n := range []int{2, 4} {
		for range 200 {
			z := randVec(r, n*n, 2)
			want := sinkhornSpecF32(z, n, 20, 1e-6)
			Sinkhorn(z, n, 20, 1e-6)
			require.Equal(t, bitsOf(want), bitsOf(z))
		}
	}
}

func TestSinkhornIndexing(t *testing.T) {
	// A column b (c[n·b .. n·b+n)) that strongly prefers output a = b+1 mod n
	// gives a mixing matrix concentrated on C[a][b] = c[a + n·b].
	const n = 4
	z := make([]float32, n*n)
	for b := range n {
		z[(b+1)%n+n*b] = 30
	}
	Sinkhorn(z, n, 20, 1e-6)
	for b := range n {
		for a := range n {
			if a == (b+1)%n {
				require.InDelta(t, 1, float64(z[a+n*b]), 1e-5)
			} else {
				require.InDelta(t, 0, float64(z[a+n*b]), 1e-5)
			}
		}
	}
}

func TestSinkhornOneIteration(t *testing.T) {
	// iters = 1: softmax + eps, then a single row normalization.
	r := newRand(4)
	const n = 4
	z := randVec(r, n*n, 1)
	want := sinkhorn64(z, n, 1, 1e-6)
	Sinkhorn(z, n, 1, 1e-6)
	for i := range z {
		require.InDelta(t, want[i], float64(z[i]), 1e-6)
	}
}

// --- HCPost (docs/formats/model.md#hc-post) ---

func TestHCPost(t *testing.T) {
	r := newRand(5)
	for _, c := range []struct{ n, d int }{{1, 3}, {2, 17}, {4, 4096}, {4, 64}} {
		t.Run(fmt.Sprintf("n%d_d%d", c.n, c.d), func(t *testing.T) {
			x := randVec(r, c.n*c.d, 1)
			y := randVec(r, c.d, 2)
			post := randVec(r, c.n, 1)
			comb := randVec(r, c.n*c.n, 0.5)
			dst := make([]float32, c.n*c.d)
			HCPost(dst, x, y, post, comb, c.n)
			for a := range c.n {
				for d := range c.d {
					want := float64(y[d]) * float64(post[a])
					mag := math.Abs(want)
					for b := range c.n {
						p := float64(comb[a+c.n*b]) * float64(x[b*c.d+d])
						want += p
						mag += math.Abs(p)
					}
					tol := float64(2*c.n+2) * 0x1p-24 * mag
					require.InDelta(t, want, float64(dst[a*c.d+d]), tol, "a=%d d=%d", a, d)

					// Spec order: y·post first, then b = 0..n−1, float32.
					acc := float32(y[d] * post[a])
					for b := range c.n {
						acc += float32(comb[a+c.n*b] * x[b*c.d+d])
					}
					require.Equal(t, acc, dst[a*c.d+d], "a=%d d=%d order", a, d)
				}
			}
		})
	}
}

// --- small helpers ---

func TestDotAxpy(t *testing.T) {
	r := newRand(6)
	a, b := randVec(r, 300, 1), randVec(r, 300, 1)
	var want, mag float64
	for i := range a {
		want += float64(a[i]) * float64(b[i])
		mag += math.Abs(float64(a[i]) * float64(b[i]))
	}
	require.InDelta(t, want, float64(Dot(a, b)), 301*0x1p-24*mag)

	acc := randVec(r, 300, 1)
	orig := append([]float32(nil), acc...)
	Axpy(acc, 0.75, b)
	for i := range acc {
		require.Equal(t, orig[i]+float32(0.75*b[i]), acc[i])
	}
}

func TestRoundF16(t *testing.T) {
	x := []float32{1, 1 + 0x1p-11, 1 + 0x1p-10, 1 + 3*0x1p-11, 65504, 65520, 1e-8, -2.5}
	RoundF16(x)
	// 1+2^-11 is a tie → even (1); 1+3·2^-11 ties up to 1+2^-9; 65520
	// rounds past the largest f16 to +Inf; 1e-8 is below half the smallest
	// f16 subnormal (2^-24) and flushes to 0.
	require.Equal(t, []float32{1, 1, 1 + 0x1p-10, 1 + 0x1p-9, 65504}, x[:5])
	require.True(t, math.IsInf(float64(x[5]), 1))
	require.Equal(t, []float32{0, -2.5}, x[6:])
}
