//go:build amd64 && !purego

package quant

import "fmt"

// The AVX-512 IQ2_XXS kernels of dot_iq2_avx512_amd64.s expand a whole
// 256-element block without scalar table loads: the 32 grid indices are
// looked up at once in tables held in registers (VPERMI2B), the 7-bit sign
// indices get their parity bit from one GF(2) affine transform, and the
// group scales are applied in int32 with VNNI (VPDPWSSD). They form each
// block's exact int32 sum and then do the block's float32 arithmetic in
// dot.go's order, so they return bit for bit what DotIQ2XXS returns. Both
// take every int8 activation code, -128 included (no activation is
// negated; the AVX2 kernels need -127..127). The single-token kernel
// multiplies the weights offset by +64 and takes the offset back with the
// activation's Bsums, so it needs Bsums that are the sums of their codes,
// as QuantizeQ8K makes them.

// iq2xxsAVX512Codes re-encodes the IQ2_XXS grid for the AVX-512 kernels:
// bytes 0..255 hold for grid row k the 2-bit codes of its elements 0..3,
// bytes 256..511 those of elements 4..7, element t at bits 2(t%4). Code 0,
// 1, 2 stands for magnitude 8, 25, 43. Four 128-byte pieces of this table
// fill eight registers that VPERMI2B looks the grid indices up in.
var iq2xxsAVX512Codes = iq2xxsCodeTable()

// iq2xxsCodeTable returns the table of iq2xxsAVX512Codes built from
// iq2xxsGrid; it panics on a grid byte that is not a valid magnitude.
func iq2xxsCodeTable() [512]byte {
	var tab [512]byte
	for k, row := range iq2xxsGrid {
		for t := range 8 {
			var c byte
			switch m := byte(row >> (8 * t)); m {
			case 8:
				c = 0
			case 25:
				c = 1
			case 43:
				c = 2
			default:
				panic(fmt.Sprintf("quant: iq2xxsGrid row %d holds magnitude %d", k, m))
			}
			tab[256*(t/4)+k] |= c << (2 * (t % 4))
		}
	}
	return tab
}

// dotIQ2XXSAVX512 is DotIQ2XXS with AVX-512 (BW, VBMI, VNNI, GFNI,
// BITALG) for activations of any codes, -128 included, whose Bsums are
// their codes' sums (QuantizeQ8K's); other Bsums give another result.
func dotIQ2XXSAVX512(w []byte, y []BlockQ8K) float32 {
	if len(y) == 0 {
		return 0
	}
	w = w[:len(y)*dotIQ2XXSBytes]
	return dotIQ2XXSAVX512Asm(&w[0], &y[0], len(y))
}

// dotIQ2XXSx4AVX512 is DotIQ2XXSx4 with AVX-512, for activations of any
// codes, -128 included: each weight block is expanded once and applied to
// all four activations.
func dotIQ2XXSx4AVX512(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	checkQ8Kx4(len(y0), y1, y2, y3)
	if len(y0) == 0 {
		*out = [4]float32{}
		return
	}
	w = w[:len(y0)*dotIQ2XXSBytes]
	dotIQ2XXSx4AVX512Asm(&w[0], &y0[0], &y1[0], &y2[0], &y3[0], len(y0), out)
}

// dotIQ2XXSAVX512Asm returns the IQ2_XXS dot of nb weight blocks at w with
// nb activation blocks at y (nb > 0), whose Bsums must be their codes'
// sums.
//
//go:noescape
func dotIQ2XXSAVX512Asm(w *byte, y *BlockQ8K, nb int) float32

// dotIQ2XXSx4AVX512Asm sets out[t] to the IQ2_XXS dot of nb weight blocks
// at w with nb activation blocks at yt (nb > 0), for t = 0..3.
//
//go:noescape
func dotIQ2XXSx4AVX512Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
