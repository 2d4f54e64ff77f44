//go:build amd64 && !purego

package cpu

import "unsafe"

// scatterNT does scatterTile with non-temporal stores in form f, 64
// bytes at a time with AVX-512 or two times 32 with AVX2, where dst and its
// stride are 64-byte aligned, and reports whether it did (n > 0).
func scatterNT(f simdForm, dst []float32, ds int, out []float32, n int) bool {
	if f == formGo || !aligned64(unsafe.Pointer(&dst[0]), ds*4) {
		return false
	}
	_ = dst[(n-1)*ds+15]
	_ = out[16*n-1]
	if f == formAVX512 {
		scatterNTAsm(&dst[0], ds*4, &out[0], n)
	} else {
		scatterNTAVX2Asm(&dst[0], ds*4, &out[0], n)
	}
	return true
}

// scatterNTAsm stores the n 64-byte vectors at src to dst, dst+stride, …
// with non-temporal stores, then fences them (n > 0).
//
//go:noescape
func scatterNTAsm(dst *float32, strideBytes int, src *float32, n int)

// scatterNTAVX2Asm is scatterNTAsm with two 32-byte non-temporal stores a
// vector.
//
//go:noescape
func scatterNTAVX2Asm(dst *float32, strideBytes int, src *float32, n int)
