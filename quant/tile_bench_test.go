package quant

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkQ8_0Tile applies 16 in-cache Q8_0 rows of benchRowElems
// elements to n tokens two ways: way=tile packs the rows (once per
// operation, as a matrix pass does per 16 rows) and runs the tile kernel,
// way=x4 runs Q8_0x4 n/4 times per row (row by row, so that the row stays
// in L1: token by token was slower). Both report Gop/s, counting a
// multiply and an add per weight and token, so benchstat -col /way sets
// them side by side.
func BenchmarkQ8_0Tile(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.Q8_0Tile == nil {
		b.Skip("no vector kernel set with the Q8_0 tile kernels on this CPU or build")
	}
	const nb = benchRowElems / 32
	rowBytes, err := Q8_0.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	w := benchRows(Q8_0, Q8_0TileRows, rowBytes)
	tile := make([]byte, Q8_0TileBytes(nb))
	r := rand.New(rand.NewPCG(6, 7))
	for _, n := range []int{4, 16, 64, 256} {
		x := make([]BlockQ8_0, n*nb)
		QuantizeQ8_0(randActivation(r, n*benchRowElems), x)
		sums := make([]int32, len(x))
		Q8_0Sums(x, sums)
		out := make([]float32, n*Q8_0TileRows)
		ops := float64(2 * Q8_0TileRows * benchRowElems * n)
		report := func(b *testing.B) {
			b.ReportMetric(ops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "Gop/s")
		}
		b.Run("n="+strconv.Itoa(n)+"/way=tile", func(b *testing.B) {
			for b.Loop() {
				k.PackQ8_0Tile(tile, w, rowBytes, nil)
				k.Q8_0Tile(tile, x, sums, n, out)
			}
			benchSinkF32 = out[0]
			report(b)
		})
		b.Run("n="+strconv.Itoa(n)+"/way=x4", func(b *testing.B) {
			var o [4]float32
			for b.Loop() {
				for i := range Q8_0TileRows {
					row := w[i*rowBytes : (i+1)*rowBytes]
					for t := 0; t < n; t += 4 {
						k.Q8_0x4(row, x[t*nb:(t+1)*nb], x[(t+1)*nb:(t+2)*nb], x[(t+2)*nb:(t+3)*nb], x[(t+3)*nb:(t+4)*nb], &o)
						for j, v := range o {
							out[(t+j)*Q8_0TileRows+i] = v
						}
					}
				}
			}
			benchSinkF32 = out[0]
			report(b)
		})
	}
}

// BenchmarkQ8_0TileParts times the pack of 16 rows of benchRowElems
// elements alone, and Q8_0Sums of one token's activation, the two costs a
// matrix pass adds to the tile kernel's (the sums once per activation);
// MB/s counts the bytes read.
func BenchmarkQ8_0TileParts(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.PackQ8_0Tile == nil {
		b.Skip("no vector kernel set with the Q8_0 tile kernels on this CPU or build")
	}
	const nb = benchRowElems / 32
	rowBytes, err := Q8_0.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	w := benchRows(Q8_0, Q8_0TileRows, rowBytes)
	tile := make([]byte, Q8_0TileBytes(nb))
	b.Run("part=pack", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			k.PackQ8_0Tile(tile, w, rowBytes, nil)
		}
	})
	x := make([]BlockQ8_0, nb)
	QuantizeQ8_0(benchVector(), x)
	sums := make([]int32, nb)
	b.Run("part=sums", func(b *testing.B) {
		b.SetBytes(int64(nb * 36))
		for b.Loop() {
			Q8_0Sums(x, sums)
		}
	})
}
