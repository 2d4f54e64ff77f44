package quant_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// TestQ8_0xNMatchesSingle holds each kernel set's Q8_0xN, for every
// activation count from 1 to quant.Q8_0xNMax, to the same set's Q8_0 on
// each activation bit for bit (the engine's batched decode uses the first
// and its single decode the second, and the two must agree exactly), and
// to the pure-Go DotQ8_0 within Q8_0's bound, on the rows and activations
// of the Q8_0x4 tests: random ones of many lengths and extreme codes and
// scales. Where NaNs meet, any NaN matches, as for Q8_0x4.
func TestQ8_0xNMatchesSingle(t *testing.T) {
	f := &kernelFields[0]
	require.Equal(t, "Q8_0", f.name)
	bf := &batchFields[0]
	sizes := append(slices.Clone(bf.sizes), 64, 65)
	// Two draws of the same shapes: case i of each has the same length
	// and generator, so their activations make eight for one row.
	a := x4Cases(rand.New(rand.NewPCG(8, 1)), f, sizes, bf.extremeSizes)
	b := x4Cases(rand.New(rand.NewPCG(8, 2)), f, sizes, bf.extremeSizes)
	require.Equal(t, len(a), len(b))
	for _, k := range kernelSets() {
		t.Run(k.Name, func(t *testing.T) {
			checkXN(t, f, k, "Q8_0xN", a, b, func(w []byte, x []quant.BlockQ8_0, n int, out *[8]float32) {
				k.Q8_0xN(w, x, n, out)
			})
		})
	}
}

// checkXN holds run, a product of one Q8_0 row by n activations given as
// their blocks one after the other, for every n from 1 to
// quant.Q8_0xNMax, to the set k's Q8_0 on each activation bit for bit and
// to the pure-Go DotQ8_0 within f's bound, on the case pairs a[i], b[i]
// (whose eight activations share a row); outputs past n must be zero, and
// where NaNs meet any NaN matches. name names run in messages.
func checkXN(t *testing.T, f *kernelField, k quant.Kernels, name string, a, b []x4Case, run func(w []byte, x []quant.BlockQ8_0, n int, out *[8]float32)) {
	t.Helper()
	gen := quant.GenericKernels()
	for i := range a {
		acts := append(a[i].act[:], b[i].act[:]...)
		nb := len(acts[0].q80)
		x := make([]quant.BlockQ8_0, 0, quant.Q8_0xNMax*nb)
		for _, c := range acts {
			x = append(x, c.q80...)
		}
		for n := 1; n <= quant.Q8_0xNMax; n++ {
			out := [8]float32{1, 2, 3, 4, 5, 6, 7, 8}
			run(a[i].w, x[:n*nb], n, &out)
			for tok := range quant.Q8_0xNMax {
				if tok >= n {
					require.Zero(t, math.Float32bits(out[tok]), "%s n=%d: out[%d] past n", a[i].name, n, tok)
					continue
				}
				c := acts[tok]
				c.w = a[i].w
				want := k.Q8_0(c.w, c.q80)
				if !(isNaN32(want) && isNaN32(out[tok])) {
					require.Equal(t, math.Float32bits(want), math.Float32bits(out[tok]),
						"%s n=%d token %d: %s %v, Q8_0 %v", a[i].name, n, tok, name, out[tok], want)
				}
				if !nonFinite(want) {
					f.compare(t, &c, gen.Q8_0(c.w, c.q80), out[tok])
				}
			}
		}
	}
}

// TestQ8_0xNBadInputPanics checks that every set's Q8_0xN panics on a row
// one byte short and on activation counts out of range or not dividing
// the blocks, and gives the known result of a constant row.
func TestQ8_0xNBadInputPanics(t *testing.T) {
	f := &kernelFields[0]
	const nb = 9
	c := f.blockCase("ones", nb, func() byte { return 1 }, func(int, int) uint16 { return 0x3c00 }, func(int) int8 { return 1 }, func(int) float32 { return 1 })
	x := make([]quant.BlockQ8_0, 0, 8*nb)
	for range 8 {
		x = append(x, c.q80...)
	}
	row := c.w[: len(c.w)-1 : len(c.w)-1]
	for _, k := range kernelSets() {
		var out [8]float32
		for _, bad := range []struct {
			w []byte
			x []quant.BlockQ8_0
			n int
		}{
			{row, x[:2*nb], 2},
			{c.w, x[:2*nb], 0},
			{c.w, x[:8*nb], 9},
			{c.w, x[:2*nb+1], 2},
		} {
			require.Panics(t, func() { k.Q8_0xN(bad.w, bad.x, bad.n, &out) }, "%s: %d blocks, n=%d, row of %d bytes", k.Name, len(bad.x), bad.n, len(bad.w))
		}
		k.Q8_0xN(c.w, x, 8, &out)
		for _, v := range out {
			require.Equal(t, float32(nb*32), v, "%s on a constant row", k.Name)
		}
	}
}
