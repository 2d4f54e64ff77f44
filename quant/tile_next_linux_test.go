package quant_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// TestPackQ8_0TileNext checks that every set's PackQ8_0Tile packs the same
// tile whether or not it asks for the next rows meanwhile, with the next
// rows ending where an inaccessible page begins (the AVX-512 pack's last
// request reaches past them, which must not fault) and one byte too short
// to be a tile.
func TestPackQ8_0TileNext(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(7, 12))
		for _, nb := range []int{1, 2, 7, 128, 129} {
			t.Run(fmt.Sprintf("nb=%d", nb), func(t *testing.T) {
				w, rowBytes := tileRows(r, nb)
				want := make([]byte, quant.Q8_0TileBytes(nb))
				vk.PackQ8_0Tile(want, w, rowBytes, nil)
				next := guardedTail(t, quant.Q8_0TileRows*rowBytes)
				copy(next, w)
				for _, nx := range [][]byte{next, next[:len(next)-1]} {
					got := make([]byte, len(want))
					vk.PackQ8_0Tile(got, w, rowBytes, nx)
					require.Equal(t, want, got, "next of %d bytes", len(nx))
				}
			})
		}
	})
}
