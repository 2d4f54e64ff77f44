package quant

import "fmt"

// A packed Q8_0 tile holds Q8_0TileRows weight rows rearranged so that a
// vector kernel can apply all of them to one token at once: its int32 lanes
// are the rows, so a block needs no horizontal reduction and every VPDPBUSD
// makes 64 useful multiply-adds.
//
// Layout. A tile of rows of nb blocks is nb packed blocks of
// q8_0TileBlockBytes = 576 bytes, in block order. Packed block b is eight
// 64-byte code vectors followed by one 64-byte scale vector:
//
//	bytes 64k+4i .. 64k+4i+3 (k < 8, i < 16): codes 4k..4k+3 of block b of
//	                                          row i, each XOR 0x80, i.e. the
//	                                          unsigned byte code+128
//	bytes 512+4i .. 512+4i+3 (i < 16):        the f16 scale of block b of
//	                                          row i as a little-endian float32
//
// The codes are biased to unsigned bytes because VPDPBUSD multiplies
// unsigned by signed bytes; the kernel removes the bias exactly with the
// activation block's code sum (Q8_0Sums): Σ(w+128)·x - 128·Σx = Σw·x.
// A tile is 576/544 ≈ 1.06 times the size of its 16 rows.

// Q8_0TileRows is the number of Q8_0 weight rows a packed tile holds.
const Q8_0TileRows = 16

// q8_0TileBlockBytes is the size of one packed block of a tile: 16 rows'
// 32 codes and their 16 float32 scales.
const q8_0TileBlockBytes = Q8_0TileRows*32 + Q8_0TileRows*4

// Q8_0TileBytes returns the bytes of a packed tile of Q8_0TileRows rows of
// nb blocks each.
func Q8_0TileBytes(nb int) int { return nb * q8_0TileBlockBytes }

// Q8_0Sums sets sums[b] to the sum of x[b].Qs for every block of x
// (len(sums) >= len(x)); it panics if sums is shorter.
func Q8_0Sums(x []BlockQ8_0, sums []int32) {
	sums = sums[:len(x)]
	// The SIMD form, where there is one, does every block.
	for b := q8_0SumsFull(hostAct, x, sums); b < len(x); b++ {
		var s int32
		for _, q := range &x[b].Qs {
			s += int32(q)
		}
		sums[b] = s
	}
}

// checkPackQ8_0Tile panics unless rowBytes is a whole number of Q8_0
// blocks, w holds Q8_0TileRows such rows and dst a tile of them; it returns
// the blocks per row.
func checkPackQ8_0Tile(dst, w []byte, rowBytes int) int {
	if rowBytes < 0 || rowBytes%dotQ8_0Bytes != 0 {
		panic(fmt.Sprintf("quant: PackQ8_0Tile row of %d bytes is not a whole number of 34-byte Q8_0 blocks", rowBytes))
	}
	nb := rowBytes / dotQ8_0Bytes
	if len(w) < Q8_0TileRows*rowBytes {
		panic(fmt.Sprintf("quant: PackQ8_0Tile weights of %d bytes hold fewer than %d rows of %d bytes", len(w), Q8_0TileRows, rowBytes))
	}
	if len(dst) < Q8_0TileBytes(nb) {
		panic(fmt.Sprintf("quant: PackQ8_0Tile destination of %d bytes is shorter than a tile of %d blocks (%d bytes)", len(dst), nb, Q8_0TileBytes(nb)))
	}
	return nb
}

// checkQ8_0Tile panics unless x holds n activations of one length, sums
// their block sums, tile a tile of rows of that length and out room for
// n·Q8_0TileRows results; it returns the blocks per activation.
func checkQ8_0Tile(tile []byte, x []BlockQ8_0, sums []int32, n int, out []float32) int {
	if n < 1 || len(x)%n != 0 {
		panic(fmt.Sprintf("quant: Q8_0Tile activation of %d blocks does not split into %d tokens", len(x), n))
	}
	nb := len(x) / n
	if len(sums) < len(x) {
		panic(fmt.Sprintf("quant: Q8_0Tile has %d block sums for %d activation blocks", len(sums), len(x)))
	}
	if len(tile) < Q8_0TileBytes(nb) {
		panic(fmt.Sprintf("quant: Q8_0Tile tile of %d bytes is shorter than %d blocks (%d bytes)", len(tile), nb, Q8_0TileBytes(nb)))
	}
	if len(out) < n*Q8_0TileRows {
		panic(fmt.Sprintf("quant: Q8_0Tile output of %d floats is shorter than %d tokens of %d rows", len(out), n, Q8_0TileRows))
	}
	return nb
}
