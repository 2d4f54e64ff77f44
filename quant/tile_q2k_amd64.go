//go:build amd64 && !purego

package quant

// The AVX-512 (VNNI) Q2_K tile kernels. The Go functions check the lengths
// and split the tokens into groups of 8 and one of the 1..7 left, for the
// assembly bodies in tile_q2k_amd64.s, each group one pass over the tile;
// every result is DotQ2K's bit for bit, blocks added in order. They need
// AVX512F, BW, VL and VNNI.
// Pack included, the tile takes less time than Q2Kx4 and Q2K from one
// token on (BenchmarkQ2KTile; docs/performance.md#tile-kernels).

// packQ2KTileAVX512 is the AVX-512 form of Kernels.PackQ2KTile.
func packQ2KTileAVX512(dst, w []byte, rowBytes int, next []byte) {
	if nb := checkPackQ2KTile(dst, w, rowBytes); nb > 0 {
		prefetchTile(next, rowBytes)
		packQ2KTileAVX512Asm(dst, w, rowBytes, nb)
	}
}

// q2KTileAVX512 is the AVX-512 form of Kernels.Q2KTile.
func q2KTileAVX512(tile []byte, y []BlockQ8K, n int, out []float32) {
	q8KTileGroups(&q2KTileKernels, tile, y, checkQ2KTile(tile, y, n, out), n, out)
}

// q2KTileKernels are the Q2_K tile kernels for 1..8 tokens.
var q2KTileKernels = q8KTileKernels{q2KTile1AVX512, q2KTile2AVX512, q2KTile3AVX512, q2KTile4AVX512,
	q2KTile5AVX512, q2KTile6AVX512, q2KTile7AVX512, q2KTile8AVX512}

// packQ2KTileAVX512Asm packs the 16 rows of nb > 0 Q2_K blocks at w,
// rowBytes apart, into dst.
//
//go:noescape
func packQ2KTileAVX512Asm(dst, w []byte, rowBytes, nb int)

// q2KTile8AVX512 sets out[16t+i], for tokens t < 8 and tile rows i, to the
// Q2_K dot of row i of the nb > 0 packed blocks at tile with token t's nb
// activation blocks at y+t·nb.
//
//go:noescape
func q2KTile8AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile7AVX512 is q2KTile8AVX512 for seven tokens.
//
//go:noescape
func q2KTile7AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile6AVX512 is q2KTile8AVX512 for six tokens.
//
//go:noescape
func q2KTile6AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile5AVX512 is q2KTile8AVX512 for five tokens.
//
//go:noescape
func q2KTile5AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile4AVX512 is q2KTile8AVX512 for four tokens.
//
//go:noescape
func q2KTile4AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile3AVX512 is q2KTile8AVX512 for three tokens.
//
//go:noescape
func q2KTile3AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile2AVX512 is q2KTile8AVX512 for two tokens.
//
//go:noescape
func q2KTile2AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile1AVX512 is q2KTile8AVX512 for one token.
//
//go:noescape
func q2KTile1AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
