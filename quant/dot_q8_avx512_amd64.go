//go:build amd64 && !purego

package quant

// The AVX-512 (VNNI) kernels of the Q8_0 dot products. Each Go function
// checks the row length as the reference does (a short row panics) and
// hands the slices to its assembly body in dot_q8_avx512_amd64.s.
//
// Numerics: they return what the AVX2 kernels of dot_q8_amd64.go return,
// bit for bit. The block sums are exact integers however they are formed,
// the block terms (f16(d_w)·d_x)·Σ round as the reference's do, and the
// terms are added in the AVX2 kernels' order: blocks b ≡ k mod 8 in float32
// lane k, one group of eight after the other, the lanes summed as a tree and
// the last len%8 blocks one by one, with the same operand order, so even
// NaN payloads agree. So the bound of dot_q8_amd64.go holds, γ(len/8+10)
// times Σ|terms| from the exact sum of the reference's terms, and the
// four-token kernel gives each token the single-token result. The
// precondition is the AVX2 kernels' too: activation codes in -127..127.
// They need AVX512F, BW, VL and VNNI.

// dotQ8_0AVX512 is the AVX-512 form of DotQ8_0.
func dotQ8_0AVX512(w []byte, x []BlockQ8_0) float32 {
	return dotQ8_0AVX512Asm(w[:len(x)*dotQ8_0Bytes], x)
}

// dotQ8_0x4AVX512 is the AVX-512 form of DotQ8_0x4; out[t] is bit for bit
// dotQ8_0AVX512(w, xt).
func dotQ8_0x4AVX512(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32) {
	n := len(x0)
	checkQ8_0x4(n, x1, x2, x3)
	dotQ8_0x4AVX512Asm(w[:n*dotQ8_0Bytes], x0, x1, x2, x3, out)
}

// dotQ8_0xNAVX512 is the AVX-512 form of DotQ8_0xN; out[t] is bit for bit
// dotQ8_0AVX512(w, x[t*nb:(t+1)*nb]).
func dotQ8_0xNAVX512(w []byte, x []BlockQ8_0, n int, out *[8]float32) {
	nb := checkQ8_0xN(x, n)
	dotQ8_0xNAVX512Asm(w[:nb*dotQ8_0Bytes], x, nb, n, out)
}

// dotQ8_0AVX512Asm is DotQ8_0 for a row of exactly len(x) blocks.
//
//go:noescape
func dotQ8_0AVX512Asm(w []byte, x []BlockQ8_0) float32

// dotQ8_0x4AVX512Asm is DotQ8_0x4 for a row of exactly len(x0) blocks and
// activations of len(x0) blocks each.
//
//go:noescape
func dotQ8_0x4AVX512Asm(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32)

// dotQ8_0xNAVX512Asm is DotQ8_0xN for a row of exactly nb blocks and
// 1 ≤ n ≤ 8 activations of nb blocks each, one after the other in x.
//
//go:noescape
func dotQ8_0xNAVX512Asm(w []byte, x []BlockQ8_0, nb, n int, out *[8]float32)

// dotQ8_0xNPreAVX512 is the AVX-512 form of Kernels.Q8_0xNPre; out[t] is
// bit for bit dotQ8_0AVX512 of the activation t that p prepares.
func dotQ8_0xNPreAVX512(w []byte, p []byte, n int, out *[8]float32) {
	ng := checkQ8_0xNPre(p, n)
	dotQ8_0xNPreAVX512Asm(w[:ng*Q8_0PreGroup*dotQ8_0Bytes], p, ng, n, out)
	for t := n; t < Q8_0xNMax; t++ {
		out[t] = 0
	}
}

// dotQ8_0xNPreAVX512Asm is Kernels.Q8_0xNPre for a row of exactly 8·ng
// blocks and 1 ≤ n ≤ 8 prepared activations of ng groups each; out[t] for
// t ≥ n is unspecified.
//
//go:noescape
func dotQ8_0xNPreAVX512Asm(w []byte, p []byte, ng, n int, out *[8]float32)
