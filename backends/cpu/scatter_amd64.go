//go:build amd64 && !purego

package cpu

import "unsafe"

// scatterNT does scatterTile with 64-byte non-temporal stores where the
// CPU has AVX-512 and dst and its stride are 64-byte aligned, and reports
// whether it did.
func scatterNT(dst []float32, ds int, out []float32, n int) bool {
	if !hasAVX512 || !aligned64(unsafe.Pointer(&dst[0]), ds*4) {
		return false
	}
	_ = dst[(n-1)*ds+15]
	_ = out[16*n-1]
	scatterNTAsm(&dst[0], ds*4, &out[0], n)
	return true
}

// scatterNTAsm stores the n 64-byte vectors at src to dst, dst+stride, …
// with non-temporal stores, then fences them (n > 0).
//
//go:noescape
func scatterNTAsm(dst *float32, strideBytes int, src *float32, n int)
