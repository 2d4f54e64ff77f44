package quant_test

import (
	"math"
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

// TestQ8_0x4StaysInBounds runs the vector Q8_0x4 with its weight row and
// each of its four activations ending at an inaccessible page.
func TestQ8_0x4StaysInBounds(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		f := &kernelFields[0]
		for _, n := range blockSizesQ8_0 {
			var x [4][]quant.BlockQ8_0
			var gx [4][]quant.BlockQ8_0
			var c dotCase
			for tok := range x {
				c = f.blockCase("guarded", n, func() byte { return 0x55 }, func(int, int) uint16 { return 0x3c00 }, func(i int) int8 { return int8(i + 3*tok) }, func(int) float32 { return 0.5 + float32(tok) })
				x[tok] = c.q80
				gx[tok] = guardedSlice[quant.BlockQ8_0](t, n)
				copy(gx[tok], c.q80)
			}
			gw := guardedTail(t, len(c.w))
			copy(gw, c.w)
			var got [4]float32
			vk.Q8_0x4(gw, gx[0], gx[1], gx[2], gx[3], &got)
			for tok := range x {
				want := vk.Q8_0(c.w, x[tok])
				require.Equal(t, math.Float32bits(want), math.Float32bits(got[tok]), "nb=%d token %d: Q8_0x4 %v, Q8_0 %v", n, tok, got[tok], want)
			}
		}
	})
}

// TestIQ2XXSx4StaysInBounds runs the vector IQ2XXSx4 with its weight row
// and each of its four activations ending at an inaccessible page.
func TestIQ2XXSx4StaysInBounds(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		f := &kernelFields[3]
		require.Equal(t, "IQ2XXS", f.name)
		for _, n := range blockSizesQ8K {
			var y, gy [4][]quant.BlockQ8K
			var c dotCase
			for tok := range y {
				c = f.blockCase("guarded", n, func() byte { return 0x55 }, func(int, int) uint16 { return 0x3c00 }, func(i int) int8 { return int8(i + 3*tok) }, func(int) float32 { return 0.5 + float32(tok) })
				y[tok] = c.q8k
				gy[tok] = guardedSlice[quant.BlockQ8K](t, n)
				copy(gy[tok], c.q8k)
			}
			gw := guardedTail(t, len(c.w))
			copy(gw, c.w)
			var got [4]float32
			vk.IQ2XXSx4(gw, gy[0], gy[1], gy[2], gy[3], &got)
			for tok := range y {
				want := vk.IQ2XXS(c.w, y[tok])
				require.Equal(t, math.Float32bits(want), math.Float32bits(got[tok]), "nb=%d token %d: IQ2XXSx4 %v, IQ2XXS %v", n, tok, got[tok], want)
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
