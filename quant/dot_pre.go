package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q8_0PreGroup is the number of blocks of one group of a prepared Q8_0
// activation: PrepareQ8_0 takes whole groups.
const Q8_0PreGroup = 8

// q8_0PreGroupBytes is the size of one prepared group: eight float32
// scales padded to a cache line and eight blocks of 32 codes.
const q8_0PreGroupBytes = 64 + Q8_0PreGroup*32

// Q8_0PreBytes returns the size in bytes of the prepared form of nb Q8_0
// activation blocks.
func Q8_0PreBytes(nb int) int { return nb / Q8_0PreGroup * q8_0PreGroupBytes }

// PrepareQ8_0 writes the form of x that Kernels.Q8_0xNPre takes into
// dst[:Q8_0PreBytes(len(x))]; it panics unless len(x) is a multiple of
// Q8_0PreGroup and dst is long enough.
//
// Each group of eight blocks becomes their eight scales, in the block order
// 0 2 4 6 1 3 5 7 in which the AVX-512 kernels' lanes hold them, 32 bytes
// of zeros, and their codes plus 128 as unsigned bytes, 32 a block in
// block order: 320 bytes, so that each group of a buffer aligned to 64
// bytes is too, and the kernel's 64-byte loads do not cross cache lines.
// Preparing each activation once per product spares the kernel, once per
// row, the scales' shuffles and the codes' sign handling.
func PrepareQ8_0(x []BlockQ8_0, dst []byte) {
	if len(x)%Q8_0PreGroup != 0 {
		panic(fmt.Sprintf("quant: PrepareQ8_0 of %d blocks, not a multiple of %d", len(x), Q8_0PreGroup))
	}
	dst = dst[:Q8_0PreBytes(len(x))]
	for g := range len(x) / Q8_0PreGroup {
		xs := x[g*Q8_0PreGroup : (g+1)*Q8_0PreGroup]
		d := dst[g*q8_0PreGroupBytes : (g+1)*q8_0PreGroupBytes]
		for i, b := range [Q8_0PreGroup]int{0, 2, 4, 6, 1, 3, 5, 7} {
			binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(xs[b].D))
		}
		clear(d[32:64])
		for b := range xs {
			c := d[64+32*b : 96+32*b]
			for i, q := range xs[b].Qs {
				c[i] = byte(q) ^ 0x80
			}
		}
	}
}

// checkQ8_0xNPre panics unless 1 ≤ n ≤ Q8_0xNMax and p holds n prepared
// activations of whole groups, and returns the groups per activation.
func checkQ8_0xNPre(p []byte, n int) int {
	if n < 1 || n > Q8_0xNMax || len(p)%(n*q8_0PreGroupBytes) != 0 {
		panic(fmt.Sprintf("quant: Q8_0xNPre of %d activations in %d bytes", n, len(p)))
	}
	return len(p) / (n * q8_0PreGroupBytes)
}
