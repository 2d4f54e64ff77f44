package cpu

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// TestVecOps holds the SIMD dot and axpy to float64 results with the
// error bound of their float32 sums (γ_n·Σ|terms| for a dot of n terms in
// any order; one rounding per element for a fused axpy), at every length
// around the 8- and 32-float steps, with rows misaligned by one float.
func TestVecOps(t *testing.T) {
	simd, ok := simdVecOps()
	if !ok {
		t.Skip("no SIMD float loops on this CPU or build")
	}
	r := newRand(7)
	u := math.Ldexp(1, -24)
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 39, 40, 63, 64, 65, 100, 512, 513} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			a := randVec(r, n+1, 3)[1:]
			b := randVec(r, n+1, 3)[1:]
			var want, mag float64
			for i := range n {
				want += float64(a[i]) * float64(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
			}
			g := float64(n) * u / (1 - float64(n)*u)
			require.InDelta(t, want, float64(simd.dot(a, b)), 2*g*mag+1e-30, "dot")

			acc := randVec(r, n+1, 1)[1:]
			orig := append([]float32(nil), acc...)
			w := float32(r.NormFloat64())
			simd.axpy(acc, w, b)
			for i := range n {
				exact := float64(orig[i]) + float64(w)*float64(b[i])
				require.InDelta(t, exact, float64(acc[i]), 2*u*math.Abs(exact)+2*u*math.Abs(float64(w)*float64(b[i]))+1e-38, "axpy element %d", i)
			}
		})
	}
}

// TestVecOpsFollowKernels checks that a backend on the pure-Go dot kernels
// runs the generic float loops and one on vector kernels the SIMD ones.
func TestVecOpsFollowKernels(t *testing.T) {
	gen := NewWithKernels(1, quant.GenericKernels())
	defer gen.Close()
	require.True(t, sameVecOps(genericVecOps(), gen.vec), "pure-Go backend")
	simd, ok := simdVecOps()
	vk, hasVec := quant.VectorKernels()
	if !ok || !hasVec {
		t.Skip("no vector kernels on this CPU or build")
	}
	be := NewWithKernels(1, vk)
	defer be.Close()
	require.True(t, sameVecOps(simd, be.vec), "%s backend", vk.Name)
}

// sameVecOps reports whether a and b hold the same functions.
func sameVecOps(a, b vecOps) bool {
	same := func(f, g any) bool { return reflect.ValueOf(f).Pointer() == reflect.ValueOf(g).Pointer() }
	return same(a.dot, b.dot) && same(a.axpy, b.axpy) && same(a.dots4, b.dots4) && same(a.weigh4, b.weigh4)
}
