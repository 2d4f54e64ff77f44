package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// --- E4M3FN (docs/formats/model.md#fp8-e4m3fn-rounding) ---

// e4m3Table decodes the 127 finite non-negative E4M3FN codes from their bit
// fields (sign 0, exponent bias 7, 3 mantissa bits; 0x7F is NaN).
func e4m3Table() []float64 {
	v := make([]float64, 127)
	for c := range v {
		e, m := c>>3, c&7
		if e == 0 {
			v[c] = math.Ldexp(float64(m), -9) // subnormal m·2^-9
		} else {
			v[c] = math.Ldexp(float64(8+m), e-10) // (8+m)/8 · 2^(e-7)
		}
	}
	return v
}

// nearestCode returns the index of the table value nearest |v| in float64,
// the even index on exact ties, clamped to the last entry.
func nearestCode(tab []float64, v float64) int {
	a := math.Abs(v)
	best, bestD := 0, math.Inf(1)
	for i, t := range tab {
		d := math.Abs(a - t)
		if d < bestD || (d == bestD && i%2 == 0) {
			best, bestD = i, d
		}
	}
	return best
}

func signed(v float64, mag float64) float64 {
	if v < 0 {
		return -mag
	}
	return mag
}

func TestE4M3Table(t *testing.T) {
	tab := e4m3Table()
	require.Equal(t, 448.0, tab[126])
	require.Equal(t, 0x1p-9, tab[1])
	require.Equal(t, 0x1p-6, tab[8]) // smallest normal
	for c := range 126 {
		require.Less(t, tab[c], tab[c+1])
	}
}

func TestRoundE4M3CodesRoundTrip(t *testing.T) {
	for c, v := range e4m3Table() {
		require.Equal(t, float32(v), roundE4M3(float32(v)), "code %d", c)
		require.Equal(t, float32(-v), roundE4M3(float32(-v)), "code -%d", c)
	}
}

func TestRoundE4M3Midpoints(t *testing.T) {
	tab := e4m3Table()
	for c := range 126 {
		mid := (tab[c] + tab[c+1]) / 2 // exact in float32
		require.Equal(t, mid, float64(float32(mid)))
		even := c
		if c%2 == 1 {
			even = c + 1
		}
		m32 := float32(mid)
		require.Equal(t, float32(tab[even]), roundE4M3(m32), "midpoint %d|%d", c, c+1)
		require.Equal(t, -float32(tab[even]), roundE4M3(-m32), "-midpoint %d|%d", c, c+1)
		// Just off the midpoint, the nearer code wins.
		require.Equal(t, float32(tab[c]), roundE4M3(math.Nextafter32(m32, 0)), "below midpoint %d", c)
		require.Equal(t, float32(tab[c+1]), roundE4M3(math.Nextafter32(m32, 1000)), "above midpoint %d", c)
	}
}

func TestRoundE4M3Random(t *testing.T) {
	tab := e4m3Table()
	r := newRand(21)
	for range 20000 {
		v := float32(math.Ldexp(r.Float64()*2-1, r.IntN(22)-12))
		want := signed(float64(v), tab[nearestCode(tab, float64(v))])
		require.Equal(t, float32(want), roundE4M3(v), "v=%v", v)
	}
}

func TestRoundE4M3Clamps(t *testing.T) {
	for _, v := range []float32{448, 449, 463.9, 464, 480, 1000, 1e30, float32(math.Inf(1))} {
		require.Equal(t, float32(448), roundE4M3(v), "v=%v", v)
		require.Equal(t, float32(-448), roundE4M3(-v), "v=%v", -v)
	}
}

// specScale is the spec's block scale: 2^ceil(f32(log2(f64(f32(amax/qmax))))).
func specScale(amax, qmax float32) float64 {
	l := float32(math.Log2(float64(amax / qmax)))
	return math.Ldexp(1, int(math.Ceil(float64(l))))
}

// fpSimRef is the spec's FP8SIM / FP4SIM on x, in blocks of block with the
// amax floor, clamp to ±qmax and the nearest table value (ties to even).
func fpSimRef(x []float32, block int, floor, qmax float32, tab []float64) []float32 {
	out := make([]float32, len(x))
	for b := 0; b < len(x); b += block {
		end := min(b+block, len(x))
		amax := floor
		for _, v := range x[b:end] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := specScale(amax, qmax)
		for i := b; i < end; i++ {
			q := float64(x[i]) / s
			q = math.Max(-float64(qmax), math.Min(float64(qmax), q))
			out[i] = float32(signed(q, tab[nearestCode(tab, q)]) * s)
		}
	}
	return out
}

func TestFP8Sim(t *testing.T) {
	tab := e4m3Table()
	r := newRand(22)
	for _, n := range []int{1, 63, 64, 65, 128, 448, 1000} {
		for _, scale := range []float64{1e-7, 1e-3, 1, 37, 1e4} {
			t.Run(fmt.Sprintf("n%d_scale%g", n, scale), func(t *testing.T) {
				x := randVec(r, n, scale)
				want := fpSimRef(x, 64, 1e-4, 448, tab)
				FP8Sim(x)
				require.Equal(t, want, x)
			})
		}
	}
}

func TestFP8SimScale(t *testing.T) {
	cases := []struct {
		name      string
		amax      float32
		probe     float32 // a second element of the block
		wantProbe float32
		wantAmax  float32
	}{
		// amax = 448: scale 1, E4M3 values pass through.
		{"amax448", 448, 0.1015625, 0.1015625, 448},
		// amax = 448·2^k: scale 2^k exactly.
		{"amax448x8", 448 * 8, 3 * 8, 3 * 8, 448 * 8},
		{"amax448/1024", 448.0 / 1024, 1.0 / 1024, 1.0 / 1024, 448.0 / 1024},
		// Just above 448: scale 2, 449/2 = 224.5 → 224 → 448.
		{"amax449", 449, 1, 1, 448},
		// 17 under scale 1 is a tie between 16 (code 88) and 18 (code 89) → 16.
		{"tie_even", 448, 17, 16, 448},
		// 19 is a tie between 18 (code 89) and 20 (code 90) → 20.
		{"tie_even_up", 448, 19, 20, 448},
		// Float32 log2 (docs/formats/model.md#fp8-e4m3fn-rounding note): amax one ulp above 448·2^-20 makes
		// amax/448 = 2^-20·(1+2^-23), whose log2 rounds to −20 in float32,
		// so the scale is 2^-20 (not 2^-19): amax clamps to 448·2^-20, and
		// 1.25·2^-29 becomes 1.25 subnormal steps → 1 step = 2^-29 (with
		// 2^-19 it would be 0.625 steps → 2^-28).
		{"log2_f32", math.Nextafter32(448*0x1p-20, 1), 1.25 * 0x1p-29, 0x1p-29, 448 * 0x1p-20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := make([]float32, 64)
			x[0], x[1], x[2] = c.amax, c.probe, -c.probe
			FP8Sim(x)
			require.Equal(t, c.wantAmax, x[0])
			require.Equal(t, c.wantProbe, x[1])
			require.Equal(t, -c.wantProbe, x[2])
			for _, v := range x[3:] {
				require.Zero(t, v)
			}
		})
	}
}

func TestFP8SimBlockSize(t *testing.T) {
	// One scale for all 64 entries: the block's amax (448, scale 1) sets
	// the scale of x[63] too, so 0.001 lands in the subnormal range:
	// 0.001/2^-9 = 0.512 → 1 step = 2^-9. A block of 32 would give x[63]
	// its own scale 2^-18 and keep it near 0.001 (256·2^-18).
	x := make([]float32, 130)
	x[0], x[63] = 448, 0.001
	// The next block starts at 64 and has its own scale.
	x[64], x[127] = 0.001, 0.001
	// A partial last block (128, 129) too.
	x[128], x[129] = 3e-7, 448
	FP8Sim(x)
	require.Equal(t, float32(0x1p-9), x[63])
	require.Equal(t, float32(256*0x1p-18), x[64])
	require.Equal(t, float32(256*0x1p-18), x[127])
	require.Equal(t, float32(0), x[128]) // 3e-7 < half of 2^-9
	require.Equal(t, float32(448), x[129])
}

func TestFP8SimBlocksIndependent(t *testing.T) {
	r := newRand(23)
	x := randVec(r, 448, 1)
	// Very different magnitudes per block.
	for b := range 7 {
		for i := range 64 {
			x[64*b+i] *= float32(math.Pow(10, float64(b-3)))
		}
	}
	whole := append([]float32(nil), x...)
	FP8Sim(whole)
	for b := range 7 {
		blk := append([]float32(nil), x[64*b:64*b+64]...)
		FP8Sim(blk)
		require.Equal(t, blk, whole[64*b:64*b+64], "block %d", b)
	}
	// Changing one block leaves the others alone.
	y := append([]float32(nil), x...)
	y[70] = 1e6
	FP8Sim(y)
	require.Equal(t, whole[:64], y[:64])
	require.Equal(t, whole[128:], y[128:])
	require.NotEqual(t, whole[64:128], y[64:128])
}

func TestFP8SimAmaxFloor(t *testing.T) {
	x := make([]float32, 128)
	x[64] = 5 // second block non-zero
	FP8Sim(x)
	for _, v := range x[:64] {
		require.Zero(t, v) // all-zero block stays zero (no NaN from 0/0)
	}
	require.Equal(t, float32(5), x[64])

	// With the 1e-4 floor the scale for a block of amax 1e-6 is
	// 2^ceil(log2(1e-4/448)) = 2^-22, which puts 1e-9 in the subnormal
	// range: 1e-9·2^22 = 0.00419 → 2 steps of 2^-9 → 2^-30. Without the
	// floor (scale 2^-28) it would become 0.28125·2^-28.
	x = make([]float32, 64)
	x[0], x[1] = 1e-6, 1e-9
	FP8Sim(x)
	require.Equal(t, float32(0x1p-30), x[1])
	require.Equal(t, float32(4*0x1p-22), x[0]) // 1e-6·2^22 = 4.19 → 4
}

// --- E2M1 (docs/formats/model.md#fp4-e2m1-rounding-and-the-hadamard-transform) ---

var e2m1Tab = []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}

func TestRoundE2M1(t *testing.T) {
	cases := []struct{ in, want float32 }{
		// Every magnitude maps to itself.
		{0, 0}, {0.5, 0.5}, {1, 1}, {1.5, 1.5}, {2, 2}, {3, 3}, {4, 4}, {6, 6},
		// Ties go to the even index.
		{0.25, 0}, {0.75, 1}, {1.25, 1}, {1.75, 2}, {2.5, 2}, {3.5, 4}, {5, 4},
		// Nearest otherwise.
		{0.26, 0.5}, {0.74, 0.5}, {1.3, 1.5}, {2.49, 2}, {2.51, 3}, {4.9, 4}, {5.1, 6},
		// Beyond 6: the largest magnitude.
		{6.5, 6}, {7, 6}, {100, 6},
	}
	for _, c := range cases {
		require.Equal(t, c.want, roundE2M1(c.in), "v=%v", c.in)
		require.Equal(t, -c.want, roundE2M1(-c.in), "v=%v", -c.in)
	}
	r := newRand(24)
	for range 10000 {
		v := float32(r.Float64()*14 - 7)
		want := signed(float64(v), e2m1Tab[nearestCode(e2m1Tab, float64(v))])
		require.Equal(t, float32(want), roundE2M1(v), "v=%v", v)
	}
}

func TestFP4Sim(t *testing.T) {
	r := newRand(25)
	for _, n := range []int{1, 31, 32, 33, 128, 200} {
		for _, scale := range []float64{1e-30, 1e-3, 1, 50} {
			t.Run(fmt.Sprintf("n%d_scale%g", n, scale), func(t *testing.T) {
				x := randVec(r, n, scale)
				want := fpSimRef(x, 32, 7.052966104933725e-38, 6, e2m1Tab)
				FP4Sim(x)
				require.Equal(t, want, x)
			})
		}
	}
}

func TestFP4SimBlocks(t *testing.T) {
	// Block 0 amax 6 (scale 1), block 1 amax 12 (scale 2), block 2 zero,
	// block 3 amax 0.75 (scale 2^ceil(log2(0.125)) = 1/8).
	x := make([]float32, 128)
	x[0], x[1], x[2] = 6, 2.5, -1.25
	x[32], x[33], x[34] = 12, 5, 7
	x[96], x[97] = 0.75, 0.3
	FP4Sim(x)
	want := make([]float32, 128)
	want[0], want[1], want[2] = 6, 2, -1
	want[32], want[33], want[34] = 12, 4, 8 // 2.5→2, 3.5→4 (ties even)
	want[96], want[97] = 0.75, 0.25         // 6→6, 2.4→2
	require.Equal(t, want, x)
}

func TestFP4SimBlockSize(t *testing.T) {
	// amax 6 at x[0] (scale 1) rounds x[31] = 0.2 to 0; a block of 16
	// would scale x[31] by 2^ceil(log2(0.2/6)) = 2^-4 and keep 0.1875.
	// x[32] starts the next block: 0.2 → 0.2/2^-4 = 3.2 → 3 → 0.1875.
	x := make([]float32, 64)
	x[0], x[31], x[32] = 6, 0.2, 0.2
	FP4Sim(x)
	require.Equal(t, float32(6), x[0])
	require.Equal(t, float32(0), x[31])
	require.Equal(t, float32(0.1875), x[32])
}

func TestQAT(t *testing.T) {
	// QAT = FP4SIM(H128(x)); check against the Sylvester matrix product
	// rounded through the reference FP4 simulation, allowing for the few
	// elements whose transformed value lies within float noise of a
	// rounding boundary.
	r := newRand(26)
	h := sylvester(128)
	for range 20 {
		x := randVec(r, 128, 1)
		hx := make([]float32, 128)
		for i := range 128 {
			var s float64
			for j := range 128 {
				s += h[i][j] * float64(x[j])
			}
			hx[i] = float32(s)
		}
		want := fpSimRef(hx, 32, 7.052966104933725e-38, 6, e2m1Tab)
		got := append([]float32(nil), x...)
		QAT(got)
		diff := 0
		for i := range got {
			if got[i] != want[i] {
				diff++
			}
		}
		require.LessOrEqual(t, diff, 2)
	}
}
