package quant

import (
	"fmt"

	"github.com/ds4-go/ds4/internal/cpufeat"
)

// Kernels is one implementation of the weight-row · activation dot
// products the matrix kernels are built from.
type Kernels struct {
	Name     string // "go" for the pure-Go reference, else the instruction set
	Q8_0     func(w []byte, x []BlockQ8_0) float32
	Q8_0x4   func(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32) // out[t] = Q8_0(w, xt) bit for bit, four activations of one length
	Q8_0xN   func(w []byte, x []BlockQ8_0, n int, out *[8]float32)       // out[t] = Q8_0(w, x[t*nb:(t+1)*nb]) bit for bit for t < n, 1 ≤ n ≤ Q8_0xNMax, nb = len(x)/n; out[t] = 0 for t ≥ n
	Q2K      func(w []byte, y []BlockQ8K) float32
	Q2Kx4    func(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) // out[t] = Q2K(w, yt) bit for bit, four activations of one length
	Q4K      func(w []byte, y []BlockQ8K) float32
	IQ2XXS   func(w []byte, y []BlockQ8K) float32                       // y as QuantizeQ8K makes it: codes in -127..127 in blocks of nonzero D (the avx2 kernel's need), Bsums their sums (the AVX-512 kernel's)
	IQ2XXSx4 func(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) // out[t] = IQ2XXS(w, yt) bit for bit, four activations of one length
	F16      func(w []byte, x []float32) float32
	F16x2x3  func(w0, w1 []byte, x0, x1, x2 []float32, out *[6]float32) // out[3r+t] = F16(wr, xt) bit for bit, two rows and three activations of one length
	F32      func(w []byte, x []float32) float32

	PackQ8_0Tile func(dst, w []byte, rowBytes int, next []byte)                       // packs the 16 rows w[i*rowBytes:(i+1)*rowBytes] (rowBytes = nb*34) into dst[:Q8_0TileBytes(nb)] (tile.go), asking the memory meanwhile for next (empty: none), the 16 rows the caller packs next; nil where the set has no tile kernel
	Q8_0Tile     func(tile []byte, x []BlockQ8_0, sums []int32, n int, out []float32) // out[t*16+i] = Q8_0(row i, x[t*nb:(t+1)*nb]) bit for bit (codes in -127..127, Q8_0's precondition) for t < n, i < 16; sums = Q8_0Sums(x) (the avx2 set does not read it); nil where PackQ8_0Tile is

	Q8_0xNPre func(w []byte, p []byte, n int, out *[8]float32) // out[t] = Q8_0(w, xt) bit for bit (codes in -127..127) for t < n, 1 ≤ n ≤ Q8_0xNMax, where p holds PrepareQ8_0 of the n activations xt of nb blocks one after the other, nb a multiple of Q8_0PreGroup; out[t] = 0 for t ≥ n; nil where the set has none

	PackIQ2XXSTile func(dst, w []byte, rowBytes int, next []byte)        // packs the 16 rows w[i*rowBytes:(i+1)*rowBytes] (rowBytes = nb*66) into dst[:IQ2XXSTileBytes(nb)] (tile_iq2.go), asking for next as PackQ8_0Tile does; nil where the set has no IQ2_XXS tile kernel
	IQ2XXSTile     func(tile []byte, y []BlockQ8K, n int, out []float32) // out[t*16+i] = IQ2XXS(row i, y[t*nb:(t+1)*nb]) bit for bit for t < n, i < 16 (y as IQ2XXS takes it); nil where PackIQ2XXSTile is

	PackQ2KTile func(dst, w []byte, rowBytes int, next []byte)        // packs the 16 rows w[i*rowBytes:(i+1)*rowBytes] (rowBytes = nb*84) into dst[:Q2KTileBytes(nb)] (tile_q2k.go), asking for next as PackQ8_0Tile does; nil where the set has no Q2_K tile kernel
	Q2KTile     func(tile []byte, y []BlockQ8K, n int, out []float32) // out[t*16+i] = Q2K(row i, y[t*nb:(t+1)*nb]) bit for bit for t < n, i < 16; nil where PackQ2KTile is
}

// genericName is the Name of the pure-Go kernel set.
const genericName = "go"

// GenericKernels returns the pure-Go reference kernels of dot.go.
func GenericKernels() Kernels {
	return Kernels{Name: genericName, Q8_0: DotQ8_0, Q8_0x4: DotQ8_0x4, Q8_0xN: DotQ8_0xN, Q2K: DotQ2K, Q2Kx4: DotQ2Kx4, Q4K: DotQ4K, IQ2XXS: DotIQ2XXS, IQ2XXSx4: DotIQ2XXSx4, F16: DotF16, F16x2x3: DotF16x2x3, F32: DotF32}
}

// Generic reports whether k is the pure-Go set, whose four-token kernels
// are four single-token calls.
func (k Kernels) Generic() bool { return k.Name == genericName }

// DotQ8_0x4 sets out[t] to DotQ8_0(w, xt) for four activations of the
// same length; it panics if their lengths differ.
func DotQ8_0x4(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32) {
	checkQ8_0x4(len(x0), x1, x2, x3)
	out[0] = DotQ8_0(w, x0)
	out[1] = DotQ8_0(w, x1)
	out[2] = DotQ8_0(w, x2)
	out[3] = DotQ8_0(w, x3)
}

// Q8_0xNMax is the most activations one Q8_0xN call takes.
const Q8_0xNMax = 8

// DotQ8_0xN sets out[t] to DotQ8_0(w, x[t*nb:(t+1)*nb]) for the n
// activations of nb = len(x)/n blocks that x holds one after the other,
// and the rest of out to 0; it panics unless 1 ≤ n ≤ Q8_0xNMax and n
// divides len(x).
func DotQ8_0xN(w []byte, x []BlockQ8_0, n int, out *[8]float32) {
	nb := checkQ8_0xN(x, n)
	*out = [8]float32{}
	for t := range n {
		out[t] = DotQ8_0(w, x[t*nb:(t+1)*nb])
	}
}

// checkQ8_0xN panics unless 1 ≤ n ≤ Q8_0xNMax and n divides len(x), and
// returns the blocks per activation.
func checkQ8_0xN(x []BlockQ8_0, n int) int {
	if n < 1 || n > Q8_0xNMax || len(x)%n != 0 {
		panic(fmt.Sprintf("quant: Q8_0xN of %d activations in %d blocks", n, len(x)))
	}
	return len(x) / n
}

// DotF16x2x3 sets out[3r+t] to DotF16(wr, xt) for two rows and three
// activations of one length; it panics if a row is shorter or the
// activations' lengths differ.
func DotF16x2x3(w0, w1 []byte, x0, x1, x2 []float32, out *[6]float32) {
	checkF16x2x3(len(x0), w0, w1, x1, x2)
	for r, w := range [2][]byte{w0, w1} {
		for t, x := range [3][]float32{x0, x1, x2} {
			out[3*r+t] = DotF16(w, x)
		}
	}
}

// checkF16x2x3 panics unless w0 and w1 hold n f16 weights and x1 and x2
// n elements.
func checkF16x2x3(n int, w0, w1 []byte, x1, x2 []float32) {
	if len(x1) != n || len(x2) != n {
		panic(fmt.Sprintf("quant: F16x2x3 activations of unequal lengths %d, %d, %d", n, len(x1), len(x2)))
	}
	if len(w0) < 2*n || len(w1) < 2*n {
		panic(fmt.Sprintf("quant: F16x2x3 rows of %d and %d bytes are shorter than %d weights", len(w0), len(w1), n))
	}
}

// checkQ8_0x4 panics unless x1, x2 and x3 have n blocks each.
func checkQ8_0x4(n int, x1, x2, x3 []BlockQ8_0) {
	if len(x1) != n || len(x2) != n || len(x3) != n {
		panic(fmt.Sprintf("quant: Q8_0x4 activations of unequal lengths %d, %d, %d, %d", n, len(x1), len(x2), len(x3)))
	}
}

// DotQ2Kx4 sets out[t] to DotQ2K(w, yt) for four activations of the same
// length; it panics if their lengths differ.
func DotQ2Kx4(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	dotQ8Kx4(DotQ2K, w, y0, y1, y2, y3, out)
}

// DotIQ2XXSx4 sets out[t] to DotIQ2XXS(w, yt) for four activations of
// the same length; it panics if their lengths differ.
func DotIQ2XXSx4(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	dotQ8Kx4(DotIQ2XXS, w, y0, y1, y2, y3, out)
}

// dotQ8Kx4 sets out[t] to dot(w, yt) after checking the lengths.
func dotQ8Kx4(dot func([]byte, []BlockQ8K) float32, w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	checkQ8Kx4(len(y0), y1, y2, y3)
	out[0] = dot(w, y0)
	out[1] = dot(w, y1)
	out[2] = dot(w, y2)
	out[3] = dot(w, y3)
}

// checkQ8Kx4 panics unless y1, y2 and y3 have n blocks each.
func checkQ8Kx4(n int, y1, y2, y3 []BlockQ8K) {
	if len(y1) != n || len(y2) != n || len(y3) != n {
		panic(fmt.Sprintf("quant: Q8_K x4 activations of unequal lengths %d, %d, %d, %d", n, len(y1), len(y2), len(y3)))
	}
}

// VectorKernelSets returns every SIMD kernel set this CPU can run, the
// fastest first, whatever DS4_PUREGO says; it is empty on another
// architecture, without the needed features, or under the purego build
// tag.
func VectorKernelSets() []Kernels { return kernelSets(cpufeat.Host().CPULevel()) }

// VectorKernels returns the fastest SIMD kernel set this CPU can run,
// whatever DS4_PUREGO says, and false when it has none.
func VectorKernels() (Kernels, bool) {
	sets := VectorKernelSets()
	if len(sets) == 0 {
		return Kernels{}, false
	}
	return sets[0], true
}

// KernelsFor returns the fastest kernel set of level l: the pure-Go one
// for cpufeat.Generic, on another architecture or under the purego build
// tag.
func KernelsFor(l cpufeat.Level) Kernels {
	if sets := kernelSets(l); len(sets) > 0 {
		return sets[0]
	}
	return GenericKernels()
}

// BestKernels returns the kernels of the host's level: the fastest vector
// set the CPU has, or the pure-Go set when it has none or DS4_PUREGO asks
// for it (cpufeat.PureGoEnv).
func BestKernels() Kernels { return KernelsFor(cpufeat.Host().Level()) }
