package quant

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkQ8_0xN applies 16 in-cache Q8_0 rows of benchRowElems elements
// to n = 1..8 tokens three ways: way=xn runs Q8_0xN once per row, way=one
// runs Q8_0 n times per row, way=tile packs the rows and runs the tile
// kernel (what a matrix pass does per 16 rows). ns/col is the time per
// row and token, so the ways and the counts compare directly.
func BenchmarkQ8_0xN(b *testing.B) {
	k, ok := VectorKernels()
	if !ok {
		b.Skip("no vector kernel set on this CPU or build")
	}
	const nb = benchRowElems / 32
	rowBytes, err := Q8_0.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	const rows = Q8_0TileRows
	w := benchRows(Q8_0, rows, rowBytes)
	tile := make([]byte, Q8_0TileBytes(nb))
	r := rand.New(rand.NewPCG(6, 8))
	x := make([]BlockQ8_0, Q8_0xNMax*nb)
	QuantizeQ8_0(randActivation(r, Q8_0xNMax*benchRowElems), x)
	sums := make([]int32, len(x))
	Q8_0Sums(x, sums)
	out := make([]float32, Q8_0xNMax*rows)
	for n := 1; n <= Q8_0xNMax; n++ {
		report := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*n), "ns/col")
		}
		b.Run("n="+strconv.Itoa(n)+"/way=xn", func(b *testing.B) {
			var o [8]float32
			for b.Loop() {
				for i := range rows {
					k.Q8_0xN(w[i*rowBytes:(i+1)*rowBytes], x[:n*nb], n, &o)
					out[i] = o[0]
				}
			}
			benchSinkF32 = out[0]
			report(b)
		})
		b.Run("n="+strconv.Itoa(n)+"/way=one", func(b *testing.B) {
			for b.Loop() {
				for i := range rows {
					for t := range n {
						out[t*rows+i] = k.Q8_0(w[i*rowBytes:(i+1)*rowBytes], x[t*nb:(t+1)*nb])
					}
				}
			}
			benchSinkF32 = out[0]
			report(b)
		})
		if k.Q8_0Tile == nil {
			continue
		}
		b.Run("n="+strconv.Itoa(n)+"/way=tile", func(b *testing.B) {
			for b.Loop() {
				k.PackQ8_0Tile(tile, w, rowBytes, nil)
				k.Q8_0Tile(tile, x[:n*nb], sums[:n*nb], n, out)
			}
			benchSinkF32 = out[0]
			report(b)
		})
	}
}

// BenchmarkQ8_0xNStream is BenchmarkQ8_0xN over 64 MiB of rows, which
// leave the caches between passes, as decode's matrices do: way=tile asks
// for the next 16 rows during each pack, as the CPU backend does,
// way=tile-nonext does not, and way=pre runs Q8_0xNPre on activations
// prepared once per pass.
func BenchmarkQ8_0xNStream(b *testing.B) {
	k, ok := VectorKernels()
	if !ok {
		b.Skip("no vector kernel set on this CPU or build")
	}
	const nb = benchRowElems / 32
	rowBytes, err := Q8_0.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	rows := (64 << 20) / rowBytes / Q8_0TileRows * Q8_0TileRows
	w := benchRows(Q8_0, rows, rowBytes)
	tile := make([]byte, Q8_0TileBytes(nb))
	r := rand.New(rand.NewPCG(6, 9))
	x := make([]BlockQ8_0, Q8_0xNMax*nb)
	QuantizeQ8_0(randActivation(r, Q8_0xNMax*benchRowElems), x)
	sums := make([]int32, len(x))
	Q8_0Sums(x, sums)
	out := make([]float32, Q8_0xNMax*Q8_0TileRows)
	pre := make([]byte, Q8_0PreBytes(len(x)))
	for n := 1; n <= Q8_0xNMax; n++ {
		report := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*n), "ns/col")
		}
		b.Run("n="+strconv.Itoa(n)+"/way=xn", func(b *testing.B) {
			var o [8]float32
			for b.Loop() {
				for i := range rows {
					k.Q8_0xN(w[i*rowBytes:(i+1)*rowBytes], x[:n*nb], n, &o)
					out[i%16] = o[0]
				}
			}
			benchSinkF32 = out[0]
			report(b)
		})
		if k.Q8_0xNPre != nil {
			b.Run("n="+strconv.Itoa(n)+"/way=pre", func(b *testing.B) {
				var o [8]float32
				pb := Q8_0PreBytes(nb)
				for b.Loop() {
					// One preparation per pass, as the CPU backend makes
					// one per product.
					PrepareQ8_0(x[:n*nb], pre)
					for i := range rows {
						k.Q8_0xNPre(w[i*rowBytes:(i+1)*rowBytes], pre[:n*pb], n, &o)
						out[i%16] = o[0]
					}
				}
				benchSinkF32 = out[0]
				report(b)
			})
		}
		if k.Q8_0Tile == nil {
			continue
		}
		for _, way := range []string{"tile", "tile-nonext"} {
			b.Run("n="+strconv.Itoa(n)+"/way="+way, func(b *testing.B) {
				tb := Q8_0TileRows * rowBytes
				for b.Loop() {
					for i := 0; i+tb <= len(w); i += tb {
						var next []byte
						if i+2*tb <= len(w) && way == "tile" {
							next = w[i+tb : i+2*tb]
						}
						k.PackQ8_0Tile(tile, w[i:i+tb], rowBytes, next)
						k.Q8_0Tile(tile, x[:n*nb], sums[:n*nb], n, out)
					}
				}
				benchSinkF32 = out[0]
				report(b)
			})
		}
	}
}
