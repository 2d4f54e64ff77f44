package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The dot kernels are checked three ways against this file's own decoding of
// the weight blocks, written from the per-element formulas of
// docs/formats/quant.md#block-layouts (it shares no code with the package's decoders):
//
//  1. exact: the spec formula (docs/formats/quant.md#dot-products) evaluated in float32 from the
//     integer codes decoded here must reproduce the kernel bit for bit, which
//     pins the operation order and the absence of fused multiply-adds;
//  2. rounding: the float64 dot of the dequantized weights with the
//     dequantized activation must agree within the float32 rounding bound
//     γ(k)·M, where M is the sum of the magnitudes of the terms the kernel
//     rounds (Σ|w_i·y_i|, with the scale and min parts of K-quant weights
//     counted separately, since the kernel rounds them separately) and k
//     is the longest chain of roundings any term goes through (a handful
//     per block plus one per block of the sequential sum);
//  3. quantization: the float64 dot with the unquantized activation must
//     agree within that rounding bound plus Σ|w_i|·|d_b|/2, the most the
//     activation quantization can move it.

// unitRoundoff32 is the unit roundoff u of float32.
const unitRoundoff32 = 0x1p-24

// gamma32 returns the classical bound γ(k) = k·u/(1-k·u) on the relative error
// accumulated by k float32 roundings.
func gamma32(k int) float64 { return float64(k) * unitRoundoff32 / (1 - float64(k)*unitRoundoff32) }

// wcodes is a weight row decoded to its integer codes and float scales.
//
// Element i is worth
//
//	Q8_0:    d[b]·q[i]
//	Q2_K:    d[b]·sc[i]·q[i] - dmin[b]·m[i]
//	Q4_K:    d[b]·sc[i]·q[i] - dmin[b]·m[i]
//	IQ2_XXS: d[b]·(0.5+sc[i])·0.25·q[i]    (q is the signed grid magnitude, sc = ls)
//
// with b the block of i.
type wcodes struct {
	t         Type
	d, dmin   []float32
	sc, m, q  []int
	blockSize int
}

// value returns the dequantized weight i, exact in float64 (every factor has
// few enough significant bits).
func (c *wcodes) value(i int) float64 {
	b := i / c.blockSize
	switch c.t {
	case Q8_0:
		return float64(c.d[b]) * float64(c.q[i])
	case IQ2_XXS:
		return float64(c.d[b]) * (0.5 + float64(c.sc[i])) * 0.25 * float64(c.q[i])
	default:
		return float64(c.d[b])*float64(c.sc[i])*float64(c.q[i]) - float64(c.dmin[b])*float64(c.m[i])
	}
}

// magnitude returns the size of the weight-side terms of element i as the
// kernel rounds them: for K-quants the scale and min parts separately.
func (c *wcodes) magnitude(i int) float64 {
	b := i / c.blockSize
	switch c.t {
	case Q2_K, Q4_K:
		return math.Abs(float64(c.d[b])*float64(c.sc[i])*float64(c.q[i])) + math.Abs(float64(c.dmin[b])*float64(c.m[i]))
	default:
		return math.Abs(c.value(i))
	}
}

// f16le decodes the little-endian f16 at b[0:2].
func f16le(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// decodeWeights decodes n elements of a row of type t per docs/formats/quant.md#block-layouts.
func decodeWeights(t Type, w []byte, n int) *wcodes {
	c := &wcodes{t: t, blockSize: t.BlockElems(), sc: make([]int, n), m: make([]int, n), q: make([]int, n)}
	bb := t.BlockBytes()
	for b := 0; b < n/c.blockSize; b++ {
		blk := w[b*bb : (b+1)*bb]
		base := b * c.blockSize
		switch t {
		case Q8_0: // docs/formats/quant.md#q8_0
			c.d = append(c.d, f16le(blk[0:]))
			for i := range 32 {
				c.q[base+i] = int(int8(blk[2+i]))
			}
		case Q2_K: // docs/formats/quant.md#q2_k
			scales, qs := blk[0:16], blk[16:80]
			c.d = append(c.d, f16le(blk[80:]))
			c.dmin = append(c.dmin, f16le(blk[82:]))
			for e := range 256 {
				half, r := e/128, e%128
				j, l := r/32, r%32
				k := 8*half + 2*j + l/16
				c.q[base+e] = int(qs[32*half+l]>>(2*j)) & 3
				c.sc[base+e] = int(scales[k] & 15)
				c.m[base+e] = int(scales[k] >> 4)
			}
		case Q4_K: // docs/formats/quant.md#q4_k
			c.d = append(c.d, f16le(blk[0:]))
			c.dmin = append(c.dmin, f16le(blk[2:]))
			s, qs := blk[4:16], blk[16:144]
			var sc, m [8]int
			for j := range 8 {
				if j < 4 {
					sc[j] = int(s[j] & 63)
					m[j] = int(s[j+4] & 63)
				} else {
					sc[j] = int(s[j+4]&15) | int(s[j-4]>>6)<<4
					m[j] = int(s[j+4]>>4) | int(s[j]>>6)<<4
				}
			}
			for e := range 256 {
				cc, r := e/64, e%64
				j := 2*cc + r/32
				bt := qs[32*cc+r%32]
				nib := int(bt & 15)
				if r >= 32 {
					nib = int(bt >> 4)
				}
				c.q[base+e] = nib
				c.sc[base+e] = sc[j]
				c.m[base+e] = m[j]
			}
		case IQ2_XXS: // docs/formats/quant.md#iq2_xxs
			c.d = append(c.d, f16le(blk[0:]))
			qs := blk[2:66]
			for g := range 8 {
				bg := qs[8*g : 8*g+8]
				a1 := binary.LittleEndian.Uint32(bg[4:])
				ls := int(a1 >> 28)
				for l := range 4 {
					s := (a1 >> (7 * l)) & 127
					// KSIGNS[s] = s | parity(s)<<7.
					sign := s | uint32(bits.OnesCount32(s)&1)<<7
					grid := iq2xxsGrid[bg[l]]
					for tt := range 8 {
						mag := int(grid >> (8 * tt) & 0xff)
						if sign>>tt&1 != 0 {
							mag = -mag
						}
						e := base + 32*g + 8*l + tt
						c.q[e] = mag
						c.sc[e] = ls
					}
				}
			}
		default:
			panic("decodeWeights: unsupported type " + t.String())
		}
	}
	return c
}

// specDot evaluates the docs/formats/quant.md#dot-products formula for c against the activation
// (codes ys, per-block scales yd of blockSize elements) in float32, from
// integer sums formed here. The min term sums m·q8 per element rather than
// using bsums, which also checks the bsums the kernel reads.
func specDot(c *wcodes, yq []int8, yd []float32) float32 {
	n := len(c.q)
	nb := n / c.blockSize
	var acc float32
	for b := range nb {
		var isum, summs int32
		for i := b * c.blockSize; i < (b+1)*c.blockSize; i++ {
			switch c.t {
			case Q8_0:
				isum += int32(c.q[i]) * int32(yq[i])
			case IQ2_XXS:
				isum += int32(2*c.sc[i]+1) * int32(c.q[i]) * int32(yq[i])
			default:
				isum += int32(c.sc[i]*c.q[i]) * int32(yq[i])
				summs += int32(c.m[i]) * int32(yq[i])
			}
		}
		switch c.t {
		case Q8_0:
			acc += float32(float32(c.d[b]*yd[b]) * float32(isum))
		case IQ2_XXS:
			acc += float32(float32(c.d[b]*yd[b]) * float32(isum))
		default:
			acc += float32(float32(yd[b]*c.d[b])*float32(isum)) - float32(float32(yd[b]*c.dmin[b])*float32(summs))
		}
	}
	if c.t == IQ2_XXS {
		acc *= 0.125
	}
	return acc
}

// randWeightRow returns nb random blocks of type t whose f16 scale fields
// are finite normal numbers of either sign (other bytes are uniformly
// random, and every bit pattern of them is a valid block).
func randWeightRow(r *rand.Rand, t Type, nb int) []byte {
	bb := t.BlockBytes()
	w := make([]byte, nb*bb)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	scale := func(p []byte) {
		v := float32(r.Float64()*0.09+0.01) * float32(math.Pow(2, float64(r.IntN(10)-12)))
		if r.IntN(2) == 0 {
			v = -v
		}
		binary.LittleEndian.PutUint16(p, F32ToF16(v))
	}
	for b := range nb {
		blk := w[b*bb : (b+1)*bb]
		switch t {
		case Q8_0, IQ2_XXS:
			scale(blk[0:])
		case Q2_K:
			scale(blk[80:])
			scale(blk[82:])
		case Q4_K:
			scale(blk[0:])
			scale(blk[2:])
		}
	}
	return w
}

// dotKernel runs the kernel for type t on weight row w and activation x,
// returning the result and the activation codes and scales it used.
func dotKernel(t Type, w []byte, x []float32) (got float32, yq []int8, yd []float32) {
	switch t {
	case Q8_0:
		y := make([]BlockQ8_0, (len(x)+31)/32)
		QuantizeQ8_0(x, y)
		for i := range y {
			yq = append(yq, y[i].Qs[:]...)
			yd = append(yd, y[i].D)
		}
		return DotQ8_0(w, y), yq, yd
	default:
		y := make([]BlockQ8K, len(x)/QK_K)
		QuantizeQ8K(x, y)
		for i := range y {
			yq = append(yq, y[i].Qs[:]...)
			yd = append(yd, y[i].D)
		}
		switch t {
		case Q2_K:
			got = DotQ2K(w, y)
		case Q4_K:
			got = DotQ4K(w, y)
		case IQ2_XXS:
			got = DotIQ2XXS(w, y)
		}
		return got, yq, yd
	}
}

func TestDotQuantized(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		t Type
		n int // activation length
	}{
		{Q8_0, 4096},
		{Q8_0, 4096 + 20}, // partial final activation block, zero-padded
		{Q8_0, 32},
		{Q2_K, 4096},
		{Q2_K, 256},
		{Q4_K, 4096},
		{Q4_K, 256},
		{IQ2_XXS, 4096},
		{IQ2_XXS, 256},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%d", tc.t, tc.n), func(t *testing.T) {
			be := tc.t.BlockElems()
			nb := (tc.n + be - 1) / be
			for trial := range 20 {
				w := randWeightRow(r, tc.t, nb)
				x := randActivation(r, tc.n)
				if trial == 1 {
					// An all-zero block and a lone outlier.
					clear(x[:min(len(x), 256)])
					x[len(x)-1] = 1e4
				}
				got, yq, yd := dotKernel(tc.t, w, x)
				c := decodeWeights(tc.t, w, nb*be)

				// 1. Bit-exact against the spec formula.
				want := specDot(c, yq, yd)
				require.Equal(t, math.Float32bits(want), math.Float32bits(got),
					"trial %d: kernel %v, spec order %v", trial, got, want)

				// 2. Within float32 rounding of the exact dot with the
				// dequantized activation. Per block a term goes through
				// at most 3 roundings (scale product, product with the
				// integer sum, the scale/min difference) and then the
				// nb-1 roundings of the sequential sum.
				var exact, mag, wabsd, plain float64
				ab := len(yq) / len(yd) // activation block size
				for i := range nb * be {
					ya := float64(yd[i/ab]) * float64(yq[i])
					exact += c.value(i) * ya
					mag += c.magnitude(i) * math.Abs(ya)
					if i < tc.n {
						plain += c.value(i) * float64(x[i])
						wabsd += math.Abs(c.value(i)) * math.Abs(float64(yd[i/ab]))
					}
				}
				bound := gamma32(nb+3) * mag
				require.InDelta(t, exact, float64(got), bound, "trial %d: rounding bound", trial)

				// 3. Within the quantization error of the float dot with
				// the unquantized activation.
				qbound := bound + wabsd*(0.5+actSlack)
				require.InDelta(t, plain, float64(got), qbound, "trial %d: quantization bound", trial)
			}
		})
	}
}

// q8KOnes returns nb Q8_K blocks with d = 1 and every code 1.
func q8KOnes(nb int) []BlockQ8K {
	y := make([]BlockQ8K, nb)
	for b := range y {
		y[b].D = 1
		for i := range y[b].Qs {
			y[b].Qs[i] = 1
		}
		for g := range y[b].Bsums {
			y[b].Bsums[g] = 16
		}
	}
	return y
}

func TestDotIQ2XXSScale(t *testing.T) {
	// With d = 1 and ls = 0 every weight is (0.5+0)·0.25·mag = mag/8: the
	// kernel must apply the final 0.125 to the integer (2ls+1) scales.
	tests := []struct {
		name      string
		ls        uint32
		gridIndex byte
		signIndex uint32
		want      float32
	}{
		{"ls=0 all 8", 0, 0, 0, 256 * 8 * 0.125},
		{"ls=15 all 8", 15, 0, 0, 256 * 8 * 3.875},
		// Sign index 1 negates element 0 and, by parity, element 7.
		{"ls=0 two negative per 8", 0, 0, 1, 256 * 8 * 0.125 * 4 / 8},
		// Grid entry 255 is 0x2b2b2b1908081908: 8+25+8+8+25+43+43+43 = 203.
		{"ls=1 grid 255", 1, 255, 0, 32 * 203 * 1.5 * 0.25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := make([]byte, 66)
			binary.LittleEndian.PutUint16(w, F32ToF16(1))
			for g := range 8 {
				grp := w[2+8*g : 2+8*g+8]
				for l := range 4 {
					grp[l] = tc.gridIndex
				}
				s := tc.signIndex | tc.signIndex<<7 | tc.signIndex<<14 | tc.signIndex<<21
				binary.LittleEndian.PutUint32(grp[4:], s|tc.ls<<28)
			}
			require.Equal(t, tc.want, DotIQ2XXS(w, q8KOnes(1)))
		})
	}
}

func TestDotQ2KMinTerm(t *testing.T) {
	// All 2-bit codes zero: only the min term -dmin·Σ m_g·bsum_g remains.
	w := make([]byte, 84)
	for g := range 16 {
		w[g] = byte(g)<<4 | 15 // min code g, scale code 15 (ignored: q = 0)
	}
	binary.LittleEndian.PutUint16(w[80:], F32ToF16(1))
	binary.LittleEndian.PutUint16(w[82:], F32ToF16(0.5))
	y := q8KOnes(1)
	// Σ_g g·16 = 16·120 = 1920.
	require.Equal(t, float32(-0.5*1920), DotQ2K(w, y))

	// Codes 3 everywhere and min codes 0: d·Σ sc_g·3·16.
	for g := range 16 {
		w[g] = byte(g & 15)
	}
	for i := 16; i < 80; i++ {
		w[i] = 0xff
	}
	require.Equal(t, float32(120*3*16), DotQ2K(w, y))
}

func TestDotQ4KHighScaleBits(t *testing.T) {
	q4 := func(s [12]byte, d, dmin float32) []byte {
		w := make([]byte, 144)
		binary.LittleEndian.PutUint16(w[0:], F32ToF16(d))
		binary.LittleEndian.PutUint16(w[2:], F32ToF16(dmin))
		copy(w[4:16], s[:])
		for i := 16; i < 144; i++ {
			w[i] = 0x11 // every 4-bit code is 1
		}
		return w
	}
	y := q8KOnes(1)
	tests := []struct {
		name string
		s    [12]byte
		d    float32
		dmin float32
		want float32
	}{
		// Every scale and min code 63.
		{"all 63", [12]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1, 0.5, 63*256 - 0.5*63*256},
		// Only the top bits of bytes 0-3 set: sc_0..3 = 0 and
		// sc_4..7 = 3<<4 = 48, so only elements 128..255 count.
		{"scale high bits", [12]byte{0xc0, 0xc0, 0xc0, 0xc0}, 1, 1, 48 * 128},
		// Only the top bits of bytes 4-7 set: m_0..3 = 0 and m_4..7 = 48.
		{"min high bits", [12]byte{4: 0xc0, 5: 0xc0, 6: 0xc0, 7: 0xc0}, 1, 1, -48 * 128},
		// Low nibbles of bytes 8-11 give sc_4..7 = 5; their high nibbles
		// m_4..7 = 2; sc_0 = 20, m_0 = 33.
		{"mixed", [12]byte{0: 20, 4: 33, 8: 0x25, 9: 0x25, 10: 0x25, 11: 0x25}, 1, 1, 20*32 - 33*32 + 4*(5*32-2*32)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, DotQ4K(q4(tc.s, tc.d, tc.dmin), y))
		})
	}
}

func TestDotFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 512, 4096} {
		// One scale for all of x, so that no term is negligible.
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		w16 := make([]byte, 2*n)
		w32 := make([]byte, 4*n)
		v16 := make([]float32, n)
		v32 := make([]float32, n)
		for i := range n {
			// Random sign and mantissa, exponents 2^-5..2^4: a narrow
			// range keeps every product relevant to the sum, so that
			// any change of rounding (an FMA) shows in the result.
			h := uint16(r.Uint32())&0x83ff | uint16(10+r.IntN(10))<<10
			if i == 3 {
				h = 0x0123 // a subnormal
			}
			binary.LittleEndian.PutUint16(w16[2*i:], h)
			v16[i] = F16ToF32(h)
			v32[i] = float32(r.NormFloat64())
			binary.LittleEndian.PutUint32(w32[4*i:], math.Float32bits(v32[i]))
		}

		// F16: sequential float32, one rounding per product and per add.
		var want16 float32
		var exact16, mag16 float64
		for i := range n {
			want16 += float32(v16[i] * x[i])
			exact16 += float64(v16[i]) * float64(x[i])
			mag16 += math.Abs(float64(v16[i]) * float64(x[i]))
		}
		got16 := DotF16(w16, x)
		require.Equal(t, math.Float32bits(want16), math.Float32bits(got16), "F16 n=%d", n)
		require.InDelta(t, exact16, float64(got16), gamma32(n)*mag16, "F16 n=%d", n)

		// F32: exact float64 products, n-1 float64 adds, one final
		// rounding to float32.
		var acc64, mag32 float64
		for i := range n {
			acc64 += float64(v32[i]) * float64(x[i])
			mag32 += math.Abs(float64(v32[i]) * float64(x[i]))
		}
		got32 := DotF32(w32, x)
		require.Equal(t, float32(acc64), got32, "F32 n=%d", n)
		require.InDelta(t, acc64, float64(got32), unitRoundoff32*math.Abs(acc64)+float64(n)*0x1p-53*mag32, "F32 n=%d", n)
	}
}

// TestDotDecodeMatchesDequantizeRow cross-checks this file's decoding, from
// which the dot tests derive their expectations, against the package's
// DequantizeRow (written independently).
func TestDotDecodeMatchesDequantizeRow(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []Type{Q8_0, Q2_K, Q4_K, IQ2_XXS} {
		const n = 1024
		w := randWeightRow(r, typ, n/typ.BlockElems())
		got := make([]float32, n)
		if err := DequantizeRow(typ, w, got); err != nil {
			t.Skipf("DequantizeRow(%v): %v", typ, err)
		}
		c := decodeWeights(typ, w, n)
		for i := range n {
			// DequantizeRow rounds each of a few float32 products.
			require.InDelta(t, c.value(i), float64(got[i]), gamma32(4)*c.magnitude(i), "%v elem %d", typ, i)
		}
	}
}

func TestActDotAllocFree(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const n = 1024
	x := randActivation(r, n)
	y8 := make([]BlockQ8_0, n/32)
	yk := make([]BlockQ8K, n/QK_K)
	wq8 := randWeightRow(r, Q8_0, n/32)
	wq2 := randWeightRow(r, Q2_K, n/QK_K)
	wq4 := randWeightRow(r, Q4_K, n/QK_K)
	wiq := randWeightRow(r, IQ2_XXS, n/QK_K)
	w16 := make([]byte, 2*n)
	w32 := make([]byte, 4*n)
	var sink float32
	allocs := testing.AllocsPerRun(10, func() {
		QuantizeQ8_0(x, y8)
		QuantizeQ8K(x, yk)
		sink += DotQ8_0(wq8, y8) + DotQ2K(wq2, yk) + DotQ4K(wq4, yk) + DotIQ2XXS(wiq, yk)
		sink += DotF16(w16, x) + DotF32(w32, x)
	})
	require.Zero(t, allocs)
	_ = sink
}
