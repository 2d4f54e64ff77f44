package quant

import (
	"math"

	"github.com/ds4-go/ds4/internal/cpufeat"
)

// BlockQ8K is one 256-element activation block quantized to Q8_K.
//
// The value of element i is approximately D*Qs[i]. D is negative whenever the
// element of largest magnitude in the block is positive (see QuantizeQ8K).
// Bsums[g] is the sum of Qs[16g:16g+16], used by the min terms of the K-quant
// dot products.
type BlockQ8K struct {
	D     float32
	Qs    [QK_K]int8
	Bsums [QK_K / 16]int16
}

// BlockQ8_0 is one 32-element activation block quantized to Q8_0 with a
// float32 scale.
//
// Unlike a stored Q8_0 weight block, whose scale is an f16, the activation
// keeps its scale in float32, as upstream ds4 does.
type BlockQ8_0 struct {
	D  float32
	Qs [32]int8
}

// QuantizeQ8K quantizes x (len a multiple of 256) into dst (len(x)/256
// blocks).
//
// Per block it follows upstream ds4_quantize_row_q8_K: the element with the
// largest |x| (the first one on ties) is encoded as -127, the scale is
// d = 1/(-127/max) and the other elements are rounded to nearest even and
// clamped to [-128, 127]. An all-zero block gets d = 0. A block whose max
// is too small for -127/max to be finite (|max| below about 3.7e-37) gets
// d = ∓0, as the formula gives it, and all codes and sums 0. (Upstream's
// codes there are lrintf of ±Inf or NaN cast to int, which depends on the
// platform; on amd64 every one is 0, as here.) So every code lies in
// -127..127, as the AVX2 IQ2_XXS kernels need. Results for blocks
// holding NaN or Inf are unspecified.
// QuantizeQ8K panics if len(x) is not a multiple of 256 or dst is shorter
// than len(x)/256.
func QuantizeQ8K(x []float32, dst []BlockQ8K) {
	if len(x)%QK_K != 0 {
		panic("quant: QuantizeQ8K input length is not a multiple of 256")
	}
	quantizeQ8KWith(hostAct, x, dst)
}

// quantizeQ8KWith is QuantizeQ8K with the whole-block loop of form a.
func quantizeQ8KWith(a actForm, x []float32, dst []BlockQ8K) {
	nb := len(x) / QK_K
	dst = dst[:nb]
	// The SIMD form, where there is one, does the same float32 operations
	// and rounds the same way, so the bits match.
	for b := quantizeQ8KFull(a, x, dst); b < nb; b++ {
		quantizeQ8KBlock((*[QK_K]float32)(x[b*QK_K:]), &dst[b])
	}
}

// actForm is the form of the activation quantizers' whole-block loops
// (QuantizeQ8_0, QuantizeQ8K, Q8_0Sums): the Go code alone, or AVX2 for
// whole blocks. The loops call their form directly (no function value, so
// their arguments do not escape).
type actForm uint8

const (
	actGo   actForm = iota // the Go code
	actAVX2                // AVX2 for whole blocks
)

// String returns the form's name: "go" or "avx2".
func (f actForm) String() string {
	if f == actAVX2 {
		return "avx2"
	}
	return genericName
}

// hostAct is the form of the host's level (cpufeat.Host).
var hostAct = actFor(cpufeat.Host().Level())

// quantizeQ8KBlock quantizes the 256 values of xb into y.
func quantizeQ8KBlock(xb *[QK_K]float32, y *BlockQ8K) {
	var mx, amax float32
	for _, v := range xb {
		// Strictly greater keeps the first element on ties, and so its
		// sign, which decides the sign of d.
		if a := actAbs(v); a > amax {
			amax = a
			mx = v
		}
	}
	if amax == 0 {
		*y = BlockQ8K{}
		return
	}

	iscale := -127 / mx
	y.D = 1 / iscale
	if y.D == 0 {
		// iscale is ±Inf: every code would be ±Inf or NaN rounded.
		y.Qs = [QK_K]int8{}
		y.Bsums = [QK_K / 16]int16{}
		return
	}
	for j, v := range xb {
		y.Qs[j] = actRoundI8(iscale * v)
	}
	for g := range y.Bsums {
		var s int16
		for _, q := range y.Qs[16*g : 16*g+16] {
			s += int16(q)
		}
		y.Bsums[g] = s
	}
}

// QuantizeQ8_0 quantizes x into dst (ceil(len(x)/32) blocks; a final partial
// block is zero-padded).
//
// Per block it follows upstream quantize_q8_0_activation: d = amax/127 kept
// in float32, id = 1/d, q = clamp(RNE(x*id), -128, 127) with ties to even,
// and d = 0 with all codes 0 for an all-zero block. Where 1/d is not finite
// (amax below about 3.7e-37) id is 0 too, so such a block keeps d = amax/127
// and gets all codes 0. (Upstream's codes there are lrintf of ±Inf or NaN
// cast to int, which depends on the platform; on amd64 every one is 0, as
// here.) So every code lies in -127..127 (|x*id| is at most 127 and a
// rounding error), as the vector Q8_0 kernels need. Results for
// blocks holding NaN or Inf are unspecified. QuantizeQ8_0 panics if dst is
// shorter than ceil(len(x)/32).
func QuantizeQ8_0(x []float32, dst []BlockQ8_0) { quantizeQ8_0With(hostAct, x, dst) }

// quantizeQ8_0With is QuantizeQ8_0 with the whole-block loop of form a.
func quantizeQ8_0With(a actForm, x []float32, dst []BlockQ8_0) {
	nb := (len(x) + 31) / 32
	dst = dst[:nb]
	// Whole blocks go to the SIMD form where there is one; it does the
	// same float32 operations and rounds the same way, so the bits match.
	full := len(x) / 32
	for b := quantizeQ8_0Full(a, x[:32*full], dst[:full]); b < nb; b++ {
		quantizeQ8_0Act(x[b*32:min(b*32+32, len(x))], &dst[b])
	}
}

// quantizeQ8_0Act quantizes the up to 32 values of xb into y.
func quantizeQ8_0Act(xb []float32, y *BlockQ8_0) {
	// A plain comparison rather than the max builtin: like upstream's C,
	// it skips NaNs instead of propagating them.
	var amax float32
	for _, v := range xb {
		if a := actAbs(v); a > amax {
			amax = a
		}
	}
	d := amax / 127
	id := 1 / d
	if id > math.MaxFloat32 {
		// d is 0 or too small for its inverse to be finite.
		id = 0
	}
	y.D = d
	for j, v := range xb {
		y.Qs[j] = actRoundI8(v * id)
	}
	clear(y.Qs[len(xb):])
}

// actAbs returns |v| by clearing the sign bit.
func actAbs(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}

// actRoundI8 rounds v to the nearest integer, ties to even (C lrintf in
// the default rounding mode), and clamps the result to the int8 range.
func actRoundI8(v float32) int8 {
	// v is a float32 so the float64 rounding sees exactly the value upstream
	// rounds. Clamping in the float domain is the same as clamping the
	// integer because rounding is monotone, and it keeps the conversion in
	// range.
	r := math.RoundToEven(float64(v))
	switch {
	case r > 127:
		r = 127
	case r < -128:
		r = -128
	}
	return int8(r)
}
