package quant

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// q2kTileBenchElems is the row length of the Q2_K tile benchmarks: that of
// a routed expert's down-projection, the matrix prefill runs them on.
const q2kTileBenchElems = 2048

// BenchmarkQ2KTile applies 16 in-cache Q2_K rows of q2kTileBenchElems
// elements to n tokens two ways: way=tile packs the rows (once per
// operation, as a matrix pass does per 16 rows) and runs the tile kernel,
// way=x4 runs Q2Kx4 n/4 times per row and Q2K for the n%4 tokens left (row
// by row, so that the row stays in L1). Both report Gop/s, counting a
// multiply and an add per weight and token, so benchstat -col /way sets
// them side by side.
func BenchmarkQ2KTile(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.Q2KTile == nil {
		b.Skip("no vector kernel set with the Q2_K tile kernels on this CPU or build")
	}
	const nb = q2kTileBenchElems / QK_K
	rowBytes, err := Q2_K.RowBytes(q2kTileBenchElems)
	if err != nil {
		b.Fatal(err)
	}
	w := benchRows(Q2_K, Q8_0TileRows, rowBytes)
	tile := make([]byte, Q2KTileBytes(nb))
	r := rand.New(rand.NewPCG(6, 8))
	for _, n := range []int{1, 2, 3, 4, 6, 8, 13, 16, 64} {
		y := make([]BlockQ8K, n*nb)
		QuantizeQ8K(randActivation(r, n*q2kTileBenchElems), y)
		out := make([]float32, n*Q8_0TileRows)
		ops := float64(2 * Q8_0TileRows * q2kTileBenchElems * n)
		report := func(b *testing.B) {
			b.ReportMetric(ops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "Gop/s")
		}
		b.Run("n="+strconv.Itoa(n)+"/way=tile", func(b *testing.B) {
			for b.Loop() {
				k.PackQ2KTile(tile, w, rowBytes, nil)
				k.Q2KTile(tile, y, n, out)
			}
			benchSinkF32 = out[0]
			report(b)
		})
		b.Run("n="+strconv.Itoa(n)+"/way=x4", func(b *testing.B) {
			var o [4]float32
			for b.Loop() {
				for i := range Q8_0TileRows {
					row := w[i*rowBytes : (i+1)*rowBytes]
					t := 0
					for ; t+4 <= n; t += 4 {
						k.Q2Kx4(row, y[t*nb:(t+1)*nb], y[(t+1)*nb:(t+2)*nb], y[(t+2)*nb:(t+3)*nb], y[(t+3)*nb:(t+4)*nb], &o)
						for j, v := range o {
							out[(t+j)*Q8_0TileRows+i] = v
						}
					}
					for ; t < n; t++ {
						out[t*Q8_0TileRows+i] = k.Q2K(row, y[t*nb:(t+1)*nb])
					}
				}
			}
			benchSinkF32 = out[0]
			report(b)
		})
	}
}

// BenchmarkQ2KTileParts times the pack of 16 rows of q2kTileBenchElems
// elements alone (MB/s counting the rows' bytes) and the tile kernel alone
// for n tokens (Gop/s as in BenchmarkQ2KTile), so that the pack can be
// set against the kernel's cost per token.
func BenchmarkQ2KTileParts(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.PackQ2KTile == nil {
		b.Skip("no vector kernel set with the Q2_K tile kernels on this CPU or build")
	}
	const nb = q2kTileBenchElems / QK_K
	rowBytes, err := Q2_K.RowBytes(q2kTileBenchElems)
	if err != nil {
		b.Fatal(err)
	}
	w := benchRows(Q2_K, Q8_0TileRows, rowBytes)
	tile := make([]byte, Q2KTileBytes(nb))
	b.Run("part=pack", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			k.PackQ2KTile(tile, w, rowBytes, nil)
		}
	})
	k.PackQ2KTile(tile, w, rowBytes, nil)
	r := rand.New(rand.NewPCG(6, 9))
	for _, n := range []int{1, 2, 4, 8, 64} {
		y := make([]BlockQ8K, n*nb)
		QuantizeQ8K(randActivation(r, n*q2kTileBenchElems), y)
		out := make([]float32, n*Q8_0TileRows)
		ops := float64(2 * Q8_0TileRows * q2kTileBenchElems * n)
		b.Run("part=kernel/n="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				k.Q2KTile(tile, y, n, out)
			}
			benchSinkF32 = out[0]
			b.ReportMetric(ops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "Gop/s")
		})
	}
}
