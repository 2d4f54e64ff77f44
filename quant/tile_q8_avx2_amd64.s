//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 bodies of the Q8_0 tile kernel of tile_q8_avx2_amd64.go: the
// products of eight rows of a packed tile (tile.go's layout, one half of
// each 64-byte code vector) with groups of 4, 2 or 1 tokens, and the pack.
//
// Why the products are exact. AVX2 has no VPDPBUSD, and its byte multiply,
// VPMADDUBSW, saturates each sum of two products at 16 bits, which the
// biased codes (0..255) times activation codes (-128..127) overflow. So the
// kernels use VPMADDWD, which multiplies 16-bit pairs and adds adjacent
// products into exact int32 lanes. A row's four codes, zero-extended
// (VPMOVZXBW), fill two lanes; the token's four codes, broadcast, are
// interleaved with zero bytes (VPUNPCKLBW), which makes each the high byte
// of a word: x·256, sign and all, so every lane sums 256·Σ(w+128)·x, at
// most 2·255·128·256 < 2^31 in magnitude, and a shift right by 8 at the
// end of the block is exact. (Sign-extending with VPMOVSXBW instead costs
// as much as the rest of a token's work on AMD Zen 3.) One VPHADDD and one
// VPERMQ then leave the eight rows' sums in order, and from there the
// block term is that of the AVX-512 kernels (tile_amd64.s): Σ(w+128)·x -
// 128·Σx = Σw·x, converted, times (scale·d_x), added to the token's sum,
// with DotQ8_0's roundings.
//
// Why they are fast. The rows are the lanes, so a block needs no
// reduction per row but the one VPHADDD, and the widened code vector half
// serves every token of the group: a token's four codes cost a broadcast,
// an unpack, two VPMADDWD and two VPADDD for 32 multiply-adds. On Zen 3
// they run at about 1.4 times the four-token row kernel (dotQ8_0x4AVX2)
// in cache, the pack included, from 16 tokens up.

// Register use: SI points at the current packed block's half (codes at
// 64k, scales at 512), DI and R8 at the current activation block of tokens
// 0 and 2 (tokens 1 and 3 are DX = 36·nb further), R10 and R11 at their
// code sums (BX = 4·nb apart); R12, R13 and R9 are the steps from one block
// to the next in the tile, x and sums; CX counts the blocks left and AX
// points at acc, where the tokens' sums stay (64 bytes apart). Y8 and Y9
// hold the widened codes of rows 0..3 and 4..7, Y10 a token's codes, Y11 a
// product and Y15 zero; token t sums its block in Y(2t) (rows 0..3) and
// Y(2t+1) (rows 4..7).

#define PROLOGUE \
	MOVQ   tile+0(FP), SI \
	MOVQ   x+8(FP), DI \
	MOVQ   sums+16(FP), R10 \
	MOVQ   nb+24(FP), DX \
	LEAQ   (DX*4), BX \
	IMUL3Q $36, DX, DX \
	MOVQ   stride+40(FP), AX \
	IMUL3Q $576, AX, R12 \
	IMUL3Q $36, AX, R13 \
	LEAQ   (AX*4), R9 \
	LEAQ   (DI)(DX*2), R8 \
	LEAQ   (R10)(BX*2), R11 \
	MOVQ   count+32(FP), CX \
	MOVQ   acc+48(FP), AX

// WIDEN loads code vector k's half, rows 0..3 to Y8 and 4..7 to Y9.
#define WIDEN(k) \
	VPMOVZXBW (64*k)(SI), Y8 \
	VPMOVZXBW (64*k+16)(SI), Y9

// FIRST sets A and B to 256 times the products of the widened codes with
// the token's codes 4k..4k+3 at M; NEXT adds them.
#define FIRST(k, M, A, B) \
	VPBROADCASTD (4+4*k)M, Y10 \
	VPUNPCKLBW   Y10, Y15, Y10 \
	VPMADDWD     Y8, Y10, A \
	VPMADDWD     Y9, Y10, B

#define NEXT(k, M, A, B) \
	VPBROADCASTD (4+4*k)M, Y10 \
	VPUNPCKLBW   Y10, Y15, Y10 \
	VPMADDWD     Y8, Y10, Y11 \
	VPADDD       Y11, A, A \
	VPMADDWD     Y9, Y10, Y11 \
	VPADDD       Y11, B, B

// TERM finishes the block for one token whose activation block is at XM
// and code sum at SM: A and B (the lanes of rows 0..3 and 4..7, two per
// row) become the eight rows' Σ(w+128)·x in order, less 128·Σx, converted
// and times (scale·d_x), with DotQ8_0's roundings, added to the sums at F.
#define TERM(XM, SM, A, B, F) \
	VPHADDD      B, A, A \
	VPERMQ       $0xd8, A, A \
	VPSRAD       $8, A, A \
	VPBROADCASTD SM, B \
	VPSLLD       $7, B, B \
	VPSUBD       B, A, A \
	VCVTDQ2PS    A, A \
	VBROADCASTSS XM, B \
	VMULPS       512(SI), B, B \
	VMULPS       A, B, B \
	VADDPS       F, B, B \
	VMOVUPS      B, F

// STEP moves to the next block.
#define STEP \
	ADDQ R12, SI \
	ADDQ R13, DI \
	ADDQ R13, R8 \
	ADDQ R9, R10 \
	ADDQ R9, R11

// K4, K2 and K1 widen code vector k's half and apply it to four, two or
// one tokens, whose codes are at (DI), (DI)(DX*1), (R8) and (R8)(DX*1), OP
// being FIRST or NEXT.
#define K4(k, OP) \
	WIDEN(k) \
	OP(k, (DI), Y0, Y1) \
	OP(k, (DI)(DX*1), Y2, Y3) \
	OP(k, (R8), Y4, Y5) \
	OP(k, (R8)(DX*1), Y6, Y7)

#define K2(k, OP) \
	WIDEN(k) \
	OP(k, (DI), Y0, Y1) \
	OP(k, (DI)(DX*1), Y2, Y3)

#define K1(k, OP) \
	WIDEN(k) \
	OP(k, (DI), Y0, Y1)

// BLOCK forms a block's sums for the tokens of Kn.
#define BLOCK(Kn) \
	Kn(0, FIRST) \
	Kn(1, NEXT) \
	Kn(2, NEXT) \
	Kn(3, NEXT) \
	Kn(4, NEXT) \
	Kn(5, NEXT) \
	Kn(6, NEXT) \
	Kn(7, NEXT)

// func q8_0Tile4AVX2(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile4AVX2(SB), NOSPLIT, $0-56
	PROLOGUE
	VPXOR   Y15, Y15, Y15

loop4:
	BLOCK(K4)
	TERM((DI), (R10), Y0, Y1, 0(AX))
	TERM((DI)(DX*1), (R10)(BX*1), Y2, Y3, 64(AX))
	TERM((R8), (R11), Y4, Y5, 128(AX))
	TERM((R8)(DX*1), (R11)(BX*1), Y6, Y7, 192(AX))
	STEP
	DECQ CX
	JNZ  loop4

	VZEROUPPER
	RET

// func q8_0Tile2AVX2(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile2AVX2(SB), NOSPLIT, $0-56
	PROLOGUE
	VPXOR   Y15, Y15, Y15

loop2:
	BLOCK(K2)
	TERM((DI), (R10), Y0, Y1, 0(AX))
	TERM((DI)(DX*1), (R10)(BX*1), Y2, Y3, 64(AX))
	STEP
	DECQ CX
	JNZ  loop2

	VZEROUPPER
	RET

// func q8_0Tile1AVX2(tile *byte, x *BlockQ8_0, sums *int32, nb, count, stride int, acc *float32)
TEXT ·q8_0Tile1AVX2(SB), NOSPLIT, $0-56
	PROLOGUE
	VPXOR   Y15, Y15, Y15

loop1:
	BLOCK(K1)
	TERM((DI), (R10), Y0, Y1, 0(AX))
	STEP
	DECQ CX
	JNZ  loop1

	VZEROUPPER
	RET

// func prefetchQ8_0(x *BlockQ8_0, n int)
// One PREFETCHT0 per 64 bytes of the n > 0 blocks at x.
TEXT ·prefetchQ8_0(SB), NOSPLIT, $0-16
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	IMUL3Q $36, CX, CX
	ADDQ   SI, CX

pf:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JLT        pf
	RET

DATA q8TileBias<>+0(SB)/4, $0x80808080
GLOBL q8TileBias<>(SB), RODATA|NOPTR, $4

// TRANSPOSE4 turns the code vectors of four rows in Ra..Rd (dword j: codes
// 4j..4j+3) into four registers holding, per 128-bit lane, the four rows'
// dword j (low lane) and j+4 (high lane): j = 0 in Ra, 1 in Rb, 2 in Rc,
// 3 in Rd. T0..T3 are scratch.
#define TRANSPOSE4(Ra, Rb, Rc, Rd, T0, T1, T2, T3) \
	VPUNPCKLDQ  Rb, Ra, T0 \
	VPUNPCKHDQ  Rb, Ra, T1 \
	VPUNPCKLDQ  Rd, Rc, T2 \
	VPUNPCKHDQ  Rd, Rc, T3 \
	VPUNPCKLQDQ T2, T0, Ra \
	VPUNPCKHQDQ T2, T0, Rb \
	VPUNPCKLQDQ T3, T1, Rc \
	VPUNPCKHQDQ T3, T1, Rd

// STOREK stores code vector halves j and j+4 of the eight rows, rows 0..3
// of each in Lo's lanes and rows 4..7 in Hi's, biased.
#define STOREK(j, Lo, Hi, T) \
	VPERM2I128 $0x20, Hi, Lo, T \
	VPXOR      Y15, T, T \
	VMOVDQU    T, (64*j)(DI) \
	VPERM2I128 $0x31, Hi, Lo, T \
	VPXOR      Y15, T, T \
	VMOVDQU    T, (64*j+256)(DI)

// func packQ8_0TileAVX2Asm(dst, w *byte, rowBytes, nb int)
//
// Packs eight rows at a time: rows 0..7 into the low 32 bytes of each code
// vector and the first eight scales, then rows 8..15 into the high ones.
// Per block the eight rows' 32 codes are an 8×8 matrix of dwords, which
// two rounds of unpacks and one of 128-bit permutes transpose into the
// eight code vector halves. The scales are gathered as f16 words and
// converted eight at a time.
TEXT ·packQ8_0TileAVX2Asm(SB), NOSPLIT, $0-32
	MOVQ         w+8(FP), R10
	MOVQ         rowBytes+16(FP), BX
	VPBROADCASTD q8TileBias<>(SB), Y15
	XORQ         R11, R11 // half: 0 or 32

half:
	MOVQ dst+0(FP), DI
	ADDQ R11, DI
	MOVQ R10, SI
	LEAQ (SI)(BX*2), R8
	ADDQ BX, R8       // row 3
	LEAQ (R8)(BX*2), R9
	ADDQ BX, R9       // row 6
	MOVQ nb+24(FP), CX

block:
	VMOVDQU 2(SI), Y0
	VMOVDQU 2(SI)(BX*1), Y1
	VMOVDQU 2(SI)(BX*2), Y2
	VMOVDQU 2(R8), Y3
	VMOVDQU 2(SI)(BX*4), Y4
	VMOVDQU 2(R8)(BX*2), Y5
	VMOVDQU 2(R9), Y6
	VMOVDQU 2(R9)(BX*1), Y7
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y8, Y9, Y10, Y11)
	TRANSPOSE4(Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11)
	STOREK(0, Y0, Y4, Y8)
	STOREK(1, Y1, Y5, Y8)
	STOREK(2, Y2, Y6, Y8)
	STOREK(3, Y3, Y7, Y8)

	MOVWLZX   (SI), AX
	VMOVD     AX, X12
	VPINSRW   $1, (SI)(BX*1), X12, X12
	VPINSRW   $2, (SI)(BX*2), X12, X12
	VPINSRW   $3, (R8), X12, X12
	VPINSRW   $4, (SI)(BX*4), X12, X12
	VPINSRW   $5, (R8)(BX*2), X12, X12
	VPINSRW   $6, (R9), X12, X12
	VPINSRW   $7, (R9)(BX*1), X12, X12
	VCVTPH2PS X12, Y12
	VMOVUPS   Y12, 512(DI)

	ADDQ $34, SI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $576, DI
	DECQ CX
	JNZ  block

	LEAQ (R10)(BX*8), R10 // rows 8..15
	ADDQ $32, R11
	CMPQ R11, $64
	JLT  half
	VZEROUPPER
	RET
