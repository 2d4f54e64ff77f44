//go:build amd64 && !purego

package cpu

// mulToSIMD does mulTo's first len(dst)&^7 elements in form f (AVX2) and
// returns how many it did (none in the Go form).
func mulToSIMD(f simdForm, dst []float32, s float32, x []float32) int {
	n := len(dst) &^ 7
	if f == formGo || n == 0 {
		return 0
	}
	mulToAVX2Asm(&dst[0], s, &x[0], n)
	return n
}

// mulAddSIMD does mulAdd's first len(acc)&^7 elements in form f (AVX2)
// and returns how many it did (none in the Go form).
func mulAddSIMD(f simdForm, acc []float32, s float32, x []float32) int {
	n := len(acc) &^ 7
	if f == formGo || n == 0 {
		return 0
	}
	mulAddAVX2Asm(&acc[0], s, &x[0], n)
	return n
}

// mulMulToSIMD does mulMulTo's first len(dst)&^7 elements in form f
// (AVX2) and returns how many it did (none in the Go form).
func mulMulToSIMD(f simdForm, dst []float32, s float32, x, w []float32) int {
	n := len(dst) &^ 7
	if f == formGo || n == 0 {
		return 0
	}
	mulMulToAVX2Asm(&dst[0], s, &x[0], &w[0], n)
	return n
}

// mulToAVX2Asm sets the n floats at dst to s times those at x (n a
// positive multiple of 8).
//
//go:noescape
func mulToAVX2Asm(dst *float32, s float32, x *float32, n int)

// mulAddAVX2Asm adds s times the n floats at x, each product rounded, to
// those at acc (n a positive multiple of 8).
//
//go:noescape
func mulAddAVX2Asm(acc *float32, s float32, x *float32, n int)

// mulMulToAVX2Asm sets the n floats at dst to s times those at x, rounded,
// times those at w (n a positive multiple of 8).
//
//go:noescape
func mulMulToAVX2Asm(dst *float32, s float32, x, w *float32, n int)
