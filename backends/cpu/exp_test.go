package cpu

import (
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

var expFull = flag.Bool("expfull", false, "check expfs on all 2^32 float32 bit patterns (minutes)")

// expRef is the scalar expf written out again: math.Exp in float64,
// rounded once to float32.
func expRef(x float32) float32 { return float32(math.Exp(float64(x))) }

// expForm is one implementation of expfs and of the SwiGLU (swiglu's
// contract); expForms lists those of this build and CPU.
type expForm struct {
	name   string
	exp    func(dst, src []float32)
	swiglu func(dst, g, u []float32, clamp, weight float32)
}

// forEachExpForm runs f as a subtest for each of expForms.
func forEachExpForm(t *testing.T, f func(t *testing.T, e expForm)) {
	for _, e := range expForms() {
		t.Run("form="+e.name, func(t *testing.T) { f(t, e) })
	}
}

// requireExpfs checks exp on src, out of place and in place, bit for bit
// against expRef.
func requireExpfs(t *testing.T, exp func(dst, src []float32), src []float32) {
	t.Helper()
	src = append(make([]float32, 1, len(src)+1), src...)[1:] // misaligned by one float
	dst := make([]float32, len(src)+1)[1:]
	exp(dst, src)
	for i, x := range src {
		if want := expRef(x); math.Float32bits(dst[i]) != math.Float32bits(want) {
			t.Fatalf("expfs(%g [%#08x]) at %d of %d = %g [%#08x], want %g [%#08x]",
				x, math.Float32bits(x), i, len(src), dst[i], math.Float32bits(dst[i]), want, math.Float32bits(want))
		}
	}
	in := append([]float32(nil), src...)
	exp(in, in)
	for i := range in {
		if math.Float32bits(dst[i]) != math.Float32bits(in[i]) {
			t.Fatalf("in place, element %d of %d: %#08x, out of place %#08x", i, len(in), math.Float32bits(in[i]), math.Float32bits(dst[i]))
		}
	}
}

// expEdges returns the inputs where an exp is most likely to go wrong.
func expEdges() []float32 {
	inf := float32(math.Inf(1))
	e := []float32{
		0, float32(math.Copysign(0, -1)), inf, -inf,
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		0x1p-126, -0x1p-126, 0x1p-30, -0x1p-30, 1e-8, -1e-8,
		math.Float32frombits(0x7fc00000), math.Float32frombits(0xffc00000), // quiet NaNs
		math.Float32frombits(0x7f800001), math.Float32frombits(0xff812345), // signalling NaNs
		math.Float32frombits(0x7fffffff), math.Float32frombits(0x7fa00000),
		-110, 100, 709, 710, -708, -746, -1000, 1000,
	}
	// The float32 overflow, denormal and underflow thresholds and the
	// clamp bounds of the kernel, with their neighbours.
	for _, b := range []float64{math.Log(math.MaxFloat32), math.Log(0x1p-126), math.Log(0x1p-149), math.Log(0x1p-150), -110, 100} {
		x := float32(b)
		for range 4 {
			x = math.Nextafter32(x, float32(math.Inf(-1)))
		}
		for range 9 {
			e = append(e, x)
			x = math.Nextafter32(x, inf)
		}
	}
	// Exact integers, and the points where x·log2(e) is half an odd
	// integer (where the reduction's rounding to n turns).
	for k := -110; k <= 100; k++ {
		h := float32((float64(k) + 0.5) * math.Ln2)
		e = append(e, float32(k), h, math.Nextafter32(h, -inf), math.Nextafter32(h, inf))
	}
	return e
}

// expHardCases are the float32 inputs, among all 2^32, whose float64
// exp lies closest to the midpoint between two float32 values: within 7
// float64 ulps (found by an exhaustive scan with math.Exp). Only there can
// a float64 result one or two ulps off change the float32 one, so these
// are the cases that tell an exact exp from a nearly exact one.
var expHardCases = []uint32{
	0xc16912cd, 0xbbf0edf1, 0x377eff81, 0xbae0e25c, 0xb3000000, 0x38e69cc1, 0x39c6be5b,
	0x3d1a274e, 0x383a3ef1, 0x40315b33, 0x4001b249, 0x39e5bb1d, 0x36fdffc1,
}

// expNearTies returns expHardCases as float32 values.
func expNearTies() []float32 {
	out := make([]float32, len(expHardCases))
	for i, b := range expHardCases {
		out[i] = math.Float32frombits(b)
	}
	return out
}

// TestExpHardCases checks that each of expHardCases is what its comment
// says: math.Exp of it within 7 float64 ulps of a float32 midpoint.
func TestExpHardCases(t *testing.T) {
	for _, x := range expNearTies() {
		y := math.Exp(float64(x))
		f := float32(y)
		lo, hi := f, math.Nextafter32(f, float32(math.Inf(1)))
		if float64(f) > y {
			lo, hi = math.Nextafter32(f, 0), f
		}
		mid := (float64(lo) + float64(hi)) / 2
		ulps := math.Abs(y-mid) / (math.Nextafter(y, math.Inf(1)) - y)
		require.LessOrEqual(t, ulps, 7.0, "x=%g", x)
	}
}

// TestExpfs holds expfs, in each of its forms, bit-identical to
// float32(math.Exp(float64(x))).
func TestExpfs(t *testing.T) {
	forEachExpForm(t, testExpfs)
}

func testExpfs(t *testing.T, e expForm) {
	requireExpfs := func(t *testing.T, src []float32) { requireExpfs(t, e.exp, src) }
	t.Run("sweep", func(t *testing.T) {
		// Every 47th float32 of [-110, 100], all lane positions
		// covered: 48M inputs (6M with -short or the race detector,
		// which slows the reference loop tenfold and has nothing to
		// check here).
		stride := uint32(47)
		if testing.Short() || raceEnabled {
			stride = 379
		}
		var src []float32
		flush := func() {
			requireExpfs(t, src)
			src = src[:0]
		}
		for _, r := range [][2]uint32{{0, math.Float32bits(100)}, {0x80000000, math.Float32bits(-110)}} {
			for b := r[0]; b <= r[1]; b += stride {
				src = append(src, math.Float32frombits(b))
				if len(src) == 1<<16 {
					flush()
				}
			}
		}
		flush()
	})
	t.Run("random-bits", func(t *testing.T) {
		r := newRand(5)
		src := make([]float32, 1<<20)
		for i := range src {
			src[i] = math.Float32frombits(r.Uint32())
		}
		requireExpfs(t, src)
	})
	t.Run("edges", func(t *testing.T) {
		requireExpfs(t, expEdges())
		requireExpfs(t, expNearTies())
	})
	t.Run("lengths", func(t *testing.T) {
		// Each length from 0 to 70 (full blocks, a masked tail, both),
		// edge values at every lane position.
		edges := append(expEdges(), expNearTies()...)
		r := newRand(6)
		for n := range 71 {
			src := make([]float32, n)
			for i := range src {
				if r.IntN(2) == 0 {
					src[i] = edges[r.IntN(len(edges))]
				} else {
					src[i] = float32(r.NormFloat64() * 30)
				}
			}
			requireExpfs(t, src)
		}
	})
	t.Run("bounds", func(t *testing.T) {
		// The tail stays inside dst: floats after it are left alone.
		src := make([]float32, 40)
		for n := range 40 {
			buf := make([]float32, 41)
			buf[n] = 12345
			e.exp(buf[:n], src[:n])
			require.Equal(t, float32(12345), buf[n], "n=%d", n)
		}
	})
}

// TestExpfsAll checks expfs, in each of its forms, on every float32
// (-expfull).
func TestExpfsAll(t *testing.T) {
	if !*expFull {
		t.Skip("-expfull not given")
	}
	forEachExpForm(t, testExpfsAll)
}

func testExpfsAll(t *testing.T, e expForm) {
	var bad atomic.Uint64
	var first atomic.Uint32
	first.Store(math.MaxUint32)
	const block = 1 << 16
	var next atomic.Uint64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			src := make([]float32, block)
			dst := make([]float32, block)
			for {
				b := next.Add(1) - 1
				if b >= 1<<32/block {
					return
				}
				for i := range src {
					src[i] = math.Float32frombits(uint32(b*block) + uint32(i))
				}
				e.exp(dst, src)
				for i, x := range src {
					if math.Float32bits(dst[i]) != math.Float32bits(expRef(x)) {
						bad.Add(1)
						first.CompareAndSwap(math.MaxUint32, math.Float32bits(x))
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("2^32 inputs, %d mismatches", bad.Load())
	require.Zero(t, bad.Load(), "mismatches (first at %#08x)", first.Load())
}

// TestSwiGLUVector holds each form of the vector SwiGLU bit-identical to
// the scalar loop on random rows with clamp hits, signed zeros, infinities
// and NaNs (single and paired, with different payloads), at lengths 0 to
// 600, out of place and in place over g or u.
func TestSwiGLUVector(t *testing.T) {
	forEachExpForm(t, testSwiGLUVector)
}

func testSwiGLUVector(t *testing.T, e expForm) {
	r := newRand(9)
	inf := float32(math.Inf(1))
	nan1, nan2 := math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00002)
	negZero := float32(math.Copysign(0, -1))
	special := []float32{0, negZero, inf, -inf, 10, -10, 1e30, -1e30, 88, -88, 104, -104}
	pick := func(p int) float32 {
		switch k := r.IntN(100); {
		case k < p:
			return special[r.IntN(len(special))]
		case k < p+1 && p > 0:
			return []float32{nan1, nan2}[r.IntN(2)]
		default:
			return float32(r.NormFloat64() * []float64{1, 6, 40}[r.IntN(3)])
		}
	}
	type params struct{ clamp, weight float32 }
	cases := []params{{10, 0.7}, {7, 1}, {0, 1}, {negZero, -2}, {inf, 0.25}, {-3, 1}, {10, 0}, {10, inf}, {nan1, 1}, {10, nan2}}
	step := 1 // every length; every 7th with -short or the race detector
	if testing.Short() || raceEnabled {
		step = 7
	}
	for _, c := range cases {
		for _, p := range []int{0, 5, 30} {
			for n := 0; n <= 600; n += step {
				name := fmt.Sprintf("clamp=%g/weight=%g/special=%d%%/n=%d", c.clamp, c.weight, p, n)
				g := make([]float32, n+1)[1:]
				u := make([]float32, n+1)[1:]
				for i := range n {
					g[i], u[i] = pick(p), pick(p)
				}
				want := make([]float32, n)
				swigluGo(want, g, u, c.clamp, c.weight)
				got := make([]float32, n+2)[1:]
				got[n] = 12345
				e.swiglu(got[:n], g, u, c.clamp, c.weight)
				for i := range n {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: element %d (g=%g u=%g) = %g [%#08x], want %g [%#08x]",
							name, i, g[i], u[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
				require.Equal(t, float32(12345), got[n], "%s: wrote past dst", name)
				// In place over g (as the shared expert calls it) and over u.
				for _, over := range []string{"g", "u"} {
					gi, ui := slices.Clone(g), slices.Clone(u)
					dst := gi
					if over == "u" {
						dst = ui
					}
					e.swiglu(dst, gi, ui, c.clamp, c.weight)
					for i := range n {
						if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s, in place over %s: element %d = %g [%#08x], want %g [%#08x]",
								name, over, i, dst[i], math.Float32bits(dst[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	}
}

// TestExpAllocs checks that expfs and the SwiGLU, called per token and
// per expert, allocate nothing, NaN blocks included.
func TestExpAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	r := newRand(12)
	g, u := randVec(r, 2048, 4), randVec(r, 2048, 4)
	g[100] = float32(math.NaN())
	dst := make([]float32, len(g))
	require.Zero(t, testing.AllocsPerRun(10, func() { expfs(dst, g) }), "expfs")
	require.Zero(t, testing.AllocsPerRun(10, func() { swiglu(dst, g, u, 10, 0.5) }), "swiglu")
}

// TestSwiGLUScalar holds the scalar SwiGLU to its definition in float64,
// min(g, c)·σ(min(g, c))·clamp(u)·w, within the few float32 roundings of
// its steps.
func TestSwiGLUScalar(t *testing.T) {
	r := newRand(10)
	n := 2048
	g, u := randVec(r, n, 6), randVec(r, n, 6)
	dst := make([]float32, n)
	const clamp, weight = 7, 0.3
	swigluGo(dst, g, u, clamp, weight)
	for i := range n {
		gj := math.Min(float64(g[i]), clamp)
		uj := math.Max(math.Min(float64(u[i]), clamp), -clamp)
		want := gj / (1 + math.Exp(-gj)) * uj * weight
		require.InDelta(t, want, float64(dst[i]), 8*ulp32(want)+1e-30, "element %d", i)
	}
}

// BenchmarkExpfs compares the scalar expf loop with expfs on 2048 floats
// (Flash's expert width) in the same run.
func BenchmarkExpfs(b *testing.B) {
	r := newRand(3)
	src := randVec(r, 2048, 5)
	dst := make([]float32, len(src))
	for _, bc := range []struct {
		name string
		f    func(dst, src []float32)
	}{{"scalar", expfsGo}, {"vector", expfs}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(src)))
			for b.Loop() {
				bc.f(dst, src)
			}
		})
	}
}

// BenchmarkSwiGLU compares the scalar SwiGLU loop with the vector one on
// 2048 floats (Flash's expert width) in the same run.
func BenchmarkSwiGLU(b *testing.B) {
	r := newRand(4)
	g, u := randVec(r, 2048, 4), randVec(r, 2048, 4)
	dst := make([]float32, len(g))
	for _, bc := range []struct {
		name string
		f    func(dst, g, u []float32, clamp, weight float32)
	}{{"scalar", swigluGo}, {"vector", swiglu}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(g)))
			for b.Loop() {
				bc.f(dst, g, u, 10, 0.5)
			}
		})
	}
}
