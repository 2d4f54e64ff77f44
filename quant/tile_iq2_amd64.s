//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// The AVX-512 bodies of the IQ2_XXS tile kernels of tile_iq2_amd64.go: the
// pack of 16 rows into the layout tile_iq2.go describes, and the products
// of a packed tile with groups of 1 to 8 tokens. They need AVX512F,
// BW, VL, VNNI, VBMI and GFNI.
//
// Why the products are fast. As in the Q8_0 tile kernels (tile_amd64.s)
// the int32 lanes of a ZMM are the tile's 16 rows: one VPDPBUSD multiplies
// four expanded weights of all 16 rows by four activation codes broadcast
// from memory ({1to16}), 64 useful multiply-adds with no horizontal
// reduction and no decoding, which the row kernels (dot_iq2_avx512_amd64.s)
// redo for every four tokens. A code vector is loaded once per group and
// serves the up to eight tokens of a token group, whose dependency chains
// interleave. On Zen 5 the kernel for eight tokens does about 600 Gop/s,
// as fast as the Q8_0 tile kernel: per token and group the eight VPDPBUSD
// come with only a VPMULLD and a VPADDD (the bias term is a broadcast
// load).
//
// Numerics. Per group g of 32 elements a token's lanes start from the bias
// term -64·(Bsums[2g]+Bsums[2g+1]) (formed once per block by VPMADDWD and
// broadcast from the frame) and add Σ(w+64)·q with eight VPDPBUSD: that is
// the exact Σw·q, at most 32·43·128 in magnitude. VPMULLD by the rows'
// 2ls+1 and VPADDD give the block's exact int32 sum bsum, DotIQ2XXS's.
// Then, as there, float32(bsum), (f16(d)·D) and that times float32(bsum)
// are each rounded to float32 (VCVTDQ2PS, VMULPS, never FMA) and added to
// the token's float32 sum block by block in order, and the sum is finally
// multiplied by 0.125: the bits of DotIQ2XXS.

// iq2tNeg64 holds 16 int16 -64: VPMADDWD with a block's Bsums makes the
// eight groups' bias terms -64·(Bsums[2g]+Bsums[2g+1]).
DATA iq2tNeg64<>+0(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2tNeg64<>+8(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2tNeg64<>+16(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2tNeg64<>+24(SB)/8, $0xffc0ffc0ffc0ffc0
GLOBL iq2tNeg64<>(SB), RODATA|NOPTR, $32

// Register use of the product kernels: SI points at the current packed
// block, DI, R8 and R9 at the current activation block of tokens 0, 3 and
// 6 of the token group (the others are addressed from these with DX = 292·nb,
// the token stride, scaled by 1, 2 or 4), CX counts the blocks left; Z0..Z7
// hold a group's code vectors, Z8..Z15 the tokens' group sums, Z16..Z23
// their block sums bsum and Z24..Z31 their float32 sums. The frame holds
// the block's bias terms, 32 bytes a token, from R12 (SP rounded up to 32
// bytes).

// DOTn loads code vector k of group g of the packed block into W and adds
// its products with activation dword 8g+k of each of tokens 0..n-1 to
// Z8..Z(7+n).
#define DOT1(g, k, W) \
	VMOVDQU64     (576*g+64*k)(SI), W \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(DI), W, Z8

#define DOT2(g, k, W) \
	DOT1(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(DI)(DX*1), W, Z9

#define DOT3(g, k, W) \
	DOT2(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(DI)(DX*2), W, Z10

#define DOT4(g, k, W) \
	DOT3(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(R8), W, Z11

#define DOT5(g, k, W) \
	DOT4(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(DI)(DX*4), W, Z12

#define DOT6(g, k, W) \
	DOT5(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(R8)(DX*2), W, Z13

#define DOT7(g, k, W) \
	DOT6(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(R9), W, Z14

#define DOT8(g, k, W) \
	DOT7(g, k, W) \
	VPDPBUSD.BCST (BlockQ8K_Qs+32*g+4*k)(R8)(DX*4), W, Z15

// BIAS stores the bias terms of the activation block at BM in the frame at
// off and clears the token's block sum B; BIASn does so for tokens 0..n-1.
#define BIAS(BM, off, B) \
	VMOVDQU  BM, Y0 \
	VPMADDWD iq2tNeg64<>(SB), Y0, Y0 \
	VMOVDQU  Y0, off(R12) \
	VPXORD   B, B, B

#define BIAS0
#define BIAS1 \
	BIAS0 \
	BIAS(BlockQ8K_Bsums(DI), 0, Z16)

#define BIAS2 \
	BIAS1 \
	BIAS(BlockQ8K_Bsums(DI)(DX*1), 32, Z17)

#define BIAS3 \
	BIAS2 \
	BIAS(BlockQ8K_Bsums(DI)(DX*2), 64, Z18)

#define BIAS4 \
	BIAS3 \
	BIAS(BlockQ8K_Bsums(R8), 96, Z19)

#define BIAS5 \
	BIAS4 \
	BIAS(BlockQ8K_Bsums(DI)(DX*4), 128, Z20)

#define BIAS6 \
	BIAS5 \
	BIAS(BlockQ8K_Bsums(R8)(DX*2), 160, Z21)

#define BIAS7 \
	BIAS6 \
	BIAS(BlockQ8K_Bsums(R9), 192, Z22)

#define BIAS8 \
	BIAS7 \
	BIAS(BlockQ8K_Bsums(R8)(DX*4), 224, Z23)

// INIT starts a token's group sum A from its bias term of group g; FOLD
// scales it by the rows' multipliers of group g and adds it to the block
// sum B. INITn and FOLDn do so for tokens 0..n-1.
#define INIT(g, t, A) \
	VPBROADCASTD (32*t+4*g)(R12), A

#define FOLD(g, A, B) \
	VPMULLD (576*g+512)(SI), A, A \
	VPADDD  A, B, B

#define INIT0(g)
#define FOLD0(g)
#define INIT1(g) \
	INIT0(g) \
	INIT(g, 0, Z8)

#define FOLD1(g) \
	FOLD0(g) \
	FOLD(g, Z8, Z16)

#define INIT2(g) \
	INIT1(g) \
	INIT(g, 1, Z9)

#define FOLD2(g) \
	FOLD1(g) \
	FOLD(g, Z9, Z17)

#define INIT3(g) \
	INIT2(g) \
	INIT(g, 2, Z10)

#define FOLD3(g) \
	FOLD2(g) \
	FOLD(g, Z10, Z18)

#define INIT4(g) \
	INIT3(g) \
	INIT(g, 3, Z11)

#define FOLD4(g) \
	FOLD3(g) \
	FOLD(g, Z11, Z19)

#define INIT5(g) \
	INIT4(g) \
	INIT(g, 4, Z12)

#define FOLD5(g) \
	FOLD4(g) \
	FOLD(g, Z12, Z20)

#define INIT6(g) \
	INIT5(g) \
	INIT(g, 5, Z13)

#define FOLD6(g) \
	FOLD5(g) \
	FOLD(g, Z13, Z21)

#define INIT7(g) \
	INIT6(g) \
	INIT(g, 6, Z14)

#define FOLD7(g) \
	FOLD6(g) \
	FOLD(g, Z14, Z22)

#define INIT8(g) \
	INIT7(g) \
	INIT(g, 7, Z15)

#define FOLD8(g) \
	FOLD7(g) \
	FOLD(g, Z15, Z23)

// GROUP adds group g of the packed block to the tokens' block sums, n being
// 8, 4, 2 or 1.
#define GROUP(g, INITn, DOTn, FOLDn) \
	INITn(g) \
	DOTn(g, 0, Z0) \
	DOTn(g, 1, Z1) \
	DOTn(g, 2, Z2) \
	DOTn(g, 3, Z3) \
	DOTn(g, 4, Z4) \
	DOTn(g, 5, Z5) \
	DOTn(g, 6, Z6) \
	DOTn(g, 7, Z7) \
	FOLDn(g)

#define BLOCK(INITn, DOTn, FOLDn) \
	GROUP(0, INITn, DOTn, FOLDn) \
	GROUP(1, INITn, DOTn, FOLDn) \
	GROUP(2, INITn, DOTn, FOLDn) \
	GROUP(3, INITn, DOTn, FOLDn) \
	GROUP(4, INITn, DOTn, FOLDn) \
	GROUP(5, INITn, DOTn, FOLDn) \
	GROUP(6, INITn, DOTn, FOLDn) \
	GROUP(7, INITn, DOTn, FOLDn) \
	VMOVUPS 4608(SI), Z0

// TERM finishes a block for one token, whose activation block is at YM:
// it adds ((row scales)·D)·float32(B) to the float sum F, with DotIQ2XXS's
// roundings, using A as scratch. Z0 holds the row scales.
#define TERM(YM, A, B, F) \
	VCVTDQ2PS   B, B \
	VMULPS.BCST YM, Z0, A \
	VMULPS      B, A, A \
	VADDPS      A, F, F

#define TERM0
#define TERM1 \
	TERM0 \
	TERM(BlockQ8K_D(DI), Z8, Z16, Z24)

#define TERM2 \
	TERM1 \
	TERM(BlockQ8K_D(DI)(DX*1), Z9, Z17, Z25)

#define TERM3 \
	TERM2 \
	TERM(BlockQ8K_D(DI)(DX*2), Z10, Z18, Z26)

#define TERM4 \
	TERM3 \
	TERM(BlockQ8K_D(R8), Z11, Z19, Z27)

#define TERM5 \
	TERM4 \
	TERM(BlockQ8K_D(DI)(DX*4), Z12, Z20, Z28)

#define TERM6 \
	TERM5 \
	TERM(BlockQ8K_D(R8)(DX*2), Z13, Z21, Z29)

#define TERM7 \
	TERM6 \
	TERM(BlockQ8K_D(R9), Z14, Z22, Z30)

#define TERM8 \
	TERM7 \
	TERM(BlockQ8K_D(R8)(DX*4), Z15, Z23, Z31)

// PROLOGUE loads the arguments and sets DX, R8 and R9.
#define PROLOGUE \
	MOVQ   tile+0(FP), SI \
	MOVQ   y+8(FP), DI \
	MOVQ   nb+16(FP), CX \
	IMUL3Q $BlockQ8K__size, CX, DX \
	LEAQ   (DX)(DX*2), AX \
	LEAQ   (DI)(AX*1), R8 \
	LEAQ   (R8)(AX*1), R9

// STEP moves to the next block.
#define STEP \
	ADDQ $const_iq2xxsTileBlockBytes, SI \
	ADDQ $BlockQ8K__size, DI \
	ADDQ $BlockQ8K__size, R8 \
	ADDQ $BlockQ8K__size, R9

// EIGHTH leaves 0.125 in every lane of Z0 and the results' address in AX.
#define EIGHTH \
	MOVL         $0x3e000000, AX \
	VPBROADCASTD AX, Z0 \
	MOVQ         out+24(FP), AX

// func iq2xxsTile8AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile8AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31

loop8:
	BIAS8
	BLOCK(INIT8, DOT8, FOLD8)
	TERM8
	STEP
	DECQ CX
	JNZ  loop8

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VMULPS  Z0, Z26, Z26
	VMOVUPS Z26, 128(AX)
	VMULPS  Z0, Z27, Z27
	VMOVUPS Z27, 192(AX)
	VMULPS  Z0, Z28, Z28
	VMOVUPS Z28, 256(AX)
	VMULPS  Z0, Z29, Z29
	VMOVUPS Z29, 320(AX)
	VMULPS  Z0, Z30, Z30
	VMOVUPS Z30, 384(AX)
	VMULPS  Z0, Z31, Z31
	VMOVUPS Z31, 448(AX)
	VZEROUPPER
	RET

// func iq2xxsTile7AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile7AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30

loop7:
	BIAS7
	BLOCK(INIT7, DOT7, FOLD7)
	TERM7
	STEP
	DECQ CX
	JNZ  loop7

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VMULPS  Z0, Z26, Z26
	VMOVUPS Z26, 128(AX)
	VMULPS  Z0, Z27, Z27
	VMOVUPS Z27, 192(AX)
	VMULPS  Z0, Z28, Z28
	VMOVUPS Z28, 256(AX)
	VMULPS  Z0, Z29, Z29
	VMOVUPS Z29, 320(AX)
	VMULPS  Z0, Z30, Z30
	VMOVUPS Z30, 384(AX)
	VZEROUPPER
	RET

// func iq2xxsTile6AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile6AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29

loop6:
	BIAS6
	BLOCK(INIT6, DOT6, FOLD6)
	TERM6
	STEP
	DECQ CX
	JNZ  loop6

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VMULPS  Z0, Z26, Z26
	VMOVUPS Z26, 128(AX)
	VMULPS  Z0, Z27, Z27
	VMOVUPS Z27, 192(AX)
	VMULPS  Z0, Z28, Z28
	VMOVUPS Z28, 256(AX)
	VMULPS  Z0, Z29, Z29
	VMOVUPS Z29, 320(AX)
	VZEROUPPER
	RET

// func iq2xxsTile5AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile5AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28

loop5:
	BIAS5
	BLOCK(INIT5, DOT5, FOLD5)
	TERM5
	STEP
	DECQ CX
	JNZ  loop5

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VMULPS  Z0, Z26, Z26
	VMOVUPS Z26, 128(AX)
	VMULPS  Z0, Z27, Z27
	VMOVUPS Z27, 192(AX)
	VMULPS  Z0, Z28, Z28
	VMOVUPS Z28, 256(AX)
	VZEROUPPER
	RET

// func iq2xxsTile4AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile4AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27

loop4:
	BIAS4
	BLOCK(INIT4, DOT4, FOLD4)
	TERM4
	STEP
	DECQ CX
	JNZ  loop4

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VMULPS  Z0, Z26, Z26
	VMOVUPS Z26, 128(AX)
	VMULPS  Z0, Z27, Z27
	VMOVUPS Z27, 192(AX)
	VZEROUPPER
	RET

// func iq2xxsTile3AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile3AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26

loop3:
	BIAS3
	BLOCK(INIT3, DOT3, FOLD3)
	TERM3
	STEP
	DECQ CX
	JNZ  loop3

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VMULPS  Z0, Z26, Z26
	VMOVUPS Z26, 128(AX)
	VZEROUPPER
	RET

// func iq2xxsTile2AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile2AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25

loop2:
	BIAS2
	BLOCK(INIT2, DOT2, FOLD2)
	TERM2
	STEP
	DECQ CX
	JNZ  loop2

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VMULPS  Z0, Z25, Z25
	VMOVUPS Z25, 64(AX)
	VZEROUPPER
	RET

// func iq2xxsTile1AVX512(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile1AVX512(SB), NOSPLIT, $288-32
	LEAQ 31(SP), R12
	ANDQ $~31, R12
	PROLOGUE
	VPXORD Z24, Z24, Z24

loop1:
	BIAS1
	BLOCK(INIT1, DOT1, FOLD1)
	TERM1
	STEP
	DECQ CX
	JNZ  loop1

	EIGHTH
	VMULPS  Z0, Z24, Z24
	VMOVUPS Z24, 0(AX)
	VZEROUPPER
	RET

// The pack. Per block it first transposes the 16 rows' 64 bytes of grid
// indices and sign words (16 dwords a row) into 16 vectors of 16 rows and
// parks them in the frame: vector 2g holds every row's four grid indices
// of group g, vector 2g+1 its word a1. Merge-masked 128-bit broadcasts
// from memory put lane q of rows r, 4+r, 8+r and 12+r into one register,
// so that two unpack levels (32 shuffles) finish the transpose; the four
// levels of tile_amd64.s's pack (64 shuffles) took 6% longer in all here,
// where the shuffles seem to be the bottleneck. Then it expands each group for all 16
// rows at once, already in the packed layout, with no table load that
// depends on the data:
//
//   - Codes. As in dot_iq2_avx512_amd64.s the grid indices are looked up in
//     the 2-bit codes of ·iq2xxsAVX512Codes held in Z24..Z31: four
//     VPERMI2B, and two VPBLENDMB under the mask of the indices' bit 7
//     (VPMOVB2M) pick the table half. L and H get in byte l of dword i the
//     codes of elements 0..3 and 4..7 of grid row l of row i.
//   - Signs. One VPMULTISHIFTQB pulls the four 7-bit sign indices of each
//     row into bytes and one VGF2P8AFFINEQB appends their parity (bit 7):
//     S gets in byte l of dword i row i's sign byte l, and one VPSHUFB per
//     l copies that byte to all four bytes of the dword.
//   - Weights. Code vector k = 2l+h takes in byte j of dword i the code of
//     element 4h+j of grid row l (one VPMULTISHIFTQB of L or H), maps it to
//     64+magnitude (one VPERMB from a 64-byte table that ignores the bits
//     above the code), and where VPTESTMB finds the element's sign bit set
//     replaces that by 128-(64+magnitude) = 64-magnitude (a masked VPSUBB).
//     Two shuffles an output vector, and no GF(2) affine map: on Zen 5 the
//     variants that merged the sign bit into the VPERMB index (a second
//     VPMULTISHIFTQB and a VPTERNLOGQ) or mapped codes with VGF2P8AFFINEQB
//     made the whole pack 10 to 25% slower, and selecting the table halves
//     with VGF2P8AFFINEQB and VPTERNLOGQ instead of VPBLENDMB a few percent.
//   - Multipliers. (a1>>27)|1 is 2ls+1.
//
// The 16 scales come in with one gather, as in the Q8_0 pack. A block
// takes about 65 ns on Zen 5, as long as the tile kernel takes for five
// tokens; the tile it writes is 4.4 times the rows' size, and writing it
// to L1 only (an experiment) saved a fifth of that.

// iq2tIota is 0..15; times rowBytes, the rows' offsets for the scale gather.
DATA iq2tIota<>+0(SB)/8, $0x0000000100000000
DATA iq2tIota<>+8(SB)/8, $0x0000000300000002
DATA iq2tIota<>+16(SB)/8, $0x0000000500000004
DATA iq2tIota<>+24(SB)/8, $0x0000000700000006
DATA iq2tIota<>+32(SB)/8, $0x0000000900000008
DATA iq2tIota<>+40(SB)/8, $0x0000000b0000000a
DATA iq2tIota<>+48(SB)/8, $0x0000000d0000000c
DATA iq2tIota<>+56(SB)/8, $0x0000000f0000000e
GLOBL iq2tIota<>(SB), RODATA|NOPTR, $64

// iq2tCodeShift holds four VPMULTISHIFTQB controls: control l moves the
// code of element j (bits 8l+2j, 8l+2j+1 of dword i of L or H) to the
// bottom of byte j of dword i.
DATA iq2tCodeShift<>+0(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+8(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+16(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+24(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+32(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+40(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+48(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+56(SB)/8, $0x2624222006040200
DATA iq2tCodeShift<>+64(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+72(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+80(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+88(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+96(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+104(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+112(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+120(SB)/8, $0x2e2c2a280e0c0a08
DATA iq2tCodeShift<>+128(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+136(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+144(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+152(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+160(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+168(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+176(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+184(SB)/8, $0x3634323016141210
DATA iq2tCodeShift<>+192(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+200(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+208(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+216(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+224(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+232(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+240(SB)/8, $0x3e3c3a381e1c1a18
DATA iq2tCodeShift<>+248(SB)/8, $0x3e3c3a381e1c1a18
GLOBL iq2tCodeShift<>(SB), RODATA|NOPTR, $256

// iq2tSignBcast holds four VPSHUFB controls: control l copies byte l of
// every dword (sign byte l of row i) to the dword's four bytes.
DATA iq2tSignBcast<>+0(SB)/8, $0x0404040400000000
DATA iq2tSignBcast<>+8(SB)/8, $0x0c0c0c0c08080808
DATA iq2tSignBcast<>+16(SB)/8, $0x0404040400000000
DATA iq2tSignBcast<>+24(SB)/8, $0x0c0c0c0c08080808
DATA iq2tSignBcast<>+32(SB)/8, $0x0404040400000000
DATA iq2tSignBcast<>+40(SB)/8, $0x0c0c0c0c08080808
DATA iq2tSignBcast<>+48(SB)/8, $0x0404040400000000
DATA iq2tSignBcast<>+56(SB)/8, $0x0c0c0c0c08080808
DATA iq2tSignBcast<>+64(SB)/8, $0x0505050501010101
DATA iq2tSignBcast<>+72(SB)/8, $0x0d0d0d0d09090909
DATA iq2tSignBcast<>+80(SB)/8, $0x0505050501010101
DATA iq2tSignBcast<>+88(SB)/8, $0x0d0d0d0d09090909
DATA iq2tSignBcast<>+96(SB)/8, $0x0505050501010101
DATA iq2tSignBcast<>+104(SB)/8, $0x0d0d0d0d09090909
DATA iq2tSignBcast<>+112(SB)/8, $0x0505050501010101
DATA iq2tSignBcast<>+120(SB)/8, $0x0d0d0d0d09090909
DATA iq2tSignBcast<>+128(SB)/8, $0x0606060602020202
DATA iq2tSignBcast<>+136(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA iq2tSignBcast<>+144(SB)/8, $0x0606060602020202
DATA iq2tSignBcast<>+152(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA iq2tSignBcast<>+160(SB)/8, $0x0606060602020202
DATA iq2tSignBcast<>+168(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA iq2tSignBcast<>+176(SB)/8, $0x0606060602020202
DATA iq2tSignBcast<>+184(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA iq2tSignBcast<>+192(SB)/8, $0x0707070703030303
DATA iq2tSignBcast<>+200(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA iq2tSignBcast<>+208(SB)/8, $0x0707070703030303
DATA iq2tSignBcast<>+216(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA iq2tSignBcast<>+224(SB)/8, $0x0707070703030303
DATA iq2tSignBcast<>+232(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA iq2tSignBcast<>+240(SB)/8, $0x0707070703030303
DATA iq2tSignBcast<>+248(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL iq2tSignBcast<>(SB), RODATA|NOPTR, $256

// iq2tSignBit holds two VPTESTMB masks: mask h tests bit 4h+j in byte j of
// every dword, the sign of element 4h+j.
DATA iq2tSignBit<>+0(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+8(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+16(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+24(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+32(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+40(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+48(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+56(SB)/8, $0x0804020108040201
DATA iq2tSignBit<>+64(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+72(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+80(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+88(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+96(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+104(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+112(SB)/8, $0x8040201080402010
DATA iq2tSignBit<>+120(SB)/8, $0x8040201080402010
GLOBL iq2tSignBit<>(SB), RODATA|NOPTR, $128

// iq2tPosTab maps a byte with a code c in bits 0..1 (bits 2..5 ignored) to
// 64+m, m = 8, 25, 43 for c = 0, 1, 2 (c = 3 does not occur).
DATA iq2tPosTab<>+0(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+8(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+16(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+24(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+32(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+40(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+48(SB)/8, $0x406b5948406b5948
DATA iq2tPosTab<>+56(SB)/8, $0x406b5948406b5948
GLOBL iq2tPosTab<>(SB), RODATA|NOPTR, $64

// iq2tSignIdx is the VPMULTISHIFTQB control that puts the sign index l of
// dword i (bits 7l..7l+6 of a1) in byte l of the dword.
DATA iq2tSignIdx<>+0(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+8(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+16(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+24(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+32(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+40(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+48(SB)/8, $0x352e2720150e0700
DATA iq2tSignIdx<>+56(SB)/8, $0x352e2720150e0700
GLOBL iq2tSignIdx<>(SB), RODATA|NOPTR, $64

// iq2tParity is the VGF2P8AFFINEQB matrix that turns a 7-bit sign index
// into its sign byte iq2Sign: bits 0..6 copied, bit 7 their parity.
DATA iq2tParity<>+0(SB)/8, $0x010204081020407f
DATA iq2tParity<>+8(SB)/8, $0x010204081020407f
DATA iq2tParity<>+16(SB)/8, $0x010204081020407f
DATA iq2tParity<>+24(SB)/8, $0x010204081020407f
DATA iq2tParity<>+32(SB)/8, $0x010204081020407f
DATA iq2tParity<>+40(SB)/8, $0x010204081020407f
DATA iq2tParity<>+48(SB)/8, $0x010204081020407f
DATA iq2tParity<>+56(SB)/8, $0x010204081020407f
GLOBL iq2tParity<>(SB), RODATA|NOPTR, $64

// iq2tOne is the dword 1.
DATA iq2tOne<>+0(SB)/4, $1
GLOBL iq2tOne<>(SB), RODATA|NOPTR, $4

// Register use of the pack: SI points at the current block of row 0 and
// AX, BX, R8 and R9 at that of rows 0..3 during the transpose, DI at the
// packed block, DX = rowBytes, R13 = 3·rowBytes, CX counts the blocks
// left, K3, K4 and K5 select 128-bit lanes 1, 2 and 3, R10 points at
// iq2tSignBcast; Z18 holds the rows' offsets, Z19 iq2tPosTab, Z20..Z23 the
// iq2tCodeShift controls, Z24..Z31 the code tables and, during the
// expansion, Z5 the bytes 128 (R11 = 128). The frame holds the
// 16 transposed vectors, from R12 (SP rounded up to 64 bytes, so that
// no vector straddles cache lines).

// LANES loads lane a of P (a < 4) with the 16 bytes at off of row 4a+r of
// the current block, B pointing at row r (R13 = 3·rowBytes): one plain and
// three merge-masked broadcasts.
#define LANES(off, B, P) \
	VBROADCASTI32X4 off(B), P \
	VBROADCASTI32X4 off(B)(DX*4), K3, P \
	VBROADCASTI32X4 off(B)(DX*8), K4, P \
	VBROADCASTI32X4 off(B)(R13*4), K5, P

// QUARTER transposes dwords 4q..4q+3 (bytes off = 2+16q of the blocks) of
// the 16 rows into transposed vectors 4q..4q+3 in the frame: after LANES,
// lane a of P0..P3 holds lane q of rows 4a..4a+3, and the 4×4 dword
// transpose within each lane (VPUNPCK{L,H}DQ, then {L,H}QDQ) finishes it.
#define QUARTER(q, off, P0, P1, P2, P3, T0, T1, T2, T3) \
	LANES(off, AX, P0) \
	LANES(off, BX, P1) \
	LANES(off, R8, P2) \
	LANES(off, R9, P3) \
	VPUNPCKLDQ  P1, P0, T0 \
	VPUNPCKHDQ  P1, P0, T1 \
	VPUNPCKLDQ  P3, P2, T2 \
	VPUNPCKHDQ  P3, P2, T3 \
	VPUNPCKLQDQ T2, T0, P0 \
	VPUNPCKHQDQ T2, T0, P1 \
	VPUNPCKLQDQ T3, T1, P2 \
	VPUNPCKHQDQ T3, T1, P3 \
	VMOVDQU64   P0, (256*q)(R12) \
	VMOVDQU64   P1, (256*q+64)(R12) \
	VMOVDQU64   P2, (256*q+128)(R12) \
	VMOVDQU64   P3, (256*q+192)(R12)

// WEIGHTS writes code vector k = 2l+h of group g from SRC (L or H by h)
// with code control CTRL (l) and the sign bytes l of the rows in SBL
// (every byte of dword i row i's sign byte l): C gets the codes, K1 the
// signs, X the weights.
#define WEIGHTS(g, k, h, SRC, CTRL, SBL, C, X) \
	VPMULTISHIFTQB SRC, CTRL, C \
	VPTESTMB       iq2tSignBit<>+(64*h)(SB), SBL, K1 \
	VPERMB         Z19, C, X \
	VPSUBB         X, Z5, K1, X \
	VMOVDQU64      X, (576*g+64*k)(DI)

// EXPAND expands group g of the current block for all 16 rows.
#define EXPAND(g) \
	VMOVDQU64      (128*g)(R12), Z0 \
	VPMOVB2M       Z0, K2 \
	VMOVDQA64      Z0, Z2 \
	VMOVDQA64      Z0, Z3 \
	VMOVDQA64      Z0, Z4 \
	VPERMI2B       Z25, Z24, Z0 \
	VPERMI2B       Z27, Z26, Z2 \
	VPERMI2B       Z29, Z28, Z3 \
	VPERMI2B       Z31, Z30, Z4 \
	VPBLENDMB      Z2, Z0, K2, Z0 \
	VPBLENDMB      Z4, Z3, K2, Z3 \
	VMOVDQU64      iq2tSignIdx<>(SB), Z6 \
	VPMULTISHIFTQB (128*g+64)(R12), Z6, Z6 \
	VGF2P8AFFINEQB $0, iq2tParity<>(SB), Z6, Z6 \
	VPSRLD         $27, (128*g+64)(R12), Z7 \
	VPORD.BCST     iq2tOne<>(SB), Z7, Z7 \
	VMOVDQU64      Z7, (576*g+512)(DI) \
	VPSHUFB        0(R10), Z6, Z16 \
	VPSHUFB        64(R10), Z6, Z17 \
	WEIGHTS(g, 0, 0, Z0, Z20, Z16, Z8, Z9) \
	WEIGHTS(g, 1, 1, Z3, Z20, Z16, Z10, Z11) \
	WEIGHTS(g, 2, 0, Z0, Z21, Z17, Z12, Z13) \
	WEIGHTS(g, 3, 1, Z3, Z21, Z17, Z14, Z15) \
	VPSHUFB        128(R10), Z6, Z16 \
	VPSHUFB        192(R10), Z6, Z17 \
	WEIGHTS(g, 4, 0, Z0, Z22, Z16, Z8, Z9) \
	WEIGHTS(g, 5, 1, Z3, Z22, Z16, Z10, Z11) \
	WEIGHTS(g, 6, 0, Z0, Z23, Z17, Z12, Z13) \
	WEIGHTS(g, 7, 1, Z3, Z23, Z17, Z14, Z15)

// func packIQ2XXSTileAVX512Asm(dst, w []byte, rowBytes, nb int)
TEXT ·packIQ2XXSTileAVX512Asm(SB), 0, $1088-64
	LEAQ         63(SP), R12
	ANDQ         $~63, R12
	MOVQ         dst_base+0(FP), DI
	MOVQ         w_base+24(FP), SI
	MOVQ         rowBytes+48(FP), DX
	MOVQ         nb+56(FP), CX
	VPBROADCASTD DX, Z18
	VPMULLD      iq2tIota<>(SB), Z18, Z18
	VMOVDQU64    iq2tCodeShift<>+0(SB), Z20
	VMOVDQU64    iq2tCodeShift<>+64(SB), Z21
	VMOVDQU64    iq2tCodeShift<>+128(SB), Z22
	VMOVDQU64    iq2tCodeShift<>+192(SB), Z23
	VMOVDQU64    ·iq2xxsAVX512Codes+0(SB), Z24
	VMOVDQU64    ·iq2xxsAVX512Codes+64(SB), Z25
	VMOVDQU64    ·iq2xxsAVX512Codes+128(SB), Z26
	VMOVDQU64    ·iq2xxsAVX512Codes+192(SB), Z27
	VMOVDQU64    ·iq2xxsAVX512Codes+256(SB), Z28
	VMOVDQU64    ·iq2xxsAVX512Codes+320(SB), Z29
	VMOVDQU64    ·iq2xxsAVX512Codes+384(SB), Z30
	VMOVDQU64    ·iq2xxsAVX512Codes+448(SB), Z31
	LEAQ         iq2tSignBcast<>(SB), R10
	VMOVDQU64    iq2tPosTab<>(SB), Z19
	MOVL         $128, R11
	LEAQ         (DX)(DX*2), R13
	MOVW         $0x00f0, AX
	KMOVW        AX, K3
	MOVW         $0x0f00, AX
	KMOVW        AX, K4
	MOVW         $0xf000, AX
	KMOVW        AX, K5
	TESTQ        CX, CX
	JZ           packdone

packloop:
	MOVQ SI, AX
	LEAQ (SI)(DX*1), BX
	LEAQ (SI)(DX*2), R8
	LEAQ (BX)(DX*2), R9
	QUARTER(0, 2, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	QUARTER(1, 18, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	QUARTER(2, 34, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	QUARTER(3, 50, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	VPBROADCASTB R11, Z5
	EXPAND(0)
	EXPAND(1)
	EXPAND(2)
	EXPAND(3)
	EXPAND(4)
	EXPAND(5)
	EXPAND(6)
	EXPAND(7)
	KXNORW      K1, K1, K1
	VPGATHERDD  (SI)(Z18*1), K1, Z16
	VPMOVDW     Z16, Y16
	VCVTPH2PS   Y16, Z16
	VMOVUPS     Z16, 4608(DI)
	ADDQ        $66, SI
	ADDQ        $const_iq2xxsTileBlockBytes, DI
	DECQ        CX
	JNZ         packloop

packdone:
	VZEROUPPER
	RET
