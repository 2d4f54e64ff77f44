package cpu

// The elementwise loops of the hyper-connection mixes. Each product is
// rounded to float32 before it is added, as the spec's order asks, so the
// SIMD forms (elem_amd64.s) give the bits of the Go loops below.

// mulTo sets dst[i] = s·x[i].
func mulTo(dst []float32, s float32, x []float32) {
	x = x[:len(dst)]
	i := mulToSIMD(hostLoops.elem, dst, s, x)
	for ; i < len(dst); i++ {
		dst[i] = s * x[i]
	}
}

// mulAdd adds s·x[i], rounded to float32, to acc[i].
func mulAdd(acc []float32, s float32, x []float32) {
	x = x[:len(acc)]
	i := mulAddSIMD(hostLoops.elem, acc, s, x)
	for ; i < len(acc); i++ {
		acc[i] += float32(s * x[i])
	}
}

// mulMulTo sets dst[i] = float32(s·x[i])·w[i], the product with s rounded
// before the one with w.
func mulMulTo(dst []float32, s float32, x, w []float32) {
	x, w = x[:len(dst)], w[:len(dst)]
	i := mulMulToSIMD(hostLoops.elem, dst, s, x, w)
	for ; i < len(dst); i++ {
		dst[i] = float32(s*x[i]) * w[i]
	}
}
