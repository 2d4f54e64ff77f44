package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/ds4-go/ds4/backends"

	"github.com/stretchr/testify/require"
)

// docs/formats/model.md#numeric-constants / docs/formats/model.md#rope constants, written out here so the tests do not depend on
// NewRoPE to produce them.
const (
	thetaStep10000  = 0x3F3FF911 // powf(10000, -2/64) = 0.749894202
	thetaStep160000 = 0x3F300A3A // powf(160000, -2/64) = 0.687656045
	yarnLo, yarnHi  = 15, 25
)

func plainRoPE() backends.RoPE { return backends.NewRoPE(64, 10000, false, 1, 0, 0, 0) }
func yarnRoPE() backends.RoPE  { return backends.NewRoPE(64, 160000, true, 16, 65536, 32, 1) }

// apply is the kernel under test.
func apply(r backends.RoPE, tail []float32, pos int, inverse bool) { ApplyRoPE(r, tail, pos, inverse) }

func TestNewRoPEConstants(t *testing.T) {
	p := plainRoPE()
	require.Equal(t, 64, p.Dims)
	require.Equal(t, uint32(thetaStep10000), math.Float32bits(p.ThetaStep))
	require.Equal(t, float32(1), p.FreqScale)
	require.False(t, p.YaRN)

	y := yarnRoPE()
	require.Equal(t, 64, y.Dims)
	require.Equal(t, uint32(thetaStep160000), math.Float32bits(y.ThetaStep))
	require.Equal(t, float32(1.0/16), y.FreqScale)
	require.True(t, y.YaRN)
	require.Equal(t, float32(yarnLo), y.Lo)
	require.Equal(t, float32(yarnHi), y.Hi)

	// The raw corr dims of docs/formats/model.md#numeric-constants (15.4533, 24.7084), in float64, floor/ceil to
	// the same pair.
	cd := func(beta float64) float64 {
		return 64 * math.Log(65536/(beta*2*math.Pi)) / (2 * math.Log(160000))
	}
	require.InDelta(t, 15.4533, cd(32), 1e-4)
	require.InDelta(t, 24.7084, cd(1), 1e-4)

	// The spec's YaRN magnitude factor af·(1+0.1·logf(1/fs)) is exactly 1
	// in float32, which is why Apply may leave it out (docs/formats/model.md#rope).
	l16 := float32(math.Log(16))
	one := 1 + float32(0.1)*l16
	af := 1 / one
	require.Equal(t, uint32(0x3F486DE1), math.Float32bits(af))
	require.Equal(t, float32(1), af*one)

	// Other widths: ThetaStep = base^(-2/dims) (float32, correctly rounded).
	for _, c := range []struct {
		dims int
		base float32
	}{{64, 10000}, {64, 160000}, {128, 10000}, {32, 50000}, {16, 10000}} {
		r := backends.NewRoPE(c.dims, c.base, false, 1, 0, 0, 0)
		want := float32(math.Pow(float64(c.base), -2/float64(c.dims)))
		require.Equal(t, want, r.ThetaStep, "dims=%d base=%v", c.dims, c.base)
	}

	// Corr dims for other parameters: floor of cd(betaFast), ceil of
	// cd(betaSlow), with cd from float64 math (none of these lie near an
	// integer, so float32 evaluation cannot change the result).
	for _, c := range []struct {
		dims          int
		base          float32
		orig          int
		fast, slow    float32
		wantLo, wantH float32
	}{
		{64, 10000, 4096, 32, 1, 10, 23},  // cd 10.47, 22.51
		{128, 10000, 8192, 32, 1, 25, 50}, // cd 25.76, 49.84
		{64, 50000, 32768, 16, 2, 17, 24}, // cd 17.11, 23.26
		{32, 10000, 2048, 32, 1, 4, 11},   // cd 4.03, 10.05
	} {
		cd := func(beta float32) float64 {
			return float64(c.dims) * math.Log(float64(c.orig)/(float64(beta)*2*math.Pi)) / (2 * math.Log(float64(c.base)))
		}
		require.Equal(t, c.wantLo, float32(math.Floor(cd(c.fast))))
		require.Equal(t, c.wantH, float32(math.Ceil(cd(c.slow))))
		r := backends.NewRoPE(c.dims, c.base, true, 8, c.orig, c.fast, c.slow)
		require.Equal(t, c.wantLo, r.Lo, "%+v", c)
		require.Equal(t, c.wantH, r.Hi, "%+v", c)
		require.Equal(t, float32(1.0/8), r.FreqScale)
	}

	// Clamping of the corr range to [0, dims−1]: a tiny original context
	// puts cd(betaFast) below 0, a huge one puts cd(betaSlow) beyond dims−1.
	r := backends.NewRoPE(64, 10000, true, 4, 10, 32, 1)
	require.Equal(t, float32(0), r.Lo)
	r = backends.NewRoPE(16, 10000, true, 4, 1<<30, 32, 1)
	require.Equal(t, float32(15), r.Hi)
}

// ropeAnglesSpec returns the 32 angles of docs/formats/model.md#rope with the spec's float32
// rounding points: te = f32(pos), te *= ts iteratively, ti = fs·te, and with
// YaRN theta = f32(ti·(1−ramp)) + f32(te·ramp), ramp from lo = 15, hi = 25.
func ropeAnglesSpec(pos int, yarn bool) []float32 {
	ts := math.Float32frombits(thetaStep10000)
	fs := float32(1)
	if yarn {
		ts = math.Float32frombits(thetaStep160000)
		fs = 1.0 / 16
	}
	th := make([]float32, 32)
	te := float32(pos)
	for k := range th {
		ti := fs * te
		if yarn {
			ramp := 1 - min(1, max(0, (float32(k)-yarnLo)/(yarnHi-yarnLo)))
			th[k] = float32(ti*(1-ramp)) + float32(te*ramp)
		} else {
			th[k] = ti
		}
		te = te * ts
	}
	return th
}

// rotate64 rotates adjacent pairs of x by the given angles in float64.
func rotate64(x []float32, th []float32, inverse bool) []float64 {
	out := make([]float64, len(x))
	for k, a := range th {
		c, s := math.Cos(float64(a)), math.Sin(float64(a))
		if inverse {
			s = -s
		}
		x0, x1 := float64(x[2*k]), float64(x[2*k+1])
		out[2*k] = x0*c - x1*s
		out[2*k+1] = x0*s + x1*c
	}
	return out
}

func TestRoPEApply(t *testing.T) {
	r := newRand(11)
	for _, yarn := range []bool{false, true} {
		rope := plainRoPE()
		if yarn {
			rope = yarnRoPE()
		}
		for _, pos := range []int{0, 1, 2, 7, 100, 4095, 65535, 1000003} {
			for _, inverse := range []bool{false, true} {
				t.Run(fmt.Sprintf("yarn%v_pos%d_inv%v", yarn, pos, inverse), func(t *testing.T) {
					x := randVec(r, 64, 1)
					got := append([]float32(nil), x...)
					apply(rope, got, pos, inverse)
					want := rotate64(x, ropeAnglesSpec(pos, yarn), inverse)
					for i := range x {
						k := i / 2
						mag := math.Abs(float64(x[2*k])) + math.Abs(float64(x[2*k+1]))
						// cos/sin rounded, two products, one add: a few ulps of |x|.
						require.InDelta(t, want[i], float64(got[i]), 4*0x1p-24*mag, "i=%d", i)
					}
					// The spec's float32 rounding points exactly: cosf/sinf
					// correctly rounded, each product rounded, then the sum.
					th := ropeAnglesSpec(pos, yarn)
					for k, a := range th {
						c, s := float32(math.Cos(float64(a))), float32(math.Sin(float64(a)))
						if inverse {
							s = -s
						}
						x0, x1 := x[2*k], x[2*k+1]
						require.Equal(t, float32(x0*c)-float32(x1*s), got[2*k], "pair %d", k)
						require.Equal(t, float32(x0*s)+float32(x1*c), got[2*k+1], "pair %d", k)
					}
				})
			}
		}
	}
}

func TestRoPEAnglesAgainstExactMath(t *testing.T) {
	// For small positions the iterative float32 product stays close to the
	// exact angle pos·base^(−2k/64), and YaRN blends unscaled (k ≤ 15) and
	// 1/16-scaled (k ≥ 25) angles linearly in between. A unit vector in
	// pair k rotates to (cos θ_k, sin θ_k).
	for _, yarn := range []bool{false, true} {
		rope, base := plainRoPE(), 10000.0
		if yarn {
			rope, base = yarnRoPE(), 160000.0
		}
		for _, pos := range []int{1, 3, 10} {
			for k := range 32 {
				exact := float64(pos) * math.Pow(base, -2*float64(k)/64)
				if yarn {
					ramp := 1 - math.Min(1, math.Max(0, (float64(k)-15)/10))
					exact = exact/16*(1-ramp) + exact*ramp
				}
				x := make([]float32, 64)
				x[2*k] = 1
				apply(rope, x, pos, false)
				require.InDelta(t, math.Cos(exact), float64(x[2*k]), 1e-5, "yarn=%v pos=%d k=%d", yarn, pos, k)
				require.InDelta(t, math.Sin(exact), float64(x[2*k+1]), 1e-5, "yarn=%v pos=%d k=%d", yarn, pos, k)
			}
		}
	}
}

func TestRoPEInverseUndoesForward(t *testing.T) {
	r := newRand(12)
	for _, rope := range []backends.RoPE{plainRoPE(), yarnRoPE()} {
		for _, pos := range []int{1, 5, 333, 65536, 999999} {
			x := randVec(r, 64, 3)
			y := append([]float32(nil), x...)
			apply(rope, y, pos, false)
			apply(rope, y, pos, true)
			for i := range x {
				k := i / 2
				mag := math.Abs(float64(x[2*k])) + math.Abs(float64(x[2*k+1]))
				require.InDelta(t, float64(x[i]), float64(y[i]), 8*0x1p-24*mag, "yarn=%v pos=%d i=%d", rope.YaRN, pos, i)
			}
		}
	}
}

func TestRoPEPosZeroIsIdentity(t *testing.T) {
	r := newRand(13)
	for _, rope := range []backends.RoPE{plainRoPE(), yarnRoPE()} {
		for _, inverse := range []bool{false, true} {
			x := randVec(r, 64, 1)
			y := append([]float32(nil), x...)
			apply(rope, y, 0, inverse)
			require.Equal(t, x, y)
		}
	}
}

func TestRoPEAdjacentPairs(t *testing.T) {
	// GPT-J layout: a value in element 2k or 2k+1 only ever moves within
	// the pair (2k, 2k+1), with its norm kept; NeoX would mix k and k+32.
	for _, rope := range []backends.RoPE{plainRoPE(), yarnRoPE()} {
		for _, i := range []int{0, 1, 2, 31, 32, 33, 62, 63} {
			x := make([]float32, 64)
			x[i] = 2
			apply(rope, x, 17, false)
			k := i / 2
			for j, v := range x {
				if j/2 != k {
					require.Zero(t, v, "yarn=%v i=%d leaked into %d", rope.YaRN, i, j)
				}
			}
			n := math.Hypot(float64(x[2*k]), float64(x[2*k+1]))
			require.InDelta(t, 2, n, 1e-6)
		}
	}
	// Direction: rotation by +θ maps (1, 0) to (cos θ, sin θ) and (0, 1)
	// to (−sin θ, cos θ); pair 0 at pos 1 has θ = 1 exactly.
	rope := plainRoPE()
	x := make([]float32, 64)
	x[0], x[3] = 1, 1
	apply(rope, x, 1, false)
	require.InDelta(t, math.Cos(1), float64(x[0]), 1e-7)
	require.InDelta(t, math.Sin(1), float64(x[1]), 1e-7)
	ts := float64(math.Float32frombits(thetaStep10000))
	require.InDelta(t, -math.Sin(ts), float64(x[2]), 1e-7)
	require.InDelta(t, math.Cos(ts), float64(x[3]), 1e-7)
}
