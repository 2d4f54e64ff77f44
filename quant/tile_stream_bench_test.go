package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkTileStream packs 64 MiB of rows, 16 at a time as prefill's
// matrix passes do, and applies each tile to the tokens an expert of a
// 512-token prefill chunk gets (12) or, for Q8_0, to 64: way=next passes
// each pack the 16 rows after its own, as the CPU backend does, way=none
// passes nothing. The rows leave the caches between passes, so the ratio
// of the two ways is what asking for the next rows during the pack buys.
// MB/s counts the rows read.
func BenchmarkTileStream(b *testing.B) {
	k, ok := VectorKernels()
	if !ok || k.PackQ8_0Tile == nil || k.PackIQ2XXSTile == nil || k.PackQ2KTile == nil {
		b.Skip("no vector kernel set with all the tile kernels on this CPU or build")
	}
	const size = 64 << 20
	r := rand.New(rand.NewPCG(8, 9))
	x8 := make([]BlockQ8_0, 64*benchRowElems/32)
	QuantizeQ8_0(randActivation(r, 64*benchRowElems), x8)
	sums := make([]int32, len(x8))
	Q8_0Sums(x8, sums)
	yk := make([]BlockQ8K, 12*benchRowElems/QK_K)
	QuantizeQ8K(randActivation(r, 12*benchRowElems), yk)
	out := make([]float32, 64*Q8_0TileRows)
	type kind struct {
		t    Type
		cols int
		run  func(tile, rows []byte, rowBytes int, next []byte)
	}
	kinds := []kind{
		{Q8_0, benchRowElems, func(tile, rows []byte, rowBytes int, next []byte) {
			k.PackQ8_0Tile(tile, rows, rowBytes, next)
			k.Q8_0Tile(tile, x8, sums, 64, out)
		}},
		{IQ2_XXS, benchRowElems, func(tile, rows []byte, rowBytes int, next []byte) {
			k.PackIQ2XXSTile(tile, rows, rowBytes, next)
			k.IQ2XXSTile(tile, yk, 12, out)
		}},
		// The routed experts' down projections are 2048 wide.
		{Q2_K, benchRowElems / 2, func(tile, rows []byte, rowBytes int, next []byte) {
			k.PackQ2KTile(tile, rows, rowBytes, next)
			k.Q2KTile(tile, yk[:12*benchRowElems/2/QK_K], 12, out)
		}},
	}
	tile := make([]byte, max(Q8_0TileBytes(benchRowElems/32), IQ2XXSTileBytes(benchRowElems/QK_K), Q2KTileBytes(benchRowElems/QK_K)))
	for _, kd := range kinds {
		rowBytes, err := kd.t.RowBytes(kd.cols)
		if err != nil {
			b.Fatal(err)
		}
		tileRows := Q8_0TileRows * rowBytes
		w := benchRows(kd.t, size/rowBytes, rowBytes)
		tiles := len(w) / tileRows
		for _, way := range []string{"next", "none"} {
			b.Run("type="+kd.t.String()+"/way="+way, func(b *testing.B) {
				b.SetBytes(int64(tiles * tileRows))
				for b.Loop() {
					for i := range tiles {
						var next []byte
						if way == "next" && i+1 < tiles {
							next = w[(i+1)*tileRows : (i+2)*tileRows]
						}
						kd.run(tile, w[i*tileRows:(i+1)*tileRows], rowBytes, next)
					}
				}
			})
		}
	}
}
