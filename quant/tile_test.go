package quant_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ds4-go/ds4/quant"
	"github.com/stretchr/testify/require"
)

// The tile kernels are held to dotQ8_0Lanes, a plain Go form of the vector
// row kernels' Q8_0 order, applied to each of the 16 unpacked rows and each
// token: every result must have its bits (any NaN matching any NaN), since
// both form the exact block sums, make DotQ8_0's three float32 operations
// per block and add the terms in the same order. Where the activation
// codes lie in -127..127, the row kernels' precondition, the results must
// also be those of the set's own Q8_0 kernel: prefill (tiles) and decode
// (rows) give the same bits.

// tileFields are the fields of quant.Kernels that the tests of this file
// and dot_pre_test.go cover rather than kernelFields: a vector set may
// leave them nil.
var tileFields = map[string]bool{"Q8_0xNPre": true, "PackQ8_0Tile": true, "Q8_0Tile": true, "PackIQ2XXSTile": true, "IQ2XXSTile": true, "PackQ2KTile": true, "Q2KTile": true}

// tileKind is one weight type's pair of tile fields in quant.Kernels.
type tileKind struct {
	name       string
	pack, kern func(quant.Kernels) bool // whether a set has the field
}

// The three tile kinds.
var (
	q8_0Tiles   = tileKind{"Q8_0", func(k quant.Kernels) bool { return k.PackQ8_0Tile != nil }, func(k quant.Kernels) bool { return k.Q8_0Tile != nil }}
	iq2xxsTiles = tileKind{"IQ2_XXS", func(k quant.Kernels) bool { return k.PackIQ2XXSTile != nil }, func(k quant.Kernels) bool { return k.IQ2XXSTile != nil }}
	q2kTiles    = tileKind{"Q2_K", func(k quant.Kernels) bool { return k.PackQ2KTile != nil }, func(k quant.Kernels) bool { return k.Q2KTile != nil }}
)

// eachTileSet runs fn for every vector kernel set that has the tile
// kernels of kind, and skips where none has.
func eachTileSet(t *testing.T, kind tileKind, fn func(t *testing.T, vk quant.Kernels)) {
	t.Helper()
	var ran bool
	for _, vk := range quant.VectorKernelSets() {
		if !kind.pack(vk) {
			continue
		}
		ran = true
		t.Run(vk.Name, func(t *testing.T) { fn(t, vk) })
	}
	if !ran {
		t.Skip("no vector kernel set with the " + kind.name + " tile kernels on this CPU or build (Q8_0 needs AVX2, the others AVX-512 F/BW/VL and VNNI, IQ2_XXS also VBMI and GFNI)")
	}
}

func TestTileFieldsSetTogether(t *testing.T) {
	for _, kind := range []tileKind{q8_0Tiles, iq2xxsTiles, q2kTiles} {
		gen := quant.GenericKernels()
		require.False(t, kind.pack(gen) || kind.kern(gen), "the go set has %s tile kernels", kind.name)
		for _, vk := range quant.VectorKernelSets() {
			require.Equal(t, kind.pack(vk), kind.kern(vk), "set %s has one %s tile field without the other", vk.Name, kind.name)
		}
	}
}

// setBsums sets blk.Bsums to the sums of its codes' 16-element runs, as
// QuantizeQ8K does.
func setBsums(blk *quant.BlockQ8K) {
	for j := range blk.Bsums {
		var s int16
		for _, q := range blk.Qs[16*j : 16*j+16] {
			s += int16(q)
		}
		blk.Bsums[j] = s
	}
}

// tileRows returns 16 random Q8_0 rows of nb blocks, rowBytes apart. Block
// 0 holds every code value twice, -128 included; the scales are finite
// f16 values of either sign from subnormal to 2^15, zeros among them.
func tileRows(r *rand.Rand, nb int) (w []byte, rowBytes int) {
	rowBytes = nb * 34
	w = make([]byte, quant.Q8_0TileRows*rowBytes)
	for i := range quant.Q8_0TileRows {
		for b := range nb {
			blk := w[i*rowBytes+b*34 : i*rowBytes+(b+1)*34]
			for j := range 32 {
				blk[2+j] = byte(r.IntN(256))
				if b == 0 {
					blk[2+j] = byte(i*32 + j)
				}
			}
			var h uint16
			switch r.IntN(16) {
			case 0:
				h = 0 // +0
			case 1:
				h = uint16(r.IntN(0x400)) | uint16(r.IntN(2))<<15 // subnormal or ±0
			default:
				h = uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15 // finite, |h| < 2^15
			}
			binary.LittleEndian.PutUint16(blk, h)
		}
	}
	return w, rowBytes
}

// tileActivation returns n tokens of nb Q8_0 blocks each, codes in
// -127..127 (the tile kernels' precondition, QuantizeQ8_0's range: the
// AVX2 kernel multiplies |w| by x·sgn(w), and -128 has no negation). Token
// t is, by t mod 4: random floats quantized by QuantizeQ8_0 (scales
// cycling over 1e-3..1e3); random codes over the whole range with a
// random scale; the extremes -127 and 127 alternating with an extreme
// scale; all codes -127 or all 127, half the blocks each, with scale 1 or
// -1 or 0.
func tileActivation(r *rand.Rand, n, nb int) []quant.BlockQ8_0 {
	x := make([]quant.BlockQ8_0, n*nb)
	for tok := range n {
		xt := x[tok*nb : (tok+1)*nb]
		switch tok % 4 {
		case 0:
			f := make([]float32, 32*nb)
			for i := range f {
				f[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/32%7)-3))
			}
			quant.QuantizeQ8_0(f, xt)
		case 1:
			for b := range xt {
				xt[b].D = float32(r.NormFloat64())
				for j := range xt[b].Qs {
					xt[b].Qs[j] = int8(r.IntN(255) - 127)
				}
			}
		case 2:
			for b := range xt {
				xt[b].D = []float32{1e30, -1e-30, 3.5, 0x1p-126}[b%4]
				for j := range xt[b].Qs {
					xt[b].Qs[j] = []int8{-127, 127}[(j+b)%2]
				}
			}
		case 3:
			for b := range xt {
				xt[b].D = []float32{1, -1, 0}[b%3]
				q := int8(-127)
				if b%2 == 1 {
					q = 127
				}
				for j := range xt[b].Qs {
					xt[b].Qs[j] = q
				}
			}
		}
	}
	return x
}

// tileWant returns the reference results, out[t*16+i] =
// dotQ8_0Lanes(row i, token t), from the unpacked rows.
func tileWant(w []byte, rowBytes int, x []quant.BlockQ8_0, n int) []float32 {
	nb := len(x) / n
	want := make([]float32, n*quant.Q8_0TileRows)
	for tok := range n {
		for i := range quant.Q8_0TileRows {
			want[tok*quant.Q8_0TileRows+i] = dotQ8_0Lanes(w[i*rowBytes:(i+1)*rowBytes], x[tok*nb:(tok+1)*nb])
		}
	}
	return want
}

// dotQ8_0Lanes is the Q8_0 dot of the vector row kernels (dot_q8_amd64.go):
// DotQ8_0's block terms, the first len(x)&^7 of them summed in eight
// lanes, lane k taking the blocks ≡ k mod 8 in order, the lanes combined as
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), and the last len(x)%8 terms added
// one by one.
func dotQ8_0Lanes(w []byte, x []quant.BlockQ8_0) float32 {
	term := func(b int) float32 {
		blk := w[b*34 : (b+1)*34]
		var isum int32
		for i, q := range blk[2:] {
			isum += int32(int8(q)) * int32(x[b].Qs[i])
		}
		d := float32(quant.F16ToF32(binary.LittleEndian.Uint16(blk)) * x[b].D)
		return float32(d * float32(isum))
	}
	nb8 := len(x) &^ 7
	var l [8]float32
	for b := range nb8 {
		l[b%8] += term(b)
	}
	s := ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
	for b := nb8; b < len(x); b++ {
		s += term(b)
	}
	return s
}

// TestQ8_0LanesIsTheRowKernels holds dotQ8_0Lanes, the tile tests'
// reference, to every vector set's Q8_0 row kernel on activations from
// QuantizeQ8_0, bit for bit, and shows it is not DotQ8_0's order.
func TestQ8_0LanesIsTheRowKernels(t *testing.T) {
	sets := quant.VectorKernelSets()
	if len(sets) == 0 {
		t.Skip("no vector kernel set on this CPU or build")
	}
	r := rand.New(rand.NewPCG(5, 8))
	differs := false
	for _, nb := range []int{1, 7, 8, 9, 16, 17, 128, 131} {
		w, rowBytes := tileRows(r, nb)
		x := tileActivation(r, 1, nb) // token 0: QuantizeQ8_0's codes
		want := dotQ8_0Lanes(w[:rowBytes], x)
		for _, vk := range sets {
			got := vk.Q8_0(w[:rowBytes], x)
			require.Equal(t, math.Float32bits(want), math.Float32bits(got), "%s nb=%d", vk.Name, nb)
		}
		differs = differs || math.Float32bits(want) != math.Float32bits(quant.DotQ8_0(w[:rowBytes], x))
	}
	require.True(t, differs, "dotQ8_0Lanes never differed from DotQ8_0: the test cannot tell the orders apart")
}

// tileMismatch describes the first result of got whose bits differ from
// want's (a NaN matches any NaN), or returns "".
func tileMismatch(got, want []float32) string {
	for k := range want {
		g, w := got[k], want[k]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			return fmt.Sprintf("token %d row %d: got %v (%#08x), want %v (%#08x)",
				k/quant.Q8_0TileRows, k%quant.Q8_0TileRows, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
	return ""
}

// runTile packs the rows, sums x and runs the tile kernel of vk.
func runTile(vk quant.Kernels, w []byte, rowBytes int, x []quant.BlockQ8_0, n int) []float32 {
	nb := rowBytes / 34
	tile := make([]byte, quant.Q8_0TileBytes(nb))
	vk.PackQ8_0Tile(tile, w, rowBytes, nil)
	sums := make([]int32, len(x))
	quant.Q8_0Sums(x, sums)
	out := make([]float32, n*quant.Q8_0TileRows)
	vk.Q8_0Tile(tile, x, sums, n, out)
	return out
}

func TestQ8_0TileMatchesDot(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(7, 11))
		for _, nb := range []int{1, 2, 3, 7, 32, 128, 129} {
			w, rowBytes := tileRows(r, nb)
			for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 64} {
				t.Run(fmt.Sprintf("nb=%d/n=%d", nb, n), func(t *testing.T) {
					x := tileActivation(r, n, nb)
					got := runTile(vk, w, rowBytes, x, n)
					require.Empty(t, tileMismatch(got, tileWant(w, rowBytes, x, n)))
					for tok := 0; tok < n; tok += 4 { // QuantizeQ8_0's codes (tileActivation)
						for i := range quant.Q8_0TileRows {
							row := vk.Q8_0(w[i*rowBytes:(i+1)*rowBytes], x[tok*nb:(tok+1)*nb])
							require.Equal(t, math.Float32bits(row), math.Float32bits(got[tok*quant.Q8_0TileRows+i]), "token %d row %d: tile and row kernel differ", tok, i)
						}
					}
				})
			}
		}
	})
}

// TestQ8_0TileSpecials covers scales that make the block terms Inf and NaN
// (an f16 Inf against an activation block of zero sum) and zero blocks.
func TestQ8_0TileSpecials(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(3, 5))
		const nb, n = 5, 9
		w, rowBytes := tileRows(r, nb)
		for i := range quant.Q8_0TileRows {
			binary.LittleEndian.PutUint16(w[i*rowBytes+(i%nb)*34:], []uint16{0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x8000}[i%5])
		}
		x := tileActivation(r, n, nb)
		x[2*nb+1] = quant.BlockQ8_0{D: 1} // all codes 0: Inf·0 = NaN
		x[4*nb+3] = quant.BlockQ8_0{}
		got := runTile(vk, w, rowBytes, x, n)
		want := tileWant(w, rowBytes, x, n)
		require.Empty(t, tileMismatch(got, want))
		var inf, nan int
		for _, v := range want {
			switch {
			case v != v:
				nan++
			case math.IsInf(float64(v), 0):
				inf++
			}
		}
		require.Positive(t, inf, "no Inf result: the case does not test what it says")
		require.Positive(t, nan, "no NaN result: the case does not test what it says")
	})
}

// TestQ8_0TileCatchesErrors shows the comparison can fail: a block sum off
// by one, two rows swapped before packing, or one code flipped in the
// packed tile each change some result's bits.
func TestQ8_0TileCatchesErrors(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(9, 9))
		const nb, n = 7, 5
		w, rowBytes := tileRows(r, nb)
		x := tileActivation(r, n, nb)
		want := tileWant(w, rowBytes, x, n)
		tile := make([]byte, quant.Q8_0TileBytes(nb))
		sums := make([]int32, len(x))
		out := make([]float32, n*quant.Q8_0TileRows)

		vk.PackQ8_0Tile(tile, w, rowBytes, nil)
		quant.Q8_0Sums(x, sums)
		vk.Q8_0Tile(tile, x, sums, n, out)
		require.Empty(t, tileMismatch(out, want), "the unaltered inputs must match")

		if vk.Name != "avx2" { // the AVX2 kernels form Σw·x directly and do not read the sums
			sums[nb+2]++
			vk.Q8_0Tile(tile, x, sums, n, out)
			require.NotEmpty(t, tileMismatch(out, want), "a block sum off by one went unnoticed")
			sums[nb+2]--
		}

		swapped := append([]byte(nil), w...)
		copy(swapped[3*rowBytes:4*rowBytes], w[5*rowBytes:6*rowBytes])
		copy(swapped[5*rowBytes:6*rowBytes], w[3*rowBytes:4*rowBytes])
		vk.PackQ8_0Tile(tile, swapped, rowBytes, nil)
		vk.Q8_0Tile(tile, x, sums, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "two swapped rows went unnoticed")

		vk.PackQ8_0Tile(tile, w, rowBytes, nil)
		tile[576*3+64*5+4*9+2] ^= 1
		vk.Q8_0Tile(tile, x, sums, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "a flipped packed code went unnoticed")
	})
}

// TestQ8_0TileLayout checks the packed bytes against the layout tile.go
// documents, built here from the rows directly.
func TestQ8_0TileLayout(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, nb := range []int{1, 3, 128} {
			w, rowBytes := tileRows(r, nb)
			got := make([]byte, quant.Q8_0TileBytes(nb)+1)
			got[len(got)-1] = 0xa5
			vk.PackQ8_0Tile(got, w, rowBytes, nil)
			require.Equal(t, byte(0xa5), got[len(got)-1], "nb=%d: PackQ8_0Tile wrote past the tile", nb)
			want := make([]byte, quant.Q8_0TileBytes(nb))
			for b := range nb {
				pb := want[b*576 : (b+1)*576]
				for i := range quant.Q8_0TileRows {
					blk := w[i*rowBytes+b*34:]
					for k := range 8 {
						for j := range 4 {
							pb[64*k+4*i+j] = blk[2+4*k+j] ^ 0x80
						}
					}
					d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
					binary.LittleEndian.PutUint32(pb[512+4*i:], math.Float32bits(d))
				}
			}
			for off := range want {
				if got[off] != want[off] {
					t.Fatalf("nb=%d: packed block %d byte %d is %#02x, want %#02x", nb, off/576, off%576, got[off], want[off])
				}
			}
		}
	})
}

func TestQ8_0TilePanics(t *testing.T) {
	eachTileSet(t, q8_0Tiles, func(t *testing.T, vk quant.Kernels) {
		const nb, n = 3, 2
		w := make([]byte, 16*nb*34)
		tile := make([]byte, quant.Q8_0TileBytes(nb))
		x := make([]quant.BlockQ8_0, n*nb)
		sums := make([]int32, n*nb)
		out := make([]float32, n*16)
		cases := []struct {
			name string
			call func()
		}{
			{"row not whole blocks", func() { vk.PackQ8_0Tile(tile, w, nb*34-1, nil) }},
			{"too few rows", func() { vk.PackQ8_0Tile(tile, w[:len(w)-1], nb*34, nil) }},
			{"short tile to pack", func() { vk.PackQ8_0Tile(tile[:len(tile)-1], w, nb*34, nil) }},
			{"no tokens", func() { vk.Q8_0Tile(tile, x, sums, 0, out) }},
			{"uneven tokens", func() { vk.Q8_0Tile(tile, x[:len(x)-1], sums, n, out) }},
			{"short sums", func() { vk.Q8_0Tile(tile, x, sums[:len(sums)-1], n, out) }},
			{"short tile", func() { vk.Q8_0Tile(tile[:len(tile)-1], x, sums, n, out) }},
			{"short out", func() { vk.Q8_0Tile(tile, x, sums, n, out[:len(out)-1]) }},
		}
		for _, c := range cases {
			require.Panics(t, c.call, c.name)
		}
		// Rows of no blocks give zeros.
		out[0] = 1
		vk.Q8_0Tile(nil, nil, nil, n, out)
		require.Equal(t, make([]float32, n*16), out)
	})
}

func TestQ8_0Sums(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, nb := range []int{0, 1, 2, 33} {
		x := tileActivation(r, 4, nb)
		if nb > 0 {
			for j := range x[0].Qs {
				x[0].Qs[j] = -128
			}
		}
		sums := make([]int32, len(x)+1)
		sums[len(x)] = 42
		quant.Q8_0Sums(x, sums)
		for b := range x {
			var want int32
			for j := range 32 {
				want += int32(x[b].Qs[j])
			}
			require.Equal(t, want, sums[b], "nb=%d block %d", nb, b)
		}
		require.Equal(t, int32(42), sums[len(x)], "nb=%d: Q8_0Sums wrote past len(x)", nb)
		if nb > 0 {
			require.Equal(t, int32(-128*32), sums[0])
		}
	}
	require.Panics(t, func() { quant.Q8_0Sums(make([]quant.BlockQ8_0, 2), make([]int32, 1)) })
}
