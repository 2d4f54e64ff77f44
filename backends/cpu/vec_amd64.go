//go:build amd64 && !purego

package cpu

// simdVecOps returns the AVX2/FMA loops of vec_amd64.s.
func simdVecOps() (vecOps, bool) {
	if !hasAVX2 {
		return vecOps{}, false
	}
	return vecOps{dot: dotAVX2, axpy: axpyAVX2}, true
}

// dotAVX2 is Dot with the first len(a)&^7 products summed in 32 lanes
// (four 8-lane accumulators, added pairwise at the end) and the rest
// added sequentially.
func dotAVX2(a, b []float32) float32 {
	b = b[:len(a)]
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		s = dotAVX2Asm(&a[0], &b[0], n)
	}
	for i := n; i < len(a); i++ {
		s += float32(a[i] * b[i])
	}
	return s
}

// axpyAVX2 is Axpy with each acc[i] += w·x[i] of the first len(acc)&^7
// elements fused (one rounding) and the rest as Axpy.
func axpyAVX2(acc []float32, w float32, x []float32) {
	x = x[:len(acc)]
	n := len(acc) &^ 7
	if n > 0 {
		axpyAVX2Asm(&acc[0], w, &x[0], n)
	}
	for i := n; i < len(acc); i++ {
		acc[i] += float32(w * x[i])
	}
}

// dotAVX2Asm returns the dot of the n floats at a and b (n a positive
// multiple of 8).
//
//go:noescape
func dotAVX2Asm(a, b *float32, n int) float32

// axpyAVX2Asm adds w times the n floats at x to those at acc (n a positive
// multiple of 8).
//
//go:noescape
func axpyAVX2Asm(acc *float32, w float32, x *float32, n int)

// prefetch asks the cache hierarchy for the lines of b without waiting for
// them.
func prefetch(b []byte) {
	if len(b) > 0 {
		prefetchAsm(&b[0], len(b))
	}
}

// prefetchAsm issues one PREFETCHT0 per 64 bytes of [p, p+n), n > 0.
//
//go:noescape
func prefetchAsm(p *byte, n int)
