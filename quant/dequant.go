package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DequantizeRow decodes len(dst) elements of type t from src into dst.
//
// It supports F32, F16, BF16, Q8_0, Q2_K, Q4_K and IQ2_XXS. It returns an
// error, without writing anything, when t is another type, when len(dst) is
// not a whole number of blocks or when src is shorter than the row needs;
// bytes in src past the row are ignored.
func DequantizeRow(t Type, src []byte, dst []float32) error {
	decode := blockDecoder(t)
	if decode == nil {
		return fmt.Errorf("quant: dequantize %v: unsupported type", t)
	}
	need, err := t.RowBytes(len(dst))
	if err != nil {
		return fmt.Errorf("quant: dequantize %v: %w", t, err)
	}
	if len(src) < need {
		return fmt.Errorf("quant: dequantize %v: source has %d bytes, a row of %d elements needs %d", t, len(src), len(dst), need)
	}
	be, bb := t.BlockElems(), t.BlockBytes()
	for i := 0; i < len(dst); i += be {
		b := i / be * bb
		decode(src[b:b+bb], dst[i:i+be])
	}
	return nil
}

// blockDecoder returns the function that decodes one block of t, or nil when
// t cannot be dequantized. Each decoder receives exactly one block of bytes
// and exactly one block of output elements.
func blockDecoder(t Type) func(b []byte, y []float32) {
	switch t {
	case F32:
		return func(b []byte, y []float32) { y[0] = math.Float32frombits(binary.LittleEndian.Uint32(b)) }
	case F16:
		return func(b []byte, y []float32) { y[0] = F16ToF32(binary.LittleEndian.Uint16(b)) }
	case BF16:
		return func(b []byte, y []float32) { y[0] = BF16ToF32(binary.LittleEndian.Uint16(b)) }
	case Q8_0:
		return dequantQ8_0
	case Q2_K:
		return dequantQ2_K
	case Q4_K:
		return dequantQ4_K
	case IQ2_XXS:
		return dequantIQ2_XXS
	}
	return nil
}

// dequantQ8_0 decodes a 34-byte Q8_0 block: x = f16(d)·qs.
func dequantQ8_0(b []byte, y []float32) {
	b = b[:34]
	y = y[:32]
	d := F16ToF32(binary.LittleEndian.Uint16(b))
	for i := range y {
		y[i] = d * float32(int8(b[2+i]))
	}
}

// dequantQ2_K decodes an 84-byte Q2_K block. Its super-scales d and dmin sit
// at the end of the block (offsets 80 and 82), unlike Q4_K.
func dequantQ2_K(b []byte, y []float32) {
	b = b[:84]
	y = y[:256]
	scales, qs := b[:16], b[16:80]
	d := F16ToF32(binary.LittleEndian.Uint16(b[80:]))
	dmin := F16ToF32(binary.LittleEndian.Uint16(b[82:]))
	// qs[32h+l] packs elements 128h+l+32s in bits 2s..2s+1 (s = 0..3).
	for h := range 2 {
		for s := range 4 {
			base := 128*h + 32*s
			for l := range 32 {
				e := base + l
				sc := scales[e/16]
				q := qs[32*h+l] >> (2 * s) & 3
				// Float32 conversions keep each product rounded on its
				// own (no fused multiply-add).
				y[e] = float32(float32(d*float32(sc&15))*float32(q)) - float32(dmin*float32(sc>>4))
			}
		}
	}
}

// q4KScaleMin unpacks the 6-bit scale and min codes of sub-block j (0..7)
// from the 12 packed bytes s of a Q4_K block.
func q4KScaleMin(s []byte, j int) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0x0f | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// dequantQ4_K decodes a 144-byte Q4_K block (d, dmin first, then 12 bytes of
// 6-bit codes, then 128 bytes of nibbles).
func dequantQ4_K(b []byte, y []float32) {
	b = b[:144]
	y = y[:256]
	d := F16ToF32(binary.LittleEndian.Uint16(b[0:]))
	dmin := F16ToF32(binary.LittleEndian.Uint16(b[2:]))
	s, qs := b[4:16], b[16:144]
	for j := range 8 {
		sc, m := q4KScaleMin(s, j)
		// The float32 conversions round each product on its own, so the
		// compiler cannot fuse dl·q − ml into a multiply-add.
		dl := float32(d * float32(sc))
		ml := float32(dmin * float32(m))
		// Sub-blocks 2p and 2p+1 share the 32 bytes qs[32p:32p+32]: low
		// nibbles for the even sub-block, high nibbles for the odd one.
		q := qs[32*(j/2) : 32*(j/2)+32]
		shift := 4 * uint(j&1)
		out := y[32*j : 32*j+32]
		for l := range out {
			out[l] = float32(dl*float32(q[l]>>shift&15)) - ml
		}
	}
}

// dequantIQ2_XXS decodes a 66-byte IQ2_XXS block. Each 32-element group has
// four grid indices, four 7-bit sign indices and a 4-bit scale code ls, and
// its scale is f16(d)·(0.5+ls)·0.25; magnitudes come from the grid bytes
// {8, 25, 43}, not from the {1, 3, 5} levels the quantizer reasons with.
func dequantIQ2_XXS(b []byte, y []float32) {
	b = b[:66]
	y = y[:256]
	d := F16ToF32(binary.LittleEndian.Uint16(b))
	for ib := range 8 {
		g := b[2+8*ib : 2+8*ib+8]
		aux := binary.LittleEndian.Uint32(g[4:])
		db := d * (0.5 + float32(aux>>28)) * 0.25
		for l := range 4 {
			grid := iq2xxsGrid[g[l]]
			signs := iq2Sign(aux >> (7 * l))
			out := y[32*ib+8*l : 32*ib+8*l+8]
			for j := range out {
				v := db * float32(uint8(grid>>(8*j)))
				if signs&(1<<j) != 0 {
					v = -v
				}
				out[j] = v
			}
		}
	}
}
