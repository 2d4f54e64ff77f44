package quant_test

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ds4-go/ds4/quant"
	"github.com/stretchr/testify/require"
)

// guardedTail returns a slice of n bytes that ends where an inaccessible
// page begins, so that reading one byte past it faults.
func guardedTail(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	require.NoError(t, syscall.Mprotect(mem[size:], syscall.PROT_NONE))
	return mem[size-n : size : size]
}

// TestVectorKernelsStayInBounds runs every vector kernel with its weight
// row and its activation each ending at an inaccessible page: a kernel
// that loads past either end (a full vector over a short tail, say)
// crashes the test instead of reading neighbouring memory unnoticed.
func TestVectorKernelsStayInBounds(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		gen := quant.GenericKernels()
		for _, f := range kernelFields {
			t.Run(f.name, func(t *testing.T) {
				sizes := floatSizes
				if f.scaleOffs != nil {
					sizes = blockSizesQ8_0
				}
				for _, n := range sizes {
					var c dotCase
					if f.scaleOffs == nil {
						c = dotCase{name: "guarded", w: make([]byte, n*f.typ.BlockBytes()), x: make([]float32, n)}
						for i := range c.x {
							c.x[i] = float32(i%5) - 2
						}
						for i := range c.w {
							c.w[i] = byte(i * 7 % 61) // small finite values of either format
						}
					} else {
						c = f.blockCase("guarded", n, func() byte { return 0x55 }, func(int, int) uint16 { return 0x3c00 }, func(i int) int8 { return int8(i) }, func(int) float32 { return 0.5 })
					}
					g := c
					g.w = guardedTail(t, len(c.w))
					copy(g.w, c.w)
					switch {
					case c.q80 != nil:
						g.q80 = guardedSlice[quant.BlockQ8_0](t, len(c.q80))
						copy(g.q80, c.q80)
					case c.q8k != nil:
						g.q8k = guardedSlice[quant.BlockQ8K](t, len(c.q8k))
						copy(g.q8k, c.q8k)
					case c.x != nil:
						g.x = guardedSlice[float32](t, len(c.x))
						copy(g.x, c.x)
					}
					f.compare(t, &g, f.run(gen, &c), f.run(vk, &g))
				}
			})
		}
	})
}

// TestX4StaysInBounds runs every vector four-activation field with its
// weight row and each of its four activations ending at an inaccessible
// page, and holds it to four calls of the single-activation field.
func TestX4StaysInBounds(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		for i := range batchFields {
			bf := &batchFields[i]
			f := bf.field()
			sizes := blockSizesQ8K
			if f.typ == quant.Q8_0 {
				sizes = blockSizesQ8_0
			}
			t.Run(bf.name, func(t *testing.T) {
				for _, n := range sizes {
					var act, guarded [4]dotCase
					for tok := range act {
						act[tok] = f.blockCase("guarded", n, func() byte { return 0x55 }, func(int, int) uint16 { return 0x3c00 }, func(i int) int8 { return int8(i + 3*tok) }, func(int) float32 { return 0.5 + float32(tok) })
						g := &guarded[tok]
						if act[tok].q80 != nil {
							g.q80 = guardedSlice[quant.BlockQ8_0](t, n)
							copy(g.q80, act[tok].q80)
						} else {
							g.q8k = guardedSlice[quant.BlockQ8K](t, n)
							copy(g.q8k, act[tok].q8k)
						}
					}
					w := act[0].w
					gw := guardedTail(t, len(w))
					copy(gw, w)
					var got [4]float32
					bf.run(vk, gw, &guarded, &got)
					for tok := range act {
						a := act[tok]
						a.w = w
						want := f.run(vk, &a)
						require.Equal(t, math.Float32bits(want), math.Float32bits(got[tok]), "nb=%d token %d: %s %v, %s %v", n, tok, bf.name, got[tok], f.name, want)
					}
				}
			})
		}
	})
}

// TestTileStaysInBounds runs every tile pack and kernel with each of its
// slices (rows and packed tile of the pack; tile, activations, sums and
// results of the kernel) ending at an inaccessible page, and holds the
// results to DotQ8_0 of the unpacked rows.
func TestTileStaysInBounds(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(5, 8))
		for _, nb := range []int{1, 2, 3, 7, 32, 129} {
			w, rowBytes := tileRows(r, nb)
			gw := guardedTail(t, len(w))
			copy(gw, w)
			tile := guardedTail(t, quant.Q8_0TileBytes(nb))
			vk.PackQ8_0Tile(tile, gw, rowBytes, nil)
			for _, n := range []int{1, 3, 8, 13} {
				x := tileActivation(r, n, nb)
				gx := guardedSlice[quant.BlockQ8_0](t, len(x))
				copy(gx, x)
				sums := guardedSlice[int32](t, len(x))
				quant.Q8_0Sums(gx, sums)
				out := guardedSlice[float32](t, n*quant.Q8_0TileRows)
				vk.Q8_0Tile(tile, gx, sums, n, out)
				require.Empty(t, tileMismatch(out, tileWant(w, rowBytes, x, n)), "nb=%d n=%d", nb, n)
			}
		}
	})
}

// guardedSlice returns a []T of n elements that ends at an inaccessible
// page.
func guardedSlice[T any](t *testing.T, n int) []T {
	var zero T
	b := guardedTail(t, n*int(unsafe.Sizeof(zero)))
	if n == 0 {
		return []T{}
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// TestIQ2XXSTileStaysInBounds runs the IQ2_XXS tile pack and kernel with
// each of their slices (rows and packed tile of the pack; tile, activations
// and results of the kernel) ending at an inaccessible page, and holds the
// results to DotIQ2XXS of the unpacked rows.
func TestIQ2XXSTileStaysInBounds(t *testing.T) {
	eachTileSet(t, iq2xxsTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(5, 9))
		for _, nb := range []int{1, 2, 3, 17} {
			w, rowBytes := iq2TileRows(r, nb)
			gw := guardedTail(t, len(w))
			copy(gw, w)
			tile := guardedTail(t, quant.IQ2XXSTileBytes(nb))
			vk.PackIQ2XXSTile(tile, gw, rowBytes, nil)
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 15} {
				y := iq2TileActivation(r, n, nb)
				gy := guardedSlice[quant.BlockQ8K](t, len(y))
				copy(gy, y)
				out := guardedSlice[float32](t, n*quant.Q8_0TileRows)
				vk.IQ2XXSTile(tile, gy, n, out)
				require.Empty(t, tileMismatch(out, iq2TileWant(w, rowBytes, y, n)), "nb=%d n=%d", nb, n)
			}
		}
	})
}

// TestTilePackNext packs each tile kind's rows with every form of next
// the packs take: none, the 16 rows after them, the same rows ending at an
// inaccessible page (the AVX2 packs ask for a few lines past a next tile,
// which must not fault) and a next too short to be a tile. Asking for next
// must not change a byte of the tile.
func TestTilePackNext(t *testing.T) {
	kinds := []struct {
		kind      tileKind
		rows      func(r *rand.Rand, nb int) ([]byte, int)
		tileBytes func(nb int) int
		pack      func(k quant.Kernels) func(dst, w []byte, rowBytes int, next []byte)
	}{
		{q8_0Tiles, tileRows, quant.Q8_0TileBytes, func(k quant.Kernels) func(dst, w []byte, rowBytes int, next []byte) { return k.PackQ8_0Tile }},
		{iq2xxsTiles, iq2TileRows, quant.IQ2XXSTileBytes, func(k quant.Kernels) func(dst, w []byte, rowBytes int, next []byte) { return k.PackIQ2XXSTile }},
		{q2kTiles, q2kTileRows, quant.Q2KTileBytes, func(k quant.Kernels) func(dst, w []byte, rowBytes int, next []byte) { return k.PackQ2KTile }},
	}
	for _, kd := range kinds {
		t.Run(kd.kind.name, func(t *testing.T) {
			eachTileSet(t, kd.kind, func(t *testing.T, vk quant.Kernels) {
				pack := kd.pack(vk)
				r := rand.New(rand.NewPCG(6, 1))
				for _, nb := range []int{1, 3, 16} {
					w, rowBytes := kd.rows(r, nb)
					next, _ := kd.rows(r, nb)
					both := append(append([]byte(nil), w...), next...)
					guarded := guardedTail(t, len(next))
					copy(guarded, next)
					want := make([]byte, kd.tileBytes(nb))
					pack(want, w, rowBytes, nil)
					for _, c := range []struct {
						name string
						w    []byte
						next []byte
					}{
						{"following rows", both[:len(w)], both[len(w):]},
						{"guarded", w, guarded},
						{"short", w, next[:len(next)-1]},
						{"empty", w, next[:0]},
					} {
						got := make([]byte, len(want))
						pack(got, c.w, rowBytes, c.next)
						require.Equal(t, want, got, "nb=%d, next %s", nb, c.name)
					}
				}
			})
		})
	}
}
