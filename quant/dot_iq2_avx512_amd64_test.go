//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
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

// TestDotIQ2XXSAVX512Exact holds the AVX-512 single-token kernel to
// DotIQ2XXS, and to the AVX2 kernel, bit for bit (any NaN matching any
// NaN against DotIQ2XXS, the same NaN against AVX2), for every row length
// of 1 to 20 blocks (each remainder of the four-block loop, with and
// without whole pairs of blocks), on random rows and on the extremes:
// activation codes of -128 and 127, every group scale 15, every weight
// negative, and Inf and NaN scales of weights and activations.
func TestDotIQ2XXSAVX512Exact(t *testing.T) {
	requireAVX512IQ2(t)
	r := rand.New(rand.NewPCG(7, 8))
	randByte := func(int) byte { return byte(r.Uint32()) }
	randCode := func(int) int8 { return int8(r.Uint32()) }
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
	alternating := func(i int) int8 { return int8(-128 + 255*(i&1)) }
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name  string
		wbyte func(i int) byte // byte i of a block's 64 grid and sign bytes
		scale func(b int) uint16
		code  func(i int) int8
		d     func(b int) float32
	}{
		{"random", randByte, func(int) uint16 { return 0x2c00 }, randCode, randD},
		{"all-0xff-act-min", func(int) byte { return 0xff }, func(int) uint16 { return 0x3c00 }, constCode(-128), randD},
		{"all-0xff-act-max", func(int) byte { return 0xff }, func(int) uint16 { return 0x3c00 }, constCode(127), randD},
		{"scale15-negative-act-min", allNeg, func(int) uint16 { return 0x3c00 }, constCode(-128), randD},
		{"scale15-negative-alternating", allNeg, func(int) uint16 { return 0x3c00 }, alternating, randD},
		{"all-0x00-act-max", func(int) byte { return 0 }, func(int) uint16 { return 0x3c00 }, constCode(127), randD},
		{"weight-scale-inf", randByte, func(b int) uint16 { return []uint16{0x3c00, 0x7c00}[b%2] }, randCode, randD},
		{"weight-scale-nan", randByte, func(b int) uint16 { return []uint16{0x3c00, 0x7e01}[b%2] }, randCode, randD},
		{"act-d-inf", randByte, func(int) uint16 { return 0x3c00 }, randCode, func(b int) float32 { return []float32{1, inf}[b%2] }},
		{"act-d-nan", randByte, func(int) uint16 { return 0x3c00 }, randCode, func(b int) float32 { return []float32{1, nan}[b%2] }},
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
