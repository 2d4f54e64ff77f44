//go:build amd64 && !purego

package quant

// The AVX2 kernels of the Q8_0, F16 and F32 dot products. Each Go function
// checks the row length as the reference does (a short row panics) and
// hands the slices to its assembly body in dot_q8_amd64.s.
//
// Numerics, against the references in dot.go:
//
//   - Q8_0 sums the 32 int8 products of a block exactly in int32 lanes and
//     forms the per-block float terms (f16(d_w)·d_x)·Σ with the
//     reference's two roundings, but adds them in eight float32 lanes
//     (blocks b ≡ k mod 8 in lane k), summed as a tree, with the last
//     len%8 blocks added one by one: the result is within
//     γ(len/8+10)·Σ|terms| of the exact sum of the reference's terms. A
//     serial chain of scalar adds, one per block, would bound the loop
//     by its latency; the lanes hide it. Activation codes
//     must lie in -127..127, which QuantizeQ8_0 guarantees (act.go: a
//     block too small for a finite 1/d gets codes 0): the kernel
//     multiplies |w| by x·sign(w), and -128·(-1) does not fit in a byte.
//   - Q8_0x4 makes, for each of its four activations, the very terms and
//     float additions of Q8_0, so each result is Q8_0's bit for bit.
//   - F16 sums in 16 float32 lanes (two accumulators of eight lanes)
//     with fused multiply-adds, then reduces the lanes as a tree and adds
//     the last len%8 elements one by one. Every term goes through at most
//     len/16+20 roundings, so the result is within γ(len/16+20)·Σ|w_i·x_i|
//     of the exact dot, where the reference's sequential sum is within
//     γ(len)·Σ|w_i·x_i|.
//   - F16x2x3 makes, for each of its two rows and three activations, the
//     very operations of F16, so each result is F16's bit for bit.
//   - F32 forms the products exactly in float64, as the reference does,
//     but sums them in 16 float64 lanes and a tree, so only the order of
//     the float64 additions differs; after the final rounding to float32
//     the two agree to within an ulp except under heavy cancellation.
//
// Non-finite inputs (Inf, NaN weights or activations, f16 subnormals)
// follow IEEE arithmetic in both, so they give the same result, up to the
// payload of a NaN.

// dotQ8_0AVX2 is the AVX2 form of DotQ8_0.
func dotQ8_0AVX2(w []byte, x []BlockQ8_0) float32 {
	return dotQ8_0Asm(w[:len(x)*dotQ8_0Bytes], x)
}

// dotQ8_0x4AVX2 is the AVX2 form of DotQ8_0x4; out[t] is bit for bit
// dotQ8_0AVX2(w, xt).
func dotQ8_0x4AVX2(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32) {
	n := len(x0)
	checkQ8_0x4(n, x1, x2, x3)
	dotQ8_0x4Asm(w[:n*dotQ8_0Bytes], x0, x1, x2, x3, out)
}

// dotQ8_0xNAVX2 is the AVX2 form of DotQ8_0xN: the four-token kernel for
// each four activations, the single-token one for the rest, so out[t] is
// bit for bit dotQ8_0AVX2(w, x[t*nb:(t+1)*nb]). It has no assembly body
// of its own yet: it is there so that callers can use Q8_0xN on every
// set, and the AVX2 tile kernels serve the larger batches.
func dotQ8_0xNAVX2(w []byte, x []BlockQ8_0, n int, out *[8]float32) {
	nb := checkQ8_0xN(x, n)
	*out = [8]float32{}
	t := 0
	for ; t+4 <= n; t += 4 {
		dotQ8_0x4AVX2(w, x[t*nb:(t+1)*nb], x[(t+1)*nb:(t+2)*nb], x[(t+2)*nb:(t+3)*nb], x[(t+3)*nb:(t+4)*nb], (*[4]float32)(out[t:t+4]))
	}
	for ; t < n; t++ {
		out[t] = dotQ8_0AVX2(w, x[t*nb:(t+1)*nb])
	}
}

// dotF16AVX2 is the AVX2 and F16C form of DotF16.
func dotF16AVX2(w []byte, x []float32) float32 {
	return dotF16Asm(w[:2*len(x)], x)
}

// dotF16x2x3AVX2 is the AVX2 form of DotF16x2x3; out[3r+t] is bit for
// bit dotF16AVX2(wr, xt).
func dotF16x2x3AVX2(w0, w1 []byte, x0, x1, x2 []float32, out *[6]float32) {
	n := len(x0)
	checkF16x2x3(n, w0, w1, x1, x2)
	if n == 0 {
		*out = [6]float32{}
		return
	}
	dotF16x2x3Asm(&w0[0], &w1[0], &x0[0], &x1[0], &x2[0], n, out)
}

// dotF32AVX2 is the AVX2 form of DotF32.
func dotF32AVX2(w []byte, x []float32) float32 {
	return dotF32Asm(w[:4*len(x)], x)
}

// dotQ8_0Asm is DotQ8_0 for a row of exactly len(x) blocks.
//
//go:noescape
func dotQ8_0Asm(w []byte, x []BlockQ8_0) float32

// dotQ8_0x4Asm is DotQ8_0x4 for a row of exactly len(x0) blocks and
// activations of len(x0) blocks each.
//
//go:noescape
func dotQ8_0x4Asm(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32)

// dotF16Asm is DotF16 for a row of exactly len(x) elements.
//
//go:noescape
func dotF16Asm(w []byte, x []float32) float32

// dotF16x2x3Asm is DotF16x2x3 for rows of n > 0 elements at w0 and w1 and
// activations of n elements at x0, x1 and x2.
//
//go:noescape
func dotF16x2x3Asm(w0, w1 *byte, x0, x1, x2 *float32, n int, out *[6]float32)

// dotF32Asm is DotF32 for a row of exactly len(x) elements.
//
//go:noescape
func dotF32Asm(w []byte, x []float32) float32
