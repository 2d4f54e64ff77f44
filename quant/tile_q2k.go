package quant

import "fmt"

// A packed Q2_K tile holds Q8_0TileRows Q2_K weight rows rearranged, like a
// Q8_0 tile (tile.go), so that the int32 lanes of a vector are the 16 rows
// and every VPDPBUSD makes 64 useful multiply-adds with no horizontal
// reduction. Each 2-bit code is stored already multiplied by its 4-bit
// sub-block scale, so that one integer sum per token and block covers all
// 16 sub-blocks.
//
// Layout. A tile of rows of nb blocks is nb packed blocks of
// q2KTileBlockBytes = 4736 bytes, in block order. For row i (i < 16) of
// packed block b, let q_e (0..3) be element e's code, s_g and m_g the low
// and high nibble of scale byte g (element e has g = e/16), and d, dmin
// the block's two f16 factors. Packed block b is:
//
//	bytes 64k+4i+l (k < 64, l < 4):        the byte q_e·s_g (0..45) of row i,
//	                                       e = 4k+l, g = k/4
//	bytes 4096+64p+4i .. +3 (p < 8):       m_{2p} and m_{2p+1} of row i as two
//	                                       little-endian int16
//	bytes 4608+4i .. +3 and 4672+4i .. +3: d and dmin of row i as
//	                                       little-endian float32
//
// With a Q8_K activation block y, VPDPBUSD of code vector k with the
// broadcast codes y.Qs[4k:4k+4] adds Σ s_g·q_e·y_e over those four
// elements to each row's lane: the 64 vectors give DotQ2K's isum exactly.
// VPDPWSSD of min vector p with the broadcast pair y.Bsums[2p:2p+2] gives
// its summs likewise. A tile is 4736/1344 ≈ 3.5 times the size of its 16
// rows.

// q2KTileBlockBytes is the size of one packed block of a Q2_K tile: 16
// rows' 256 scaled codes, their 16 mins as int16 and their d and dmin as
// float32.
const q2KTileBlockBytes = Q8_0TileRows*QK_K + Q8_0TileRows*16*2 + Q8_0TileRows*2*4

// Q2KTileBytes returns the bytes of a packed tile of Q8_0TileRows (16) Q2_K
// rows of nb blocks each.
func Q2KTileBytes(nb int) int { return nb * q2KTileBlockBytes }

// checkPackQ2KTile panics unless rowBytes is a whole number of Q2_K
// blocks, w holds Q8_0TileRows such rows and dst a tile of them; it returns
// the blocks per row.
func checkPackQ2KTile(dst, w []byte, rowBytes int) int {
	if rowBytes < 0 || rowBytes%dotQ2KBytes != 0 {
		panic(fmt.Sprintf("quant: PackQ2KTile row of %d bytes is not a whole number of 84-byte Q2_K blocks", rowBytes))
	}
	nb := rowBytes / dotQ2KBytes
	if len(w) < Q8_0TileRows*rowBytes {
		panic(fmt.Sprintf("quant: PackQ2KTile weights of %d bytes hold fewer than %d rows of %d bytes", len(w), Q8_0TileRows, rowBytes))
	}
	if len(dst) < Q2KTileBytes(nb) {
		panic(fmt.Sprintf("quant: PackQ2KTile destination of %d bytes is shorter than a tile of %d blocks (%d bytes)", len(dst), nb, Q2KTileBytes(nb)))
	}
	return nb
}

// checkQ2KTile panics unless y holds n activations of one length, tile a
// tile of rows of that length and out room for n·Q8_0TileRows results; it
// returns the blocks per activation.
func checkQ2KTile(tile []byte, y []BlockQ8K, n int, out []float32) int {
	if n < 1 || len(y)%n != 0 {
		panic(fmt.Sprintf("quant: Q2KTile activation of %d blocks does not split into %d tokens", len(y), n))
	}
	nb := len(y) / n
	if len(tile) < Q2KTileBytes(nb) {
		panic(fmt.Sprintf("quant: Q2KTile tile of %d bytes is shorter than %d blocks (%d bytes)", len(tile), nb, Q2KTileBytes(nb)))
	}
	if len(out) < n*Q8_0TileRows {
		panic(fmt.Sprintf("quant: Q2KTile output of %d floats is shorter than %d tokens of %d rows", len(out), n, Q8_0TileRows))
	}
	return nb
}
