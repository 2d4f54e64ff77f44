package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The decoders are checked against blocks assembled here field by field and
// against per-element formulas written independently of dequant.go
// (docs/formats/quant.md#block-layouts): each element is located directly from its index,
// and the value is computed in float64. Every product in these formats is
// exact in float32 (an f16 scale has 11 significant bits, a code at most 8),
// and so is the float64 difference of two of them unless their exponents are
// more than 29 apart, so the float64 value rounded once to float32 equals the
// decoder's float32 result bit for bit.

// dqF16 rounds v to the nearest f16 and returns both the bits and the value.
func dqF16(v float32) (uint16, float64) {
	h := F32ToF16(v)
	return h, float64(F16ToF32(h))
}

func TestDequantQ8_0Element(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 20 {
		blk := make([]byte, 2*34)
		var want [64]float32
		for b := range 2 {
			h, d := dqF16(float32(r.NormFloat64()))
			binary.LittleEndian.PutUint16(blk[34*b:], h)
			for i := range 32 {
				q := int8(r.IntN(256) - 128)
				blk[34*b+2+i] = byte(q)
				want[32*b+i] = float32(d * float64(q))
			}
		}
		var got [64]float32
		require.NoError(t, DequantizeRow(Q8_0, blk, got[:]))
		require.Equal(t, want, got)
	}
}

func TestDequantQ2_KElement(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for range 20 {
		var blk [84]byte
		for i := range 80 {
			blk[i] = byte(r.IntN(256)) // scales and 2-bit codes
		}
		hd, d := dqF16(float32(r.NormFloat64()))
		hm, dmin := dqF16(float32(r.NormFloat64()))
		binary.LittleEndian.PutUint16(blk[80:], hd) // d and dmin are last
		binary.LittleEndian.PutUint16(blk[82:], hm)
		var got [256]float32
		require.NoError(t, DequantizeRow(Q2_K, blk[:], got[:]))
		for e := range 256 {
			half, tt := e/128, e%128
			q := blk[16+32*half+tt%32] >> (2 * (tt / 32)) & 3
			g := blk[e/16]
			want := float32(d*float64(g&15)*float64(q) - dmin*float64(g>>4))
			require.Equal(t, want, got[e], "element %d", e)
		}
	}
}

// dqPackQ4K packs six-bit scale and min codes with the "packing view" of
// docs/formats/quant.md#q4_k (the unpacking formulas are what the decoder implements).
func dqPackQ4K(sc, m [8]uint8) [12]byte {
	var s [12]byte
	for j := range 4 {
		s[j] = sc[j]&63 | (sc[j+4]>>4)<<6
		s[j+4] = m[j]&63 | (m[j+4]>>4)<<6
		s[j+8] = sc[j+4]&15 | (m[j+4]&15)<<4
	}
	return s
}

func TestDequantQ4_KElement(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for range 20 {
		var blk [144]byte
		hd, d := dqF16(float32(r.NormFloat64()))
		hm, dmin := dqF16(float32(r.NormFloat64()))
		binary.LittleEndian.PutUint16(blk[0:], hd) // d and dmin are first
		binary.LittleEndian.PutUint16(blk[2:], hm)
		var sc, m [8]uint8
		for j := range 8 {
			sc[j], m[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
		}
		s := dqPackQ4K(sc, m)
		copy(blk[4:16], s[:])
		for i := 16; i < 144; i++ {
			blk[i] = byte(r.IntN(256))
		}
		var got [256]float32
		require.NoError(t, DequantizeRow(Q4_K, blk[:], got[:]))
		for e := range 256 {
			j := e / 32
			b := blk[16+32*(j/2)+e%32]
			q := b & 15
			if j%2 == 1 {
				q = b >> 4
			}
			want := float32(d*float64(sc[j])*float64(q) - dmin*float64(m[j]))
			require.Equal(t, want, got[e], "element %d", e)
		}
	}
}

func TestDequantIQ2_XXSElement(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	mags := [3]float64{8, 25, 43} // grid byte for level 0, 1, 2
	for range 20 {
		var blk [66]byte
		hd, d := dqF16(float32(r.NormFloat64()))
		binary.LittleEndian.PutUint16(blk[0:], hd)
		var gidx [8][4]int
		var sidx [8][4]uint32
		var ls [8]uint32
		for ib := range 8 {
			var s uint32
			for l := range 4 {
				gidx[ib][l] = r.IntN(256)
				sidx[ib][l] = uint32(r.IntN(128))
				blk[2+8*ib+l] = byte(gidx[ib][l])
				s |= sidx[ib][l] << (7 * l)
			}
			ls[ib] = uint32(r.IntN(16))
			s |= ls[ib] << 28
			binary.LittleEndian.PutUint32(blk[2+8*ib+4:], s)
		}
		var got [256]float32
		require.NoError(t, DequantizeRow(IQ2_XXS, blk[:], got[:]))
		for e := range 256 {
			ib, l, j := e/32, e%32/8, e%8
			level := iq2xxsKGrid[gidx[ib][l]] >> (2 * j) & 3
			s := sidx[ib][l]
			// The eighth sign bit makes the number of negatives even.
			neg := s>>j&1 == 1
			if j == 7 {
				neg = bits.OnesCount32(s)%2 == 1
			}
			want := d * float64(2*ls[ib]+1) / 8 * mags[level]
			if neg {
				want = -want
			}
			require.Equal(t, float32(want), got[e], "element %d", e)
		}
	}
}

func TestDequantFloatTypes(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 65504, 1e-7, 3.1415927, float32(math.Inf(-1))}
	tests := []struct {
		typ  Type
		enc  func(b []byte, v float32)
		want func(v float32) float32
	}{
		{F32, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }, func(v float32) float32 { return v }},
		{F16, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, F32ToF16(v)) }, RoundF16},
		{BF16, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, F32ToBF16(v)) }, func(v float32) float32 { return BF16ToF32(F32ToBF16(v)) }},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			n := tc.typ.BlockBytes()
			src := make([]byte, n*len(vals))
			for i, v := range vals {
				tc.enc(src[n*i:], v)
			}
			got := make([]float32, len(vals))
			require.NoError(t, DequantizeRow(tc.typ, src, got))
			for i, v := range vals {
				require.Equal(t, math.Float32bits(tc.want(v)), math.Float32bits(got[i]), "value %v", v)
			}
			// QuantizeRow is the exact inverse for the float types.
			back := make([]byte, len(src))
			require.NoError(t, QuantizeRow(tc.typ, got, nil, back))
			require.Equal(t, src, back)
		})
	}
}

func TestDequantizeRowErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		src  int // bytes
		dst  int // elements
	}{
		{"Q8_0 partial block", Q8_0, 34, 31},
		{"Q8_0 short src", Q8_0, 67, 64},
		{"Q2_K short src", Q2_K, 83, 256},
		{"Q4_K partial block", Q4_K, 288, 300},
		{"Q4_K short src", Q4_K, 287, 512},
		{"IQ2_XXS short src", IQ2_XXS, 0, 256},
		{"F16 short src", F16, 5, 3},
		{"I32 unsupported", I32, 16, 4},
		{"Q8_K unsupported", Q8_K, 292, 256},
		{"Q6_K unsupported", Type(14), 210, 256},
		{"unknown type", Type(99), 64, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]float32, tc.dst)
			for i := range dst {
				dst[i] = 42
			}
			require.Error(t, DequantizeRow(tc.typ, make([]byte, tc.src), dst))
			for _, v := range dst {
				require.Equal(t, float32(42), v, "dst written on error")
			}
		})
	}
	// A longer src is fine: only the row's bytes are read.
	require.NoError(t, DequantizeRow(Q8_0, make([]byte, 40), make([]float32, 32)))
	require.NoError(t, DequantizeRow(Q2_K, nil, nil))
}
