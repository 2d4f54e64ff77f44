//go:build amd64 && !purego

package quant

// Placeholders until the assembly lands (issue 10): each returns the
// reference result.

func hasF16C() bool { return false }

func dotQ8_0AVX2(w []byte, x []BlockQ8_0) float32 { return DotQ8_0(w, x) }

func dotF16AVX2(w []byte, x []float32) float32 { return DotF16(w, x) }

func dotF32AVX2(w []byte, x []float32) float32 { return DotF32(w, x) }
