//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// referenceVecOps returns the loops that define the float order of be's
// attention: Dot and Axpy for a pure-Go backend, else the AVX2 ones.
func referenceVecOps(be *Backend) vecOps {
	if _, ok := simdVecOps(); !ok || be.Kernels().Generic() {
		return genericVecOps()
	}
	return avx2VecOps()
}

// oddVec returns n values, each with probability p an infinity or a NaN
// (of either sign, with a random payload) and otherwise normal, subnormal
// or near the float32 maximum, of either sign.
func oddVec(r *rand.Rand, n int, p float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		if r.Float64() < p {
			sign := r.Uint32() & 0x80000000
			if r.IntN(2) == 0 {
				v[i] = math.Float32frombits(sign | 0x7f800000)
			} else {
				v[i] = math.Float32frombits(sign | 0x7f800000 | (r.Uint32()&0x7fffff | 1))
			}
			continue
		}
		x := r.NormFloat64()
		switch r.IntN(8) {
		case 0:
			x *= 1e-42 // subnormal
		case 1:
			x *= 1e37 // products and sums overflow
		}
		v[i] = float32(x)
	}
	return v
}

// vecLengths are the lengths the loop tests run: every length to 80 (all
// remainders of the 8-, 16-, 32- and 64-float steps), then random ones to
// 600.
func vecLengths(r *rand.Rand) []int {
	var ns []int
	for n := range 81 {
		ns = append(ns, n)
	}
	for range 60 {
		ns = append(ns, 81+r.IntN(520))
	}
	return append(ns, 512, 600)
}

// TestAVX512MatchesAVX2 holds the AVX-512 dot and axpy to the AVX2 ones
// bit for bit, NaN payloads included, on finite values of every magnitude
// and on vectors sprinkled with infinities and NaNs, rows misaligned.
func TestAVX512MatchesAVX2(t *testing.T) {
	if !hasAVX512() {
		t.Skip("no AVX-512 on this CPU")
	}
	r := newRand(71)
	for _, p := range []float64{0, 0.01, 0.3} {
		for _, n := range vecLengths(r) {
			a := oddVec(r, n+1, p)[1:]
			b := oddVec(r, n+3, p)[3:]
			want, got := dotAVX2(a, b), dotAVX512(a, b)
			requireSameBits(t, []float32{want}, []float32{got}, "dot n=%d p=%v", n, p)

			acc := oddVec(r, n+2, p)[2:]
			w := oddVec(r, 1, p)[0]
			wantAcc := append([]float32(nil), acc...)
			axpyAVX2(wantAcc, w, b)
			axpyAVX512(acc, w, b)
			requireSameBits(t, wantAcc, acc, "axpy n=%d p=%v", n, p)
		}
	}
}

// groupLoops are the four-head loops of vec_amd64.s this CPU can run.
func groupLoops() []struct {
	name  string
	dots4 func(dst, q []float32, rows [][]float32)
	weigh func(out, w []float32, rows [][]float32, r []float32)
} {
	type loops = struct {
		name  string
		dots4 func(dst, q []float32, rows [][]float32)
		weigh func(out, w []float32, rows [][]float32, r []float32)
	}
	var ls []loops
	if hasAVX512() {
		ls = append(ls, loops{"avx512", dots4AVX512, weigh4AVX512})
	}
	if hasAVX2() {
		ls = append(ls, loops{"avx2", dots4AVX2, weigh4AVX2})
	}
	return ls
}

// TestGroupLoopsMatchSingle holds dots4 and weigh4 of the AVX-512 and the
// AVX2 loops to four heads' separate AVX2 dots, and to the AVX2 axpys from
// zero then the scaling that weigh stands for, bit for bit, over head
// dimensions of every remainder and row counts from none up.
func TestGroupLoopsMatchSingle(t *testing.T) {
	ls := groupLoops()
	if len(ls) == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	for _, l := range ls {
		r := newRand(73)
		for _, p := range []float64{0, 0.005, 0.2} {
			for i, d := range vecLengths(r) {
				nrows := []int{0, 1, 2, 3, 17}[i%5]
				t.Run(fmt.Sprintf("%s/p=%v/d=%d/rows=%d", l.name, p, d, nrows), func(t *testing.T) {
					q := oddVec(r, 4*d, p)
					rows := make([][]float32, nrows)
					for j := range rows {
						rows[j] = oddVec(r, d+1+j%3, p)[1:] // misaligned, some longer than d
					}
					want := make([]float32, 4*nrows)
					for j, row := range rows {
						for h := range 4 {
							want[4*j+h] = dotAVX2(q[h*d:(h+1)*d], row)
						}
					}
					got := make([]float32, 4*nrows)
					for k := range got {
						got[k] = 99 // overwritten
					}
					l.dots4(got, q, rows)
					requireSameBits(t, want, got, "dots4")

					w := oddVec(r, 4*nrows, p)
					rh := oddVec(r, 4, p)
					want = make([]float32, 4*d)
					for h := range 4 {
						for j, row := range rows {
							axpyAVX2(want[h*d:(h+1)*d], w[4*j+h], row)
						}
						for k := h * d; k < (h+1)*d; k++ {
							want[k] *= rh[h]
						}
					}
					got = oddVec(r, 4*d, p) // overwritten
					l.weigh(got, w, rows, rh)
					requireSameBits(t, want, got, "weigh4")
				})
			}
		}
	}
}

// TestGroupLoopsShortRow checks that a row shorter than the heads panics
// before the assembly reads past it, as dot and axpy do.
func TestGroupLoopsShortRow(t *testing.T) {
	ls := groupLoops()
	if len(ls) == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	for _, l := range ls {
		q, rows := make([]float32, 4*64), [][]float32{make([]float32, 64), make([]float32, 63)}
		require.Panics(t, func() { l.dots4(make([]float32, 8), q, rows) }, l.name)
		require.Panics(t, func() { l.weigh(q, make([]float32, 8), rows, make([]float32, 4)) }, l.name)
	}
}

// BenchmarkVecLoops compares the AVX2 and AVX-512 dot and axpy on rows of
// the indexer's 128 floats and the attention's 512.
func BenchmarkVecLoops(b *testing.B) {
	if !hasAVX512() {
		b.Skip("no AVX-512 on this CPU")
	}
	r := newRand(9)
	for _, n := range []int{128, 512} {
		x, y := randVec(r, n, 1), randVec(r, n, 1)
		for _, l := range []struct {
			name string
			ops  vecOps
		}{{"avx2", avx2VecOps()}, {"avx512", vecOps{dot: dotAVX512, axpy: axpyAVX512}}} {
			b.Run(fmt.Sprintf("dot/n=%d/%s", n, l.name), func(b *testing.B) {
				var s float32
				for b.Loop() {
					s += l.ops.dot(x, y)
				}
				benchSink = s
			})
			b.Run(fmt.Sprintf("axpy/n=%d/%s", n, l.name), func(b *testing.B) {
				acc := make([]float32, n)
				for b.Loop() {
					l.ops.axpy(acc, 1e-3, y)
				}
				benchSink = acc[0]
			})
		}
	}
}
