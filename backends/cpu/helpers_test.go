package cpu

import (
	"math"
	"math/rand/v2"
)

// Shared helpers of the package tests. Every expected value in these tests
// comes from an independent computation (float64 math, tables built here,
// or the spec's recipe written out again); none is produced by calling the
// function under test.

// ulp32 returns the distance from |x| to the next float32 away from zero.
func ulp32(x float64) float64 {
	a := float32(math.Abs(x))
	if math.IsInf(float64(a), 0) {
		return math.Inf(1)
	}
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// randVec returns n normally distributed float32 values times scale.
func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// pow2 returns 2^e as a float32.
func pow2(e int) float32 { return float32(math.Ldexp(1, e)) }
