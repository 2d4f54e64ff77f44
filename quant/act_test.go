package quant

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/internal/cpufeat"
)

// actSlack is the relative slack on the |d|/2 quantization error: the scaled
// value and the scale are each rounded to float32 once, which moves the
// dequantized value by at most a few hundred ulps of 127·|d|.
const actSlack = 1e-5

// randActivation returns n Gaussian values whose blocks of 32 have scales
// spread over several orders of magnitude, so that every block gets its own
// quantization scale.
func randActivation(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		// The scale changes every 32 elements (so also every Q8_K block)
		// and cycles over 1e-3..1e3.
		scale := math.Pow(10, float64(i/32%7)-3)
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

func TestQuantizeQ8K(t *testing.T) {
	block := func(set map[int]float32) []float32 {
		x := make([]float32, QK_K)
		for i, v := range set {
			x[i] = v
		}
		return x
	}
	tests := []struct {
		name  string
		x     []float32
		d     float32      // want D exactly
		codes map[int]int8 // want Qs at these indices
		all   bool         // every index not in codes must be 0
	}{
		{
			name:  "positive max gives negative d",
			x:     block(map[int]float32{5: 3, 9: -1.2, 200: 0.75}),
			d:     1 / (-127 / float32(3)),
			codes: map[int]int8{5: -127, 9: 51, 200: -32}, // 50.8 → 51, -31.75 → -32
			all:   true,
		},
		{
			name:  "negative max gives positive d",
			x:     block(map[int]float32{17: -6, 100: 2}),
			d:     1 / (-127 / float32(-6)),
			codes: map[int]int8{17: -127, 100: 42}, // 42.33 → 42
			all:   true,
		},
		{
			name:  "tie keeps the first (positive)",
			x:     block(map[int]float32{3: 2, 10: -2}),
			d:     1 / (-127 / float32(2)),
			codes: map[int]int8{3: -127, 10: 127},
			all:   true,
		},
		{
			name:  "tie keeps the first (negative)",
			x:     block(map[int]float32{3: -2, 10: 2}),
			d:     1 / (-127 / float32(-2)),
			codes: map[int]int8{3: -127, 10: 127},
			all:   true,
		},
		{
			// max = -127 makes iscale exactly 1, so x itself is rounded:
			// exact halves must go to the even neighbour.
			name:  "ties to even",
			x:     block(map[int]float32{0: -127, 1: 2.5, 2: 3.5, 3: -2.5, 4: -3.5, 5: 0.5, 6: -0.5, 7: 126.5, 8: 1.5}),
			d:     1,
			codes: map[int]int8{0: -127, 1: 2, 2: 4, 3: -2, 4: -4, 5: 0, 6: 0, 7: 126, 8: 2},
			all:   true,
		},
		{
			name: "all zero (with negative zeros)",
			x:    block(map[int]float32{4: float32(math.Copysign(0, -1)), 77: 0}),
			d:    0,
			all:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]BlockQ8K, 1)
			// Pre-fill with garbage so an all-zero block must clear it.
			for i := range dst[0].Qs {
				dst[0].Qs[i] = 99
			}
			dst[0].Bsums[3] = 7
			QuantizeQ8K(tc.x, dst)
			y := dst[0]
			require.Equal(t, math.Float32bits(tc.d), math.Float32bits(y.D), "d = %v, want %v", y.D, tc.d)
			for i, q := range y.Qs {
				if want, ok := tc.codes[i]; ok {
					require.Equal(t, want, q, "qs[%d]", i)
				} else if tc.all {
					require.Zero(t, q, "qs[%d]", i)
				}
			}
			requireBsums(t, &y)
		})
	}
}

// requireBsums checks bsums against the codes.
func requireBsums(t *testing.T, y *BlockQ8K) {
	t.Helper()
	for g := range 16 {
		s := 0
		for _, q := range y.Qs[16*g : 16*g+16] {
			s += int(q)
		}
		require.Equal(t, s, int(y.Bsums[g]), "bsums[%d]", g)
	}
}

func TestQuantizeQ8KRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const nb = 16
	x := randActivation(r, nb*QK_K)
	// One block whose largest element is a lone positive outlier.
	x[3*QK_K+77] = 1000
	dst := make([]BlockQ8K, nb)
	QuantizeQ8K(x, dst)
	for b := range dst {
		y := &dst[b]
		xb := x[b*QK_K : (b+1)*QK_K]
		imax := 0
		for i, v := range xb {
			if absF32(v) > absF32(xb[imax]) {
				imax = i
			}
		}
		require.Equal(t, int8(-127), y.Qs[imax], "block %d: the largest element encodes to -127", b)
		require.Equal(t, xb[imax] > 0, y.D < 0, "block %d: d has the opposite sign of the max", b)
		require.Equal(t, 1/(-127/xb[imax]), y.D, "block %d", b)
		requireBsums(t, y)
		for i, v := range xb {
			deq := float64(y.D) * float64(y.Qs[i])
			require.LessOrEqual(t, math.Abs(deq-float64(v)), math.Abs(float64(y.D))*(0.5+actSlack),
				"block %d elem %d: x=%v q=%d d=%v", b, i, v, y.Qs[i], y.D)
		}
	}
}

func TestQuantizeQ8KPanicsOnPartialBlock(t *testing.T) {
	require.Panics(t, func() { QuantizeQ8K(make([]float32, 300), make([]BlockQ8K, 2)) })
}

func TestQuantizeQ8_0(t *testing.T) {
	// garbage pre-fills dst, to see that every code, padding included, is
	// written.
	const garbage = 55
	tests := []struct {
		name  string
		x     []float32
		d     []float32 // want D per block
		codes [][]int8  // want Qs per block (all 32)
	}{
		{
			// amax = 127 gives d = 1 and id = 1, so x itself is rounded.
			name:  "ties to even",
			x:     []float32{127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 3.5, -3.5},
			d:     []float32{1},
			codes: [][]int8{q8Pad32(127, 0, 2, 2, 0, -2, -2, 126, 4, -4)},
		},
		{
			name:  "negative max",
			x:     []float32{-254, 127, 1},
			d:     []float32{2},
			codes: [][]int8{q8Pad32(-127, 64, 0)}, // 63.5 → 64, 0.5 → 0
		},
		{
			name:  "all zero",
			x:     make([]float32, 32),
			d:     []float32{0},
			codes: [][]int8{q8Pad32()},
		},
		{
			name: "partial final block is zero-padded",
			x: append(append(make([]float32, 0, 40), q8Ramp(32)...),
				-3, 1.4, 0, 3, 0.7, -0.7, 1, 2),
			d: []float32{1, float32(3) / 127},
			codes: [][]int8{
				q8RampCodes(32),
				q8Pad32(-127, 59, 0, 127, 30, -30, 42, 85), // 59.27, 29.63, 42.33, 84.67
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]BlockQ8_0, len(tc.d))
			for b := range dst {
				for i := range dst[b].Qs {
					dst[b].Qs[i] = garbage
				}
			}
			QuantizeQ8_0(tc.x, dst)
			for b := range dst {
				require.Equal(t, math.Float32bits(tc.d[b]), math.Float32bits(dst[b].D), "block %d: d = %v, want %v", b, dst[b].D, tc.d[b])
				require.Equal(t, tc.codes[b], dst[b].Qs[:], "block %d", b)
			}
		})
	}
}

// q8Pad32 returns the codes q followed by zeros up to 32.
func q8Pad32(q ...int8) []int8 {
	out := make([]int8, 32)
	copy(out, q)
	return out
}

// q8Ramp returns the n integers 128-n..127: with amax = 127 the Q8_0 scale
// is 1 and each code equals its value.
func q8Ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i - n + 1 + 127)
	}
	return x
}

// q8RampCodes returns the codes of q8Ramp(n).
func q8RampCodes(n int) []int8 {
	q := make([]int8, n)
	for i := range q {
		q[i] = int8(i - n + 1 + 127)
	}
	return q
}

func TestQuantizeQ8_0ScaleIsFloat32(t *testing.T) {
	// amax/127 with amax = 1 is not representable as an f16; the activation
	// scale must keep all float32 bits (stock ggml would round it to f16).
	x := make([]float32, 32)
	x[0] = 1
	x[1] = -0.3
	dst := make([]BlockQ8_0, 1)
	QuantizeQ8_0(x, dst)
	require.Equal(t, float32(1)/127, dst[0].D)
	require.NotEqual(t, RoundF16(dst[0].D), dst[0].D)
	require.Equal(t, int8(127), dst[0].Qs[0])
	require.Equal(t, int8(-38), dst[0].Qs[1]) // -38.1 → -38
}

func TestActRoundI8Clamp(t *testing.T) {
	tests := []struct {
		v    float32
		want int8
	}{
		{127.4, 127}, {127.5, 127}, {128, 127}, {1e30, 127},
		{-128, -128}, {-128.5, -128}, {-129, -128}, {-1e30, -128},
		{126.5, 126}, {-127.5, -128}, {-126.5, -126}, {0.5, 0}, {1.5, 2},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, actRoundI8(tc.v), "round(%v)", tc.v)
	}
}

func TestQuantizeQ8_0Random(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{32, 4096, 4096 + 17, 5} {
		x := randActivation(r, n)
		dst := make([]BlockQ8_0, (n+31)/32)
		QuantizeQ8_0(x, dst)
		for b := range dst {
			y := &dst[b]
			xb := x[b*32 : min(b*32+32, n)]
			var amax float32
			for _, v := range xb {
				amax = max(amax, absF32(v))
			}
			require.Equal(t, amax/127, y.D, "n=%d block %d", n, b)
			for i, v := range xb {
				deq := float64(y.D) * float64(y.Qs[i])
				require.LessOrEqual(t, math.Abs(deq-float64(v)), float64(y.D)*(0.5+actSlack),
					"n=%d block %d elem %d", n, b, i)
			}
			for i := len(xb); i < 32; i++ {
				require.Zero(t, y.Qs[i], "n=%d padding %d", n, i)
			}
		}
	}
}

// absF32 returns |v|.
func absF32(v float32) float32 { return float32(math.Abs(float64(v))) }

// TestQuantizeQ8_0WholeBlocks holds QuantizeQ8_0 on whole blocks (the SIMD
// form where the CPU has one, whatever DS4_PUREGO says) to
// quantizeQ8_0Act, the per-block Go code, bit for bit: random blocks over
// a wide range of scales, exact ties, the ties-to-even cases of
// TestQuantizeQ8_0 filled out to 32 values, zero and negative-zero blocks,
// subnormals and single spikes.
func TestQuantizeQ8_0WholeBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var blocks [][32]float32
	ties := [32]float32{127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 3.5, -3.5, -126.5, 63.5, -63.5}
	blocks = append(blocks, ties, [32]float32{}, [32]float32{0: float32(math.Copysign(0, -1))})
	var sub, spike [32]float32
	for i := range sub {
		sub[i] = math.Float32frombits(uint32(i + 1)) // subnormal
		spike[i] = float32(i%3) * 1e-3
	}
	spike[17] = -4e4
	blocks = append(blocks, sub, spike)
	for range 500 {
		var b [32]float32
		scale := math.Pow(10, float64(r.IntN(16)-8))
		for i := range b {
			b[i] = float32(r.NormFloat64() * scale)
		}
		if r.IntN(4) == 0 { // integers up to ±127 with amax 127: exact ties after scaling
			for i := range b {
				b[i] = float32(r.IntN(255)-127) + 0.5*float32(r.IntN(2))
			}
			b[r.IntN(32)] = 127
		}
		blocks = append(blocks, b)
	}
	x := make([]float32, 0, 32*len(blocks))
	for _, b := range blocks {
		x = append(x, b[:]...)
	}
	got := make([]BlockQ8_0, len(blocks))
	quantizeQ8_0With(cpuAct(), x, got)
	for i := range blocks {
		var want BlockQ8_0
		quantizeQ8_0Act(blocks[i][:], &want)
		require.Equal(t, math.Float32bits(want.D), math.Float32bits(got[i].D), "block %d: d", i)
		require.Equal(t, want.Qs, got[i].Qs, "block %d: codes", i)
	}
	require.Equal(t, q8Pad32(127, 0, 2, 2, 0, -2, -2, 126, 4, -4, -126, 64, -64), got[0].Qs[:])
}

// TestQuantizeQ8KWholeBlocks holds QuantizeQ8K (the SIMD form where the
// CPU has one) to quantizeQ8KBlock, the per-block Go code, bit for bit:
// random blocks over a wide range of scales, exact ties after scaling, a
// maximum shared by elements of both signs (the first one decides d's
// sign), zero and negative-zero blocks, subnormals, single spikes and a
// maximum in every position.
func TestQuantizeQ8KWholeBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var blocks [][QK_K]float32
	var zero, negZero, sub, spike, tiesPos, tiesNeg [QK_K]float32
	for i := range QK_K {
		negZero[i] = float32(math.Copysign(0, -1))
		sub[i] = math.Float32frombits(uint32(i + 1)) // subnormal
		spike[i] = float32(i%3) * 1e-3
		tiesPos[i] = float32(i%200-100) + 0.5*float32(i%2)
	}
	spike[201] = -4e4
	tiesPos[40], tiesPos[90] = -127, 127 // the first maximum is negative: d > 0
	tiesNeg = tiesPos
	tiesNeg[40] = 127 // now positive: d < 0
	blocks = append(blocks, zero, negZero, sub, spike, tiesPos, tiesNeg)
	for pos := range QK_K {
		var b [QK_K]float32
		for i := range b {
			b[i] = float32(r.NormFloat64())
		}
		b[pos] = float32(10 * (1 - 2*float64(pos%2)))
		blocks = append(blocks, b)
	}
	for range 300 {
		var b [QK_K]float32
		scale := math.Pow(10, float64(r.IntN(16)-8))
		for i := range b {
			b[i] = float32(r.NormFloat64() * scale)
		}
		blocks = append(blocks, b)
	}
	x := make([]float32, 0, QK_K*len(blocks))
	for _, b := range blocks {
		x = append(x, b[:]...)
	}
	got := make([]BlockQ8K, len(blocks))
	for i := range got {
		got[i].D, got[i].Qs[0], got[i].Bsums[15] = 55, 55, 55 // all must be written
	}
	quantizeQ8KWith(cpuAct(), x, got)
	for i := range blocks {
		var want BlockQ8K
		quantizeQ8KBlock(&blocks[i], &want)
		require.Equal(t, math.Float32bits(want.D), math.Float32bits(got[i].D), "block %d: d", i)
		require.Equal(t, want.Qs, got[i].Qs, "block %d: codes", i)
		require.Equal(t, want.Bsums, got[i].Bsums, "block %d: sums", i)
		// The AVX2 IQ2_XXS kernels rely on this range.
		require.GreaterOrEqual(t, slices.Min(got[i].Qs[:]), int8(-127), "block %d: codes", i)
	}
	// The subnormal block is too small for -127/max to be finite: it gets
	// d = 1/-Inf = -0 and codes 0 (TestQuantizeTinyBlocks).
	require.Equal(t, math.Float32bits(float32(math.Copysign(0, -1))), math.Float32bits(got[2].D), "subnormal block: d")
	require.Equal(t, [QK_K]int8{}, got[2].Qs, "subnormal block: codes")
	require.Positive(t, got[4].D, "first maximum negative")
	require.Negative(t, got[5].D, "first maximum positive")
}

// tinyQ8_0Threshold returns the least float32 amax > 0 for which the Q8_0
// inverse scale 1/(amax/127) is finite.
func tinyQ8_0Threshold() float32 {
	lo, hi := uint32(1), math.Float32bits(1) // 1/d is Inf at lo, finite at hi
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if d := math.Float32frombits(mid) / 127; 1/d <= math.MaxFloat32 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return math.Float32frombits(hi)
}

// tinyQ8KThreshold returns the least float32 max > 0 for which the Q8_K
// inverse scale -127/max is finite.
func tinyQ8KThreshold() float32 {
	lo, hi := uint32(1), math.Float32bits(1)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if s := -127 / math.Float32frombits(mid); s >= -math.MaxFloat32 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return math.Float32frombits(hi)
}

// tinyPattern fills xb with amax·pattern, the pattern holding both signs,
// zeros of both signs, subnormal fractions and exact halves; sign < 0
// negates the first (largest) element.
func tinyPattern(xb []float32, amax float32, sign float32) {
	pattern := []float32{1, -1, 0, float32(math.Copysign(0, -1)), 0.5, -0.25, 0x1p-20, -0.7, 0.999, -0.5}
	for i := range xb {
		xb[i] = amax * pattern[i%len(pattern)]
	}
	xb[0] = sign * amax
	xb[1] = -sign * amax // a tie of the other sign: the first decides
}

// TestQuantizeTinyBlocks holds QuantizeQ8_0 and QuantizeQ8K on blocks whose
// largest |x| is too small for the inverse scale to be finite (1/d or
// -127/max overflows to Inf) to their documented result: every code 0 (and
// every Q8_K sum 0), the scale as the formula gives it (amax/127 for Q8_0,
// 1/(-127/max) = ∓0 for Q8_K). The whole-block SIMD form must give the
// per-block Go code's bytes, and every code must lie in -127..127 (the
// vector kernels' domain), there and on the blocks around the threshold
// where the inverse scale becomes finite, which keep the usual codes.
func TestQuantizeTinyBlocks(t *testing.T) {
	const minNormal = 0x1p-126 // 1.1754944e-38
	q80T, q8KT := tinyQ8_0Threshold(), tinyQ8KThreshold()
	below := func(v float32) float32 { return math.Float32frombits(math.Float32bits(v) - 1) }
	tiny := []struct {
		name string
		amax float32
		sign float32
	}{
		{"min-normal", minNormal, 1},
		{"min-normal-negative-first", minNormal, -1},
		{"subnormal", 0x1p-130, 1},
		{"subnormal-negative-first", 0x1p-130, -1},
		{"127-ulps", 127 * 0x1p-149, 1},
		{"3e-37", 3e-37, 1},
		{"3e-37-negative-first", 3e-37, -1},
		{"q8_0-threshold-below", below(q80T), 1},
		{"q8_k-threshold-below", below(q8KT), -1},
	}

	t.Run("Q8_0", func(t *testing.T) {
		for _, tc := range tiny {
			t.Run(tc.name, func(t *testing.T) {
				if tc.amax >= q80T {
					t.Skip("1/d is finite for this amax")
				}
				x := make([]float32, 32)
				tinyPattern(x, tc.amax, tc.sign)
				got := make([]BlockQ8_0, 1)
				got[0].Qs[0], got[0].Qs[31] = 55, 55 // every code must be written
				quantizeQ8_0With(cpuAct(), x, got)
				var ref BlockQ8_0
				quantizeQ8_0Act(x, &ref)
				require.Equal(t, math.Float32bits(ref.D), math.Float32bits(got[0].D), "SIMD d, Go d")
				require.Equal(t, ref.Qs, got[0].Qs, "SIMD codes, Go codes")
				require.Equal(t, math.Float32bits(tc.amax/127), math.Float32bits(ref.D), "d = amax/127")
				require.Equal(t, [32]int8{}, ref.Qs, "codes of a block whose 1/d is not finite")
			})
		}
	})

	t.Run("Q8_K", func(t *testing.T) {
		for _, tc := range tiny {
			t.Run(tc.name, func(t *testing.T) {
				if tc.amax >= q8KT {
					t.Skip("-127/max is finite for this max")
				}
				x := make([]float32, QK_K)
				tinyPattern(x, tc.amax, tc.sign)
				got := make([]BlockQ8K, 1)
				got[0].D, got[0].Qs[0], got[0].Bsums[15] = 55, 55, 55
				quantizeQ8KWith(cpuAct(), x, got)
				var ref BlockQ8K
				quantizeQ8KBlock((*[QK_K]float32)(x), &ref)
				require.Equal(t, math.Float32bits(ref.D), math.Float32bits(got[0].D), "SIMD d, Go d")
				require.Equal(t, ref.Qs, got[0].Qs, "SIMD codes, Go codes")
				require.Equal(t, ref.Bsums, got[0].Bsums, "SIMD sums, Go sums")
				require.Equal(t, math.Float32bits(1/(-127/(tc.sign*tc.amax))), math.Float32bits(ref.D), "d = 1/(-127/max)")
				require.Equal(t, [QK_K]int8{}, ref.Qs, "codes of a block whose -127/max is not finite")
				require.Equal(t, [QK_K / 16]int16{}, ref.Bsums, "sums of a block whose -127/max is not finite")
			})
		}
	})

	// Around each threshold: a row of blocks whose amax steps over it one
	// ulp at a time, in whole blocks (the SIMD form) and block by block.
	t.Run("threshold", func(t *testing.T) {
		const steps = 256
		x80 := make([]float32, 32*2*steps)
		x8K := make([]float32, QK_K*2*steps)
		for i := range 2 * steps {
			sign := float32(1 - 2*(i%2))
			tinyPattern(x80[32*i:32*i+32], math.Float32frombits(math.Float32bits(q80T)-steps+uint32(i)), sign)
			tinyPattern(x8K[QK_K*i:QK_K*i+QK_K], math.Float32frombits(math.Float32bits(q8KT)-steps+uint32(i)), sign)
		}
		y80 := make([]BlockQ8_0, 2*steps)
		y8K := make([]BlockQ8K, 2*steps)
		QuantizeQ8_0(x80, y80)
		QuantizeQ8K(x8K, y8K)
		for i := range 2 * steps {
			var ref80 BlockQ8_0
			quantizeQ8_0Act(x80[32*i:32*i+32], &ref80)
			require.Equal(t, ref80, y80[i], "Q8_0 block %d: SIMD, Go", i)
			require.GreaterOrEqual(t, slices.Min(ref80.Qs[:]), int8(-127), "Q8_0 block %d", i)
			var ref8K BlockQ8K
			quantizeQ8KBlock((*[QK_K]float32)(x8K[QK_K*i:]), &ref8K)
			require.Equal(t, math.Float32bits(ref8K.D), math.Float32bits(y8K[i].D), "Q8_K block %d: SIMD d, Go d", i)
			require.Equal(t, ref8K.Qs, y8K[i].Qs, "Q8_K block %d: SIMD, Go", i)
			require.Equal(t, ref8K.Bsums, y8K[i].Bsums, "Q8_K block %d: SIMD, Go", i)
			require.GreaterOrEqual(t, slices.Min(ref8K.Qs[:]), int8(-127), "Q8_K block %d", i)
			if i >= steps { // at or above the threshold: the usual codes
				want80 := [2]int8{127, -127} // x = ±amax, ∓amax
				if x80[32*i] < 0 {
					want80 = [2]int8{-127, 127}
				}
				require.Equal(t, want80, [2]int8(ref80.Qs[:2]), "Q8_0 block %d", i)
				require.Equal(t, [2]int8{-127, 127}, [2]int8(ref8K.Qs[:2]), "Q8_K block %d", i)
			}
		}
	})
}

// cpuAct returns the activation quantizers of this CPU's level, whatever
// DS4_PUREGO says, so that the SIMD forms are held to the Go code in
// every run.
func cpuAct() actForm { return actFor(cpufeat.Host().CPULevel()) }
