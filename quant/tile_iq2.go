package quant

import "fmt"

// A packed IQ2_XXS tile holds Q8_0TileRows IQ2_XXS weight rows expanded to
// one signed byte per weight and rearranged like a Q8_0 tile (tile.go): the
// int32 lanes of a vector are the 16 rows, so one VPDPBUSD makes 64 useful
// multiply-adds for all of them, with no horizontal reduction. The grid
// lookups and sign decoding are done once, when the tile is packed, and the
// packed tile then serves every token routed through the rows.
//
// Layout. A tile of rows of nb blocks is nb packed blocks of
// iq2xxsTileBlockBytes = 4672 bytes, in block order. Packed block b is
// eight packed groups of 576 bytes (group g covers elements 32g..32g+31 of
// the block, the elements of one scale) followed by one 64-byte scale
// vector; packed group g is eight 64-byte code vectors followed by one
// 64-byte multiplier vector:
//
//	bytes 576g+64k+4i+j (k < 8, i < 16, j < 4): the weight of element
//	                        32g+4k+j of block b of row i, ±8, ±25 or ±43
//	                        (grid magnitude and sign), plus 64: an
//	                        unsigned byte in 21..107
//	bytes 576g+512+4i .. +3:  the group's multiplier 2ls+1 of row i as a
//	                        little-endian int32
//	bytes 4608+4i .. +3:    the f16 scale d of block b of row i as a
//	                        little-endian float32
//
// The weights are biased to unsigned bytes because VPDPBUSD multiplies
// unsigned by signed bytes; the kernel removes the bias exactly with the
// activation's group sums: Σ(w+64)·q − 64·(Bsums[2g]+Bsums[2g+1]) = Σw·q,
// so the activation blocks' Bsums must be their codes' sums, as
// QuantizeQ8K sets them.
// A tile is 4672/1056 ≈ 4.4 times the size of its 16 rows.

// iq2xxsTileBlockBytes is the size of one packed block of an IQ2_XXS tile:
// 16 rows' 256 expanded weights, their 8 group multipliers and their
// float32 scales.
const iq2xxsTileBlockBytes = 8*(Q8_0TileRows*32+Q8_0TileRows*4) + Q8_0TileRows*4

// IQ2XXSTileBytes returns the bytes of a packed tile of Q8_0TileRows (16)
// IQ2_XXS rows of nb blocks each.
func IQ2XXSTileBytes(nb int) int { return nb * iq2xxsTileBlockBytes }

// checkPackIQ2XXSTile panics unless rowBytes is a whole number of IQ2_XXS
// blocks, w holds Q8_0TileRows such rows and dst a tile of them; it returns
// the blocks per row.
func checkPackIQ2XXSTile(dst, w []byte, rowBytes int) int {
	if rowBytes < 0 || rowBytes%dotIQ2XXSBytes != 0 {
		panic(fmt.Sprintf("quant: PackIQ2XXSTile row of %d bytes is not a whole number of 66-byte IQ2_XXS blocks", rowBytes))
	}
	nb := rowBytes / dotIQ2XXSBytes
	if len(w) < Q8_0TileRows*rowBytes {
		panic(fmt.Sprintf("quant: PackIQ2XXSTile weights of %d bytes hold fewer than %d rows of %d bytes", len(w), Q8_0TileRows, rowBytes))
	}
	if len(dst) < IQ2XXSTileBytes(nb) {
		panic(fmt.Sprintf("quant: PackIQ2XXSTile destination of %d bytes is shorter than a tile of %d blocks (%d bytes)", len(dst), nb, IQ2XXSTileBytes(nb)))
	}
	return nb
}

// checkIQ2XXSTile panics unless y holds n activations of one length, tile a
// tile of rows of that length and out room for n·Q8_0TileRows results; it
// returns the blocks per activation.
func checkIQ2XXSTile(tile []byte, y []BlockQ8K, n int, out []float32) int {
	if n < 1 || len(y)%n != 0 {
		panic(fmt.Sprintf("quant: IQ2XXSTile activation of %d blocks does not split into %d tokens", len(y), n))
	}
	nb := len(y) / n
	if len(tile) < IQ2XXSTileBytes(nb) {
		panic(fmt.Sprintf("quant: IQ2XXSTile tile of %d bytes is shorter than %d blocks (%d bytes)", len(tile), nb, IQ2XXSTileBytes(nb)))
	}
	if len(out) < n*Q8_0TileRows {
		panic(fmt.Sprintf("quant: IQ2XXSTile output of %d floats is shorter than %d tokens of %d rows", len(out), n, Q8_0TileRows))
	}
	return nb
}
