package quant

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkIQ2XXSTile applies 16 in-cache IQ2_XXS rows of benchRowElems
// elements to n tokens two ways: way=tile packs the rows (once per
// operation, as a matrix pass does per 16 rows) and runs the tile kernel,
// way=x4 runs IQ2XXSx4 n/4 times per row and IQ2XXS for the n%4 tokens
// left (row by row, so that the row stays in L1). Both report Gop/s,
// counting a multiply and an add per weight and token, so benchstat -col
// /way sets them side by side.
func BenchmarkIQ2XXSTile(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.IQ2XXSTile == nil {
		b.Skip("no vector kernel set with the IQ2_XXS tile kernels on this CPU or build")
	}
	const nb = benchRowElems / 256
	rowBytes, err := IQ2_XXS.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	w := benchRows(IQ2_XXS, Q8_0TileRows, rowBytes)
	tile := make([]byte, IQ2XXSTileBytes(nb))
	r := rand.New(rand.NewPCG(6, 8))
	for _, n := range []int{1, 2, 3, 4, 7, 8, 16, 64} {
		y := make([]BlockQ8K, n*nb)
		QuantizeQ8K(randActivation(r, n*benchRowElems), y)
		out := make([]float32, n*Q8_0TileRows)
		ops := float64(2 * Q8_0TileRows * benchRowElems * n)
		report := func(b *testing.B) {
			b.ReportMetric(ops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "Gop/s")
		}
		b.Run("n="+strconv.Itoa(n)+"/way=tile", func(b *testing.B) {
			for b.Loop() {
				k.PackIQ2XXSTile(tile, w, rowBytes, nil)
				k.IQ2XXSTile(tile, y, n, out)
			}
			benchSinkF32 = out[0]
			report(b)
		})
		b.Run("n="+strconv.Itoa(n)+"/way=x4", func(b *testing.B) {
			var o [4]float32
			tok := func(t int) []BlockQ8K { return y[t*nb : (t+1)*nb] }
			for b.Loop() {
				for i := range Q8_0TileRows {
					row := w[i*rowBytes : (i+1)*rowBytes]
					t := 0
					for ; t+4 <= n; t += 4 {
						k.IQ2XXSx4(row, tok(t), tok(t+1), tok(t+2), tok(t+3), &o)
						for j, v := range o {
							out[(t+j)*Q8_0TileRows+i] = v
						}
					}
					for ; t < n; t++ {
						out[t*Q8_0TileRows+i] = k.IQ2XXS(row, tok(t))
					}
				}
			}
			benchSinkF32 = out[0]
			report(b)
		})
	}
}

// BenchmarkIQ2XXSTileParts times the pack of 16 rows of benchRowElems
// elements alone and the tile kernel alone for n tokens, the two parts of
// way=tile in BenchmarkIQ2XXSTile; MB/s counts the row bytes packed.
func BenchmarkIQ2XXSTileParts(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.PackIQ2XXSTile == nil {
		b.Skip("no vector kernel set with the IQ2_XXS tile kernels on this CPU or build")
	}
	const nb = benchRowElems / 256
	rowBytes, err := IQ2_XXS.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	w := benchRows(IQ2_XXS, Q8_0TileRows, rowBytes)
	tile := make([]byte, IQ2XXSTileBytes(nb))
	b.Run("part=pack", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			k.PackIQ2XXSTile(tile, w, rowBytes, nil)
		}
	})
	k.PackIQ2XXSTile(tile, w, rowBytes, nil)
	r := rand.New(rand.NewPCG(6, 9))
	for _, n := range []int{1, 2, 4, 8} {
		y := make([]BlockQ8K, n*nb)
		QuantizeQ8K(randActivation(r, n*benchRowElems), y)
		out := make([]float32, n*Q8_0TileRows)
		b.Run("part=kernel/n="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				k.IQ2XXSTile(tile, y, n, out)
			}
			benchSinkF32 = out[0]
		})
	}
}
