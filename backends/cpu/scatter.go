package cpu

import "unsafe"

// scatterNTBytes is the output footprint (inputs × destination stride ×
// 4 bytes) from which a tile's results go out with non-temporal stores.
// Such outputs exceed the caches (prefill's query projection writes 64 MB
// a chunk), so a store that first reads its line (write-allocate) only
// adds a read of memory and a cache miss per token.
const scatterNTBytes = 8 << 20

// scatterTile copies the 16 results of each of n inputs, out[16t:16t+16],
// to dst[t·ds:t·ds+16].
func scatterTile(dst []float32, ds int, out []float32, n int) {
	if n > 0 && n*ds*4 >= scatterNTBytes && scatterNT(hostLoops.scatter, dst, ds, out, n) {
		return
	}
	for t := range n {
		copy(dst[t*ds:t*ds+16], out[t*16:t*16+16])
	}
}

// aligned64 reports whether p and the byte stride are multiples of 64,
// as a 64-byte non-temporal store needs.
func aligned64(p unsafe.Pointer, strideBytes int) bool {
	return (uintptr(p)|uintptr(strideBytes))%64 == 0
}
