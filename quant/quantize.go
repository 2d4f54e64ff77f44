package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The weight quantizers reproduce upstream gguf-tools/quants.c byte for
// byte. That requires every intermediate to be a float32 rounded after each
// operation, evaluated in upstream's order. Go may fuse x*y+z into one
// fused multiply-add on some architectures (arm64, ppc64, s390x, riscv64,
// amd64 with GOAMD64=v3), which skips the rounding of the product; an
// explicit float32(...) conversion forces that rounding (Go spec,
// "Floating-point operators"). So in this file and its siblings every
// product whose result is later added or subtracted is wrapped in float32(),
// even where the conversion looks redundant.

// Emittable reports whether QuantizeRow and Quantize can produce type t.
func (t Type) Emittable() bool {
	switch t {
	case F32, F16, BF16, Q8_0, Q2_K, Q4_K, IQ2_XXS:
		return true
	}
	return false
}

// RequiresImportance reports whether QuantizeRow needs an importance vector
// to produce type t.
func (t Type) RequiresImportance() bool { return t == IQ2_XXS }

// QuantizeRow quantizes src into dst as ggml blocks of type t.
//
// len(src) must be a multiple of t's block size and len(dst) must be exactly
// t.RowBytes(len(src)). importance is nil or holds one non-negative weight
// per element of src (the importance of this row's columns); Q2_K and Q4_K
// use their importance-weighted searches when it is present, Q8_0 and the
// float types ignore it, and IQ2_XXS requires it.
func QuantizeRow(t Type, src, importance []float32, dst []byte) error {
	if !t.Emittable() {
		return fmt.Errorf("quant: quantize %v: unsupported target type", t)
	}
	need, err := t.RowBytes(len(src))
	if err != nil {
		return fmt.Errorf("quant: quantize %v: %w", t, err)
	}
	if len(dst) != need {
		return fmt.Errorf("quant: quantize %v: destination has %d bytes, a row of %d elements needs %d", t, len(dst), len(src), need)
	}
	if importance != nil && len(importance) != len(src) {
		return fmt.Errorf("quant: quantize %v: importance has %d values for a row of %d elements", t, len(importance), len(src))
	}
	if importance == nil && t.RequiresImportance() {
		return fmt.Errorf("quant: quantize %v: %w", t, errNeedImportance)
	}
	quantizeRow(t, src, importance, dst)
	return nil
}

var errNeedImportance = errors.New("an importance vector is required")

// quantizeRow is QuantizeRow without the argument checks.
func quantizeRow(t Type, src, importance []float32, dst []byte) {
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			quantizeQ8_0Block(src[32*b:32*b+32], dst[34*b:34*b+34])
		}
	case Q2_K:
		for b := 0; b < len(src)/QK_K; b++ {
			x, y := src[QK_K*b:QK_K*(b+1)], dst[84*b:84*(b+1)]
			if importance != nil {
				quantizeQ2_KWeighted(x, importance[QK_K*b:QK_K*(b+1)], y)
			} else {
				quantizeQ2_KRef(x, y)
			}
		}
	case Q4_K:
		for b := 0; b < len(src)/QK_K; b++ {
			x, y := src[QK_K*b:QK_K*(b+1)], dst[144*b:144*(b+1)]
			if importance != nil {
				quantizeQ4_KWeighted(x, importance[QK_K*b:QK_K*(b+1)], y)
			} else {
				quantizeQ4_KRef(x, y)
			}
		}
	case IQ2_XXS:
		m := iq2xxsNeighbours()
		for b := 0; b < len(src)/QK_K; b++ {
			quantizeIQ2_XXSBlock(m, src[QK_K*b:QK_K*(b+1)], importance[QK_K*b:QK_K*(b+1)], dst[66*b:66*(b+1)])
		}
	}
}

// Quantize quantizes the rows×cols row-major matrix data into ggml blocks of
// type t, rows concatenated.
//
// importance is nil or holds cols values, the same vector for every row.
// IQ2_XXS needs one; when it is nil Quantize derives it from the weights as
// upstream does: the importance of column c is the float32 sum, in row
// order, of the squares of column c's values.
func Quantize(t Type, data []float32, cols int, importance []float32) ([]byte, error) {
	if !t.Emittable() {
		return nil, fmt.Errorf("quant: quantize %v: unsupported target type", t)
	}
	if cols <= 0 {
		return nil, fmt.Errorf("quant: quantize %v: invalid column count %d", t, cols)
	}
	if len(data)%cols != 0 {
		return nil, fmt.Errorf("quant: quantize %v: %d values are not a whole number of rows of %d columns", t, len(data), cols)
	}
	rowBytes, err := t.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("quant: quantize %v: %w", t, err)
	}
	if importance != nil && len(importance) != cols {
		return nil, fmt.Errorf("quant: quantize %v: importance has %d values for %d columns", t, len(importance), cols)
	}
	rows := len(data) / cols
	if importance == nil && t.RequiresImportance() {
		importance = make([]float32, cols)
		for r := range rows {
			for c, v := range data[r*cols : (r+1)*cols] {
				importance[c] += float32(v * v)
			}
		}
	}
	out := make([]byte, rows*rowBytes)
	for r := range rows {
		quantizeRow(t, data[r*cols:(r+1)*cols], importance, out[r*rowBytes:(r+1)*rowBytes])
	}
	return out, nil
}

// quantizeQ8_0Block writes one 34-byte Q8_0 block for 32 values: d is the
// largest magnitude over 127, stored as f16, and the codes round x/d half
// away from zero (C roundf), unlike the ties-to-even activation quantizer.
func quantizeQ8_0Block(x []float32, y []byte) {
	x = x[:32]
	y = y[:34]
	var amax float32
	for _, v := range x {
		if a := fabsf(v); a > amax {
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(y, F32ToF16(d))
	for i, v := range x {
		// The scaled value is at most 127 in magnitude for finite input,
		// so it always fits an int8 (no clamp, as upstream).
		y[2+i] = byte(int8(math.Round(float64(v * id))))
	}
}

// nearestInt rounds v to the nearest integer, ties to even. It is upstream's
// ds4q_nearest_int: adding 1.5·2^23 leaves the rounded integer in the low
// mantissa bits. For |v| ≤ 4194303 (every value the quantizers round) it
// equals math.RoundToEven; unlike a float-to-int conversion it is also well
// defined, if meaningless, for NaN, infinities and huge values.
//
// The float32(v) conversion is essential: once nearestInt is inlined into
// nearestInt(a*b), the compiler could otherwise fuse a*b + 1.5·2^23 into
// one multiply-add and round the unrounded product.
func nearestInt(v float32) int32 {
	f := float32(v) + 12582912
	return int32(math.Float32bits(f)&0x007fffff) - 0x00400000
}

// clampLevel limits v to [lo, hi].
func clampLevel(v, lo, hi int32) int32 {
	return max(lo, min(hi, v))
}

// fabsf is C fabsf: it clears the sign bit.
func fabsf(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// sqrtf is C sqrtf: the float64 square root rounded to float32 is the
// correctly rounded float32 square root.
func sqrtf(v float32) float32 { return float32(math.Sqrt(float64(v))) }
