package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// elemInputs returns x of length n with ordinary values and, at fixed
// places, the specials whose float rules a SIMD loop could get wrong.
func elemInputs(n int, seed uint64) []float32 {
	r := newRand(seed)
	x := randVec(r, n, 3)
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		float32(math.Copysign(0, -1)), 0, math.SmallestNonzeroFloat32, math.MaxFloat32, -1e-30}
	for i := 0; i < n; i += 7 {
		x[i] = specials[(i/7)%len(specials)]
	}
	return x
}

// TestElemLoops holds mulTo, mulAdd and mulMulTo (their SIMD forms where the CPU
// has them) to the plain loops bit for bit, on every length to 70 and on
// the Flash width, with infinities, NaN, signed zeros and subnormals.
func TestElemLoops(t *testing.T) {
	lengths := []int{4096}
	for n := range 71 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, s := range []float32{0.37, -2.5, 0, float32(math.Inf(1)), 1e-30} {
			t.Run(fmt.Sprintf("n%d_s%g", n, s), func(t *testing.T) {
				x, acc := elemInputs(n, 1), elemInputs(n, 2)
				got := make([]float32, n)
				mulTo(got, s, x)
				for i := range n {
					require.Equal(t, math.Float32bits(s*x[i]), math.Float32bits(got[i]), "mulTo %d", i)
				}
				copy(got, acc)
				mulAdd(got, s, x)
				for i := range n {
					want := acc[i] + float32(s*x[i])
					require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "mulAdd %d", i)
				}
				mulMulTo(got, s, x, acc)
				for i := range n {
					want := float32(s*x[i]) * acc[i]
					require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "mulMulTo %d", i)
				}
			})
		}
	}
}

// TestWeightedSumOrder holds weightedSum to the spec's order: per element
// the products of h = 0, 1, … added in turn to a zero sum, each rounded.
func TestWeightedSumOrder(t *testing.T) {
	r := newRand(8)
	for _, c := range []struct{ h, d int }{{4, 4096}, {4, 19}, {1, 8}, {3, 0}} {
		x := randVec(r, c.h*c.d, 2)
		w := randVec(r, c.h, 1)
		dst := randVec(r, c.d, 1) // garbage: every element must be written
		weightedSum(dst, x, w)
		for d := range c.d {
			var acc float32
			for h := range c.h {
				acc += float32(x[h*c.d+d] * w[h])
			}
			require.Equal(t, math.Float32bits(acc), math.Float32bits(dst[d]), "h=%d d=%d elem %d", c.h, c.d, d)
		}
	}
}

// BenchmarkHCPost compares HCPost with the plain loop of the spec's order
// (impl=loop) on Flash's shape: 4 streams of 4096.
func BenchmarkHCPost(b *testing.B) {
	const n, d = 4, 4096
	r := newRand(9)
	x, y := randVec(r, n*d, 1), randVec(r, d, 1)
	post, comb := randVec(r, n, 1), randVec(r, n*n, 1)
	dst := make([]float32, n*d)
	b.Run("impl=loop", func(b *testing.B) {
		for b.Loop() {
			for a := range n {
				for i := range d {
					acc := float32(y[i] * post[a])
					for k := range n {
						acc += float32(comb[a+n*k] * x[k*d+i])
					}
					dst[a*d+i] = acc
				}
			}
		}
	})
	b.Run("impl=best", func(b *testing.B) {
		for b.Loop() {
			HCPost(dst, x, y, post, comb, n)
		}
	})
}
