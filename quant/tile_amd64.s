//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 (VNNI) bodies of the Q8_0 tile kernels of tile_amd64.go: the
// pack of 16 rows into the layout tile.go describes, and the products of a
// packed tile with groups of 8, 4, 2 or 1 tokens. They need AVX512F, BW, VL
// and VNNI.
//
// Why the products are fast. The int32 lanes of a ZMM are the tile's 16
// rows, so one VPDPBUSD multiplies four codes of all 16 rows by the same
// four activation codes (broadcast from memory, {1to16}) and adds them into
// the 16 rows' block sums: 64 useful multiply-adds and no horizontal
// reduction, where the row-at-a-time kernels spend most of their work
// reducing. Eight VPDPBUSD make a block's 16 sums for one token. A code
// vector is loaded once per block and serves the up to eight tokens of a
// group, whose eight dependency chains interleave so that the VPDPBUSD
// latency is hidden; their float accumulators stay in registers over all
// blocks. On AMD Zen 5 groups of 10 and 12 tokens were at most 3% faster
// and 6 slower. There the VPDPBUSD alone reach about 85% of their peak and
// the whole kernel about 70%: the six vector ops a token and block spends
// besides its eight VPDPBUSD fill the ports (the bias correction alone
// costs 10%, formed by a shift and a subtraction as here, by a VPMULLD or
// by a VPDPWSSD alike).
//
// Numerics. VPDPBUSD multiplies unsigned by signed bytes, without
// saturation: the packed codes are w+128 (0..255) and the activation codes x
// stay signed, so a lane sums Σ(w+128)·x, at most 32·255·128 in magnitude,
// and subtracting 128·Σx (the block's entry of sums, shifted) leaves the
// exact Σw·x for every code, -128 included. The sum converts exactly
// (|Σw·x| ≤ 2^19 < 2^24), and then, as in DotQ8_0, (f16(d_w)·d_x) and that
// times the sum are each rounded to float32 (VMULPS, never FMA) and added
// to the token's accumulator. Which blocks an accumulator takes, in which
// order, is the caller's (tile_amd64.go): the kernels walk count blocks
// stride apart, and the accumulators start from and end in acc.

// Register use of the product kernels: SI points at the current packed
// block and CX counts the blocks left; DX = 36·nb and BX = 4·nb are the
// token strides of x and sums, DI, R8 and R9 point at the current block of
// tokens 0, 3 and 6 of the group, R10, R11 and R12 at their sums (the other
// tokens are addressed from these with DX or BX scaled by 1, 2 or 4); Z0..Z7
// hold the block's code vectors, Z8..Z15 the tokens' int32 block sums,
// Z16..Z23 their float32 accumulators, Z24 the block's row scales, and Z25
// and Z26 are scratch. The frame holds the steps from one block to the
// next: 0(SP) in the tile, 8(SP) in x and 16(SP) in sums.

// PROLOGUE loads the arguments, stores the block steps and leaves acc in
// AX.
#define PROLOGUE \
	MOVQ   tile+0(FP), SI \
	MOVQ   x+8(FP), DI \
	MOVQ   sums+16(FP), R10 \
	MOVQ   nb+24(FP), CX \
	LEAQ   (CX)(CX*8), DX \
	SHLQ   $2, DX \
	LEAQ   (CX*4), BX \
	MOVQ   stride+40(FP), AX \
	LEAQ   (AX*4), R13 \
	MOVQ   R13, 16(SP) \
	LEAQ   (AX)(AX*8), R13 \
	SHLQ   $2, R13 \
	MOVQ   R13, 8(SP) \
	IMUL3Q $576, AX, R13 \
	MOVQ   R13, 0(SP) \
	MOVQ   count+32(FP), CX \
	MOVQ   acc+48(FP), AX

// DOT8 loads code vector k of the packed block into W and adds its products
// with activation dword k of each of tokens 0..7 to Z8..Z15; DOT4, DOT2 and
// DOT1 do so for the first four, two and one tokens.
#define DOT8(k, W) \
	DOT4(k, W) \
	VPDPBUSD.BCST (4+4*k)(DI)(DX*4), W, Z12 \
	VPDPBUSD.BCST (4+4*k)(R8)(DX*2), W, Z13 \
	VPDPBUSD.BCST (4+4*k)(R9), W, Z14 \
	VPDPBUSD.BCST (4+4*k)(R8)(DX*4), W, Z15

#define DOT4(k, W) \
	DOT2(k, W) \
	VPDPBUSD.BCST (4+4*k)(DI)(DX*2), W, Z10 \
	VPDPBUSD.BCST (4+4*k)(R8), W, Z11

#define DOT2(k, W) \
	DOT1(k, W) \
	VPDPBUSD.BCST (4+4*k)(DI)(DX*1), W, Z9

#define DOT1(k, W) \
	VMOVDQU64     (64*k)(SI), W \
	VPDPBUSD.BCST (4+4*k)(DI), W, Z8

// BLOCK sums the packed block's products with one activation block per
// token, DOTn being DOT8, DOT4, DOT2 or DOT1, and loads the row scales.
#define BLOCK(DOTn) \
	DOTn(0, Z0) \
	DOTn(1, Z1) \
	DOTn(2, Z2) \
	DOTn(3, Z3) \
	DOTn(4, Z4) \
	DOTn(5, Z5) \
	DOTn(6, Z6) \
	DOTn(7, Z7) \
	VMOVUPS 512(SI), Z24

// TERM finishes a block for one token, whose activation block is at XM and
// its code sum at SM: it takes 128·sum from the lanes I of Σ(w+128)·x,
// converts them, and adds (scales·d_x)·Σw·x to the accumulator F, with
// DotQ8_0's roundings. It clears I for the next block.
#define TERM(XM, SM, I, F) \
	VPSLLD.BCST $7, SM, Z25 \
	VPSUBD      Z25, I, I \
	VCVTDQ2PS   I, I \
	VMULPS.BCST XM, Z24, Z26 \
	VMULPS      I, Z26, Z26 \
	VADDPS      Z26, F, F \
	VPXORD      I, I, I

// func q8_0Tile8AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile8AVX512(SB), NOSPLIT, $24-56
	PROLOGUE
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	VMOVUPS 256(AX), Z20
	VMOVUPS 320(AX), Z21
	VMOVUPS 384(AX), Z22
	VMOVUPS 448(AX), Z23
	LEAQ   (DX)(DX*2), AX
	LEAQ   (DI)(AX*1), R8
	LEAQ   (R8)(AX*1), R9
	LEAQ   (BX)(BX*2), AX
	LEAQ   (R10)(AX*1), R11
	LEAQ   (R11)(AX*1), R12
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

loop8:
	BLOCK(DOT8)
	TERM((DI), (R10), Z8, Z16)
	TERM((DI)(DX*1), (R10)(BX*1), Z9, Z17)
	TERM((DI)(DX*2), (R10)(BX*2), Z10, Z18)
	TERM((R8), (R11), Z11, Z19)
	TERM((DI)(DX*4), (R10)(BX*4), Z12, Z20)
	TERM((R8)(DX*2), (R11)(BX*2), Z13, Z21)
	TERM((R9), (R12), Z14, Z22)
	TERM((R8)(DX*4), (R11)(BX*4), Z15, Z23)
	ADDQ 0(SP), SI
	ADDQ 8(SP), DI
	ADDQ 8(SP), R8
	ADDQ 8(SP), R9
	ADDQ 16(SP), R10
	ADDQ 16(SP), R11
	ADDQ 16(SP), R12
	DECQ CX
	JNZ  loop8

	MOVQ    acc+48(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VMOVUPS Z20, 256(AX)
	VMOVUPS Z21, 320(AX)
	VMOVUPS Z22, 384(AX)
	VMOVUPS Z23, 448(AX)
	VZEROUPPER
	RET

// func q8_0Tile4AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile4AVX512(SB), NOSPLIT, $24-56
	PROLOGUE
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	LEAQ   (DX)(DX*2), AX
	LEAQ   (DI)(AX*1), R8
	LEAQ   (BX)(BX*2), AX
	LEAQ   (R10)(AX*1), R11
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11

loop4:
	BLOCK(DOT4)
	TERM((DI), (R10), Z8, Z16)
	TERM((DI)(DX*1), (R10)(BX*1), Z9, Z17)
	TERM((DI)(DX*2), (R10)(BX*2), Z10, Z18)
	TERM((R8), (R11), Z11, Z19)
	ADDQ 0(SP), SI
	ADDQ 8(SP), DI
	ADDQ 8(SP), R8
	ADDQ 16(SP), R10
	ADDQ 16(SP), R11
	DECQ CX
	JNZ  loop4

	MOVQ    acc+48(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VZEROUPPER
	RET

// func q8_0Tile2AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile2AVX512(SB), NOSPLIT, $24-56
	PROLOGUE
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z17
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9

loop2:
	BLOCK(DOT2)
	TERM((DI), (R10), Z8, Z16)
	TERM((DI)(DX*1), (R10)(BX*1), Z9, Z17)
	ADDQ 0(SP), SI
	ADDQ 8(SP), DI
	ADDQ 16(SP), R10
	DECQ CX
	JNZ  loop2

	MOVQ    acc+48(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VZEROUPPER
	RET

// func q8_0Tile1AVX512(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile1AVX512(SB), NOSPLIT, $24-56
	PROLOGUE
	VMOVUPS 0(AX), Z16
	VPXORD Z8, Z8, Z8

loop1:
	BLOCK(DOT1)
	TERM((DI), (R10), Z8, Z16)
	ADDQ 0(SP), SI
	ADDQ 8(SP), DI
	ADDQ 16(SP), R10
	DECQ CX
	JNZ  loop1

	MOVQ    acc+48(FP), AX
	VMOVUPS Z16, 0(AX)
	VZEROUPPER
	RET

// func q8_0TileTreeAVX512(lanes *float32, vecs int, out *float32)
//
// For each of vecs vectors of 16 floats, lanes holding eight such arrays 512
// bytes apart (the sums l0..l7 of the blocks ≡ 0..7 mod 8), sets out to
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the tree in which the row kernels
// sum their eight lanes (dot_q8_amd64.s).
TEXT ·q8_0TileTreeAVX512(SB), NOSPLIT, $0-24
	MOVQ lanes+0(FP), SI
	MOVQ vecs+8(FP), CX
	MOVQ out+16(FP), DI

tree:
	VMOVUPS 0(SI), Z0
	VADDPS  2048(SI), Z0, Z0
	VMOVUPS 1024(SI), Z1
	VADDPS  3072(SI), Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS 512(SI), Z2
	VADDPS  2560(SI), Z2, Z2
	VMOVUPS 1536(SI), Z3
	VADDPS  3584(SI), Z3, Z3
	VADDPS  Z3, Z2, Z2
	VADDPS  Z2, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     tree
	VZEROUPPER
	RET

// The pack. For each block it transposes 16 rows × 8 dwords of codes into
// 8 vectors of 16 rows: Z_j (j < 8) takes the 32 codes of rows j and j+8 in
// its two halves (one load and one insert), and the classic three-level
// 8×8 dword transpose runs in both halves at once, VPUNPCK{L,H}DQ and
// VPUNPCK{L,H}QDQ within 128-bit lanes and, where the 256-bit form would
// swap lanes, one two-register VPERMT2Q per output that also joins the
// halves: 40 shuffles for 512 bytes. The 16 scales come in with one gather
// at the rows' offsets (0, rowBytes, …, 15·rowBytes: rowBytes ≤ 2^27, so
// they fit the int32 indices), are narrowed to words and converted. A
// block takes about 10 ns on Zen 5, not bound by loads; loading the rows
// in 128-bit quarters so that two unpack levels suffice took 12% longer,
// and one gather per code vector 3.5 times longer.

// tileIota is 0..15; times rowBytes, the rows' offsets for the scale gather.
DATA tileIota<>+0(SB)/8, $0x0000000100000000
DATA tileIota<>+8(SB)/8, $0x0000000300000002
DATA tileIota<>+16(SB)/8, $0x0000000500000004
DATA tileIota<>+24(SB)/8, $0x0000000700000006
DATA tileIota<>+32(SB)/8, $0x0000000900000008
DATA tileIota<>+40(SB)/8, $0x0000000b0000000a
DATA tileIota<>+48(SB)/8, $0x0000000d0000000c
DATA tileIota<>+56(SB)/8, $0x0000000f0000000e
GLOBL tileIota<>(SB), RODATA|NOPTR, $64

// tileLo and tileHi are the VPERMT2Q controls of the transpose's last
// level: 128-bit lanes 0 and 2 (tileLo) or 1 and 3 (tileHi) of each of two
// registers, interleaved.
DATA tileLo<>+0(SB)/8, $0
DATA tileLo<>+8(SB)/8, $1
DATA tileLo<>+16(SB)/8, $8
DATA tileLo<>+24(SB)/8, $9
DATA tileLo<>+32(SB)/8, $4
DATA tileLo<>+40(SB)/8, $5
DATA tileLo<>+48(SB)/8, $12
DATA tileLo<>+56(SB)/8, $13
GLOBL tileLo<>(SB), RODATA|NOPTR, $64

DATA tileHi<>+0(SB)/8, $2
DATA tileHi<>+8(SB)/8, $3
DATA tileHi<>+16(SB)/8, $10
DATA tileHi<>+24(SB)/8, $11
DATA tileHi<>+32(SB)/8, $6
DATA tileHi<>+40(SB)/8, $7
DATA tileHi<>+48(SB)/8, $14
DATA tileHi<>+56(SB)/8, $15
GLOBL tileHi<>(SB), RODATA|NOPTR, $64

// tileBias is the byte 0x80 that turns a code into code+128.
DATA tileBias<>+0(SB)/4, $0x80808080
GLOBL tileBias<>(SB), RODATA|NOPTR, $4

// PAIR loads the codes of block 0(AX) of rows j (from AX) and j+8 into ZR,
// biased, and moves AX to row j+1.
#define PAIR(YR, ZR) \
	VMOVDQU      2(AX), YR \
	VINSERTI64X4 $1, 2(AX)(DX*8), ZR, ZR \
	VPXORD       Z31, ZR, ZR \
	ADDQ         DX, AX

// LAST writes code vectors k and k+4 of the packed block at 0(DI) from UA
// (rows 0..3 and 8..11) and UB (rows 4..7 and 12..15). Clobbers UA.
#define LAST(k, UA, UB) \
	VMOVDQA64 Z28, Z24 \
	VPERMI2Q  UB, UA, Z24 \
	VPERMT2Q  UB, Z29, UA \
	VMOVDQU64 Z24, (64*k)(DI) \
	VMOVDQU64 UA, (64*k+256)(DI)

// PREFETCH9 asks for the nine lines from 0(R8), which cover the 544 bytes
// of one block of the next tile's rows, and moves R8 on by those 544.
#define PREFETCH9 \
	PREFETCHT0 0(R8) \
	PREFETCHT0 64(R8) \
	PREFETCHT0 128(R8) \
	PREFETCHT0 192(R8) \
	PREFETCHT0 256(R8) \
	PREFETCHT0 320(R8) \
	PREFETCHT0 384(R8) \
	PREFETCHT0 448(R8) \
	PREFETCHT0 512(R8) \
	ADDQ       $544, R8

// func packQ8_0TileAVX512Asm(dst, w []byte, rowBytes, nb int, next *byte)
//
// Where next is not nil, each block's step also asks for the next 544
// bytes of the 16·rowBytes = 544·nb from next: the requests for the rows
// packed next are spread over the pack, one block's worth a step, instead
// of issued in one burst before it, which filled the core's miss buffers
// and stalled it until most lines had come (BenchmarkQ8_0xNStream).
TEXT ·packQ8_0TileAVX512Asm(SB), NOSPLIT, $0-72
	MOVQ         dst_base+0(FP), DI
	MOVQ         w_base+24(FP), SI
	MOVQ         rowBytes+48(FP), DX
	MOVQ         nb+56(FP), CX
	MOVQ         next+64(FP), R8
	VPBROADCASTD DX, Z30
	VPMULLD      tileIota<>(SB), Z30, Z30
	VPBROADCASTD tileBias<>(SB), Z31
	VMOVDQU64    tileLo<>(SB), Z28
	VMOVDQU64    tileHi<>(SB), Z29
	TESTQ        CX, CX
	JZ           packdone

packloop:
	MOVQ SI, AX
	PAIR(Y0, Z0)
	PAIR(Y1, Z1)
	PAIR(Y2, Z2)
	PAIR(Y3, Z3)
	PAIR(Y4, Z4)
	PAIR(Y5, Z5)
	PAIR(Y6, Z6)
	PAIR(Y7, Z7)
	TESTQ       R8, R8
	JZ          packnopf
	PREFETCH9

packnopf:
	VPUNPCKLDQ  Z1, Z0, Z8
	VPUNPCKHDQ  Z1, Z0, Z9
	VPUNPCKLDQ  Z3, Z2, Z10
	VPUNPCKHDQ  Z3, Z2, Z11
	VPUNPCKLDQ  Z5, Z4, Z12
	VPUNPCKHDQ  Z5, Z4, Z13
	VPUNPCKLDQ  Z7, Z6, Z14
	VPUNPCKHDQ  Z7, Z6, Z15
	VPUNPCKLQDQ Z10, Z8, Z16
	VPUNPCKHQDQ Z10, Z8, Z17
	VPUNPCKLQDQ Z11, Z9, Z18
	VPUNPCKHQDQ Z11, Z9, Z19
	VPUNPCKLQDQ Z14, Z12, Z20
	VPUNPCKHQDQ Z14, Z12, Z21
	VPUNPCKLQDQ Z15, Z13, Z22
	VPUNPCKHQDQ Z15, Z13, Z23
	LAST(0, Z16, Z20)
	LAST(1, Z17, Z21)
	LAST(2, Z18, Z22)
	LAST(3, Z19, Z23)
	KXNORW      K1, K1, K1
	VPGATHERDD  (SI)(Z30*1), K1, Z25
	VPMOVDW     Z25, Y25
	VCVTPH2PS   Y25, Z25
	VMOVUPS     Z25, 512(DI)
	ADDQ        $34, SI
	ADDQ        $576, DI
	DECQ        CX
	JNZ         packloop

packdone:
	VZEROUPPER
	RET

// func q8_0SumsAVX2(x []BlockQ8_0, sums []int32)
//
// The sums of Q8_0Sums, which needs only AVX2: a block's 32 codes biased to
// unsigned bytes (XOR 0x80) are summed by VPSADBW against zero into four
// qwords, which are added, and 32·128 is taken off: under 1 ns a block on
// Zen 5, 20 times faster than the Go loop, so that the sums cost little
// next to the tile products even for a matrix of few tiles.
TEXT ·q8_0SumsAVX2(SB), NOSPLIT, $0-48
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	MOVQ         sums_base+24(FP), DI
	MOVL         $0x80808080, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VPXOR        Y14, Y14, Y14

sumsloop:
	VPXOR        4(SI), Y15, Y0
	VPSADBW      Y14, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDQ       X1, X0, X0
	VMOVD        X0, AX
	SUBL         $4096, AX
	MOVL         AX, (DI)
	ADDQ         $36, SI
	ADDQ         $4, DI
	DECQ         CX
	JNZ          sumsloop

	VZEROUPPER
	RET

// func prefetchAsm(p *byte, n int)
TEXT ·prefetchAsm(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX

prefetch:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JLT        prefetch
	RET
