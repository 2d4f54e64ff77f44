package cpu

import "math"

// Float32 versions of libm functions: computed in float64 and rounded once,
// which matches a correctly rounded float32 libm (docs/formats/model.md#scalar-functions).

func expf(x float32) float32   { return float32(math.Exp(float64(x))) }
func logf(x float32) float32   { return float32(math.Log(float64(x))) }
func log1pf(x float32) float32 { return float32(math.Log1p(float64(x))) }
func sqrtf(x float32) float32  { return float32(math.Sqrt(float64(x))) }
func cosf(x float32) float32   { return float32(math.Cos(float64(x))) }
func sinf(x float32) float32   { return float32(math.Sin(float64(x))) }
func powf(x, y float32) float32 {
	return float32(math.Pow(float64(x), float64(y)))
}
func log2f(x float32) float32 { return float32(math.Log2(float64(x))) }

// SigmoidPlain is 1/(1+exp(-z)) as the HC pre/post split computes it.
func SigmoidPlain(z float32) float32 { return 1 / (1 + expf(-z)) }

// SigmoidStable is the overflow-safe logistic used by SiLU and the output
// HC head.
func SigmoidStable(z float32) float32 {
	if z >= 0 {
		return 1 / (1 + expf(-z))
	}
	e := expf(z)
	return e / (1 + e)
}

// SiLU is x·sigmoid(x).
func SiLU(x float32) float32 { return x * SigmoidStable(x) }

// Softplus is log(1+exp(x)) with the reference's cutoffs at ±20.
func Softplus(x float32) float32 {
	switch {
	case x > 20:
		return x
	case x < -20:
		return expf(x)
	}
	return log1pf(expf(x))
}
