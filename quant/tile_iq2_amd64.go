//go:build amd64 && !purego

package quant

import "fmt"

// The AVX-512 IQ2_XXS tile kernels. The Go functions check the lengths and
// split the tokens into groups of 8 and at most one smaller group, for the
// assembly bodies in tile_iq2_amd64.s; every result is DotIQ2XXS's bit
// for bit. They need AVX512F, BW, VL, VNNI, VBMI and GFNI.

// packIQ2XXSTileAVX512 is the AVX-512 form of Kernels.PackIQ2XXSTile.
func packIQ2XXSTileAVX512(dst, w []byte, rowBytes int, next []byte) {
	nb := checkPackIQ2XXSTile(dst, w, rowBytes)
	// The gather of the scales addresses row i at i·rowBytes in an int32,
	// as the Q8_0 pack does.
	if rowBytes > q8_0TileMaxRowBytes {
		panic(fmt.Sprintf("quant: PackIQ2XXSTile row of %d bytes is longer than the %d bytes the AVX-512 pack addresses", rowBytes, q8_0TileMaxRowBytes))
	}
	if nb > 0 {
		prefetchTile(next, rowBytes)
		packIQ2XXSTileAVX512Asm(dst, w, rowBytes, nb)
	}
}

// iq2xxsTileAVX512 is the AVX-512 form of Kernels.IQ2XXSTile. Each token's
// blocks are added in order into one float32 sum per row, as DotIQ2XXS
// adds them.
func iq2xxsTileAVX512(tile []byte, y []BlockQ8K, n int, out []float32) {
	q8KTileGroups(&iq2xxsTileKernels, tile, y, checkIQ2XXSTile(tile, y, n, out), n, out)
}

// iq2xxsTileKernels are the IQ2_XXS tile kernels for 1..8 tokens.
var iq2xxsTileKernels = q8KTileKernels{iq2xxsTile1AVX512, iq2xxsTile2AVX512, iq2xxsTile3AVX512, iq2xxsTile4AVX512,
	iq2xxsTile5AVX512, iq2xxsTile6AVX512, iq2xxsTile7AVX512, iq2xxsTile8AVX512}

// q8KTileKernels are the kernels of one Q8_K-activation tile kind for
// groups of 1..8 tokens: kernel g-1 sets out[16t+i] for t < g. Every
// group size has its own, because each pass over the tile costs a fixed
// share besides the tokens' own work: running 7 tokens as groups of 4, 2
// and 1 takes far longer than one pass of 7.
type q8KTileKernels [8]func(tile *byte, y *BlockQ8K, nb int, out *float32)

// q8KTileGroups applies the tile of nb blocks to the n tokens of y in
// groups of eight and one group of the rest, with kernels k.
func q8KTileGroups(k *q8KTileKernels, tile []byte, y []BlockQ8K, nb, n int, out []float32) {
	out = out[:n*Q8_0TileRows]
	if nb == 0 {
		clear(out)
		return
	}
	for t := 0; t < n; t += 8 {
		g := min(8, n-t)
		k[g-1](&tile[0], &y[t*nb], nb, &out[t*Q8_0TileRows])
	}
}

// packIQ2XXSTileAVX512Asm packs the 16 rows of nb > 0 blocks at w, rowBytes
// apart, into dst.
//
//go:noescape
func packIQ2XXSTileAVX512Asm(dst, w []byte, rowBytes, nb int)

// iq2xxsTile8AVX512 sets out[16t+i], for tokens t < 8 and tile rows i, to
// the IQ2_XXS dot of row i of the packed tile of nb > 0 blocks at tile with
// token t's nb activation blocks at y+t·nb.
//
//go:noescape
func iq2xxsTile8AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile7AVX512 is iq2xxsTile8AVX512 for seven tokens.
//
//go:noescape
func iq2xxsTile7AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile6AVX512 is iq2xxsTile8AVX512 for six tokens.
//
//go:noescape
func iq2xxsTile6AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile5AVX512 is iq2xxsTile8AVX512 for five tokens.
//
//go:noescape
func iq2xxsTile5AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile4AVX512 is iq2xxsTile8AVX512 for four tokens.
//
//go:noescape
func iq2xxsTile4AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile3AVX512 is iq2xxsTile8AVX512 for three tokens.
//
//go:noescape
func iq2xxsTile3AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile2AVX512 is iq2xxsTile8AVX512 for two tokens.
//
//go:noescape
func iq2xxsTile2AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile1AVX512 is iq2xxsTile8AVX512 for one token.
//
//go:noescape
func iq2xxsTile1AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
