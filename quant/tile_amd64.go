//go:build amd64 && !purego

package quant

import "fmt"

// The AVX-512 (VNNI) Q8_0 tile kernels. The Go functions check the lengths
// and split the tokens into groups of 8, then at most one of 4, 2 and 1,
// for the assembly bodies in tile_amd64.s; every result is that of the
// vector row kernels (dotQ8_0AVX2, dotQ8_0AVX512) bit for bit. They need
// AVX512F, BW, VL and VNNI.

// q8_0TileMaxRowBytes bounds the rows packQ8_0TileAVX512 takes: the gather
// of the scales addresses row i at i·rowBytes in an int32.
const q8_0TileMaxRowBytes = 1 << 27

// packQ8_0TileAVX512 is the AVX-512 form of Kernels.PackQ8_0Tile.
func packQ8_0TileAVX512(dst, w []byte, rowBytes int, next []byte) {
	nb := checkPackQ8_0Tile(dst, w, rowBytes)
	if rowBytes > q8_0TileMaxRowBytes {
		panic(fmt.Sprintf("quant: PackQ8_0Tile row of %d bytes is longer than the %d bytes the AVX-512 pack addresses", rowBytes, q8_0TileMaxRowBytes))
	}
	if nb > 0 {
		var pf *byte
		if len(next) >= Q8_0TileRows*rowBytes {
			pf = &next[0]
		}
		packQ8_0TileAVX512Asm(dst, w, rowBytes, nb, pf)
	}
}

// prefetchTile asks the memory for the 16 rows at next, rowBytes apart,
// when next holds them: the AVX-512 IQ2_XXS and Q2_K packs take Kernels'
// next this way, a request a line before they start, where the AVX2 packs
// and the AVX-512 Q8_0 pack spread theirs over the pack.
func prefetchTile(next []byte, rowBytes int) {
	if n := Q8_0TileRows * rowBytes; len(next) >= n {
		prefetchAsm(&next[0], n)
	}
}

// prefetchAsm issues one PREFETCHT0 per 64 bytes of [p, p+n), n > 0.
//
//go:noescape
func prefetchAsm(p *byte, n int)

// q8_0TileAVX512 is the AVX-512 form of Kernels.Q8_0Tile.
//
// It adds each row's block terms in the order of the vector row kernels
// (dot_q8_amd64.go), so that a product gives the same bits whether prefill
// runs it here or decode runs it one row at a time: the first nb8 = nb&^7
// blocks go into eight sums l0..l7, lk taking the blocks ≡ k mod 8 in
// order, which are combined as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), and
// the last nb%8 blocks are added one by one. The kernels walk the blocks
// ≡ k mod 8 eight apart, one sum at a time, so a group of eight tokens
// still keeps one accumulator per token in registers.
func q8_0TileAVX512(tile []byte, x []BlockQ8_0, sums []int32, n int, out []float32) {
	nb := checkQ8_0Tile(tile, x, sums, n, out)
	out = out[:n*Q8_0TileRows]
	if nb == 0 {
		clear(out)
		return
	}
	nb8 := nb &^ 7
	// lanes[k] holds the sums of the blocks ≡ k mod 8 of up to eight
	// tokens: 4 KiB on the stack, 512 bytes apart (q8_0TileTreeAVX512).
	var lanes [8][8 * Q8_0TileRows]float32
	for t := 0; t < n; {
		g := 8
		for g > n-t {
			g /= 2
		}
		o := out[t*Q8_0TileRows : (t+g)*Q8_0TileRows]
		xt, st := x[t*nb:], sums[t*nb:]
		if nb8 > 0 {
			for k := range lanes {
				l := lanes[k][:g*Q8_0TileRows]
				clear(l)
				q8_0TileGroup(g, &tile[k*q8_0TileBlockBytes], &xt[k], &st[k], nb, nb8/8, 8, &l[0])
			}
			q8_0TileTreeAVX512(&lanes[0][0], g, &o[0])
		} else {
			clear(o)
		}
		if nb > nb8 {
			q8_0TileGroup(g, &tile[nb8*q8_0TileBlockBytes], &xt[nb8], &st[nb8], nb, nb-nb8, 1, &o[0])
		}
		t += g
	}
}

// q8_0TileGroup runs the kernel for g = 8, 4, 2 or 1 tokens.
func q8_0TileGroup(g int, tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32) {
	switch g {
	case 8:
		q8_0Tile8AVX512(tile, x, sums, nb, count, stride, acc)
	case 4:
		q8_0Tile4AVX512(tile, x, sums, nb, count, stride, acc)
	case 2:
		q8_0Tile2AVX512(tile, x, sums, nb, count, stride, acc)
	default:
		q8_0Tile1AVX512(tile, x, sums, nb, count, stride, acc)
	}
}

// packQ8_0TileAVX512Asm packs the 16 rows of nb > 0 blocks at w, rowBytes
// apart, into dst, asking meanwhile for the 16 rows at next unless it is
// nil.
//
//go:noescape
func packQ8_0TileAVX512Asm(dst, w []byte, rowBytes, nb int, next *byte)

// q8_0Tile8AVX512 adds to acc[16t+i], for tokens t < 8 and tile rows i, the
// terms of count > 0 blocks stride apart, from the packed block at tile and
// the activation blocks at x (token t's nb blocks from x+t·nb, their code
// sums likewise from sums), one by one in block order.
//
//go:noescape
func q8_0Tile8AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)

// q8_0Tile4AVX512 is q8_0Tile8AVX512 for four tokens.
//
//go:noescape
func q8_0Tile4AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)

// q8_0Tile2AVX512 is q8_0Tile8AVX512 for two tokens.
//
//go:noescape
func q8_0Tile2AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)

// q8_0Tile1AVX512 is q8_0Tile8AVX512 for one token.
//
//go:noescape
func q8_0Tile1AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)

// q8_0TileTreeAVX512 sets out[v·16+i] = ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
// for v < vecs and i < 16, lk being lanes[k·128+v·16+i].
//
//go:noescape
func q8_0TileTreeAVX512(lanes *float32, vecs int, out *float32)

// q8_0SumsFull sets sums[b] for every block of x in form f and returns
// how many it did: all of them with AVX2, none with Go.
func q8_0SumsFull(f actForm, x []BlockQ8_0, sums []int32) int {
	if f == actGo || len(x) == 0 {
		return 0
	}
	q8_0SumsAVX2(x, sums[:len(x)])
	return len(x)
}

// q8_0SumsAVX2 sets sums[b] to the sum of x[b].Qs for the len(x) > 0
// blocks of x.
//
//go:noescape
func q8_0SumsAVX2(x []BlockQ8_0, sums []int32)
