package quant

import (
	"encoding/binary"
	"math"
)

// This file holds the pure-Go reference dot products of one weight row with
// one activation vector (docs/formats/quant.md#dot-products, docs/formats/model.md#matrix-vector-products). They evaluate the
// float operations in exactly the order the spec writes them, block by block
// and sequentially. Every float product that feeds an addition is wrapped in
// an explicit conversion, which the Go spec guarantees rounds it and so
// forbids fusing it into an FMA on architectures that have one.
//
// Sizes are the caller's contract: the weight row must hold at least as many
// blocks (or elements) as the activation; a shorter row is a programming
// error and makes the slicing below panic.

// Block sizes in bytes of the weight formats read here.
const (
	dotQ8_0Bytes   = 34
	dotQ2KBytes    = 84
	dotQ4KBytes    = 144
	dotIQ2XXSBytes = 66
)

// dotF16At decodes the little-endian f16 at b[0:2].
func dotF16At(b []byte) float32 {
	return F16ToF32(binary.LittleEndian.Uint16(b))
}

// DotQ8_0 returns the dot product of one Q8_0 weight row (len(x)*34 bytes)
// with a Q8_0 activation.
//
// Per block it adds (f16(d_w)·d_x)·Σ w_i·x_i (docs/formats/quant.md#dot-products, upstream
// dot_q8_0_row). It panics if w is shorter than len(x) blocks.
func DotQ8_0(w []byte, x []BlockQ8_0) float32 {
	w = w[:len(x)*dotQ8_0Bytes]
	var acc float32
	for b := range x {
		blk := (*[dotQ8_0Bytes]byte)(w[b*dotQ8_0Bytes:])
		xb := &x[b]
		var isum int32
		for i, q := range blk[2:] {
			isum += int32(int8(q)) * int32(xb.Qs[i])
		}
		acc += float32(float32(dotF16At(blk[0:2])*xb.D) * float32(isum))
	}
	return acc
}

// DotQ2K returns the dot product of one Q2_K weight row (len(y)*84 bytes)
// with a Q8_K activation.
//
// It follows upstream ds4_vec_dot_q2_K_q8_K and panics if w is shorter than
// len(y) blocks.
func DotQ2K(w []byte, y []BlockQ8K) float32 {
	w = w[:len(y)*dotQ2KBytes]
	var sumf float32
	for b := range y {
		blk := (*[dotQ2KBytes]byte)(w[b*dotQ2KBytes:])
		yb := &y[b]
		scales := blk[0:16]
		qs := blk[16:80]

		// The min term uses the activation's 16-element sums: each
		// 16-element group shares one min code in its high nibble.
		var summs int32
		for g, sc := range scales {
			summs += int32(yb.Bsums[g]) * int32(sc>>4)
		}

		// Byte qs[32h+l] packs elements 128h+l+32j for j = 0..3 in bits
		// 2j..2j+1; scale k = 8h+2j+sub covers 16 elements starting at
		// 128h+32j+16sub.
		var isum int32
		for h := range 2 {
			for j := range 4 {
				shift := 2 * j
				for sub := range 2 {
					k := 8*h + 2*j + sub
					e0 := 128*h + 32*j + 16*sub
					q2 := qs[32*h+16*sub : 32*h+16*sub+16]
					q8 := yb.Qs[e0 : e0+16]
					var s int32
					for l, q := range q2 {
						s += int32(q>>shift&3) * int32(q8[l])
					}
					isum += int32(scales[k]&15) * s
				}
			}
		}

		dall := yb.D * dotF16At(blk[80:82])
		dmin := yb.D * dotF16At(blk[82:84])
		sumf += float32(dall*float32(isum)) - float32(dmin*float32(summs))
	}
	return sumf
}

// DotIQ2XXS returns the dot product of one IQ2_XXS weight row (len(y)*66
// bytes) with a Q8_K activation.
//
// It follows upstream ds4_vec_dot_iq2_xxs_q8_K and panics if w is shorter
// than len(y) blocks.
func DotIQ2XXS(w []byte, y []BlockQ8K) float32 {
	w = w[:len(y)*dotIQ2XXSBytes]
	var sumf float32
	for b := range y {
		blk := (*[dotIQ2XXSBytes]byte)(w[b*dotIQ2XXSBytes:])
		yb := &y[b]
		var bsum int32
		for g := range 8 {
			grp := (*[8]byte)(blk[2+8*g:])
			a1 := binary.LittleEndian.Uint32(grp[4:])
			// The group scale (0.5+ls)/4 is applied as the integer 2ls+1
			// here and the common factor 1/8 once at the end.
			ls := int32(2*(a1>>28) + 1)
			var sumi int32
			for l := range 4 {
				grid := iq2xxsGrid[grp[l]]
				signs := iq2Sign(a1 >> (7 * l))
				q8 := (*[8]int8)(yb.Qs[32*g+8*l:])
				for t, q := range q8 {
					m := int32(grid >> (8 * t) & 0xff)
					neg := -int32(signs >> t & 1) // 0 or -1
					sumi += (m ^ neg - neg) * int32(q)
				}
			}
			bsum += sumi * ls
		}
		dd := dotF16At(blk[0:2]) * yb.D
		sumf += float32(dd * float32(bsum))
	}
	return 0.125 * sumf
}

// DotQ4K returns the dot product of one Q4_K weight row (len(y)*144 bytes)
// with a Q8_K activation.
//
// Upstream's CPU backend has no Q4_K kernel; this follows the per-block
// formula of its CUDA decode path (dev_dot_q4_K_q8_K_block) and sums the
// block partials sequentially. It panics if w is shorter than len(y) blocks.
func DotQ4K(w []byte, y []BlockQ8K) float32 {
	w = w[:len(y)*dotQ4KBytes]
	var acc float32
	for b := range y {
		blk := (*[dotQ4KBytes]byte)(w[b*dotQ4KBytes:])
		yb := &y[b]
		s := (*[12]byte)(blk[4:16])
		qs := blk[16:144]
		var isum, summs int32
		for j := range 8 {
			sc, m := dotQ4KScaleMin(s, j)
			summs += int32(m) * (int32(yb.Bsums[2*j]) + int32(yb.Bsums[2*j+1]))
			// Byte qs[32p+l] holds element 64p+l in its low nibble and
			// 64p+32+l in its high nibble.
			shift := 4 * (j & 1)
			q4 := qs[32*(j/2) : 32*(j/2)+32]
			q8 := yb.Qs[32*j : 32*j+32]
			var sj int32
			for l, q := range q4 {
				sj += int32(q>>shift&15) * int32(q8[l])
			}
			isum += int32(sc) * sj
		}
		dx := yb.D * dotF16At(blk[0:2])
		dm := yb.D * dotF16At(blk[2:4])
		acc += float32(dx*float32(isum)) - float32(dm*float32(summs))
	}
	return acc
}

// dotQ4KScaleMin unpacks the 6-bit scale and min codes of Q4_K sub-block j.
func dotQ4KScaleMin(s *[12]byte, j int) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// DotF16 returns the dot product of one F16 weight row (len(x)*2 bytes) with
// x, accumulated sequentially in float32 (upstream dot_f16_row).
//
// It panics if w is shorter than len(x) elements.
func DotF16(w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var acc float32
	for i, v := range x {
		h := binary.LittleEndian.Uint16(w[2*i:])
		// Normal numbers, the common case, decode inline by rebiasing the
		// exponent, which is exact; the rest go through F16ToF32.
		var f float32
		if e := h >> 10 & 0x1f; e != 0 && e != 0x1f {
			f = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)+(112<<10))<<13)
		} else {
			f = F16ToF32(h)
		}
		acc += float32(f * v)
	}
	return acc
}

// DotF32 returns the dot product of one F32 weight row (len(x)*4 bytes) with
// x, accumulated in float64 as upstream matvec_f32 does.
//
// It panics if w is shorter than len(x) elements.
func DotF32(w []byte, x []float32) float32 {
	w = w[:4*len(x)]
	var acc float64
	for i, v := range x {
		wi := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
		// The product of two float32 values is exact in float64, so only
		// the additions round.
		acc += float64(float64(wi) * float64(v))
	}
	return float32(acc)
}
