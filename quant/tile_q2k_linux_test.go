package quant_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ds4-go/ds4/quant"
	"github.com/stretchr/testify/require"
)

// TestQ2KTileStaysInBounds runs the Q2_K tile pack and kernel with each of
// their slices (rows and packed tile of the pack; tile, activations and
// results of the kernel) ending at an inaccessible page, and holds the
// results to DotQ2K of the unpacked rows.
func TestQ2KTileStaysInBounds(t *testing.T) {
	eachTileSet(t, q2kTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(5, 8))
		for _, nb := range []int{1, 2, 3, 8, 9} {
			w, rowBytes := q2kTileRows(r, nb)
			gw := guardedTail(t, len(w))
			copy(gw, w)
			tile := guardedTail(t, quant.Q2KTileBytes(nb))
			vk.PackQ2KTile(tile, gw, rowBytes, nil)
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 15} {
				y := q2kTileActivation(r, n, nb)
				gy := guardedSlice[quant.BlockQ8K](t, len(y))
				copy(gy, y)
				out := guardedSlice[float32](t, n*quant.Q8_0TileRows)
				vk.Q2KTile(tile, gy, n, out)
				require.Empty(t, tileMismatch(out, q2kTileWant(w, rowBytes, y, n)), "nb=%d n=%d", nb, n)
			}
		}
	})
}
