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

// The IQ2_XXS tile kernels are held to DotIQ2XXS applied to each of the 16
// unpacked rows and each token: every result must have its bits (any NaN
// matching any NaN), and also those of the set's own IQ2XXS row kernel, so
// that prefill (tiles) and decode (rows) give the same bits.

// iq2TileRows returns 16 random IQ2_XXS rows of nb blocks, rowBytes apart:
// random grid indices and sign words (so every sign pattern and scale
// occurs), and f16 scales of either sign from zero and subnormal to 2^15.
func iq2TileRows(r *rand.Rand, nb int) (w []byte, rowBytes int) {
	rowBytes = nb * 66
	w = make([]byte, quant.Q8_0TileRows*rowBytes)
	for i := range quant.Q8_0TileRows {
		for b := range nb {
			blk := w[i*rowBytes+b*66 : i*rowBytes+(b+1)*66]
			for j := 2; j < 66; j++ {
				blk[j] = byte(r.IntN(256))
			}
			var h uint16
			switch r.IntN(16) {
			case 0:
				h = uint16(r.IntN(2)) << 15 // ±0
			case 1:
				h = uint16(1+r.IntN(0x3ff)) | uint16(r.IntN(2))<<15 // subnormal
			case 2:
				h = uint16(0x7800+r.IntN(0x3ff)) | uint16(r.IntN(2))<<15 // 2^15 and up
			default:
				h = uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15
			}
			binary.LittleEndian.PutUint16(blk, h)
		}
	}
	return w, rowBytes
}

// iq2TileActivation returns n tokens of nb Q8_K blocks each, their codes
// in QuantizeQ8K's range -127..127 (the IQ2_XXS kernels' precondition).
// Token t is, by t mod 4: random floats quantized by QuantizeQ8K; random
// codes over the whole range with a random scale; the extremes -127 and
// 127 alternating; all codes -127 or all 127, block by block. Bsums are
// always the sums of the codes, as QuantizeQ8K sets them.
func iq2TileActivation(r *rand.Rand, n, nb int) []quant.BlockQ8K {
	y := make([]quant.BlockQ8K, n*nb)
	for tok := range n {
		yt := y[tok*nb : (tok+1)*nb]
		if tok%4 == 0 {
			f := make([]float32, 256*nb)
			for i := range f {
				f[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/256%5)-2))
			}
			quant.QuantizeQ8K(f, yt)
			continue
		}
		for b := range yt {
			blk := &yt[b]
			for j := range blk.Qs {
				switch tok % 4 {
				case 1:
					blk.Qs[j] = int8(r.IntN(255) - 127)
				case 2:
					blk.Qs[j] = []int8{-127, 127}[(j+b)%2]
				case 3:
					blk.Qs[j] = []int8{-127, 127}[b%2]
				}
			}
			blk.D = []float32{float32(r.NormFloat64()), 1e30, -1e-30, 3.5, 0x1p-126}[b%5]
			setBsums(blk)
		}
	}
	return y
}

// iq2TileWant returns the reference results, out[t*16+i] =
// DotIQ2XXS(row i, token t), from the unpacked rows.
func iq2TileWant(w []byte, rowBytes int, y []quant.BlockQ8K, n int) []float32 {
	nb := len(y) / n
	want := make([]float32, n*quant.Q8_0TileRows)
	for tok := range n {
		for i := range quant.Q8_0TileRows {
			want[tok*quant.Q8_0TileRows+i] = quant.DotIQ2XXS(w[i*rowBytes:(i+1)*rowBytes], y[tok*nb:(tok+1)*nb])
		}
	}
	return want
}

// runIQ2Tile packs the rows and runs the tile kernel of vk.
func runIQ2Tile(vk quant.Kernels, w []byte, rowBytes int, y []quant.BlockQ8K, n int) []float32 {
	nb := rowBytes / 66
	tile := make([]byte, quant.IQ2XXSTileBytes(nb))
	vk.PackIQ2XXSTile(tile, w, rowBytes, nil)
	out := make([]float32, n*quant.Q8_0TileRows)
	vk.IQ2XXSTile(tile, y, n, out)
	return out
}

func TestIQ2XXSTileMatchesDot(t *testing.T) {
	eachTileSet(t, iq2xxsTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(7, 12))
		for _, nb := range []int{1, 2, 3, 16, 17} {
			w, rowBytes := iq2TileRows(r, nb)
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 40} {
				t.Run(fmt.Sprintf("nb=%d/n=%d", nb, n), func(t *testing.T) {
					y := iq2TileActivation(r, n, nb)
					got := runIQ2Tile(vk, w, rowBytes, y, n)
					want := iq2TileWant(w, rowBytes, y, n)
					require.Empty(t, tileMismatch(got, want))
					for tok := range n {
						for i := range quant.Q8_0TileRows {
							row := vk.IQ2XXS(w[i*rowBytes:(i+1)*rowBytes], y[tok*nb:(tok+1)*nb])
							g := got[tok*quant.Q8_0TileRows+i]
							require.True(t, math.Float32bits(row) == math.Float32bits(g) || (row != row && g != g),
								"token %d row %d: tile %v and row kernel %v differ", tok, i, g, row)
						}
					}
				})
			}
		}
	})
}

// TestIQ2XXSTileSpecials covers scales that make the block terms Inf and
// NaN (an f16 Inf against an activation block of zero sum) and zero blocks.
func TestIQ2XXSTileSpecials(t *testing.T) {
	eachTileSet(t, iq2xxsTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(3, 6))
		const nb, n = 5, 9
		w, rowBytes := iq2TileRows(r, nb)
		for i := range quant.Q8_0TileRows {
			binary.LittleEndian.PutUint16(w[i*rowBytes+(i%nb)*66:], []uint16{0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x8000}[i%5])
		}
		y := iq2TileActivation(r, n, nb)
		y[2*nb+1] = quant.BlockQ8K{D: 1} // all codes 0: Inf·0 = NaN
		y[4*nb+3] = quant.BlockQ8K{}
		got := runIQ2Tile(vk, w, rowBytes, y, n)
		want := iq2TileWant(w, rowBytes, y, n)
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

// TestIQ2XXSTileCatchesErrors shows the comparison can fail: a Bsums entry
// off by one, two rows swapped before packing, or one packed byte flipped
// each change some result's bits.
func TestIQ2XXSTileCatchesErrors(t *testing.T) {
	eachTileSet(t, iq2xxsTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(9, 10))
		const nb, n = 3, 5
		w, rowBytes := iq2TileRows(r, nb)
		for i := range quant.Q8_0TileRows { // finite, nonzero scales
			for b := range nb {
				binary.LittleEndian.PutUint16(w[i*rowBytes+b*66:], 0x3c00+uint16(i))
			}
		}
		y := iq2TileActivation(r, n, nb)
		want := iq2TileWant(w, rowBytes, y, n)
		tile := make([]byte, quant.IQ2XXSTileBytes(nb))
		out := make([]float32, n*quant.Q8_0TileRows)

		vk.PackIQ2XXSTile(tile, w, rowBytes, nil)
		vk.IQ2XXSTile(tile, y, n, out)
		require.Empty(t, tileMismatch(out, want), "the unaltered inputs must match")

		y[2].Bsums[5]++
		vk.IQ2XXSTile(tile, y, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "a Bsums entry off by one went unnoticed")
		y[2].Bsums[5]--

		swapped := append([]byte(nil), w...)
		copy(swapped[3*rowBytes:4*rowBytes], w[5*rowBytes:6*rowBytes])
		copy(swapped[5*rowBytes:6*rowBytes], w[3*rowBytes:4*rowBytes])
		vk.PackIQ2XXSTile(tile, swapped, rowBytes, nil)
		vk.IQ2XXSTile(tile, y, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "two swapped rows went unnoticed")

		vk.PackIQ2XXSTile(tile, w, rowBytes, nil)
		tile[4672+576*3+64*5+4*9+2] ^= 1
		vk.IQ2XXSTile(tile, y, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "a flipped packed weight went unnoticed")
	})
}

// TestIQ2XXSTileLayout checks the packed bytes against the layout
// tile_iq2.go documents, built here from DequantizeRow of the rows with
// their scales set to 1 (which gives each weight times (2ls+1)/8 exactly).
func TestIQ2XXSTileLayout(t *testing.T) {
	eachTileSet(t, iq2xxsTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(1, 3))
		for _, nb := range []int{1, 3, 16} {
			w, rowBytes := iq2TileRows(r, nb)
			got := make([]byte, quant.IQ2XXSTileBytes(nb)+1)
			got[len(got)-1] = 0xa5
			vk.PackIQ2XXSTile(got, w, rowBytes, nil)
			require.Equal(t, byte(0xa5), got[len(got)-1], "nb=%d: PackIQ2XXSTile wrote past the tile", nb)
			const blockBytes = 4672
			require.Equal(t, nb*blockBytes, quant.IQ2XXSTileBytes(nb))
			want := make([]byte, quant.IQ2XXSTileBytes(nb))
			unit := append([]byte(nil), w...)
			vals := make([]float32, 256*nb)
			for i := range quant.Q8_0TileRows {
				row := unit[i*rowBytes : (i+1)*rowBytes]
				for b := range nb {
					binary.LittleEndian.PutUint16(row[b*66:], 0x3c00) // 1.0
				}
				require.NoError(t, quant.DequantizeRow(quant.IQ2_XXS, row, vals))
				for b := range nb {
					blk := w[i*rowBytes+b*66:]
					pb := want[b*blockBytes : (b+1)*blockBytes]
					for g := range 8 {
						m := 2*int32(binary.LittleEndian.Uint32(blk[2+8*g+4:])>>28) + 1
						binary.LittleEndian.PutUint32(pb[576*g+512+4*i:], uint32(m))
						for e := range 32 {
							v := vals[256*b+32*g+e] * 8 / float32(m)
							require.Contains(t, []float32{-43, -25, -8, 8, 25, 43}, v)
							pb[576*g+64*(e/4)+4*i+e%4] = byte(int8(v) + 64)
						}
					}
					d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
					binary.LittleEndian.PutUint32(pb[4608+4*i:], math.Float32bits(d))
				}
			}
			for off := range want {
				if got[off] != want[off] {
					t.Fatalf("nb=%d: packed block %d byte %d is %#02x, want %#02x", nb, off/blockBytes, off%blockBytes, got[off], want[off])
				}
			}
		}
	})
}

func TestIQ2XXSTilePanics(t *testing.T) {
	eachTileSet(t, iq2xxsTiles, func(t *testing.T, vk quant.Kernels) {
		const nb, n = 3, 2
		w := make([]byte, 16*nb*66)
		tile := make([]byte, quant.IQ2XXSTileBytes(nb))
		y := make([]quant.BlockQ8K, n*nb)
		out := make([]float32, n*16)
		cases := []struct {
			name string
			call func()
		}{
			{"row not whole blocks", func() { vk.PackIQ2XXSTile(tile, w, nb*66-1, nil) }},
			{"too few rows", func() { vk.PackIQ2XXSTile(tile, w[:len(w)-1], nb*66, nil) }},
			{"short tile to pack", func() { vk.PackIQ2XXSTile(tile[:len(tile)-1], w, nb*66, nil) }},
			{"no tokens", func() { vk.IQ2XXSTile(tile, y, 0, out) }},
			{"uneven tokens", func() { vk.IQ2XXSTile(tile, y[:len(y)-1], n, out) }},
			{"short tile", func() { vk.IQ2XXSTile(tile[:len(tile)-1], y, n, out) }},
			{"short out", func() { vk.IQ2XXSTile(tile, y, n, out[:len(out)-1]) }},
		}
		for _, c := range cases {
			require.Panics(t, c.call, c.name)
		}
		// Rows of no blocks give zeros.
		out[0] = 1
		vk.IQ2XXSTile(nil, nil, n, out)
		require.Equal(t, make([]float32, n*16), out)
	})
}
