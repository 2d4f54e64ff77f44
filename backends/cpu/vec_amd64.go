//go:build amd64 && !purego

package cpu

// avx512VecOps returns the AVX-512 loops of vec_amd64.s, which give the
// bits of the AVX2/FMA ones.
func avx512VecOps() vecOps {
	return vecOps{name: "avx512", dot: dotAVX512, axpy: axpyAVX512, dots4: dots4AVX512, weigh4: weigh4AVX512}
}

// avx2VecOps returns the AVX2/FMA loops, which define the float order of
// every SIMD loop here.
func avx2VecOps() vecOps {
	return vecOps{name: "avx2", dot: dotAVX2, axpy: axpyAVX2, dots4: dots4AVX2, weigh4: weigh4AVX2}
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
	return dotTail(s, a[n:], b[n:])
}

// dotTail returns s plus the products of a and b added in order: the
// tail of every SIMD dot, one function so that all compile to the same
// instructions (Go does not fix which operand of a sum a NaN comes from).
func dotTail(s float32, a, b []float32) float32 {
	b = b[:len(a)]
	for i := range a {
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
	axpyTail(acc[n:], w, x[n:])
}

// axpyTail adds w times x to acc one element at a time: the tail of every
// SIMD axpy, one function for the reason of dotTail.
func axpyTail(acc []float32, w float32, x []float32) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] += float32(w * x[i])
	}
}

// dotAVX512 is dotAVX2 with the AVX-512 loop, bit for bit.
func dotAVX512(a, b []float32) float32 {
	b = b[:len(a)]
	n := len(a) &^ 7
	var s float32
	if n > 0 {
		s = dotAVX512Asm(&a[0], &b[0], n)
	}
	return dotTail(s, a[n:], b[n:])
}

// axpyAVX512 is axpyAVX2 with the AVX-512 loop, bit for bit.
func axpyAVX512(acc []float32, w float32, x []float32) {
	x = x[:len(acc)]
	n := len(acc) &^ 7
	if n > 0 {
		axpyAVX512Asm(&acc[0], w, &x[0], n)
	}
	axpyTail(acc[n:], w, x[n:])
}

// dots4AVX512 and dots4AVX2 set dst[4j+h] to dotAVX2 of head h of q
// (four heads of len(q)/4 floats) and rows[j], bit for bit.
func dots4AVX512(dst, q []float32, rows [][]float32) { dots4(true, dst, q, rows) }
func dots4AVX2(dst, q []float32, rows [][]float32)   { dots4(false, dst, q, rows) }

// dots4 is dots4AVX512 (avx512) or dots4AVX2.
func dots4(avx512 bool, dst, q []float32, rows [][]float32) {
	d := len(q) / 4
	dst = dst[:4*len(rows)]
	for _, row := range rows {
		_ = row[:d] // the bounds the assembly relies on
	}
	n := d &^ 7
	if len(rows) == 0 {
		return
	}
	switch {
	case n == 0:
		clear(dst)
	case avx512:
		dots4AVX512Asm(&dst[0], &q[0], d, &rows[0], len(rows), n)
	default:
		dots4AVX2Asm(&dst[0], &q[0], d, &rows[0], len(rows), n)
	}
	if n == d {
		return
	}
	for j, row := range rows {
		for h := range 4 {
			dst[4*j+h] = dotTail(dst[4*j+h], q[h*d+n:(h+1)*d], row[n:d])
		}
	}
}

// weigh4AVX512 and weigh4AVX2 are vecOps.weigh of four heads on the AVX2
// axpy, bit for bit.
func weigh4AVX512(out, w []float32, rows [][]float32, r []float32) { weigh4(true, out, w, rows, r) }
func weigh4AVX2(out, w []float32, rows [][]float32, r []float32)   { weigh4(false, out, w, rows, r) }

// weigh4 is weigh4AVX512 (avx512) or weigh4AVX2.
func weigh4(avx512 bool, out, w []float32, rows [][]float32, r []float32) {
	d := len(out) / 4
	w, r = w[:4*len(rows)], r[:4]
	for _, row := range rows {
		_ = row[:d] // the bounds the assembly relies on
	}
	n := d &^ 7
	if len(rows) == 0 {
		n = 0
	}
	switch {
	case n == 0:
	case avx512:
		weigh4AVX512Asm(&out[0], d, &w[0], &rows[0], len(rows), n, &r[0])
	default:
		weigh4AVX2Asm(&out[0], d, &w[0], &rows[0], len(rows), n, &r[0])
	}
	if n == d {
		return
	}
	for h := range 4 {
		oh := out[h*d+n : (h+1)*d]
		clear(oh)
		for j, row := range rows {
			axpyTail(oh, w[4*j+h], row[n:d])
		}
		scaleVec(oh, r[h])
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

// dotAVX512Asm is dotAVX2Asm with two 16-lane registers holding its four
// 8-lane chains.
//
//go:noescape
func dotAVX512Asm(a, b *float32, n int) float32

// axpyAVX512Asm is axpyAVX2Asm 16 lanes at a time.
//
//go:noescape
func axpyAVX512Asm(acc *float32, w float32, x *float32, n int)

// dots4AVX512Asm sets dst[4j+h] to dotAVX2Asm of the n floats of head h of
// q (the heads d floats apart) and of rows[j], for the nrows > 0 rows (n
// a positive multiple of 8, d ≥ n, every row at least n floats).
//
//go:noescape
func dots4AVX512Asm(dst, q *float32, d int, rows *[]float32, nrows int, n int)

// weigh4AVX512Asm sets the first n floats of each of the four heads h of
// out (d floats apart) to r[h] times the sum from zero, by axpyAVX2Asm in
// row order, of w[4j+h] times rows[j], for the nrows > 0 rows (n a
// positive multiple of 8, d ≥ n, every row at least n floats).
//
//go:noescape
func weigh4AVX512Asm(out *float32, d int, w *float32, rows *[]float32, nrows int, n int, r *float32)

// dots4AVX2Asm is dots4AVX512Asm with AVX2, two heads at a time.
//
//go:noescape
func dots4AVX2Asm(dst, q *float32, d int, rows *[]float32, nrows int, n int)

// weigh4AVX2Asm is weigh4AVX512Asm with AVX2.
//
//go:noescape
func weigh4AVX2Asm(out *float32, d int, w *float32, rows *[]float32, nrows int, n int, r *float32)
