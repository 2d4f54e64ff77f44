package quant

import "math"

// F16ToF32 decodes IEEE binary16 bits exactly to float32 (subnormals, ±0,
// ±Inf and NaN preserved).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0: // ±0
		return math.Float32frombits(sign)
	}
	// Subnormal: man·2^-24 is exact in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}

// F32ToF16 encodes f as IEEE binary16 with round-to-nearest-even, including
// rounding into the subnormal range; overflow gives ±Inf and every NaN
// becomes the quiet NaN sign|0x7E00.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000:
		return sign | 0x7e00
	case abs >= 0x477ff000: // rounds to ≥ 65520 → Inf (also catches Inf)
		return sign | 0x7c00
	case abs >= 0x38800000: // normal half range (≥ 2^-14)
		// Rebias the exponent and round the 13 dropped mantissa bits to
		// nearest even; a carry out of the mantissa bumps the exponent,
		// which is exactly right.
		r := abs - (112 << 23)
		r += 0xfff + (r>>13)&1
		return sign | uint16(r>>13)
	case abs < 0x33000000: // below half of the smallest subnormal → ±0
		return sign
	}
	// Subnormal result: shift the implicit-one mantissa right and round.
	e := abs >> 23
	m := abs&0x7fffff | 0x800000
	shift := 126 - e // 14 + (113 - e) ... bits dropped beyond the 10-bit field
	// value = m·2^(e-150); subnormal unit 2^-24 → q = m·2^(e-126) = m >> (126-e)
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return sign | uint16(q)
}

// RoundF16 rounds f to the nearest binary16 value and back to float32.
func RoundF16(f float32) float32 { return F16ToF32(F32ToF16(f)) }

// BF16ToF32 decodes bfloat16 bits to float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 encodes f as bfloat16 rounding to nearest even; NaNs are quieted.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
