//go:build amd64 && !purego

package quant

// The AVX2 tile kernels of Q8_0, IQ2_XXS and Q2_K weights: the packs into
// the layouts of tile.go, tile_iq2.go and tile_q2k.go and the products of
// packed tiles with many tokens, for CPUs without AVX-512 such as AMD Zen
// 2 and 3 and Intel's client cores. The assembly bodies
// (tile_avx2_amd64.s) take eight rows, one half of the tile, and a group
// of tokens at a time; every result is that of the vector row kernels bit
// for bit: for Q8_0 in the order q8_0TileAVX512 describes, for IQ2_XXS
// and Q2_K in DotIQ2XXS's and DotQ2K's.

// packNextLines returns where the AVX2 packs of the rows w, rowBytes
// apart, start asking for next and how far they move on after each block
// step, at which they ask for lines 64-byte lines. A pack makes two steps
// a block (one per half of the tile) and reads eight rows' blocks a step,
// so lines ≥ blockBytes/8 covers a tile of next's rows (with a few lines
// past it). A next shorter than a tile gets no step: the packs then ask
// again for the lines at w, which they are reading anyway.
//
// Asked for in a burst before the pack, a tile's lines are in no hurry
// to come (the core allows only so many misses in flight), so the
// requests are spread over the pack before it (BenchmarkTileStream
// compares the two ways; docs/performance.md#tile-kernels).
func packNextLines(w []byte, rowBytes int, next []byte, lines int) (*byte, int) {
	if len(next) < Q8_0TileRows*rowBytes {
		return &w[0], 0
	}
	return &next[0], 64 * lines
}

// packQ8_0TileAVX2 is the AVX2 form of Kernels.PackQ8_0Tile.
func packQ8_0TileAVX2(dst, w []byte, rowBytes int, next []byte) {
	if nb := checkPackQ8_0Tile(dst, w, rowBytes); nb > 0 {
		p, step := packNextLines(w, rowBytes, next, 5)
		packQ8_0TileAVX2Asm(&dst[0], &w[0], rowBytes, nb, p, step)
	}
}

// q8_0TileAVX2 is the AVX2 form of Kernels.Q8_0Tile. Its kernels form
// Σw·x directly and leave sums unused.
func q8_0TileAVX2(tile []byte, x []BlockQ8_0, sums []int32, n int, out []float32) {
	nb := checkQ8_0Tile(tile, x, sums, n, out)
	out = out[:n*Q8_0TileRows]
	if nb == 0 {
		clear(out)
		return
	}
	nb8 := nb &^ 7
	// lanes[k] holds the sums of the blocks ≡ k mod 8 of up to eight
	// tokens. The kernels walk the first nb8 blocks in order, adding each
	// to its lane, so that the activations stream: walking each lane's
	// blocks eight apart instead left the hardware prefetchers behind
	// and, in prefill, the kernels at 0.6 of their speed in cache.
	var lanes [8][8 * Q8_0TileRows]float32
	for t := 0; t < n; {
		g := 8
		for g > n-t {
			g /= 2
		}
		o := out[t*Q8_0TileRows : (t+g)*Q8_0TileRows]
		xt := x[t*nb:]
		if nb8 > 0 {
			// The lanes are zero here: combineLanesAVX2 clears what it
			// reads, and a group has no more tokens than the one before.
			for h := range 2 {
				q8_0TileGroupAVX2(g, &tile[32*h], &xt[0], nb, nb8, len(lanes), &lanes[0][8*h])
			}
			combineLanesAVX2(&o[0], &lanes, len(o))
		} else {
			clear(o)
		}
		if nb > nb8 {
			for h := range 2 {
				q8_0TileGroupAVX2(g, &tile[nb8*q8_0TileBlockBytes+32*h], &xt[nb8], nb, nb-nb8, 1, &o[8*h])
			}
		}
		t += g
	}
}

// combineLanesAVX2 sets o[v], for v < n (a multiple of 8), to
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) of lk = lanes[k][v], the row
// kernels' order, eight at a time, and clears those lanes. The Go loop it
// replaces, with the clear before each group, took a twentieth of the
// Q8_0 tile products' time in prefill.
//
//go:noescape
func combineLanesAVX2(o *float32, lanes *[8][8 * Q8_0TileRows]float32, n int)

// q8_0TileGroupAVX2 runs the kernel for g = 8, 4, 2 or 1 tokens.
func q8_0TileGroupAVX2(g int, tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32) {
	switch g {
	case 8:
		q8_0Tile8AVX2(tile, x, nb, count, lanes, acc)
	case 4:
		q8_0Tile4AVX2(tile, x, nb, count, lanes, acc)
	case 2:
		q8_0Tile2AVX2(tile, x, nb, count, lanes, acc)
	default:
		q8_0Tile1AVX2(tile, x, nb, count, lanes, acc)
	}
}

// q8_0Tile8AVX2 adds, for tokens t < 8 and the eight rows i < 8 of the
// half of the packed tile that tile points into (its first code vector's
// bytes 0 or 32), the terms of count > 0 consecutive blocks, from the
// packed block at tile and the activation blocks at x (token t's nb
// blocks from x+t·nb), one by one in block order, the b-th to
// acc[128(b mod lanes)+16t+i]: lanes sets of sums 512 bytes apart,
// taking the blocks in turn.
//
//go:noescape
func q8_0Tile8AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)

// q8_0Tile4AVX2 is q8_0Tile8AVX2 for four tokens.
//
//go:noescape
func q8_0Tile4AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)

// q8_0Tile2AVX2 is q8_0Tile8AVX2 for two tokens.
//
//go:noescape
func q8_0Tile2AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)

// q8_0Tile1AVX2 is q8_0Tile8AVX2 for one token.
//
//go:noescape
func q8_0Tile1AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)

// packQ8_0TileAVX2Asm packs the 16 rows of nb > 0 blocks at w, rowBytes
// apart, into dst, and asks for five lines at next a block step, moving
// next step bytes on each time (packNextLines).
//
//go:noescape
func packQ8_0TileAVX2Asm(dst, w *byte, rowBytes, nb int, next *byte, step int)

// packIQ2XXSTileAVX2 is the AVX2 form of Kernels.PackIQ2XXSTile.
func packIQ2XXSTileAVX2(dst, w []byte, rowBytes int, next []byte) {
	if nb := checkPackIQ2XXSTile(dst, w, rowBytes); nb > 0 {
		p, step := packNextLines(w, rowBytes, next, 9)
		packIQ2XXSTileAVX2Asm(&dst[0], &w[0], rowBytes, nb, p, step)
	}
}

// iq2xxsTileAVX2 is the AVX2 form of Kernels.IQ2XXSTile. Each token's
// blocks are added in order into one float32 sum per row, as DotIQ2XXS
// adds them.
func iq2xxsTileAVX2(tile []byte, y []BlockQ8K, n int, out []float32) {
	halfTileGroups(&iq2xxsHalfTileKernels, tile, y, checkIQ2XXSTile(tile, y, n, out), n, out)
}

// iq2xxsHalfTileKernels are the AVX2 IQ2_XXS tile kernels.
var iq2xxsHalfTileKernels = halfTileKernels{iq2xxsTile8AVX2, iq2xxsTile4AVX2, iq2xxsTile2AVX2, iq2xxsTile1AVX2}

// halfTileKernels are the AVX2 kernels of one Q8_K-activation tile kind
// for groups of 8, 4, 2 and 1 tokens: each sets out[16t+i] for its tokens
// t and the eight rows i of the tile half that tile points into.
type halfTileKernels [4]func(tile *byte, y *BlockQ8K, nb int, out *float32)

// halfTileGroups applies the tile of nb blocks to the n tokens of y with
// kernels k: groups of eight tokens, then at most one group each of 4, 2
// and 1, each group on the two halves of the tile in turn.
func halfTileGroups(k *halfTileKernels, tile []byte, y []BlockQ8K, nb, n int, out []float32) {
	out = out[:n*Q8_0TileRows]
	if nb == 0 {
		clear(out)
		return
	}
	for t := 0; t < n; {
		g, kernel := 8, k[0]
		for i := 1; g > n-t; i++ {
			g, kernel = g/2, k[i]
		}
		for h := range 2 {
			kernel(&tile[32*h], &y[t*nb], nb, &out[t*Q8_0TileRows+8*h])
		}
		t += g
	}
}

// packIQ2XXSTileAVX2Asm packs the 16 IQ2_XXS rows of nb > 0 blocks at w,
// rowBytes apart, into dst, and asks for nine lines at next a block step,
// moving next step bytes on each time (packNextLines).
//
//go:noescape
func packIQ2XXSTileAVX2Asm(dst, w *byte, rowBytes, nb int, next *byte, step int)

// iq2xxsTile8AVX2 sets out[16t+i], for tokens t < 8 and the eight rows
// i < 8 of the half of the packed tile that tile points into (its first
// code vector's bytes 0 or 32), to the IQ2_XXS dot of the row with token
// t's nb > 0 activation blocks at y+t·nb.
//
//go:noescape
func iq2xxsTile8AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile4AVX2 is iq2xxsTile8AVX2 for four tokens.
//
//go:noescape
func iq2xxsTile4AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile2AVX2 is iq2xxsTile8AVX2 for two tokens.
//
//go:noescape
func iq2xxsTile2AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// iq2xxsTile1AVX2 is iq2xxsTile8AVX2 for one token.
//
//go:noescape
func iq2xxsTile1AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// packQ2KTileAVX2 is the AVX2 form of Kernels.PackQ2KTile.
func packQ2KTileAVX2(dst, w []byte, rowBytes int, next []byte) {
	if nb := checkPackQ2KTile(dst, w, rowBytes); nb > 0 {
		p, step := packNextLines(w, rowBytes, next, 11)
		packQ2KTileAVX2Asm(&dst[0], &w[0], rowBytes, nb, p, step)
	}
}

// q2KTileAVX2 is the AVX2 form of Kernels.Q2KTile. Each token's blocks are
// added in order into one float32 sum per row, as DotQ2K adds them.
func q2KTileAVX2(tile []byte, y []BlockQ8K, n int, out []float32) {
	halfTileGroups(&q2KHalfTileKernels, tile, y, checkQ2KTile(tile, y, n, out), n, out)
}

// q2KHalfTileKernels are the AVX2 Q2_K tile kernels.
var q2KHalfTileKernels = halfTileKernels{q2KTile8AVX2, q2KTile4AVX2, q2KTile2AVX2, q2KTile1AVX2}

// packQ2KTileAVX2Asm packs the 16 Q2_K rows of nb > 0 blocks at w,
// rowBytes apart, into dst, and asks for eleven lines at next a block
// step, moving next step bytes on each time (packNextLines).
//
//go:noescape
func packQ2KTileAVX2Asm(dst, w *byte, rowBytes, nb int, next *byte, step int)

// q2KTile8AVX2 sets out[16t+i], for tokens t < 8 and the eight rows i < 8
// of the half of the packed tile that tile points into (its first code
// vector's bytes 0 or 32), to the Q2_K dot of the row with token t's
// nb > 0 activation blocks at y+t·nb.
//
//go:noescape
func q2KTile8AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile4AVX2 is q2KTile8AVX2 for four tokens.
//
//go:noescape
func q2KTile4AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile2AVX2 is q2KTile8AVX2 for two tokens.
//
//go:noescape
func q2KTile2AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)

// q2KTile1AVX2 is q2KTile8AVX2 for one token.
//
//go:noescape
func q2KTile1AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
