//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// The AVX2 bodies of the tile kernels of tile_avx2_amd64.go. First Q8_0:
// the products of eight rows of a packed tile (tile.go's layout, one half
// of each 64-byte code vector) with groups of 4, 2 or 1 tokens, and the
// pack. IQ2_XXS and Q2_K follow. (The macros come first: go vet reads
// the lines after a TEXT as that function's.)
//
// Why the products are exact. AVX2 has no VPDPBUSD, and its byte multiply,
// VPMADDUBSW (unsigned bytes times signed bytes, adjacent products summed
// to int16 with saturation), would overflow on the packed codes w+128
// times activation codes. So the kernels take the codes back to w (XOR
// 0x80) and multiply |w| by x·sgn(w) (VPSIGNB), as the row kernel does
// (dot_q8_amd64.s): a pair is at most 2·128·127 in magnitude, which needs
// the activation codes in -127..127, Q8_0's precondition. VPMADDWD by
// ones then sums each row's four products into its int32 lane, so a
// block leaves the eight rows' exact Σw·x in order, with no correction
// for the +128 (the code sums are not used), and from there the block
// term is that of the AVX-512 kernels (tile_amd64.s): converted, times
// (scale·d_x), added to the token's sum, with DotQ8_0's roundings.
//
// Why they are fast. The rows are the lanes, so a block needs no
// reduction, and a code vector half, its signs and magnitudes serve every
// token of the group: a token's four codes cost a broadcast, a VPSIGNB, a
// VPMADDUBSW, a VPMADDWD and a VPADDD for 32 multiply-adds, no shuffle,
// and one register holds a token's sums, so groups are of eight tokens.
// (Zero-extended codes times x·256 by VPMADDWD would take an unpack, two
// VPMADDWD and two VPADDD a token and two sums registers.)
//
// What bounds them: their count of vector instructions a token, not the
// cache (they run fastest on the longest rows, so cutting rows into
// lengths whose tile stays in L1 would not help). The variants measured
// against them (signs by VPXOR/VPSUBB, codes without the XOR, int16 tiles)
// were no faster; see docs/performance.md#kernel-design-notes.

// Register use: SI points at the current packed block's half (codes at
// 64k, scales at 512), DI at token 0's current activation block, R8 and
// R11 at those of tokens 3 and 6 (DX = 36·nb is the distance between
// tokens); CX counts the blocks left and AX points at the current lane's
// sums in acc (the tokens' 64 bytes apart, the lanes 512), R13 at the
// first lane's, R10 holds the number of lanes and R12 counts those left
// before AX goes back to R13. Y8 holds a code vector half's codes w, Y9
// their magnitudes, Y10 a token's codes and products, Y12 int16 ones and
// Y13 0x80 bytes; token t sums its block in Yt.

#define PROLOGUE \
	MOVQ         tile+0(FP), SI \
	MOVQ         x+8(FP), DI \
	MOVQ         nb+16(FP), DX \
	IMUL3Q       $36, DX, DX \
	LEAQ         (DX)(DX*2), R8 \
	LEAQ         (R8)(R8*1), R11 \
	ADDQ         DI, R8 \
	ADDQ         DI, R11 \
	MOVQ         count+24(FP), CX \
	MOVQ         lanes+32(FP), R10 \
	MOVQ         R10, R12 \
	MOVQ         acc+40(FP), AX \
	MOVQ         AX, R13 \
	MOVL         $0x00010001, BX \
	VMOVD        BX, X12 \
	VPBROADCASTD X12, Y12 \
	VPBROADCASTD q8TileBias<>(SB), Y13

// CODES loads code vector k's half: the codes w to Y8, |w| to Y9.
#define CODES(k) \
	VPXOR  (64*k)(SI), Y13, Y8 \
	VPABSB Y8, Y9

// FIRST sets A to the products of the code vector half with the token's
// codes 4k..4k+3 at M, each row's four summed; NEXT adds them.
#define FIRST(k, M, A) \
	VPBROADCASTD (4+4*k)M, Y10 \
	VPSIGNB      Y8, Y10, Y10 \
	VPMADDUBSW   Y10, Y9, Y10 \
	VPMADDWD     Y12, Y10, A

#define NEXT(k, M, A) \
	VPBROADCASTD (4+4*k)M, Y10 \
	VPSIGNB      Y8, Y10, Y10 \
	VPMADDUBSW   Y10, Y9, Y10 \
	VPMADDWD     Y12, Y10, Y10 \
	VPADDD       Y10, A, A

// TERM finishes the block for one token whose activation block is at XM:
// A, the eight rows' Σw·x, converted and times (scale·d_x), with
// DotQ8_0's roundings, is added to the sums at F.
#define TERM(XM, A, F) \
	VCVTDQ2PS    A, A \
	VBROADCASTSS XM, Y10 \
	VMULPS       512(SI), Y10, Y10 \
	VMULPS       A, Y10, Y10 \
	VADDPS       F, Y10, Y10 \
	VMOVUPS      Y10, F

// STEP moves to the next block and the next lane's sums, back to the
// first after the last.
#define STEP \
	ADDQ    $576, SI \
	ADDQ    $36, DI \
	ADDQ    $36, R8 \
	ADDQ    $36, R11 \
	ADDQ    $512, AX \
	DECQ    R12 \
	CMOVQEQ R13, AX \
	CMOVQEQ R10, R12

// K8, K4, K2 and K1 load code vector k's half and apply it to eight,
// four, two or one tokens, whose codes are at (DI), (DI)(DX*1),
// (DI)(DX*2), (R8), (DI)(DX*4), (R8)(DX*2), (R11) and (R11)(DX*1), OP
// being FIRST or NEXT.
#define K8(k, OP) \
	CODES(k) \
	OP(k, (DI), Y0) \
	OP(k, (DI)(DX*1), Y1) \
	OP(k, (DI)(DX*2), Y2) \
	OP(k, (R8), Y3) \
	OP(k, (DI)(DX*4), Y4) \
	OP(k, (R8)(DX*2), Y5) \
	OP(k, (R11), Y6) \
	OP(k, (R11)(DX*1), Y7)

#define K4(k, OP) \
	CODES(k) \
	OP(k, (DI), Y0) \
	OP(k, (DI)(DX*1), Y1) \
	OP(k, (DI)(DX*2), Y2) \
	OP(k, (R8), Y3)

#define K2(k, OP) \
	CODES(k) \
	OP(k, (DI), Y0) \
	OP(k, (DI)(DX*1), Y1)

#define K1(k, OP) \
	CODES(k) \
	OP(k, (DI), Y0)

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

// The AVX2 IQ2_XXS tile kernels of tile_avx2_amd64.go: the pack of 16
// IQ2_XXS rows into the layout tile_iq2.go describes, and the products of
// eight rows of a packed tile with groups of 8, 4, 2 or 1 tokens.
//
// Why the products are exact. The packed weights are w+64, 21..107, so
// VPMADDUBSW (unsigned weights times signed activation codes, adjacent
// products summed to int16) cannot saturate: a pair is at most 2·107·128 in
// magnitude. VPMADDWD by the rows' multipliers 2ls+1, as int16 pairs,
// widens each to int32 and scales it, and the group's bias term,
// 64·(2ls+1)·(Bsums[2g]+Bsums[2g+1]), is one VPMADDWD of the broadcast
// Bsums pair by the multipliers times 64. So each token's int32 lanes, the
// eight rows, sum exactly Σg (2ls+1)·Σw·q: DotIQ2XXS's bsum. Then, as
// there, float32(bsum), (f16(d)·D) and that times float32(bsum) are each
// rounded to float32, added to the token's sum block by block in order,
// and the sum is multiplied by 0.125.
//
// Why they are fast. The grid lookups and sign decoding are done once per
// tile, by the pack, not once per four tokens as in the row kernels, and a
// token's four codes of eight rows cost a broadcast, a VPMADDUBSW, a
// VPMADDWD and a VPADDD, the code vector half serving every token of the
// group.

// Register use of the products: SI points at the current packed group's
// half (its code vectors at 64k, its multipliers at 512; the block's
// scales are 4608 past the block's first group), DI, R8 and R9 at the
// current group's activation codes of tokens 0, 3 and 6 less
// BlockQ8K_Qs, R10, R11 and R12 at their Bsums pairs (the tokens are DX =
// 292·nb apart), BX counts the groups of the block left, CX the blocks,
// and AX points at out, where the tokens' float32 sums stay (64 bytes
// apart). Y0..Y7 hold the tokens' block sums bsum, Y8 a code vector half,
// Y9 a token's broadcast codes, Y10 a product, Y11 the group's
// multipliers as int16 pairs and Y12 those times 64; Y13 is scratch.
//
// A block's eight groups are a loop, not unrolled: unrolled, the
// eight-token kernel was 14 KB of code, past what AMD Zen 3's op cache
// holds, and its instructions were decoded again on every pass. The packs
// loop over groups for the same reason.

// IQ2T_MULT loads the group's multipliers to Y11 and Y12.
#define IQ2T_MULT \
	VMOVDQU 512(SI), Y11 \
	VPSLLD  $16, Y11, Y12 \
	VPOR    Y12, Y11, Y11 \
	VPSLLW  $6, Y11, Y12

// IQ2T_BIAS takes the group's bias term of the token whose Bsums pair is
// at M from its sum A (k unused).
#define IQ2T_BIAS(k, M, A) \
	VPBROADCASTD M, Y9 \
	VPMADDWD     Y12, Y9, Y10 \
	VPSUBD       Y10, A, A

// IQ2T_DOT adds to A the products of code vector k, in Y8, with the
// token's codes 4k..4k+3 of the group, at M, times the multipliers.
#define IQ2T_DOT(k, M, A) \
	VPBROADCASTD (BlockQ8K_Qs+4*k)M, Y9 \
	VPMADDUBSW   Y9, Y8, Y10 \
	VPMADDWD     Y11, Y10, Y10 \
	VPADDD       Y10, A, A

// The tokens of a group: T8, T4, T2 and T1 apply OP(k, M, A) to each,
// with tokens 0, 3 and 6 at B0, B3 and B6.
#define IQ2T_T8(OP, k, B0, B3, B6) \
	IQ2T_T4(OP, k, B0, B3, B6) \
	OP(k, (B0)(DX*4), Y4) \
	OP(k, (B3)(DX*2), Y5) \
	OP(k, (B6), Y6) \
	OP(k, (B6)(DX*1), Y7)

#define IQ2T_T4(OP, k, B0, B3, B6) \
	IQ2T_T2(OP, k, B0, B3, B6) \
	OP(k, (B0)(DX*2), Y2) \
	OP(k, (B3), Y3)

#define IQ2T_T2(OP, k, B0, B3, B6) \
	IQ2T_T1(OP, k, B0, B3, B6) \
	OP(k, (B0)(DX*1), Y1)

#define IQ2T_T1(OP, k, B0, B3, B6) \
	OP(k, (B0), Y0)

// IQ2T_START points R10, R11 and R12 at the block's first Bsums pairs
// and sets the group count.
#define IQ2T_START \
	LEAQ BlockQ8K_Bsums(DI), R10 \
	LEAQ BlockQ8K_Bsums(R8), R11 \
	LEAQ BlockQ8K_Bsums(R9), R12 \
	MOVL $8, BX

// IQ2T_GROUP adds the current group to the block sums of the tokens of
// Tn, moves to the next and counts it.
#define IQ2T_GROUP(Tn) \
	IQ2T_MULT \
	Tn(IQ2T_BIAS, 0, R10, R11, R12) \
	VMOVDQU 0(SI), Y8 \
	Tn(IQ2T_DOT, 0, DI, R8, R9) \
	VMOVDQU 64(SI), Y8 \
	Tn(IQ2T_DOT, 1, DI, R8, R9) \
	VMOVDQU 128(SI), Y8 \
	Tn(IQ2T_DOT, 2, DI, R8, R9) \
	VMOVDQU 192(SI), Y8 \
	Tn(IQ2T_DOT, 3, DI, R8, R9) \
	VMOVDQU 256(SI), Y8 \
	Tn(IQ2T_DOT, 4, DI, R8, R9) \
	VMOVDQU 320(SI), Y8 \
	Tn(IQ2T_DOT, 5, DI, R8, R9) \
	VMOVDQU 384(SI), Y8 \
	Tn(IQ2T_DOT, 6, DI, R8, R9) \
	VMOVDQU 448(SI), Y8 \
	Tn(IQ2T_DOT, 7, DI, R8, R9) \
	ADDQ    $576, SI \
	ADDQ    $32, DI \
	ADDQ    $32, R8 \
	ADDQ    $32, R9 \
	ADDQ    $4, R10 \
	ADDQ    $4, R11 \
	ADDQ    $4, R12 \
	DECQ    BX

// IQ2T_TERM adds the block's term ((row scales)·D)·float32(A) to the sum
// at off(AX) of the token whose block is at M and clears A.
#define IQ2T_TERM(off, M, A) \
	VCVTDQ2PS    A, A \
	VBROADCASTSS M, Y13 \
	VMULPS       4608(SI), Y13, Y13 \
	VMULPS       A, Y13, Y13 \
	VADDPS       off(AX), Y13, Y13 \
	VMOVUPS      Y13, off(AX) \
	VPXOR        A, A, A

// IQ2T_TERMS, IQ2T_ZERO and IQ2T_EIGHTH finish a block, clear and scale
// by 0.125 the sums of tokens 0..n-1 (n = 8, 4, 2, 1).
#define IQ2T_TERMS8 \
	IQ2T_TERMS4 \
	IQ2T_TERM(256, (DI)(DX*4), Y4) \
	IQ2T_TERM(320, (R8)(DX*2), Y5) \
	IQ2T_TERM(384, (R9), Y6) \
	IQ2T_TERM(448, (R9)(DX*1), Y7)

#define IQ2T_TERMS4 \
	IQ2T_TERMS2 \
	IQ2T_TERM(128, (DI)(DX*2), Y2) \
	IQ2T_TERM(192, (R8), Y3)

#define IQ2T_TERMS2 \
	IQ2T_TERMS1 \
	IQ2T_TERM(64, (DI)(DX*1), Y1)

#define IQ2T_TERMS1 \
	IQ2T_TERM(0, (DI), Y0)

// IQ2T_PROLOGUE loads the arguments and sets DX, R8 and R9.
#define IQ2T_PROLOGUE \
	MOVQ   tile+0(FP), SI \
	MOVQ   y+8(FP), DI \
	MOVQ   nb+16(FP), CX \
	IMUL3Q $BlockQ8K__size, CX, DX \
	LEAQ   (DI)(DX*2), R8 \
	ADDQ   DX, R8 \
	LEAQ   (R8)(DX*2), R9 \
	ADDQ   DX, R9 \
	MOVQ   out+24(FP), AX

// IQ2T_ZEROn clears the block sums and float32 sums of tokens 0..n-1.
#define IQ2T_ZERO8 \
	IQ2T_ZERO4 \
	VPXOR   Y4, Y4, Y4 \
	VPXOR   Y5, Y5, Y5 \
	VPXOR   Y6, Y6, Y6 \
	VPXOR   Y7, Y7, Y7 \
	VMOVUPS Y0, 256(AX) \
	VMOVUPS Y0, 320(AX) \
	VMOVUPS Y0, 384(AX) \
	VMOVUPS Y0, 448(AX)

#define IQ2T_ZERO4 \
	IQ2T_ZERO2 \
	VPXOR   Y2, Y2, Y2 \
	VPXOR   Y3, Y3, Y3 \
	VMOVUPS Y0, 128(AX) \
	VMOVUPS Y0, 192(AX)

#define IQ2T_ZERO2 \
	IQ2T_ZERO1 \
	VPXOR   Y1, Y1, Y1 \
	VMOVUPS Y0, 64(AX)

#define IQ2T_ZERO1 \
	VPXOR   Y0, Y0, Y0 \
	VMOVUPS Y0, 0(AX)

// IQ2T_FINISH, after a block's eight groups, takes SI, DI, R8 and R9
// back to the block's start, finishes it with TERMSn and moves to the
// next block.
#define IQ2T_FINISH(TERMSn) \
	SUBQ $4608, SI \
	SUBQ $256, DI \
	SUBQ $256, R8 \
	SUBQ $256, R9 \
	TERMSn \
	ADDQ $const_iq2xxsTileBlockBytes, SI \
	ADDQ $BlockQ8K__size, DI \
	ADDQ $BlockQ8K__size, R8 \
	ADDQ $BlockQ8K__size, R9

// IQ2T_EIGHTHn multiplies the sums of tokens 0..n-1 by 0.125, in Y13.
#define IQ2T_EIGHTH(off) \
	VMULPS  off(AX), Y13, Y0 \
	VMOVUPS Y0, off(AX)

#define IQ2T_EIGHTH8 \
	IQ2T_EIGHTH4 \
	IQ2T_EIGHTH(256) \
	IQ2T_EIGHTH(320) \
	IQ2T_EIGHTH(384) \
	IQ2T_EIGHTH(448)

#define IQ2T_EIGHTH4 \
	IQ2T_EIGHTH2 \
	IQ2T_EIGHTH(128) \
	IQ2T_EIGHTH(192)

#define IQ2T_EIGHTH2 \
	IQ2T_EIGHTH1 \
	IQ2T_EIGHTH(64)

#define IQ2T_EIGHTH1 \
	MOVL         $0x3e000000, BX \
	VMOVD        BX, X13 \
	VBROADCASTSS X13, Y13 \
	IQ2T_EIGHTH(0)

// The AVX2 Q2_K tile kernels of tile_avx2_amd64.go: the pack of 16 Q2_K
// rows into the layout tile_q2k.go describes, and the products of eight
// rows of a packed tile with groups of 8, 4, 2 or 1 tokens.
//
// Why the products are exact. The packed weights are code times sub-block
// scale, 0..45, so VPMADDUBSW (unsigned weights times signed activation
// codes, adjacent products summed to int16) makes at most 2·45·128 and
// two of its results, code vectors 2j and 2j+1, still add in int16
// (VPADDW) before one VPMADDWD by ones widens them to int32: the rows'
// lanes sum DotQ2K's isum exactly. The mins' sum summs is one VPMADDWD
// per pair of sub-blocks (the rows' two mins times the broadcast Bsums
// pair). Then, as in DotQ2K, (D·d)·float32(isum) and (D·dmin)·float32(summs)
// are each rounded to float32, their difference too, and added to the
// token's sum block by block in order.

// Register use of the products: SI points at the current packed block's
// half (code vector k at 64k, min vector p at 4096+64p, d and dmin at 4608
// and 4672), DI, R8 and R9 at the current activation block of tokens 0, 3
// and 6 (the others are DX = 292·nb apart), CX counts the blocks left, R10
// the steps of the block's inner loop, and AX points at out, where the
// tokens' float32 sums stay (64 bytes apart). The inner loop moves SI by
// eight code vectors and DI, R8 and R9 by 32 codes a step, and back at the
// end. Y0..Y7 hold the tokens' isum, Y8 and Y9 two code vector halves,
// Y10 a token's broadcast codes, Y11 and Y12 products and Y13 the int16
// ones.

// Q2T_PAIR adds to A the products of code vectors 2j and 2j+1 (in Y8 and
// Y9) with the token's codes 8j..8j+7 at M.
#define Q2T_PAIR(j, M, A) \
	VPBROADCASTD (BlockQ8K_Qs+8*j)M, Y10 \
	VPMADDUBSW   Y10, Y8, Y11 \
	VPBROADCASTD (BlockQ8K_Qs+8*j+4)M, Y10 \
	VPMADDUBSW   Y10, Y9, Y12 \
	VPADDW       Y12, Y11, Y11 \
	VPMADDWD     Y13, Y11, Y11 \
	VPADDD       Y11, A, A

// The tokens of a group: Q2T_Tn applies OP(j, M, A) to tokens 0..n-1.
#define Q2T_T8(OP, j) \
	Q2T_T4(OP, j) \
	OP(j, (DI)(DX*4), Y4) \
	OP(j, (R8)(DX*2), Y5) \
	OP(j, (R9), Y6) \
	OP(j, (R9)(DX*1), Y7)

#define Q2T_T4(OP, j) \
	Q2T_T2(OP, j) \
	OP(j, (DI)(DX*2), Y2) \
	OP(j, (R8), Y3)

#define Q2T_T2(OP, j) \
	Q2T_T1(OP, j) \
	OP(j, (DI)(DX*1), Y1)

#define Q2T_T1(OP, j) \
	OP(j, (DI), Y0)

// Q2T_STEP applies code vectors 2j and 2j+1 of the inner loop's step to
// the tokens of Tn.
#define Q2T_STEP(Tn, j) \
	VMOVDQU (128*j)(SI), Y8 \
	VMOVDQU (128*j+64)(SI), Y9 \
	Tn(Q2T_PAIR, j)

// Q2T_TERM adds the block's term (D·d)·float32(isum) - (D·dmin)·float32(summs)
// of the token at M, isum in A, to its sum at off(AX), and clears A.
#define Q2T_TERM(off, M, A) \
	VCVTDQ2PS    A, A \
	VBROADCASTSS M, Y10 \
	VMULPS       4608(SI), Y10, Y11 \
	VMULPS       A, Y11, Y11 \
	VPBROADCASTD (BlockQ8K_Bsums)M, Y12 \
	VPMADDWD     4096(SI), Y12, A \
	Q2T_MIN(1, M, A) \
	Q2T_MIN(2, M, A) \
	Q2T_MIN(3, M, A) \
	Q2T_MIN(4, M, A) \
	Q2T_MIN(5, M, A) \
	Q2T_MIN(6, M, A) \
	Q2T_MIN(7, M, A) \
	VCVTDQ2PS    A, A \
	VMULPS       4672(SI), Y10, Y12 \
	VMULPS       A, Y12, Y12 \
	VSUBPS       Y12, Y11, Y11 \
	VADDPS       off(AX), Y11, Y11 \
	VMOVUPS      Y11, off(AX) \
	VPXOR        A, A, A

// Q2T_MIN adds to A the rows' mins of sub-blocks 2p and 2p+1 times the
// token's Bsums there.
#define Q2T_MIN(p, M, A) \
	VPBROADCASTD (BlockQ8K_Bsums+4*p)M, Y12 \
	VPMADDWD     (4096+64*p)(SI), Y12, Y12 \
	VPADDD       Y12, A, A

#define Q2T_TERMS8 \
	Q2T_TERMS4 \
	Q2T_TERM(256, (DI)(DX*4), Y4) \
	Q2T_TERM(320, (R8)(DX*2), Y5) \
	Q2T_TERM(384, (R9), Y6) \
	Q2T_TERM(448, (R9)(DX*1), Y7)

#define Q2T_TERMS4 \
	Q2T_TERMS2 \
	Q2T_TERM(128, (DI)(DX*2), Y2) \
	Q2T_TERM(192, (R8), Y3)

#define Q2T_TERMS2 \
	Q2T_TERMS1 \
	Q2T_TERM(64, (DI)(DX*1), Y1)

#define Q2T_TERMS1 \
	Q2T_TERM(0, (DI), Y0)

// Q2T_INNER is one step of a block's inner loop for the tokens of Tn: four
// code vector pairs, then SI, DI, R8 and R9 moved on by them.
#define Q2T_INNER(Tn) \
	Q2T_STEP(Tn, 0) \
	Q2T_STEP(Tn, 1) \
	Q2T_STEP(Tn, 2) \
	Q2T_STEP(Tn, 3) \
	ADDQ $512, SI \
	ADDQ $32, DI \
	ADDQ $32, R8 \
	ADDQ $32, R9

// Q2T_FINISH moves SI, DI, R8 and R9 back to the block's start after its
// eight inner steps, finishes the block with TERMSn and moves to the next.
#define Q2T_FINISH(TERMSn) \
	SUBQ $4096, SI \
	SUBQ $256, DI \
	SUBQ $256, R8 \
	SUBQ $256, R9 \
	TERMSn \
	ADDQ $const_q2KTileBlockBytes, SI \
	ADDQ $BlockQ8K__size, DI \
	ADDQ $BlockQ8K__size, R8 \
	ADDQ $BlockQ8K__size, R9

// Q2T_PROLOGUE is IQ2T_PROLOGUE with the int16 ones in Y13.
#define Q2T_PROLOGUE \
	IQ2T_PROLOGUE \
	MOVL         $0x00010001, BX \
	VMOVD        BX, X13 \
	VPBROADCASTD X13, Y13

// The packs' common parts. Each packs eight rows at a time, rows 0..7 of
// the tile into the low 32 bytes of each 64-byte vector and rows 8..15
// into the high ones: R12 points at the first of the eight rows, BX is
// rowBytes and R11 the half's byte offset in the vectors (0 or 32). Per
// block SI, R8 and R9 point at rows 0, 3 and 6 (the others are (SI)(BX*1),
// (SI)(BX*2), (SI)(BX*4), (R8)(BX*2) and (R9)(BX*1)), DI at the packed
// block's half and CX counts the blocks left.

// PACK_HALF sets up the pointers for the half of R11.
#define PACK_HALF \
	MOVQ dst+0(FP), DI \
	ADDQ R11, DI \
	MOVQ R12, SI \
	LEAQ (SI)(BX*2), R8 \
	ADDQ BX, R8 \
	LEAQ (R8)(BX*2), R9 \
	ADDQ BX, R9 \
	MOVQ nb+24(FP), CX

// PACK_PREFETCH asks for the line at off of each of the eight rows.
#define PACK_PREFETCH(off) \
	PREFETCHT0 off(SI) \
	PREFETCHT0 off(SI)(BX*1) \
	PREFETCHT0 off(SI)(BX*2) \
	PREFETCHT0 off(R8) \
	PREFETCHT0 off(SI)(BX*4) \
	PREFETCHT0 off(R8)(BX*2) \
	PREFETCHT0 off(R9) \
	PREFETCHT0 off(R9)(BX*1)

// PACK_NEXT_BEGIN and PACK_NEXT_END bracket a pack's PREFETCHT0s at
// offsets of AX, the next rows of the caller (next+32(FP)), and move that
// pointer step+40(FP) bytes on: issued a few lines a block step, they
// fetch the caller's next tile while this one is packed (see
// packNextLines).
#define PACK_NEXT_BEGIN \
	MOVQ next+32(FP), AX

#define PACK_NEXT_END \
	ADDQ step+40(FP), AX \
	MOVQ AX, next+32(FP)

// NEXT1, NEXT4 and NEXT8 ask for one, four or eight lines from off(AX).
#define NEXT1(off) \
	PREFETCHT0 off(AX)

#define NEXT4(off) \
	NEXT1(off) \
	NEXT1(off+64) \
	NEXT1(off+128) \
	NEXT1(off+192)

#define NEXT8(off) \
	NEXT4(off) \
	NEXT4(off+256)

// PACK_F16 converts the eight rows' f16 at off of their blocks to float32
// and stores them at to(DI), using X, its Y register Yx and AX.
#define PACK_F16(off, to, X, Yx) \
	MOVWLZX   off(SI), AX \
	VMOVD     AX, X \
	VPINSRW   $1, off(SI)(BX*1), X, X \
	VPINSRW   $2, off(SI)(BX*2), X, X \
	VPINSRW   $3, off(R8), X, X \
	VPINSRW   $4, off(SI)(BX*4), X, X \
	VPINSRW   $5, off(R8)(BX*2), X, X \
	VPINSRW   $6, off(R9), X, X \
	VPINSRW   $7, off(R9)(BX*1), X, X \
	VCVTPH2PS X, Yx \
	VMOVUPS   Yx, to(DI)

// PACK_NEXT_HALF moves R12 to rows 8..15 and R11 to the high half; the
// flags then say whether the half is still to be packed (JLT).
#define PACK_NEXT_HALF \
	LEAQ (R12)(BX*8), R12 \
	ADDQ $32, R11 \
	CMPQ R11, $64

// func q8_0Tile8AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)
TEXT ·q8_0Tile8AVX2(SB), NOSPLIT, $0-48
	PROLOGUE

loop8:
	BLOCK(K8)
	TERM((DI), Y0, 0(AX))
	TERM((DI)(DX*1), Y1, 64(AX))
	TERM((DI)(DX*2), Y2, 128(AX))
	TERM((R8), Y3, 192(AX))
	TERM((DI)(DX*4), Y4, 256(AX))
	TERM((R8)(DX*2), Y5, 320(AX))
	TERM((R11), Y6, 384(AX))
	TERM((R11)(DX*1), Y7, 448(AX))
	STEP
	DECQ CX
	JNZ  loop8

	VZEROUPPER
	RET

// func q8_0Tile4AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)
TEXT ·q8_0Tile4AVX2(SB), NOSPLIT, $0-48
	PROLOGUE

loop4:
	BLOCK(K4)
	TERM((DI), Y0, 0(AX))
	TERM((DI)(DX*1), Y1, 64(AX))
	TERM((DI)(DX*2), Y2, 128(AX))
	TERM((R8), Y3, 192(AX))
	STEP
	DECQ CX
	JNZ  loop4

	VZEROUPPER
	RET

// func q8_0Tile2AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)
TEXT ·q8_0Tile2AVX2(SB), NOSPLIT, $0-48
	PROLOGUE

loop2:
	BLOCK(K2)
	TERM((DI), Y0, 0(AX))
	TERM((DI)(DX*1), Y1, 64(AX))
	STEP
	DECQ CX
	JNZ  loop2

	VZEROUPPER
	RET

// func q8_0Tile1AVX2(tile *byte, x *BlockQ8_0, nb, count, lanes int, acc *float32)
TEXT ·q8_0Tile1AVX2(SB), NOSPLIT, $0-48
	PROLOGUE

loop1:
	BLOCK(K1)
	TERM((DI), Y0, 0(AX))
	STEP
	DECQ CX
	JNZ  loop1

	VZEROUPPER
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

// func packQ8_0TileAVX2Asm(dst, w *byte, rowBytes, nb int, next *byte, step int)
//
// Packs eight rows at a time: rows 0..7 into the low 32 bytes of each code
// vector and the first eight scales, then rows 8..15 into the high ones.
// Per block the eight rows' 32 codes are an 8×8 matrix of dwords, which
// two rounds of unpacks and one of 128-bit permutes transpose into the
// eight code vector halves. The scales are gathered as f16 words and
// converted eight at a time.
TEXT ·packQ8_0TileAVX2Asm(SB), NOSPLIT, $0-48
	MOVQ         w+8(FP), R12
	MOVQ         rowBytes+16(FP), BX
	VPBROADCASTD q8TileBias<>(SB), Y15
	XORQ         R11, R11

half:
	PACK_HALF

block:
	PACK_NEXT_BEGIN
	NEXT4(0)
	NEXT1(256)
	PACK_NEXT_END
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
	PACK_F16(0, 512, X12, Y12)

	ADDQ $34, SI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $576, DI
	DECQ CX
	JNZ  block

	PACK_NEXT_HALF
	JLT  half
	VZEROUPPER
	RET

// func combineLanesAVX2(o *float32, lanes *[8][128]float32, n int)
//
// Lane k's floats are 512k bytes past lane 0's.
TEXT ·combineLanesAVX2(SB), NOSPLIT, $0-24
	MOVQ   o+0(FP), DI
	MOVQ   lanes+8(FP), SI
	MOVQ   n+16(FP), CX
	SHRQ   $3, CX
	VXORPS Y15, Y15, Y15

combine:
	VMOVUPS (SI), Y0
	VADDPS  2048(SI), Y0, Y0
	VMOVUPS 1024(SI), Y1
	VADDPS  3072(SI), Y1, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS 512(SI), Y2
	VADDPS  2560(SI), Y2, Y2
	VMOVUPS 1536(SI), Y3
	VADDPS  3584(SI), Y3, Y3
	VADDPS  Y3, Y2, Y2
	VADDPS  Y2, Y0, Y0
	VMOVUPS Y0, (DI)
	VMOVUPS Y15, (SI)
	VMOVUPS Y15, 512(SI)
	VMOVUPS Y15, 1024(SI)
	VMOVUPS Y15, 1536(SI)
	VMOVUPS Y15, 2048(SI)
	VMOVUPS Y15, 2560(SI)
	VMOVUPS Y15, 3072(SI)
	VMOVUPS Y15, 3584(SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     combine
	VZEROUPPER
	RET

// func iq2xxsTile8AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile8AVX2(SB), NOSPLIT, $0-32
	IQ2T_PROLOGUE
	IQ2T_ZERO8

t8loop:
	IQ2T_START

t8group:
	IQ2T_GROUP(IQ2T_T8)
	JNZ t8group
	IQ2T_FINISH(IQ2T_TERMS8)
	DECQ CX
	JNZ  t8loop
	IQ2T_EIGHTH8
	VZEROUPPER
	RET

// func iq2xxsTile4AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile4AVX2(SB), NOSPLIT, $0-32
	IQ2T_PROLOGUE
	IQ2T_ZERO4

t4loop:
	IQ2T_START

t4group:
	IQ2T_GROUP(IQ2T_T4)
	JNZ t4group
	IQ2T_FINISH(IQ2T_TERMS4)
	DECQ CX
	JNZ  t4loop
	IQ2T_EIGHTH4
	VZEROUPPER
	RET

// func iq2xxsTile2AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile2AVX2(SB), NOSPLIT, $0-32
	IQ2T_PROLOGUE
	IQ2T_ZERO2

t2loop:
	IQ2T_START

t2group:
	IQ2T_GROUP(IQ2T_T2)
	JNZ t2group
	IQ2T_FINISH(IQ2T_TERMS2)
	DECQ CX
	JNZ  t2loop
	IQ2T_EIGHTH2
	VZEROUPPER
	RET

// func iq2xxsTile1AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·iq2xxsTile1AVX2(SB), NOSPLIT, $0-32
	IQ2T_PROLOGUE
	IQ2T_ZERO1

t1loop:
	IQ2T_START

t1group:
	IQ2T_GROUP(IQ2T_T1)
	JNZ t1group
	IQ2T_FINISH(IQ2T_TERMS1)
	DECQ CX
	JNZ  t1loop
	IQ2T_EIGHTH1
	VZEROUPPER
	RET

DATA iq2tBias<>+0(SB)/4, $0x40404040
GLOBL iq2tBias<>(SB), RODATA|NOPTR, $4

// IQ2T_EXPAND sets Yr (low half Xr) to the 32 weights of group g of the
// IQ2_XXS block at P, each plus 64: the grid rows gathered and the signs
// decoded as dot_k_amd64.s's IQ2EXPAND does, from the grid at R10, with
// Y12 zero, Y13 the bytes 64, Y14 the bytes 1 and Y15 ·iq2SignSel; the
// four grid indexes come with one 32-bit load rather than four byte
// loads. It also
// puts the group's signs-and-scale word a1 in dword r of Y11, the row's
// lane of the multiplier vector. Clobbers AX, DX and Y8..Y10.
#define IQ2T_EXPAND(g, P, r, Yr, Xr) \
	MOVL         (g*8+2)P, DX \
	MOVBLZX      DL, AX \
	VMOVQ        (R10)(AX*8), Xr \
	MOVBLZX      DH, AX \
	VPINSRQ      $1, (R10)(AX*8), Xr, Xr \
	SHRL         $16, DX \
	MOVBLZX      DL, AX \
	VMOVQ        (R10)(AX*8), X8 \
	MOVBLZX      DH, AX \
	VPINSRQ      $1, (R10)(AX*8), X8, X8 \
	VINSERTI128  $1, X8, Yr, Yr \
	VPBROADCASTD (g*8+6)P, Y9 \
	VPBLENDD     $(1<<r), Y9, Y11, Y11 \
	VPSHUFB      Y15, Y9, Y9 \
	VPAND        ·iq2SignBits(SB), Y9, Y9 \
	VPCMPEQB     ·iq2SignTest(SB), Y9, Y9 \
	VPSADBW      Y12, Y9, Y10 \
	VPSLLQ       $63, Y10, Y10 \
	VPOR         Y10, Y9, Y9 \
	VPOR         Y14, Y9, Y9 \
	VPSIGNB      Y9, Yr, Yr \
	VPADDB       Y13, Yr, Yr

// IQ2T_STORE stores code vector halves j and j+4 of group g for the eight
// rows, rows 0..3 in Lo's lanes and 4..7 in Hi's (TRANSPOSE4).
#define IQ2T_STORE(g, j, Lo, Hi) \
	VPERM2I128 $0x20, Hi, Lo, Y8 \
	VMOVDQU    Y8, (576*g+64*j)(DI) \
	VPERM2I128 $0x31, Hi, Lo, Y8 \
	VMOVDQU    Y8, (576*g+64*j+256)(DI)

// IQ2T_MULTSTORE stores group g's multipliers 2ls+1 = (a1>>27)|1 of the
// eight rows, from their words a1 in Y11 (IQ2T_EXPAND), with Y14 the bytes
// 1. Clobbers Y8. One blend a row and one vector store, fewer
// instructions than a load, a shift, an OR and a store a row.
#define IQ2T_MULTSTORE(g) \
	VPSRLD  $27, Y11, Y11 \
	VPSRLD  $24, Y14, Y8 \
	VPOR    Y8, Y11, Y11 \
	VMOVDQU Y11, (576*g+512)(DI)

// IQ2T_PACKGROUP packs group g past the current one (the pack's loop
// passes 0 and moves the pointers a group a step) of the eight rows at
// (SI), (SI)(BX*1), (SI)(BX*2), (R8), (SI)(BX*4), (R8)(BX*2), (R9) and
// (R9)(BX*1): it expands each row's group into a register, whose dword k
// is then the row's four weights of code vector k, stores the multipliers
// and transposes the weights. Every part of it counts for its time, and
// the variants tried were no faster (docs/performance.md#kernel-design-notes).
#define IQ2T_PACKGROUP(g) \
	IQ2T_EXPAND(g, (SI), 0, Y0, X0) \
	IQ2T_EXPAND(g, (SI)(BX*1), 1, Y1, X1) \
	IQ2T_EXPAND(g, (SI)(BX*2), 2, Y2, X2) \
	IQ2T_EXPAND(g, (R8), 3, Y3, X3) \
	IQ2T_EXPAND(g, (SI)(BX*4), 4, Y4, X4) \
	IQ2T_EXPAND(g, (R8)(BX*2), 5, Y5, X5) \
	IQ2T_EXPAND(g, (R9), 6, Y6, X6) \
	IQ2T_EXPAND(g, (R9)(BX*1), 7, Y7, X7) \
	IQ2T_MULTSTORE(g) \
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y8, Y9, Y10, Y11) \
	TRANSPOSE4(Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11) \
	IQ2T_STORE(g, 0, Y0, Y4) \
	IQ2T_STORE(g, 1, Y1, Y5) \
	IQ2T_STORE(g, 2, Y2, Y6) \
	IQ2T_STORE(g, 3, Y3, Y7)

// func packIQ2XXSTileAVX2Asm(dst, w *byte, rowBytes, nb int, next *byte, step int)
//
// Packs eight rows at a time, rows 0..7 into the low 32 bytes of each code
// vector and rows 8..15 into the high ones, as packQ8_0TileAVX2Asm does,
// a block group by group (a loop, for the reason the products' groups
// are one). In prefill the rows come from memory, eight
// streams 66 bytes a step, which the hardware prefetchers do not keep
// ahead of, so it asks for each row's lines four blocks ahead.
TEXT ·packIQ2XXSTileAVX2Asm(SB), NOSPLIT, $0-48
	MOVQ         w+8(FP), R12
	MOVQ         rowBytes+16(FP), BX
	LEAQ         ·iq2xxsGrid(SB), R10
	VPXOR        Y12, Y12, Y12
	VPBROADCASTD iq2tBias<>(SB), Y13
	VMOVDQU      ·iq2Ones(SB), Y14
	VMOVDQU      ·iq2SignSel(SB), Y15
	XORQ         R11, R11

iq2phalf:
	PACK_HALF

iq2pblock:
	PACK_PREFETCH(264)
	PACK_PREFETCH(328)
	PACK_NEXT_BEGIN
	NEXT8(0)
	NEXT1(512)
	PACK_NEXT_END
	PACK_F16(0, 4608, X0, Y0)
	MOVL $8, R13

iq2pgroup:
	IQ2T_PACKGROUP(0)
	ADDQ $8, SI
	ADDQ $8, R8
	ADDQ $8, R9
	ADDQ $576, DI
	DECQ R13
	JNZ  iq2pgroup

	ADDQ $(const_dotIQ2XXSBytes-64), SI
	ADDQ $(const_dotIQ2XXSBytes-64), R8
	ADDQ $(const_dotIQ2XXSBytes-64), R9
	ADDQ $(const_iq2xxsTileBlockBytes-8*576), DI
	DECQ CX
	JNZ  iq2pblock

	PACK_NEXT_HALF
	JLT  iq2phalf
	VZEROUPPER
	RET

// q2tScale holds 16 VPSHUFB controls, eight for even and then eight for odd
// bytes. Applied to a row's 16 scale bytes (low nibbles) in both lanes,
// control 4h+j puts scale 8h+2j in the even (odd) bytes of the low lane
// and scale 8h+2j+1 in those of the high lane, zero in the others: the
// multipliers of the 32 codes of elements 128h+32j..+31.
DATA q2tScale<>+0(SB)/8, $0x8000800080008000
DATA q2tScale<>+8(SB)/8, $0x8000800080008000
DATA q2tScale<>+16(SB)/8, $0x8001800180018001
DATA q2tScale<>+24(SB)/8, $0x8001800180018001
DATA q2tScale<>+32(SB)/8, $0x8002800280028002
DATA q2tScale<>+40(SB)/8, $0x8002800280028002
DATA q2tScale<>+48(SB)/8, $0x8003800380038003
DATA q2tScale<>+56(SB)/8, $0x8003800380038003
DATA q2tScale<>+64(SB)/8, $0x8004800480048004
DATA q2tScale<>+72(SB)/8, $0x8004800480048004
DATA q2tScale<>+80(SB)/8, $0x8005800580058005
DATA q2tScale<>+88(SB)/8, $0x8005800580058005
DATA q2tScale<>+96(SB)/8, $0x8006800680068006
DATA q2tScale<>+104(SB)/8, $0x8006800680068006
DATA q2tScale<>+112(SB)/8, $0x8007800780078007
DATA q2tScale<>+120(SB)/8, $0x8007800780078007
DATA q2tScale<>+128(SB)/8, $0x8008800880088008
DATA q2tScale<>+136(SB)/8, $0x8008800880088008
DATA q2tScale<>+144(SB)/8, $0x8009800980098009
DATA q2tScale<>+152(SB)/8, $0x8009800980098009
DATA q2tScale<>+160(SB)/8, $0x800a800a800a800a
DATA q2tScale<>+168(SB)/8, $0x800a800a800a800a
DATA q2tScale<>+176(SB)/8, $0x800b800b800b800b
DATA q2tScale<>+184(SB)/8, $0x800b800b800b800b
DATA q2tScale<>+192(SB)/8, $0x800c800c800c800c
DATA q2tScale<>+200(SB)/8, $0x800c800c800c800c
DATA q2tScale<>+208(SB)/8, $0x800d800d800d800d
DATA q2tScale<>+216(SB)/8, $0x800d800d800d800d
DATA q2tScale<>+224(SB)/8, $0x800e800e800e800e
DATA q2tScale<>+232(SB)/8, $0x800e800e800e800e
DATA q2tScale<>+240(SB)/8, $0x800f800f800f800f
DATA q2tScale<>+248(SB)/8, $0x800f800f800f800f
DATA q2tScale<>+256(SB)/8, $0x0080008000800080
DATA q2tScale<>+264(SB)/8, $0x0080008000800080
DATA q2tScale<>+272(SB)/8, $0x0180018001800180
DATA q2tScale<>+280(SB)/8, $0x0180018001800180
DATA q2tScale<>+288(SB)/8, $0x0280028002800280
DATA q2tScale<>+296(SB)/8, $0x0280028002800280
DATA q2tScale<>+304(SB)/8, $0x0380038003800380
DATA q2tScale<>+312(SB)/8, $0x0380038003800380
DATA q2tScale<>+320(SB)/8, $0x0480048004800480
DATA q2tScale<>+328(SB)/8, $0x0480048004800480
DATA q2tScale<>+336(SB)/8, $0x0580058005800580
DATA q2tScale<>+344(SB)/8, $0x0580058005800580
DATA q2tScale<>+352(SB)/8, $0x0680068006800680
DATA q2tScale<>+360(SB)/8, $0x0680068006800680
DATA q2tScale<>+368(SB)/8, $0x0780078007800780
DATA q2tScale<>+376(SB)/8, $0x0780078007800780
DATA q2tScale<>+384(SB)/8, $0x0880088008800880
DATA q2tScale<>+392(SB)/8, $0x0880088008800880
DATA q2tScale<>+400(SB)/8, $0x0980098009800980
DATA q2tScale<>+408(SB)/8, $0x0980098009800980
DATA q2tScale<>+416(SB)/8, $0x0a800a800a800a80
DATA q2tScale<>+424(SB)/8, $0x0a800a800a800a80
DATA q2tScale<>+432(SB)/8, $0x0b800b800b800b80
DATA q2tScale<>+440(SB)/8, $0x0b800b800b800b80
DATA q2tScale<>+448(SB)/8, $0x0c800c800c800c80
DATA q2tScale<>+456(SB)/8, $0x0c800c800c800c80
DATA q2tScale<>+464(SB)/8, $0x0d800d800d800d80
DATA q2tScale<>+472(SB)/8, $0x0d800d800d800d80
DATA q2tScale<>+480(SB)/8, $0x0e800e800e800e80
DATA q2tScale<>+488(SB)/8, $0x0e800e800e800e80
DATA q2tScale<>+496(SB)/8, $0x0f800f800f800f80
DATA q2tScale<>+504(SB)/8, $0x0f800f800f800f80
GLOBL q2tScale<>(SB), RODATA|NOPTR, $512

DATA q2tThree<>+0(SB)/4, $0x03030303
GLOBL q2tThree<>(SB), RODATA|NOPTR, $4

DATA q2tFifteen<>+0(SB)/4, $0x0f0f0f0f
GLOBL q2tFifteen<>(SB), RODATA|NOPTR, $4

// Q2P_ROW sets Yr to the row at P's 32 packed weights q·s of elements
// 128h+32j..+31: its codes (bits 2j..2j+1 of code bytes 32h..32h+31) times
// their sub-block scales, as two VPMADDUBSW of the codes by the scales in
// the even and in the odd bytes, merged. Y12 holds the bytes 3, Y13 the
// bytes 15, X14 the shift 2j and R13 points at q2tScale's controls of j
// (32j past its start); clobbers Y8..Y11.
#define Q2P_ROW(h, P, Yr) \
	VMOVDQU        (16+32*h)P, Yr \
	VPSRLW         X14, Yr, Yr \
	VPAND          Y12, Yr, Yr \
	VBROADCASTI128 P, Y8 \
	VPAND          Y13, Y8, Y8 \
	VPSHUFB        (128*h)(R13), Y8, Y9 \
	VPMADDUBSW     Y9, Yr, Y10 \
	VPSHUFB        (256+128*h)(R13), Y8, Y9 \
	VPMADDUBSW     Y9, Yr, Y11 \
	VPSLLW         $8, Y11, Y11 \
	VPOR           Y11, Y10, Yr

// Q2P_MINROW sets Yr to the row at P's 16 mins (scale high nibbles) as
// int16.
#define Q2P_MINROW(P, Yr) \
	VPMOVZXBW P, Yr \
	VPSRLW    $4, Yr, Yr

// Q2P_STORE stores vectors j and j+4 of the 64-byte vectors from off, for
// the eight rows, rows 0..3 in Lo's lanes and 4..7 in Hi's (TRANSPOSE4).
#define Q2P_STORE(off, j, Lo, Hi) \
	VPERM2I128 $0x20, Hi, Lo, Y8 \
	VMOVDQU    Y8, (off+64*j)(DI) \
	VPERM2I128 $0x31, Hi, Lo, Y8 \
	VMOVDQU    Y8, (off+64*j+256)(DI)

// Q2P_TRANSPOSE transposes the eight rows' dwords in Y0..Y7 and stores
// them as the eight 64-byte vectors from off.
#define Q2P_TRANSPOSE(off) \
	TRANSPOSE4(Y0, Y1, Y2, Y3, Y8, Y9, Y10, Y11) \
	TRANSPOSE4(Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11) \
	Q2P_STORE(off, 0, Y0, Y4) \
	Q2P_STORE(off, 1, Y1, Y5) \
	Q2P_STORE(off, 2, Y2, Y6) \
	Q2P_STORE(off, 3, Y3, Y7)

// Q2P_CODES packs code vectors 32h+8j..32h+8j+7 of the eight rows, j
// being the step of the loop over j: R13 points at the VPSHUFB controls of
// j, X14 holds the shift 2j and DI is 512j past the block's start.
#define Q2P_CODES(h) \
	Q2P_ROW(h, (SI), Y0) \
	Q2P_ROW(h, (SI)(BX*1), Y1) \
	Q2P_ROW(h, (SI)(BX*2), Y2) \
	Q2P_ROW(h, (R8), Y3) \
	Q2P_ROW(h, (SI)(BX*4), Y4) \
	Q2P_ROW(h, (R8)(BX*2), Y5) \
	Q2P_ROW(h, (R9), Y6) \
	Q2P_ROW(h, (R9)(BX*1), Y7) \
	Q2P_TRANSPOSE(2048*h)

// func packQ2KTileAVX2Asm(dst, w *byte, rowBytes, nb int, next *byte, step int)
//
// Packs eight rows at a time, rows 0..7 into the low 32 bytes of each
// vector and rows 8..15 into the high ones, as packQ8_0TileAVX2Asm does,
// prefetching each row's lines four blocks ahead as
// packIQ2XXSTileAVX2Asm does, the four shifts j of the codes a loop (see
// the IQ2_XXS products' register use).
TEXT ·packQ2KTileAVX2Asm(SB), NOSPLIT, $0-48
	MOVQ         w+8(FP), R12
	MOVQ         rowBytes+16(FP), BX
	LEAQ         q2tScale<>(SB), R13
	VPBROADCASTD q2tThree<>(SB), Y12
	VPBROADCASTD q2tFifteen<>(SB), Y13
	MOVL         $2, AX
	VMOVQ        AX, X15
	XORQ         R11, R11

q2phalf:
	PACK_HALF

q2pblock:
	PACK_PREFETCH(336)
	PACK_PREFETCH(400)
	PACK_NEXT_BEGIN
	NEXT8(0)
	NEXT1(512)
	NEXT1(576)
	NEXT1(640)
	PACK_NEXT_END
	VPXOR X14, X14, X14
	MOVL  $4, R10

q2pstep:
	Q2P_CODES(0)
	Q2P_CODES(1)
	VPADDQ X15, X14, X14
	ADDQ   $32, R13
	ADDQ   $512, DI
	DECQ   R10
	JNZ    q2pstep

	SUBQ $128, R13
	SUBQ $2048, DI
	Q2P_MINROW((SI), Y0)
	Q2P_MINROW((SI)(BX*1), Y1)
	Q2P_MINROW((SI)(BX*2), Y2)
	Q2P_MINROW((R8), Y3)
	Q2P_MINROW((SI)(BX*4), Y4)
	Q2P_MINROW((R8)(BX*2), Y5)
	Q2P_MINROW((R9), Y6)
	Q2P_MINROW((R9)(BX*1), Y7)
	Q2P_TRANSPOSE(4096)
	PACK_F16(80, 4608, X0, Y0)
	PACK_F16(82, 4672, X0, Y0)

	ADDQ $const_dotQ2KBytes, SI
	ADDQ $const_dotQ2KBytes, R8
	ADDQ $const_dotQ2KBytes, R9
	ADDQ $const_q2KTileBlockBytes, DI
	DECQ CX
	JNZ  q2pblock

	PACK_NEXT_HALF
	JLT  q2phalf
	VZEROUPPER
	RET

// func q2KTile8AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile8AVX2(SB), NOSPLIT, $0-32
	Q2T_PROLOGUE
	IQ2T_ZERO8

q2t8block:
	MOVQ $8, R10

q2t8inner:
	Q2T_INNER(Q2T_T8)
	DECQ R10
	JNZ  q2t8inner
	Q2T_FINISH(Q2T_TERMS8)
	DECQ CX
	JNZ  q2t8block
	VZEROUPPER
	RET

// func q2KTile4AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile4AVX2(SB), NOSPLIT, $0-32
	Q2T_PROLOGUE
	IQ2T_ZERO4

q2t4block:
	MOVQ $8, R10

q2t4inner:
	Q2T_INNER(Q2T_T4)
	DECQ R10
	JNZ  q2t4inner
	Q2T_FINISH(Q2T_TERMS4)
	DECQ CX
	JNZ  q2t4block
	VZEROUPPER
	RET

// func q2KTile2AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile2AVX2(SB), NOSPLIT, $0-32
	Q2T_PROLOGUE
	IQ2T_ZERO2

q2t2block:
	MOVQ $8, R10

q2t2inner:
	Q2T_INNER(Q2T_T2)
	DECQ R10
	JNZ  q2t2inner
	Q2T_FINISH(Q2T_TERMS2)
	DECQ CX
	JNZ  q2t2block
	VZEROUPPER
	RET

// func q2KTile1AVX2(tile *byte, y *BlockQ8K, nb int, out *float32)
TEXT ·q2KTile1AVX2(SB), NOSPLIT, $0-32
	Q2T_PROLOGUE
	IQ2T_ZERO1

q2t1block:
	MOVQ $8, R10

q2t1inner:
	Q2T_INNER(Q2T_T1)
	DECQ R10
	JNZ  q2t1inner
	Q2T_FINISH(Q2T_TERMS1)
	DECQ CX
	JNZ  q2t1block
	VZEROUPPER
	RET
