//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 (VNNI) bodies of the Q2_K tile kernels of tile_q2k_amd64.go:
// the pack of 16 rows into the layout tile_q2k.go describes, and the
// products of a packed tile with groups of 1 to 8 tokens. They need
// AVX512F, BW, VL and VNNI.
//
// Why the products are fast. As in the Q8_0 tile kernels (tile_amd64.s),
// the int32 lanes of a ZMM are the tile's 16 rows, so one VPDPBUSD
// multiplies four packed codes of all 16 rows by four activation codes
// broadcast from memory: 64 useful multiply-adds, no horizontal reduction.
// Because the pack stored each code times its sub-block scale, the 64
// VPDPBUSD of a block sum DotQ2K's isum for all 16 sub-blocks into one
// accumulator with no bias to remove and no per-sub-block multiply, and 8
// VPDPWSSD of the packed mins with the broadcast Bsums pairs give its
// summs. A code vector is loaded once per block and serves every token of
// the group, whose dependency chains interleave; in a group of n ≤ 6
// tokens each token's isum cycles through several accumulators (8/n for
// n = 1, 2 and 4, two for 3, 5 and 6), so that at least six independent
// VPDPBUSD chains hide the instruction's latency.
// A group of the 1..7 tokens left over from groups of eight makes one pass
// over the tile, not up to three (4+2+1): 11% faster for three tokens.
// On Zen 5 a group of eight reaches about 80% of the VNNI peak (two
// VPDPBUSD a cycle); one token alone is bound by its two loads per
// VPDPBUSD and runs at about half the rate.
//
// Numerics. The packed codes are q·s (0..45) and VPDPBUSD multiplies them,
// unsigned, by the signed activation codes without saturation: a lane sums
// exactly Σ s·q·y = DotQ2K's isum, at most 256·45·128 < 2^24 in magnitude,
// so it converts to float32 exactly; VPDPWSSD sums the int16 products of
// mins (0..15) and Bsums exactly, |summs| ≤ 16·15·2^15 < 2^24. Then, as in
// DotQ2K, dall = D·d and dmin' = D·dmin, A = dall·isum and B = dmin'·summs
// are each rounded to float32 (VMULPS, never FMA), t = A - B is rounded,
// and the token's accumulator takes sumf + t, blocks in order.

// Register use of the product kernels: SI points at the current packed
// block and CX counts the blocks left; DX = 292·nb is the token stride of
// y; DI, R8 and R9 point at the current activation block of tokens 0, 3
// and 6 of the group (the other tokens are addressed from these with DX
// scaled by 1, 2 or 4). Z0 holds a code vector, Z1 a min vector, Z2 and Z3
// the block's d and dmin, Z4 and Z5 are scratch, Z8..Z15 hold the int32
// isum accumulators (with Z6, Z7, Z22 and Z23 for groups of 5 and 6),
// Z16..Z23 the tokens' float32 sums and Z24..Z31 their int32 summs.

// PROLOGUE loads the arguments and clears the accumulators.
#define PROLOGUE \
	MOVQ   tile+0(FP), SI \
	MOVQ   y+8(FP), DI \
	MOVQ   nb+16(FP), CX \
	IMUL3Q $292, CX, DX \
	LEAQ   (DX)(DX*2), AX \
	LEAQ   (DI)(AX*1), R8 \
	LEAQ   (R8)(AX*1), R9 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15 \
	VPXORD Z16, Z16, Z16 \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	VPXORD Z20, Z20, Z20 \
	VPXORD Z21, Z21, Z21 \
	VPXORD Z22, Z22, Z22 \
	VPXORD Z23, Z23, Z23 \
	VPXORD Z24, Z24, Z24 \
	VPXORD Z25, Z25, Z25 \
	VPXORD Z26, Z26, Z26 \
	VPXORD Z27, Z27, Z27 \
	VPXORD Z28, Z28, Z28 \
	VPXORD Z29, Z29, Z29 \
	VPXORD Z30, Z30, Z30 \
	VPXORD Z31, Z31, Z31

// DOTn loads code vector k of the packed block and adds its products with
// activation dword k of tokens 0..n-1 to the accumulators A0..An-1.
#define DOT1(k, A0) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0

#define DOT2(k, A0, A1) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1

#define DOT3(k, A0, A1, A2) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*2), Z0, A2

#define DOT4(k, A0, A1, A2, A3) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*2), Z0, A2 \
	VPDPBUSD.BCST (4+4*(k))(R8), Z0, A3

#define DOT5(k, A0, A1, A2, A3, A4) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*2), Z0, A2 \
	VPDPBUSD.BCST (4+4*(k))(R8), Z0, A3 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*4), Z0, A4

#define DOT6(k, A0, A1, A2, A3, A4, A5) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*2), Z0, A2 \
	VPDPBUSD.BCST (4+4*(k))(R8), Z0, A3 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*4), Z0, A4 \
	VPDPBUSD.BCST (4+4*(k))(R8)(DX*2), Z0, A5

#define DOT7(k, A0, A1, A2, A3, A4, A5, A6) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*2), Z0, A2 \
	VPDPBUSD.BCST (4+4*(k))(R8), Z0, A3 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*4), Z0, A4 \
	VPDPBUSD.BCST (4+4*(k))(R8)(DX*2), Z0, A5 \
	VPDPBUSD.BCST (4+4*(k))(R9), Z0, A6

#define DOT8(k, A0, A1, A2, A3, A4, A5, A6, A7) \
	VMOVDQU64     (64*(k))(SI), Z0 \
	VPDPBUSD.BCST (4+4*(k))(DI), Z0, A0 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*1), Z0, A1 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*2), Z0, A2 \
	VPDPBUSD.BCST (4+4*(k))(R8), Z0, A3 \
	VPDPBUSD.BCST (4+4*(k))(DI)(DX*4), Z0, A4 \
	VPDPBUSD.BCST (4+4*(k))(R8)(DX*2), Z0, A5 \
	VPDPBUSD.BCST (4+4*(k))(R9), Z0, A6 \
	VPDPBUSD.BCST (4+4*(k))(R8)(DX*4), Z0, A7

// OCTn runs code vectors b..b+7 for a group of n tokens, cycling through
// its sets of n accumulators.
#define OCT1(b) \
	DOT1(b+0, Z8) \
	DOT1(b+1, Z9) \
	DOT1(b+2, Z10) \
	DOT1(b+3, Z11) \
	DOT1(b+4, Z12) \
	DOT1(b+5, Z13) \
	DOT1(b+6, Z14) \
	DOT1(b+7, Z15)

#define OCT2(b) \
	DOT2(b+0, Z8, Z9) \
	DOT2(b+1, Z10, Z11) \
	DOT2(b+2, Z12, Z13) \
	DOT2(b+3, Z14, Z15) \
	DOT2(b+4, Z8, Z9) \
	DOT2(b+5, Z10, Z11) \
	DOT2(b+6, Z12, Z13) \
	DOT2(b+7, Z14, Z15)

#define OCT3(b) \
	DOT3(b+0, Z8, Z9, Z10) \
	DOT3(b+1, Z11, Z12, Z13) \
	DOT3(b+2, Z8, Z9, Z10) \
	DOT3(b+3, Z11, Z12, Z13) \
	DOT3(b+4, Z8, Z9, Z10) \
	DOT3(b+5, Z11, Z12, Z13) \
	DOT3(b+6, Z8, Z9, Z10) \
	DOT3(b+7, Z11, Z12, Z13)

#define OCT4(b) \
	DOT4(b+0, Z8, Z9, Z10, Z11) \
	DOT4(b+1, Z12, Z13, Z14, Z15) \
	DOT4(b+2, Z8, Z9, Z10, Z11) \
	DOT4(b+3, Z12, Z13, Z14, Z15) \
	DOT4(b+4, Z8, Z9, Z10, Z11) \
	DOT4(b+5, Z12, Z13, Z14, Z15) \
	DOT4(b+6, Z8, Z9, Z10, Z11) \
	DOT4(b+7, Z12, Z13, Z14, Z15)

#define OCT5(b) \
	DOT5(b+0, Z8, Z9, Z10, Z11, Z12) \
	DOT5(b+1, Z13, Z14, Z15, Z6, Z7) \
	DOT5(b+2, Z8, Z9, Z10, Z11, Z12) \
	DOT5(b+3, Z13, Z14, Z15, Z6, Z7) \
	DOT5(b+4, Z8, Z9, Z10, Z11, Z12) \
	DOT5(b+5, Z13, Z14, Z15, Z6, Z7) \
	DOT5(b+6, Z8, Z9, Z10, Z11, Z12) \
	DOT5(b+7, Z13, Z14, Z15, Z6, Z7)

#define OCT6(b) \
	DOT6(b+0, Z8, Z9, Z10, Z11, Z12, Z13) \
	DOT6(b+1, Z14, Z15, Z6, Z7, Z22, Z23) \
	DOT6(b+2, Z8, Z9, Z10, Z11, Z12, Z13) \
	DOT6(b+3, Z14, Z15, Z6, Z7, Z22, Z23) \
	DOT6(b+4, Z8, Z9, Z10, Z11, Z12, Z13) \
	DOT6(b+5, Z14, Z15, Z6, Z7, Z22, Z23) \
	DOT6(b+6, Z8, Z9, Z10, Z11, Z12, Z13) \
	DOT6(b+7, Z14, Z15, Z6, Z7, Z22, Z23)

#define OCT7(b) \
	DOT7(b+0, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+1, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+2, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+3, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+4, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+5, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+6, Z8, Z9, Z10, Z11, Z12, Z13, Z14) \
	DOT7(b+7, Z8, Z9, Z10, Z11, Z12, Z13, Z14)

#define OCT8(b) \
	DOT8(b+0, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+1, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+2, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+3, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+4, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+5, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+6, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15) \
	DOT8(b+7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)

// CODES runs all 64 code vectors of the block with OCT = OCTn.
#define CODES(OCT) \
	OCT(0) OCT(8) OCT(16) OCT(24) OCT(32) OCT(40) OCT(48) OCT(56)

// MINn loads min vector p of the packed block and adds its products with
// the Bsums pair p of tokens 0..n-1 to Z24..Z24+n-1.
#define MIN1(p) \
	VMOVDQU64     (4096+64*(p))(SI), Z1 \
	VPDPWSSD.BCST (260+4*(p))(DI), Z1, Z24

#define MIN2(p) \
	MIN1(p) \
	VPDPWSSD.BCST (260+4*(p))(DI)(DX*1), Z1, Z25

#define MIN3(p) \
	MIN2(p) \
	VPDPWSSD.BCST (260+4*(p))(DI)(DX*2), Z1, Z26

#define MIN4(p) \
	MIN3(p) \
	VPDPWSSD.BCST (260+4*(p))(R8), Z1, Z27

#define MIN5(p) \
	MIN4(p) \
	VPDPWSSD.BCST (260+4*(p))(DI)(DX*4), Z1, Z28

#define MIN6(p) \
	MIN5(p) \
	VPDPWSSD.BCST (260+4*(p))(R8)(DX*2), Z1, Z29

#define MIN7(p) \
	MIN6(p) \
	VPDPWSSD.BCST (260+4*(p))(R9), Z1, Z30

#define MIN8(p) \
	MIN7(p) \
	VPDPWSSD.BCST (260+4*(p))(R8)(DX*4), Z1, Z31

// BLOCK sums the packed block's isum and summs for every token of the
// group, OCT and MIN being OCTn and MINn, and loads the rows' d and dmin.
#define BLOCK(OCT, MIN) \
	CODES(OCT) \
	MIN(0) MIN(1) MIN(2) MIN(3) MIN(4) MIN(5) MIN(6) MIN(7) \
	VMOVUPS 4608(SI), Z2 \
	VMOVUPS 4672(SI), Z3

// ADD adds accumulator B into A and clears B.
#define ADD(A, B) \
	VPADDD B, A, A \
	VPXORD B, B, B

// TERM finishes a block for token t, whose activation block is at XM (its
// D first), with isum in I and summs in Z24+t: it adds
// (D·d)·isum - (D·dmin)·summs to its float sums Z16+t with DotQ2K's
// roundings, and clears I and the summs for the next block.
#define TERM(XM, I, M, F) \
	VCVTDQ2PS   I, I \
	VCVTDQ2PS   M, M \
	VMULPS.BCST XM, Z2, Z4 \
	VMULPS      I, Z4, Z4 \
	VMULPS.BCST XM, Z3, Z5 \
	VMULPS      M, Z5, Z5 \
	VSUBPS      Z5, Z4, Z4 \
	VADDPS      Z4, F, F \
	VPXORD      I, I, I \
	VPXORD      M, M, M

// NEXT moves SI and the activation pointers to the next block and loops
// to L while blocks are left.
#define NEXT(L) \
	ADDQ $4736, SI \
	ADDQ $292, DI \
	ADDQ $292, R8 \
	ADDQ $292, R9 \
	DECQ CX \
	JNZ  L

// func q2KTile8AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile8AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop8:
	BLOCK(OCT8, MIN8)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	TERM((DI)(DX*2), Z10, Z26, Z18)
	TERM((R8), Z11, Z27, Z19)
	TERM((DI)(DX*4), Z12, Z28, Z20)
	TERM((R8)(DX*2), Z13, Z29, Z21)
	TERM((R9), Z14, Z30, Z22)
	TERM((R8)(DX*4), Z15, Z31, Z23)
	NEXT(loop8)

	MOVQ    out+24(FP), AX
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

// func q2KTile7AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile7AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop7:
	BLOCK(OCT7, MIN7)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	TERM((DI)(DX*2), Z10, Z26, Z18)
	TERM((R8), Z11, Z27, Z19)
	TERM((DI)(DX*4), Z12, Z28, Z20)
	TERM((R8)(DX*2), Z13, Z29, Z21)
	TERM((R9), Z14, Z30, Z22)
	NEXT(loop7)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VMOVUPS Z20, 256(AX)
	VMOVUPS Z21, 320(AX)
	VMOVUPS Z22, 384(AX)
	VZEROUPPER
	RET

// func q2KTile6AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile6AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop6:
	BLOCK(OCT6, MIN6)
	ADD(Z8, Z14)
	ADD(Z9, Z15)
	ADD(Z10, Z6)
	ADD(Z11, Z7)
	ADD(Z12, Z22)
	ADD(Z13, Z23)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	TERM((DI)(DX*2), Z10, Z26, Z18)
	TERM((R8), Z11, Z27, Z19)
	TERM((DI)(DX*4), Z12, Z28, Z20)
	TERM((R8)(DX*2), Z13, Z29, Z21)
	NEXT(loop6)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VMOVUPS Z20, 256(AX)
	VMOVUPS Z21, 320(AX)
	VZEROUPPER
	RET

// func q2KTile5AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile5AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop5:
	BLOCK(OCT5, MIN5)
	ADD(Z8, Z13)
	ADD(Z9, Z14)
	ADD(Z10, Z15)
	ADD(Z11, Z6)
	ADD(Z12, Z7)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	TERM((DI)(DX*2), Z10, Z26, Z18)
	TERM((R8), Z11, Z27, Z19)
	TERM((DI)(DX*4), Z12, Z28, Z20)
	NEXT(loop5)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VMOVUPS Z20, 256(AX)
	VZEROUPPER
	RET

// func q2KTile4AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile4AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop4:
	BLOCK(OCT4, MIN4)
	ADD(Z8, Z12)
	ADD(Z9, Z13)
	ADD(Z10, Z14)
	ADD(Z11, Z15)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	TERM((DI)(DX*2), Z10, Z26, Z18)
	TERM((R8), Z11, Z27, Z19)
	NEXT(loop4)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	VZEROUPPER
	RET

// func q2KTile3AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile3AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop3:
	BLOCK(OCT3, MIN3)
	ADD(Z8, Z11)
	ADD(Z9, Z12)
	ADD(Z10, Z13)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	TERM((DI)(DX*2), Z10, Z26, Z18)
	NEXT(loop3)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VZEROUPPER
	RET

// func q2KTile2AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile2AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop2:
	BLOCK(OCT2, MIN2)
	ADD(Z8, Z10)
	ADD(Z9, Z11)
	ADD(Z12, Z14)
	ADD(Z13, Z15)
	ADD(Z8, Z12)
	ADD(Z9, Z13)
	TERM((DI), Z8, Z24, Z16)
	TERM((DI)(DX*1), Z9, Z25, Z17)
	NEXT(loop2)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VMOVUPS Z17, 64(AX)
	VZEROUPPER
	RET

// func q2KTile1AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile1AVX512(SB), NOSPLIT, $0-32
	PROLOGUE

loop1:
	BLOCK(OCT1, MIN1)
	ADD(Z8, Z9)
	ADD(Z10, Z11)
	ADD(Z12, Z13)
	ADD(Z14, Z15)
	ADD(Z8, Z10)
	ADD(Z12, Z14)
	ADD(Z8, Z12)
	TERM((DI), Z8, Z24, Z16)
	NEXT(loop1)

	MOVQ    out+24(FP), AX
	VMOVUPS Z16, 0(AX)
	VZEROUPPER
	RET

// The pack. Per block it transposes the rows' 21 dwords so that dword i
// of a vector is row i's, with no gather (five VPGATHERDD a block took
// 45% of the pack's time on Zen 5). The 16 scale bytes and the dword of d
// and dmin come in 16 bytes a row, four rows a, a+4, a+8, a+12 to a ZMM
// (a load and three inserts; merge-masked loads instead of the inserts
// were 10% slower), and one in-lane 4×4 dword transpose (eight
// unpacks, three for d and dmin, whose dword is the last of its 16 bytes)
// leaves the scale dwords T_0..T_3 and the d and dmin dword. The mins are
// split off with a shift and a mask and widened to int16 pairs by VPSHUFB;
// the scales are masked to their low nibbles. The 64 code bytes of a row
// are one ZMM, and a 16×16 dword transpose (in-lane 4×4 transposes of four
// rows at a time, then a 4×4 transpose of their 128-bit lanes: 64
// shuffles) gives the vectors Q_c (c < 16) whose dword i holds row i's code
// bytes 4c..4c+3. Code vector k = 32h+8j+c (c < 8) of the tile is then
// ((Q_{8h+c} >> 2j) & 3) times the scale of sub-block g = 8h+2j+c/4: a
// VPSHUFB copies each row's scale byte g into both words of its dword, and
// one VPMULLW scales two codes per word, since q·s ≤ 45 leaves no carry
// into the high byte. Three vector ops and a store per code vector (two
// for j = 0) are the bulk of the work. On Zen 5 a block takes about 42 ns,
// 3.3 tokens' worth of the product kernels' work; the 74 stores of
// a 4736-byte packed block cost about a third of it. Taking the shifts
// out of j = 2 and 3 (a mask and VPMULHUW by s·2^(16-2j)) gained nothing
// measurable.

// q2kLow2 and q2kLow4 are the byte masks of a 2-bit code and of a nibble.
DATA q2kLow2<>+0(SB)/4, $0x03030303
GLOBL q2kLow2<>(SB), RODATA|NOPTR, $4

DATA q2kLow4<>+0(SB)/4, $0x0f0f0f0f
GLOBL q2kLow4<>(SB), RODATA|NOPTR, $4

// q2kScaleB (B < 4) are VPSHUFB controls that copy byte B of each dword
// into both of its words, zero-extended.
DATA q2kScale0<>+0(SB)/8, $0x8004800480008000
DATA q2kScale0<>+8(SB)/8, $0x800c800c80088008
DATA q2kScale0<>+16(SB)/8, $0x8004800480008000
DATA q2kScale0<>+24(SB)/8, $0x800c800c80088008
DATA q2kScale0<>+32(SB)/8, $0x8004800480008000
DATA q2kScale0<>+40(SB)/8, $0x800c800c80088008
DATA q2kScale0<>+48(SB)/8, $0x8004800480008000
DATA q2kScale0<>+56(SB)/8, $0x800c800c80088008
GLOBL q2kScale0<>(SB), RODATA|NOPTR, $64

DATA q2kScale1<>+0(SB)/8, $0x8005800580018001
DATA q2kScale1<>+8(SB)/8, $0x800d800d80098009
DATA q2kScale1<>+16(SB)/8, $0x8005800580018001
DATA q2kScale1<>+24(SB)/8, $0x800d800d80098009
DATA q2kScale1<>+32(SB)/8, $0x8005800580018001
DATA q2kScale1<>+40(SB)/8, $0x800d800d80098009
DATA q2kScale1<>+48(SB)/8, $0x8005800580018001
DATA q2kScale1<>+56(SB)/8, $0x800d800d80098009
GLOBL q2kScale1<>(SB), RODATA|NOPTR, $64

DATA q2kScale2<>+0(SB)/8, $0x8006800680028002
DATA q2kScale2<>+8(SB)/8, $0x800e800e800a800a
DATA q2kScale2<>+16(SB)/8, $0x8006800680028002
DATA q2kScale2<>+24(SB)/8, $0x800e800e800a800a
DATA q2kScale2<>+32(SB)/8, $0x8006800680028002
DATA q2kScale2<>+40(SB)/8, $0x800e800e800a800a
DATA q2kScale2<>+48(SB)/8, $0x8006800680028002
DATA q2kScale2<>+56(SB)/8, $0x800e800e800a800a
GLOBL q2kScale2<>(SB), RODATA|NOPTR, $64

DATA q2kScale3<>+0(SB)/8, $0x8007800780038003
DATA q2kScale3<>+8(SB)/8, $0x800f800f800b800b
DATA q2kScale3<>+16(SB)/8, $0x8007800780038003
DATA q2kScale3<>+24(SB)/8, $0x800f800f800b800b
DATA q2kScale3<>+32(SB)/8, $0x8007800780038003
DATA q2kScale3<>+40(SB)/8, $0x800f800f800b800b
DATA q2kScale3<>+48(SB)/8, $0x8007800780038003
DATA q2kScale3<>+56(SB)/8, $0x800f800f800b800b
GLOBL q2kScale3<>(SB), RODATA|NOPTR, $64

// q2kMinLo and q2kMinHi are VPSHUFB controls that widen bytes 0 and 1
// (q2kMinLo) or 2 and 3 (q2kMinHi) of each dword to its two words.
DATA q2kMinLo<>+0(SB)/8, $0x8005800480018000
DATA q2kMinLo<>+8(SB)/8, $0x800d800c80098008
DATA q2kMinLo<>+16(SB)/8, $0x8005800480018000
DATA q2kMinLo<>+24(SB)/8, $0x800d800c80098008
DATA q2kMinLo<>+32(SB)/8, $0x8005800480018000
DATA q2kMinLo<>+40(SB)/8, $0x800d800c80098008
DATA q2kMinLo<>+48(SB)/8, $0x8005800480018000
DATA q2kMinLo<>+56(SB)/8, $0x800d800c80098008
GLOBL q2kMinLo<>(SB), RODATA|NOPTR, $64

DATA q2kMinHi<>+0(SB)/8, $0x8007800680038002
DATA q2kMinHi<>+8(SB)/8, $0x800f800e800b800a
DATA q2kMinHi<>+16(SB)/8, $0x8007800680038002
DATA q2kMinHi<>+24(SB)/8, $0x800f800e800b800a
DATA q2kMinHi<>+32(SB)/8, $0x8007800680038002
DATA q2kMinHi<>+40(SB)/8, $0x800f800e800b800a
DATA q2kMinHi<>+48(SB)/8, $0x8007800680038002
DATA q2kMinHi<>+56(SB)/8, $0x800f800e800b800a
GLOBL q2kMinHi<>(SB), RODATA|NOPTR, $64

// Register use of the pack: SI points at the current block of row 0, DI at
// the current packed block, DX = rowBytes, R11 = 3·rowBytes, R12 =
// 4·rowBytes and R13 = 12·rowBytes, CX counts the blocks left and AX walks
// the rows. Z0..Z15 hold the code dwords Q_0..Q_15, Z24..Z27 the masked
// scales T_0..T_3 and Z28 the code mask; the others are scratch.

// QUAD loads the 16 bytes at OFF of rows a (from AX), a+4, a+8 and a+12
// into the lanes of ZR, and moves AX to row a+1.
#define QUAD(OFF, XR, ZR) \
	VMOVDQU      OFF(AX), XR \
	VINSERTI32X4 $1, OFF(AX)(R12*1), ZR, ZR \
	VINSERTI32X4 $2, OFF(AX)(R12*2), ZR, ZR \
	VINSERTI32X4 $3, OFF(AX)(R13*1), ZR, ZR \
	ADDQ         DX, AX

// MINS writes the two min vectors of the four scale bytes of the rows'
// dwords in T to OFF0 and OFF1 of the packed block.
#define MINS(T, OFF0, OFF1) \
	VPSRLD      $4, T, Z16 \
	VPANDD.BCST q2kLow4<>(SB), Z16, Z16 \
	VPSHUFB     q2kMinLo<>(SB), Z16, Z17 \
	VMOVDQU64   Z17, OFF0(DI) \
	VPSHUFB     q2kMinHi<>(SB), Z16, Z17 \
	VMOVDQU64   Z17, OFF1(DI)

// ROWS4 loads the code bytes of rows 4g..4g+3 (from AX) and transposes
// each 128-bit lane: lane L of Vc holds dword 4L+c of the four rows. It
// moves AX to row 4g+4.
#define ROWS4(V0, V1, V2, V3) \
	VMOVDQU64   16(AX), Z16 \
	VMOVDQU64   16(AX)(DX*1), Z17 \
	VMOVDQU64   16(AX)(DX*2), Z18 \
	VMOVDQU64   16(AX)(R11*1), Z19 \
	ADDQ        R12, AX \
	VPUNPCKLDQ  Z17, Z16, Z20 \
	VPUNPCKHDQ  Z17, Z16, Z21 \
	VPUNPCKLDQ  Z19, Z18, Z22 \
	VPUNPCKHDQ  Z19, Z18, Z23 \
	VPUNPCKLQDQ Z22, Z20, V0 \
	VPUNPCKHQDQ Z22, Z20, V1 \
	VPUNPCKLQDQ Z23, Z21, V2 \
	VPUNPCKHQDQ Z23, Z21, V3

// LANES transposes the 128-bit lanes of the vectors Vc of the four groups
// of rows, A, B, C and D, which become Q_c, Q_{4+c}, Q_{8+c} and
// Q_{12+c}.
#define LANES(A, B, C, D) \
	VSHUFI32X4 $0x44, B, A, Z16 \
	VSHUFI32X4 $0xee, B, A, Z17 \
	VSHUFI32X4 $0x44, D, C, Z18 \
	VSHUFI32X4 $0xee, D, C, Z19 \
	VSHUFI32X4 $0x88, Z18, Z16, A \
	VSHUFI32X4 $0xdd, Z18, Z16, B \
	VSHUFI32X4 $0x88, Z19, Z17, C \
	VSHUFI32X4 $0xdd, Z19, Z17, D

// CODE0 writes code vector k: the codes of bits 0..1 of Q times the
// scales S. CODE does so for the codes of bits sh..sh+1.
#define CODE0(Q, S, k) \
	VPANDD    Z28, Q, Z22 \
	VPMULLW   S, Z22, Z22 \
	VMOVDQU64 Z22, (64*(k))(DI)

#define CODE(sh, Q, S, k) \
	VPSRLD    $sh, Q, Z22 \
	VPANDD    Z28, Z22, Z22 \
	VPMULLW   S, Z22, Z22 \
	VMOVDQU64 Z22, (64*(k))(DI)

// JROW0 writes the eight code vectors 32h..32h+7 (j = 0) of half h from
// the code dwords Q0..Q7 of the half and the scales T of its sub-blocks
// 8h..8h+3; JROW writes those of j = 1..3, shifting by sh = 2j, C0 and C1
// picking the scales of the two sub-blocks from T.
#define JROW0(h, T, Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7) \
	VPSHUFB q2kScale0<>(SB), T, Z20 \
	CODE0(Q0, Z20, 32*(h)+0) \
	CODE0(Q1, Z20, 32*(h)+1) \
	CODE0(Q2, Z20, 32*(h)+2) \
	CODE0(Q3, Z20, 32*(h)+3) \
	VPSHUFB q2kScale1<>(SB), T, Z21 \
	CODE0(Q4, Z21, 32*(h)+4) \
	CODE0(Q5, Z21, 32*(h)+5) \
	CODE0(Q6, Z21, 32*(h)+6) \
	CODE0(Q7, Z21, 32*(h)+7)

#define JROW(h, j, sh, T, C0, C1, Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7) \
	VPSHUFB C0, T, Z20 \
	CODE(sh, Q0, Z20, 32*(h)+8*(j)+0) \
	CODE(sh, Q1, Z20, 32*(h)+8*(j)+1) \
	CODE(sh, Q2, Z20, 32*(h)+8*(j)+2) \
	CODE(sh, Q3, Z20, 32*(h)+8*(j)+3) \
	VPSHUFB C1, T, Z21 \
	CODE(sh, Q4, Z21, 32*(h)+8*(j)+4) \
	CODE(sh, Q5, Z21, 32*(h)+8*(j)+5) \
	CODE(sh, Q6, Z21, 32*(h)+8*(j)+6) \
	CODE(sh, Q7, Z21, 32*(h)+8*(j)+7)

// HALF writes code vectors 32h..32h+31 from the code dwords Q0..Q7 of half
// h and its scale dwords TL = T_{2h} and TH = T_{2h+1}.
#define HALF(h, TL, TH, Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7) \
	JROW0(h, TL, Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7) \
	JROW(h, 1, 2, TL, q2kScale2<>(SB), q2kScale3<>(SB), Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7) \
	JROW(h, 2, 4, TH, q2kScale0<>(SB), q2kScale1<>(SB), Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7) \
	JROW(h, 3, 6, TH, q2kScale2<>(SB), q2kScale3<>(SB), Q0, Q1, Q2, Q3, Q4, Q5, Q6, Q7)

// func packQ2KTileAVX512Asm(dst, w []byte, rowBytes, nb int)
TEXT ·packQ2KTileAVX512Asm(SB), NOSPLIT, $0-64
	MOVQ         dst_base+0(FP), DI
	MOVQ         w_base+24(FP), SI
	MOVQ         rowBytes+48(FP), DX
	MOVQ         nb+56(FP), CX
	LEAQ         (DX)(DX*2), R11
	LEAQ         (DX*4), R12
	LEAQ         (R11*4), R13
	VPBROADCASTD q2kLow2<>(SB), Z28

packloop:
	// The scale dwords T_0..T_3 into Z24..Z27.
	MOVQ        SI, AX
	QUAD(0, X0, Z0)
	QUAD(0, X1, Z1)
	QUAD(0, X2, Z2)
	QUAD(0, X3, Z3)
	VPUNPCKLDQ  Z1, Z0, Z4
	VPUNPCKHDQ  Z1, Z0, Z5
	VPUNPCKLDQ  Z3, Z2, Z6
	VPUNPCKHDQ  Z3, Z2, Z7
	VPUNPCKLQDQ Z6, Z4, Z24
	VPUNPCKHQDQ Z6, Z4, Z25
	VPUNPCKLQDQ Z7, Z5, Z26
	VPUNPCKHQDQ Z7, Z5, Z27

	// d and dmin: the last dword of bytes 68..83 of each row's block.
	MOVQ        SI, AX
	QUAD(68, X0, Z0)
	QUAD(68, X1, Z1)
	QUAD(68, X2, Z2)
	QUAD(68, X3, Z3)
	VPUNPCKHDQ  Z1, Z0, Z5
	VPUNPCKHDQ  Z3, Z2, Z7
	VPUNPCKHQDQ Z7, Z5, Z1
	VPMOVDW     Z1, Y0
	VCVTPH2PS   Y0, Z0
	VMOVUPS     Z0, 4608(DI)
	VPSRLD      $16, Z1, Z1
	VPMOVDW     Z1, Y1
	VCVTPH2PS   Y1, Z1
	VMOVUPS     Z1, 4672(DI)

	MINS(Z24, 4096, 4160)
	MINS(Z25, 4224, 4288)
	MINS(Z26, 4352, 4416)
	MINS(Z27, 4480, 4544)
	VPANDD.BCST q2kLow4<>(SB), Z24, Z24
	VPANDD.BCST q2kLow4<>(SB), Z25, Z25
	VPANDD.BCST q2kLow4<>(SB), Z26, Z26
	VPANDD.BCST q2kLow4<>(SB), Z27, Z27

	// The code dwords Q_0..Q_15 into Z0..Z15.
	MOVQ  SI, AX
	ROWS4(Z0, Z1, Z2, Z3)
	ROWS4(Z4, Z5, Z6, Z7)
	ROWS4(Z8, Z9, Z10, Z11)
	ROWS4(Z12, Z13, Z14, Z15)
	LANES(Z0, Z4, Z8, Z12)
	LANES(Z1, Z5, Z9, Z13)
	LANES(Z2, Z6, Z10, Z14)
	LANES(Z3, Z7, Z11, Z15)

	HALF(0, Z24, Z25, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	HALF(1, Z26, Z27, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	ADDQ  $84, SI
	ADDQ  $4736, DI
	DECQ  CX
	JNZ   packloop

	VZEROUPPER
	RET
