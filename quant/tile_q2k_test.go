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

// The Q2_K tile kernels are held to DotQ2K, the pure-Go reference, applied
// to each of the 16 unpacked rows and each token: every result must have
// its bits (any NaN matching any NaN), since both form the exact integer
// sums isum and summs, make DotQ2K's float32 operations per block and add
// the blocks in order. The results must also be those of the set's own
// Q2K row kernel, so that prefill (tiles) and decode (rows) agree.

// q2kTileF16 returns a random f16 factor: +0 or -0, a subnormal, a
// finite value of either sign up to the largest (65504), or 1.
func q2kTileF16(r *rand.Rand) uint16 {
	switch r.IntN(8) {
	case 0:
		return uint16(r.IntN(2)) << 15 // ±0
	case 1:
		return uint16(1+r.IntN(0x3ff)) | uint16(r.IntN(2))<<15 // subnormal
	case 2:
		return uint16(0x7800+r.IntN(0x400)) | uint16(r.IntN(2))<<15 // 2^15 .. 65504
	case 3:
		return 0x3c00 // 1
	default:
		return uint16(r.IntN(0x7c00)) | uint16(r.IntN(2))<<15 // any finite
	}
}

// q2kTileRows returns 16 random Q2_K rows of nb blocks, rowBytes apart.
// The scale bytes of block 0 of the 16 rows are 0..255 (every scale and
// min nibble with every other), the codes are random bytes (every 2-bit
// code in every position) and d and dmin come from q2kTileF16.
func q2kTileRows(r *rand.Rand, nb int) (w []byte, rowBytes int) {
	rowBytes = nb * 84
	w = make([]byte, quant.Q8_0TileRows*rowBytes)
	for i := range quant.Q8_0TileRows {
		for b := range nb {
			blk := w[i*rowBytes+b*84 : i*rowBytes+(b+1)*84]
			for j := range 80 {
				blk[j] = byte(r.Uint32())
			}
			if b == 0 {
				for j := range 16 {
					blk[j] = byte(16*i + j)
				}
			}
			binary.LittleEndian.PutUint16(blk[80:], q2kTileF16(r))
			binary.LittleEndian.PutUint16(blk[82:], q2kTileF16(r))
		}
	}
	return w, rowBytes
}

// q2kTileActivation returns n tokens of nb Q8_K blocks each. Token t is, by
// t mod 5: random floats quantized by QuantizeQ8K (scales cycling over
// 1e-3..1e3); random codes over the whole -128..127 with a random scale;
// the extremes -128 and 127 alternating with an extreme scale; all codes
// -128 or all 127, alternate blocks, with scale 1, -1 or 0; random codes
// with Bsums random over the whole int16 range (the kernels must use them
// as given). Bsums are otherwise the codes' sums.
func q2kTileActivation(r *rand.Rand, n, nb int) []quant.BlockQ8K {
	y := make([]quant.BlockQ8K, n*nb)
	for tok := range n {
		yt := y[tok*nb : (tok+1)*nb]
		switch tok % 5 {
		case 0:
			f := make([]float32, quant.QK_K*nb)
			for i := range f {
				f[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/quant.QK_K%7)-3))
			}
			quant.QuantizeQ8K(f, yt)
			continue
		case 1, 4:
			for b := range yt {
				yt[b].D = float32(r.NormFloat64())
				for j := range yt[b].Qs {
					yt[b].Qs[j] = int8(r.Uint32())
				}
			}
		case 2:
			for b := range yt {
				yt[b].D = []float32{1e30, -1e-30, 3.5, 0x1p-126}[b%4]
				for j := range yt[b].Qs {
					yt[b].Qs[j] = []int8{-128, 127}[(j+b)%2]
				}
			}
		case 3:
			for b := range yt {
				yt[b].D = []float32{1, -1, 0}[b%3]
				q := int8(-128)
				if b%2 == 1 {
					q = 127
				}
				for j := range yt[b].Qs {
					yt[b].Qs[j] = q
				}
			}
		}
		for b := range yt {
			setBsums(&yt[b])
			if tok%5 == 4 {
				for g := range yt[b].Bsums {
					yt[b].Bsums[g] = int16(r.Uint32())
				}
			}
		}
	}
	return y
}

// q2kTileWant returns the reference results, out[t*16+i] = DotQ2K(row i,
// token t), from the unpacked rows.
func q2kTileWant(w []byte, rowBytes int, y []quant.BlockQ8K, n int) []float32 {
	nb := len(y) / n
	want := make([]float32, n*quant.Q8_0TileRows)
	for tok := range n {
		for i := range quant.Q8_0TileRows {
			want[tok*quant.Q8_0TileRows+i] = quant.DotQ2K(w[i*rowBytes:(i+1)*rowBytes], y[tok*nb:(tok+1)*nb])
		}
	}
	return want
}

// runQ2KTile packs the rows and runs the Q2_K tile kernel of vk.
func runQ2KTile(vk quant.Kernels, w []byte, rowBytes int, y []quant.BlockQ8K, n int) []float32 {
	tile := make([]byte, quant.Q2KTileBytes(rowBytes/84))
	vk.PackQ2KTile(tile, w, rowBytes, nil)
	out := make([]float32, n*quant.Q8_0TileRows)
	for i := range out {
		out[i] = float32(math.NaN()) // every result must be written
	}
	vk.Q2KTile(tile, y, n, out)
	return out
}

func TestQ2KTileMatchesDot(t *testing.T) {
	eachTileSet(t, q2kTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(7, 12))
		for _, nb := range []int{1, 2, 3, 8, 9} {
			w, rowBytes := q2kTileRows(r, nb)
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 14, 40} {
				t.Run(fmt.Sprintf("nb=%d/n=%d", nb, n), func(t *testing.T) {
					y := q2kTileActivation(r, n, nb)
					got := runQ2KTile(vk, w, rowBytes, y, n)
					want := q2kTileWant(w, rowBytes, y, n)
					require.Empty(t, tileMismatch(got, want))
					var nonzero int
					for k, v := range want {
						if v != 0 {
							nonzero++
						}
						require.False(t, v != v, "result %d is NaN: the rows or activations are not the finite ones meant", k)
					}
					require.Greater(t, nonzero, len(want)/2, "most results are zero: the case tests little")
					for tok := range n {
						for i := range quant.Q8_0TileRows {
							row := vk.Q2K(w[i*rowBytes:(i+1)*rowBytes], y[tok*nb:(tok+1)*nb])
							require.Equal(t, math.Float32bits(row), math.Float32bits(got[tok*quant.Q8_0TileRows+i]), "token %d row %d: tile and row kernel differ", tok, i)
						}
					}
				})
			}
		}
	})
}

// TestQ2KTileSpecials covers factors that make the block terms Inf and
// NaN: an infinite d against codes of nonzero and of zero sum (Inf·0 in
// the product, or D = 0 in D·d), an infinite dmin, whose term is
// subtracted, and the largest finite d with the largest activation scale,
// whose product overflows.
func TestQ2KTileSpecials(t *testing.T) {
	eachTileSet(t, q2kTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(3, 5))
		const nb, n = 5, 9
		w, rowBytes := q2kTileRows(r, nb)
		for i := range quant.Q8_0TileRows {
			blk := w[i*rowBytes+(i%nb)*84:]
			switch i % 4 {
			case 0:
				binary.LittleEndian.PutUint16(blk[80:], 0x7c00) // d = +Inf
			case 1:
				binary.LittleEndian.PutUint16(blk[80:], 0xfc00) // d = -Inf
			case 2:
				binary.LittleEndian.PutUint16(blk[82:], 0x7c00) // dmin = +Inf
			case 3:
				binary.LittleEndian.PutUint16(blk[80:], 0x7bff) // d = 65504
			}
		}
		y := q2kTileActivation(r, n, nb)
		y[2*nb+1] = quant.BlockQ8K{D: 1} // all codes 0: Inf·0 = NaN
		y[4*nb+3] = quant.BlockQ8K{}     // D = 0: 0·Inf = NaN
		y[6*nb+2].D = math.MaxFloat32    // 65504·D overflows
		got := runQ2KTile(vk, w, rowBytes, y, n)
		want := q2kTileWant(w, rowBytes, y, n)
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

// TestQ2KTileCatchesErrors shows the comparison can fail: a Bsums entry
// off by one, two rows swapped before packing, or one packed code byte
// flipped each change some result's bits.
func TestQ2KTileCatchesErrors(t *testing.T) {
	eachTileSet(t, q2kTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(9, 9))
		const nb, n = 3, 5
		w, rowBytes := q2kTileRows(r, nb)
		y := q2kTileActivation(r, n, nb)
		want := q2kTileWant(w, rowBytes, y, n)
		tile := make([]byte, quant.Q2KTileBytes(nb))
		out := make([]float32, n*quant.Q8_0TileRows)

		vk.PackQ2KTile(tile, w, rowBytes, nil)
		vk.Q2KTile(tile, y, n, out)
		require.Empty(t, tileMismatch(out, want), "the unaltered inputs must match")

		y[nb+2].Bsums[7]++
		vk.Q2KTile(tile, y, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "a Bsums entry off by one went unnoticed")
		y[nb+2].Bsums[7]--

		swapped := append([]byte(nil), w...)
		copy(swapped[3*rowBytes:4*rowBytes], w[5*rowBytes:6*rowBytes])
		copy(swapped[5*rowBytes:6*rowBytes], w[3*rowBytes:4*rowBytes])
		vk.PackQ2KTile(tile, swapped, rowBytes, nil)
		vk.Q2KTile(tile, y, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "two swapped rows went unnoticed")

		vk.PackQ2KTile(tile, w, rowBytes, nil)
		tile[4736+64*37+4*9+2] ^= 1
		vk.Q2KTile(tile, y, n, out)
		require.NotEmpty(t, tileMismatch(out, want), "a flipped packed code went unnoticed")
	})
}

// TestQ2KTileLayout checks the packed bytes against the layout tile_q2k.go
// documents, built here from the rows directly.
func TestQ2KTileLayout(t *testing.T) {
	eachTileSet(t, q2kTiles, func(t *testing.T, vk quant.Kernels) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, nb := range []int{1, 3, 8} {
			w, rowBytes := q2kTileRows(r, nb)
			got := make([]byte, quant.Q2KTileBytes(nb)+1)
			got[len(got)-1] = 0xa5
			vk.PackQ2KTile(got, w, rowBytes, nil)
			require.Equal(t, byte(0xa5), got[len(got)-1], "nb=%d: PackQ2KTile wrote past the tile", nb)
			const blockBytes = 4736
			require.Equal(t, nb*blockBytes, quant.Q2KTileBytes(nb))
			want := make([]byte, quant.Q2KTileBytes(nb))
			for b := range nb {
				pb := want[b*blockBytes : (b+1)*blockBytes]
				for i := range quant.Q8_0TileRows {
					blk := w[i*rowBytes+b*84:]
					for e := range quant.QK_K {
						// Element e = 128h+32j+l (l < 32) is bits 2j..2j+1
						// of code byte 32h+l (DotQ2K).
						h, j, l := e/128, e%128/32, e%32
						q := blk[16+32*h+l] >> (2 * j) & 3
						pb[64*(e/4)+4*i+e%4] = q * (blk[e/16] & 15)
					}
					for g := range 16 {
						binary.LittleEndian.PutUint16(pb[4096+64*(g/2)+4*i+2*(g%2):], uint16(blk[g]>>4))
					}
					d := quant.F16ToF32(binary.LittleEndian.Uint16(blk[80:]))
					dmin := quant.F16ToF32(binary.LittleEndian.Uint16(blk[82:]))
					binary.LittleEndian.PutUint32(pb[4608+4*i:], math.Float32bits(d))
					binary.LittleEndian.PutUint32(pb[4672+4*i:], math.Float32bits(dmin))
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

func TestQ2KTilePanics(t *testing.T) {
	eachTileSet(t, q2kTiles, func(t *testing.T, vk quant.Kernels) {
		const nb, n = 3, 2
		w := make([]byte, 16*nb*84)
		tile := make([]byte, quant.Q2KTileBytes(nb))
		y := make([]quant.BlockQ8K, n*nb)
		out := make([]float32, n*16)
		cases := []struct {
			name string
			call func()
		}{
			{"row not whole blocks", func() { vk.PackQ2KTile(tile, w, nb*84-1, nil) }},
			{"negative row", func() { vk.PackQ2KTile(tile, w, -84, nil) }},
			{"too few rows", func() { vk.PackQ2KTile(tile, w[:len(w)-1], nb*84, nil) }},
			{"short tile to pack", func() { vk.PackQ2KTile(tile[:len(tile)-1], w, nb*84, nil) }},
			{"no tokens", func() { vk.Q2KTile(tile, y, 0, out) }},
			{"uneven tokens", func() { vk.Q2KTile(tile, y[:len(y)-1], n, out) }},
			{"short tile", func() { vk.Q2KTile(tile[:len(tile)-1], y, n, out) }},
			{"short out", func() { vk.Q2KTile(tile, y, n, out[:len(out)-1]) }},
		}
		for _, c := range cases {
			require.Panics(t, c.call, c.name)
		}
		// Rows of no blocks give zeros.
		out[0] = 1
		vk.Q2KTile(nil, nil, n, out)
		require.Equal(t, make([]float32, n*16), out)
	})
}
