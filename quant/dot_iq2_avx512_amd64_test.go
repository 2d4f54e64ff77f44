//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireAVX512IQ2 skips t unless the CPU runs the AVX-512 IQ2_XXS kernels.
func requireAVX512IQ2(t *testing.T) {
	t.Helper()
	if !hasKernelSet("avx512") {
		t.Skip("no AVX-512 with VBMI, VNNI, GFNI and BITALG")
	}
}

// iq2Activation returns nb Q8_K blocks with codes from code (element index)
// and scales from d (block index), and Bsums that sum their codes.
func iq2Activation(nb int, code func(i int) int8, d func(b int) float32) []BlockQ8K {
	y := make([]BlockQ8K, nb)
	for b := range y {
		y[b].D = d(b)
		for i := range y[b].Qs {
			y[b].Qs[i] = code(QK_K*b + i)
		}
		for g := range y[b].Bsums {
			var s int16
			for _, q := range y[b].Qs[16*g : 16*g+16] {
				s += int16(q)
			}
			y[b].Bsums[g] = s
		}
	}
	return y
}

// inIQ2AVX2Domain reports whether y lies in the AVX2 IQ2_XXS kernel's
// domain (dot_k_amd64.go): codes in -127..127 in every block whose scale D
// is not zero. A block of D = ±0 may hold any codes: its term is ±0, or
// NaN, whatever its integer sum.
func inIQ2AVX2Domain(y []BlockQ8K) bool {
	for b := range y {
		if y[b].D != 0 && slices.Min(y[b].Qs[:]) < -127 {
			return false
		}
	}
	return true
}

// TestDotIQ2XXSAVX512Exact holds the AVX-512 single-token kernel to
// DotIQ2XXS bit for bit (any NaN matching any NaN), on every case: its
// domain is every int8 code, -128 included, with Bsums that sum the codes
// (dot_iq2_avx512_amd64.go). The four-token kernel, whose domain is every
// int8 code, must give each token the single-token bits. Where a case's
// activations also lie in the AVX2 kernel's domain (inIQ2AVX2Domain: no
// code of -128 in a block of nonzero scale), the AVX-512 kernel must
// return the AVX2 kernel's bits too, NaN payloads included; the table
// says which cases do, and the test checks the claim against the data.
// It runs every row length of 1 to 20 blocks (each remainder of the
// four-block loop, with and without whole pairs of blocks), on random
// rows and on the extremes: activation codes of -128, -127 and 127, every
// group scale 15, every weight negative, Inf and NaN scales of weights
// and activations, and blocks of scale -0 holding codes of -128.
func TestDotIQ2XXSAVX512Exact(t *testing.T) {
	requireAVX512IQ2(t)
	r := rand.New(rand.NewPCG(7, 8))
	randByte := func(int) byte { return byte(r.Uint32()) }
	randCode := func(int) int8 { return int8(r.Uint32()) }           // -128..127
	randCode127 := func(int) int8 { return int8(r.IntN(255) - 127) } // -127..127
	randD := func(int) float32 { return float32(r.NormFloat64()) }
	constCode := func(v int8) func(int) int8 { return func(int) int8 { return v } }
	// allNeg keeps the grid indices random and sets every a1 to all ones:
	// scale 15 and sign indices 0x7f, whose parity makes all eight
	// weights of each row negative.
	allNeg := func(i int) byte {
		if i%8 >= 4 {
			return 0xff
		}
		return byte(r.Uint32())
	}
	alternating := func(lo int8) func(int) int8 {
		return func(i int) int8 { return []int8{lo, 127}[i&1] }
	}
	// tinyCode and tinyD make the odd blocks of D = -0 (as QuantizeQ8K
	// makes a block too small for a finite scale) hold codes of -128,
	// which a block of zero D may hold in both kernels' domains.
	tinyCode := func(i int) int8 {
		if i/QK_K%2 == 1 {
			return -128
		}
		return randCode127(i)
	}
	tinyD := func(b int) float32 {
		if b%2 == 1 {
			return float32(math.Copysign(0, -1))
		}
		return randD(b)
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	one := func(int) uint16 { return 0x3c00 }
	tests := []struct {
		name  string
		wbyte func(i int) byte // byte i of a block's 64 grid and sign bytes
		scale func(b int) uint16
		code  func(i int) int8
		d     func(b int) float32
		avx2  bool // the activations lie in the AVX2 kernel's domain too
	}{
		{"random", randByte, func(int) uint16 { return 0x2c00 }, randCode127, randD, true},
		{"random-act-full-range", randByte, func(int) uint16 { return 0x2c00 }, randCode, randD, false},
		{"all-0xff-act-min", func(int) byte { return 0xff }, one, constCode(-128), randD, false},
		{"all-0xff-act--127", func(int) byte { return 0xff }, one, constCode(-127), randD, true},
		{"all-0xff-act-max", func(int) byte { return 0xff }, one, constCode(127), randD, true},
		{"scale15-negative-act-min", allNeg, one, constCode(-128), randD, false},
		{"scale15-negative-act--127", allNeg, one, constCode(-127), randD, true},
		{"scale15-negative-alternating-min", allNeg, one, alternating(-128), randD, false},
		{"scale15-negative-alternating--127", allNeg, one, alternating(-127), randD, true},
		{"all-0x00-act-max", func(int) byte { return 0 }, one, constCode(127), randD, true},
		{"weight-scale-inf", randByte, func(b int) uint16 { return []uint16{0x3c00, 0x7c00}[b%2] }, randCode127, randD, true},
		{"weight-scale-nan", randByte, func(b int) uint16 { return []uint16{0x3c00, 0x7e01}[b%2] }, randCode127, randD, true},
		{"act-d-inf", randByte, one, randCode127, func(b int) float32 { return []float32{1, inf}[b%2] }, true},
		{"act-d-nan", randByte, one, randCode127, func(b int) float32 { return []float32{1, nan}[b%2] }, true},
		{"act-d-nan-full-range", randByte, one, randCode, func(b int) float32 { return []float32{1, nan}[b%2] }, false},
		{"act-tiny-blocks", randByte, one, tinyCode, tinyD, true},
		{"act-tiny-blocks-weight-scale-inf", randByte, func(int) uint16 { return 0x7c00 }, tinyCode, tinyD, true},
	}
	for _, tc := range tests {
		for nb := 1; nb <= 20; nb++ {
			t.Run(fmt.Sprintf("%s/nb=%d", tc.name, nb), func(t *testing.T) {
				w := make([]byte, nb*dotIQ2XXSBytes)
				for b := range nb {
					blk := w[b*dotIQ2XXSBytes : (b+1)*dotIQ2XXSBytes]
					binary.LittleEndian.PutUint16(blk, tc.scale(b))
					for i := range 64 {
						blk[2+i] = tc.wbyte(i)
					}
				}
				y := iq2Activation(nb, tc.code, tc.d)
				want, got := DotIQ2XXS(w, y), dotIQ2XXSAVX512(w, y)
				if math.Float32bits(want) != math.Float32bits(got) && !(want != want && got != got) {
					t.Fatalf("AVX-512 %v (%#08x), DotIQ2XXS %v (%#08x)", got, math.Float32bits(got), want, math.Float32bits(want))
				}
				var x4 [4]float32
				dotIQ2XXSx4AVX512(w, y, y, y, y, &x4)
				for tok, v := range x4 {
					require.Equal(t, math.Float32bits(got), math.Float32bits(v), "token %d: AVX-512 x4 %v, single %v", tok, v, got)
				}
				if !tc.avx2 {
					return // codes of -128 where D is not zero: outside the AVX2 kernel's domain
				}
				require.True(t, inIQ2AVX2Domain(y), "the case claims the AVX2 kernel's domain but has a code of -128 in a block of nonzero D")
				avx2 := dotIQ2XXSAVX2(w, y)
				require.Equal(t, math.Float32bits(avx2), math.Float32bits(got), "AVX-512 %v, AVX2 %v", got, avx2)
			})
		}
	}
}

// TestDotIQ2XXSAVX512TrustsBsums shows that the AVX-512 single-token kernel
// reads the activations' Bsums, which DotIQ2XXS ignores: with one Bsums
// entry off by one the result moves by exactly the bias term that entry
// carries, so a test of hand-made activations with stale Bsums fails, and
// with the sums restored it matches again.
func TestDotIQ2XXSAVX512TrustsBsums(t *testing.T) {
	requireAVX512IQ2(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, nb := range []int{1, 3, 4, 6} {
		t.Run(fmt.Sprintf("nb=%d", nb), func(t *testing.T) {
			w := make([]byte, nb*dotIQ2XXSBytes)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for b := range nb {
				binary.LittleEndian.PutUint16(w[b*dotIQ2XXSBytes:], 0x3c00) // d = 1
			}
			y := iq2Activation(nb, func(int) int8 { return int8(r.Uint32()) }, func(int) float32 { return 1 })
			want := DotIQ2XXS(w, y)
			require.Equal(t, math.Float32bits(want), math.Float32bits(dotIQ2XXSAVX512(w, y)), "consistent Bsums")

			// Bsums[5] covers elements 80..95, in group 2: the kernel
			// subtracts 64·(2ls+1)·Bsums[5], so one more takes
			// 64·(2ls+1)/8 off the result (d = D = 1).
			b := nb - 1
			y[b].Bsums[5]++
			ls := w[b*dotIQ2XXSBytes+2+8*2+7] >> 4
			shift := float64(64*(2*int(ls)+1)) / 8
			got := dotIQ2XXSAVX512(w, y)
			require.NotEqual(t, math.Float32bits(want), math.Float32bits(got), "a Bsums entry off by one went unnoticed")
			require.InDelta(t, float64(want)-shift, float64(got), 1e-3*math.Abs(float64(want))+1e-3)
			y[b].Bsums[5]--
			require.Equal(t, math.Float32bits(want), math.Float32bits(dotIQ2XXSAVX512(w, y)), "Bsums restored")
		})
	}
}
