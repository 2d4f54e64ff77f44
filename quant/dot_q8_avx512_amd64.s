//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 (VNNI) bodies of the Q8_0 dot products; dot_q8_avx512_amd64.go
// states their numerics: they give the AVX2 kernels' results bit for bit.
// They need AVX512F, BW (byte ops and VPMOVB2M on ZMM), VL (EVEX ops on
// YMM) and VNNI (VPDPBUSD).
//
// Products. A ZMM holds two blocks' 32 codes, the first in its low half and
// the second in its high half; the 34- and 36-byte block strides rule out
// one 64-byte load, so the second block comes in with VINSERTI64X4 from
// memory. VPDPBUSD multiplies unsigned by signed bytes and sums four
// adjacent products into each int32 lane, so, as in the AVX2 kernels, the
// weight's magnitude |w| (VPABSB, 128 included) is the unsigned operand and
// the activation takes the weight's sign: a merge-masked VPSUBB from zero
// under the mask of negative weights (VPMOVB2M), since AVX-512 has no
// VPSIGNB. A lane then sums four products of at most 128·127, exactly what
// VPMADDUBSW with VPMADDWD made, in one instruction instead of two. The
// weight's magnitudes and sign masks are formed once per block and shared
// by the four activations of the x4 kernel. The precondition is the AVX2
// kernels': an activation code of -128 against a negative weight does not
// negate, and QuantizeQ8_0 never produces -128 (act.go: a block too small
// for a finite 1/d gets codes 0).
//
// Reduction. The four such ZMM of eight blocks are reduced in two levels of
// two non-destructive shuffles and one add each (VPUNPCKLDQ/VPUNPCKHDQ
// pair the dwords of two registers, VPUNPCKLQDQ/VPUNPCKHQDQ the qwords of
// two of those), leaving in 128-bit lane ℓ the sums of lane ℓ of each of
// the four. A third level, two VSHUFI32X4 and an add, pairs the 128-bit
// lanes that hold the two halves of a block, for sixteen blocks at once
// (two such results) or eight. No level needs a lane permutation of its
// own: lane i of the result sums block π(i), with π = 0 2 4 6 1 3 5 7 and
// then the same plus 8, and the scales are fetched in that order instead
// of sorting the sums.
//
// Float part. The block sums are converted (exactly: |sum| < 2^24),
// multiplied by their scales f16(d_w)·d_x, formed as the reference forms
// them, and added to eight float32 lanes, lane j taking the blocks ≡ π(j)
// mod 8 one group of eight after the other: exactly the additions the AVX2
// kernel makes in its lane b mod 8. The lanes are put back in block order
// once at the end (VPERMD) and summed with the AVX2 kernel's tree, and the
// last len%8 blocks are added one by one, as in the AVX2 kernel.
//
// Scales. A 64-byte load from the start of an even block holds the scales
// of that block and of the next (activation: dwords 0 and 9; weight: words
// 0 and 17). One two-table permute (VPERMT2PS, VPERMT2W) joins two such
// loads into four scales and a second two fours into eight in π order:
// three shuffles for eight scales, where inserting them one by one takes
// seven, and gathers (VPGATHERDD, VGATHERDPS) made both kernels about 1.35
// times slower on AMD Zen 5. No load reaches past the last block it serves.
//
// The two kernels load differently, each the faster way on Zen 5. The
// single-token one takes eight blocks a step and reads a pair of blocks
// with that 64-byte load, which also holds the first block's codes (moved
// to byte 0 by VPERMW or VALIGND), and one 32-byte insert: two loads a pair
// instead of three, about 8% faster than the way below. The four-token one
// takes sixteen blocks a step and reads the codes with a 32-byte load and
// an insert and the scales with loads of their own: the extra shuffles of
// the first way, and its third reduction level every eight blocks, made it
// about 5% slower.
//
// Tried on Zen 5 and not kept, as no faster or slower: the first reduction
// level by shifts and a masked add instead of unpacks; the second block of
// a register by a merge-masked load, or by a broadcast load and a blend,
// instead of VINSERTI64X4.

// q8ScaleD1 and q8ScaleD2 are the two activation scale permutes' controls,
// q8ScaleW1 and q8ScaleW2 the weight ones'; the lanes past the listed ones
// are unused.
DATA q8ScaleD1<>+0(SB)/8, $0x0000000900000000
DATA q8ScaleD1<>+8(SB)/8, $0x0000001900000010
DATA q8ScaleD1<>+16(SB)/8, $0x0000000000000000
DATA q8ScaleD1<>+24(SB)/8, $0x0000000000000000
DATA q8ScaleD1<>+32(SB)/8, $0x0000000000000000
DATA q8ScaleD1<>+40(SB)/8, $0x0000000000000000
DATA q8ScaleD1<>+48(SB)/8, $0x0000000000000000
DATA q8ScaleD1<>+56(SB)/8, $0x0000000000000000
GLOBL q8ScaleD1<>(SB), RODATA|NOPTR, $64

DATA q8ScaleD2<>+0(SB)/8, $0x0000000200000000
DATA q8ScaleD2<>+8(SB)/8, $0x0000001200000010
DATA q8ScaleD2<>+16(SB)/8, $0x0000000300000001
DATA q8ScaleD2<>+24(SB)/8, $0x0000001300000011
DATA q8ScaleD2<>+32(SB)/8, $0x0000000000000000
DATA q8ScaleD2<>+40(SB)/8, $0x0000000000000000
DATA q8ScaleD2<>+48(SB)/8, $0x0000000000000000
DATA q8ScaleD2<>+56(SB)/8, $0x0000000000000000
GLOBL q8ScaleD2<>(SB), RODATA|NOPTR, $64

DATA q8ScaleW1<>+0(SB)/8, $0x0031002000110000
DATA q8ScaleW1<>+8(SB)/8, $0x0000000000000000
DATA q8ScaleW1<>+16(SB)/8, $0x0000000000000000
DATA q8ScaleW1<>+24(SB)/8, $0x0000000000000000
DATA q8ScaleW1<>+32(SB)/8, $0x0000000000000000
DATA q8ScaleW1<>+40(SB)/8, $0x0000000000000000
DATA q8ScaleW1<>+48(SB)/8, $0x0000000000000000
DATA q8ScaleW1<>+56(SB)/8, $0x0000000000000000
GLOBL q8ScaleW1<>(SB), RODATA|NOPTR, $64

DATA q8ScaleW2<>+0(SB)/8, $0x0022002000020000
DATA q8ScaleW2<>+8(SB)/8, $0x0023002100030001
DATA q8ScaleW2<>+16(SB)/8, $0x0000000000000000
DATA q8ScaleW2<>+24(SB)/8, $0x0000000000000000
DATA q8ScaleW2<>+32(SB)/8, $0x0000000000000000
DATA q8ScaleW2<>+40(SB)/8, $0x0000000000000000
DATA q8ScaleW2<>+48(SB)/8, $0x0000000000000000
DATA q8ScaleW2<>+56(SB)/8, $0x0000000000000000
GLOBL q8ScaleW2<>(SB), RODATA|NOPTR, $64


// q8WordShift is the VPERMW control that moves every word down by one:
// word i takes word i+1.
DATA q8WordShift<>+0(SB)/8, $0x0004000300020001
DATA q8WordShift<>+8(SB)/8, $0x0008000700060005
DATA q8WordShift<>+16(SB)/8, $0x000c000b000a0009
DATA q8WordShift<>+24(SB)/8, $0x0010000f000e000d
DATA q8WordShift<>+32(SB)/8, $0x0014001300120011
DATA q8WordShift<>+40(SB)/8, $0x0018001700160015
DATA q8WordShift<>+48(SB)/8, $0x001c001b001a0019
DATA q8WordShift<>+56(SB)/8, $0x0000001f001e001d
GLOBL q8WordShift<>(SB), RODATA|NOPTR, $64

// q8Unperm is the VPERMD control that puts the accumulator's lanes, which
// hold the blocks ≡ π(0..7) = 0 2 4 6 1 3 5 7 mod 8, back in block order.
DATA q8Unperm<>+0(SB)/8, $0x0000000400000000
DATA q8Unperm<>+8(SB)/8, $0x0000000500000001
DATA q8Unperm<>+16(SB)/8, $0x0000000600000002
DATA q8Unperm<>+24(SB)/8, $0x0000000700000003
GLOBL q8Unperm<>(SB), RODATA|NOPTR, $32

// Register use common to both kernels: Z4..Z7 hold the magnitudes of the
// current eight weight blocks (two per register) and K1..K4 their sign
// masks; Z21, Z22, Z28 and Z29 the scale permutes' controls and Z23 zero.

// LANES sums the eight lanes of Y, in π order, as the AVX2 kernel does in
// block order, into the low lane of X; Y26 holds q8Unperm. Clobbers X15.
#define LANES(Y, X) \
	VPERMD       Y, Y26, Y \
	VEXTRACTF128 $1, Y, X15 \
	VADDPS       X15, X, X \
	VMOVHLPS     X, X, X15 \
	VADDPS       X15, X, X \
	VMOVSHDUP    X, X15 \
	VADDSS       X15, X, X

// ONEW prepares the weight block at 0(SI) for ONE.
#define ONEW \
	VMOVDQU64 2(SI), Y4 \
	VPMOVB2M  Y4, K1 \
	VPABSB    Y4, Y4 \
	MOVWLZX   0(SI), AX \
	VMOVD     AX, X5 \
	VCVTPH2PS X5, X5

// ONE adds the term of one block, the weight's magnitudes in Y4, its sign
// mask in K1 and its converted scale in X5 (ONEW), and the activation block
// at 0(XP), to the low lane of ACC, as the AVX2 kernel's tail does.
// Clobbers Y12 and Y13.
#define ONE(XP, ACC) \
	VMOVDQU64    4(XP), Y12 \
	VPSUBB       Y12, Y23, K1, Y12 \
	VPXORD       Y13, Y13, Y13 \
	VPDPBUSD     Y12, Y4, Y13 \
	VEXTRACTI128 $1, Y13, X12 \
	VPADDD       X12, X13, X13 \
	VPSHUFD      $0x4e, X13, X12 \
	VPADDD       X12, X13, X13 \
	VPSHUFD      $0xb1, X13, X12 \
	VPADDD       X12, X13, X13 \
	VCVTDQ2PS    X13, X13 \
	VMULSS       0(XP), X5, X12 \
	VMULSS       X12, X13, X13 \
	VADDSS       X13, ACC, ACC

// SETUP loads the constants.
#define SETUP \
	VPXORD    Z23, Z23, Z23 \
	VMOVDQU64 q8ScaleD1<>(SB), Z21 \
	VMOVDQU64 q8ScaleD2<>(SB), Z22 \
	VMOVDQU64 q8ScaleW1<>(SB), Z28 \
	VMOVDQU64 q8ScaleW2<>(SB), Z29

// The single-token kernel: Y20 holds the eight converted weight scales in
// π order and Z24 q8WordShift; Z8..Z19, Z25..Z27 and Z30 are scratch.

// SW2 loads the weight blocks at woff(SI) and woff+34(SI), leaving in ZR
// the 64 bytes from woff (both scales, at words 0 and 17), in ZW the codes'
// magnitudes and in K the mask of their negative codes. The first block's
// codes come from ZR moved down a word (VPERMW), not from a load of their
// own.
#define SW2(woff, ZR, ZW, K) \
	VMOVDQU64    (woff)(SI), ZR \
	VPERMW       ZR, Z24, ZW \
	VINSERTI64X4 $1, (woff+36)(SI), ZW, ZW \
	VPMOVB2M     ZW, K \
	VPABSB       ZW, ZW

// SWHALF prepares the eight weight blocks from 0(SI): magnitudes in Z4..Z7,
// sign masks in K1..K4 and converted scales in Y20. Clobbers Z12..Z15.
#define SWHALF \
	SW2(0, Z12, Z4, K1) \
	SW2(68, Z13, Z5, K2) \
	SW2(136, Z14, Z6, K3) \
	SW2(204, Z15, Z7, K4) \
	VPERMT2W  Z13, Z28, Z12 \
	VPERMT2W  Z15, Z28, Z14 \
	VPERMT2W  Z14, Z29, Z12 \
	VCVTPH2PS X12, Y20

// SA2 sums the products of the activation blocks at xoff(XP) and
// xoff+36(XP) with the weight blocks of ZW and K into the int32 lanes of
// ZACC, block one in the low eight, block two in the high eight, and
// leaves in ZR the 64 bytes from xoff (both scales, at dwords 0 and 9). The
// first block's codes come from ZR moved down a dword (VALIGND), as in
// SW2.
#define SA2(XP, xoff, ZR, ZA, K, ZW, ZACC) \
	VMOVDQU64    (xoff)(XP), ZR \
	VALIGND      $1, ZR, ZR, ZA \
	VINSERTI64X4 $1, (xoff+40)(XP), ZA, ZA \
	VPSUBB       ZA, Z23, K, ZA \
	VPXORD       ZACC, ZACC, ZACC \
	VPDPBUSD     ZA, ZW, ZACC

// SAHALF sums the eight activation blocks from 0(XP) against the weight
// blocks of SWHALF and leaves in Z8, per 128-bit lane ℓ, the sums of lane ℓ
// of each of the four SA2 registers (two of the three reduction levels),
// and in Y25 the eight activation scales in π order.
#define SAHALF(XP) \
	SA2(XP, 0, Z25, Z12, K1, Z4, Z16) \
	SA2(XP, 72, Z26, Z13, K2, Z5, Z17) \
	SA2(XP, 144, Z27, Z14, K3, Z6, Z18) \
	SA2(XP, 216, Z30, Z15, K4, Z7, Z19) \
	VPERMT2PS   Z26, Z21, Z25 \
	VPERMT2PS   Z30, Z21, Z27 \
	VPERMT2PS   Z27, Z22, Z25 \
	VPUNPCKLDQ  Z17, Z16, Z12 \
	VPUNPCKHDQ  Z17, Z16, Z16 \
	VPADDD      Z12, Z16, Z16 \
	VPUNPCKLDQ  Z19, Z18, Z13 \
	VPUNPCKHDQ  Z19, Z18, Z18 \
	VPADDD      Z13, Z18, Z18 \
	VPUNPCKLQDQ Z18, Z16, Z12 \
	VPUNPCKHQDQ Z18, Z16, Z16 \
	VPADDD      Z12, Z16, Z8

// SSTEP8 finishes eight blocks for one activation after SAHALF: the third
// reduction level pairs the 128-bit lanes that hold a block's two halves,
// leaving the eight block sums in π order in Y9; they are converted
// (exactly: |sum| < 2^24), multiplied by their scales f16(d_w)·d_x and
// added to the eight lanes of ACC. Clobbers Z9, Z10 and Y25.
#define SSTEP8(ACC) \
	VSHUFI32X4 $0x88, Z8, Z8, Z9 \
	VSHUFI32X4 $0xdd, Z8, Z8, Z10 \
	VPADDD     Y10, Y9, Y9 \
	VCVTDQ2PS  Y9, Y9 \
	VMULPS     Y25, Y20, Y25 \
	VMULPS     Y25, Y9, Y9 \
	VADDPS     Y9, ACC, ACC

// func dotQ8_0AVX512Asm(w []byte, x []BlockQ8_0) float32
//
// Eight blocks a step into eight float32 lanes, then the lane tree and the
// last len%8 blocks one by one.
TEXT ·dotQ8_0AVX512Asm(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   x_base+24(FP), DI
	MOVQ   x_len+32(FP), CX
	VXORPS X0, X0, X0
	SETUP
	VMOVDQU64 q8WordShift<>(SB), Z24
	SUBQ   $8, CX
	JLT    stail

s8loop:
	SWHALF
	SAHALF(DI)
	SSTEP8(Y0)
	ADDQ $272, SI
	ADDQ $288, DI
	SUBQ $8, CX
	JGE  s8loop

stail:
	VMOVDQU64 q8Unperm<>(SB), Y26
	LANES(Y0, X0)
	ADDQ $8, CX
	JZ   sdone

s1loop:
	ONEW
	ONE(DI, X0)
	ADDQ $34, SI
	ADDQ $36, DI
	DECQ CX
	JNZ  s1loop

sdone:
	VZEROUPPER
	MOVSS X0, ret+48(FP)
	RET

// The four-token kernel: Z20 holds the sixteen converted weight scales in
// π order and the first half's sums of the four activations wait in
// Z8..Z11; Z12..Z19, Z24..Z27 and Z30 are scratch.

// X4W2 loads the weight blocks at woff(SI) and woff+34(SI) into one register
// and leaves their magnitudes in ZW and their negative codes' mask in K.
#define X4W2(woff, YW, ZW, K) \
	VMOVDQU64    (woff+2)(SI), YW \
	VINSERTI64X4 $1, (woff+36)(SI), ZW, ZW \
	VPMOVB2M     ZW, K \
	VPABSB       ZW, ZW

// X4WHALF prepares the eight weight blocks from woff(SI) in Z4..Z7, K1..K4.
#define X4WHALF(woff) \
	X4W2(woff, Y4, Z4, K1) \
	X4W2(woff+68, Y5, Z5, K2) \
	X4W2(woff+136, Y6, Z6, K3) \
	X4W2(woff+204, Y7, Z7, K4)

// X4A2 sums the products of the activation blocks at xoff(XP) and
// xoff+36(XP) with the weight blocks of ZW and K into the int32 lanes of
// ZACC: block one in the low eight, block two in the high eight.
#define X4A2(XP, xoff, YA, ZA, K, ZW, ZACC) \
	VMOVDQU64    (xoff+4)(XP), YA \
	VINSERTI64X4 $1, (xoff+40)(XP), ZA, ZA \
	VPSUBB       ZA, Z23, K, ZA \
	VPXORD       ZACC, ZACC, ZACC \
	VPDPBUSD     ZA, ZW, ZACC

// X4AHALF sums the eight activation blocks from xoff(XP) against the weight
// blocks of X4WHALF and leaves in Q, per 128-bit lane ℓ, the sums of lane ℓ
// of each of the four X4A2 registers: two of the three reduction levels.
#define X4AHALF(XP, xoff, Q) \
	X4A2(XP, xoff, Y12, Z12, K1, Z4, Z16) \
	X4A2(XP, xoff+72, Y13, Z13, K2, Z5, Z17) \
	X4A2(XP, xoff+144, Y14, Z14, K3, Z6, Z18) \
	X4A2(XP, xoff+216, Y15, Z15, K4, Z7, Z19) \
	VPUNPCKLDQ  Z17, Z16, Z12 \
	VPUNPCKHDQ  Z17, Z16, Z16 \
	VPADDD      Z12, Z16, Z16 \
	VPUNPCKLDQ  Z19, Z18, Z13 \
	VPUNPCKHDQ  Z19, Z18, Z18 \
	VPADDD      Z13, Z18, Z18 \
	VPUNPCKLQDQ Z18, Z16, Z12 \
	VPUNPCKHQDQ Z18, Z16, Z16 \
	VPADDD      Z12, Z16, Q

// X4W8 leaves in the low eight words of Z the f16 scales of the eight weight
// blocks from woff(SI), in π order. Clobbers Z30.
#define X4W8(woff, Z) \
	VMOVDQU64 (woff)(SI), Z \
	VPERMT2W  (woff+68)(SI), Z28, Z \
	VMOVDQU64 (woff+136)(SI), Z30 \
	VPERMT2W  (woff+204)(SI), Z28, Z30 \
	VPERMT2W  Z30, Z29, Z

// X4WSCALES16 leaves the converted scales of the sixteen weight blocks from
// 0(SI) in Z20, in π order. Clobbers Z24 and Z30.
#define X4WSCALES16 \
	X4W8(0, Z20) \
	X4W8(272, Z24) \
	VINSERTI32X4 $1, X24, Y20, Y20 \
	VCVTPH2PS    Y20, Z20

// X4WSCALES8 leaves the converted scales of the eight weight blocks from
// 0(SI) in the low half of Z20, in π order, and zeroes the high half.
// Clobbers Z30.
#define X4WSCALES8 \
	X4W8(0, Z20) \
	VCVTPH2PS X20, Y20

// X4SCALES8 leaves in the low eight lanes of Z the scales of the eight
// activation blocks from xoff(XP), in π order. Clobbers Z30.
#define X4SCALES8(XP, xoff, Z) \
	VMOVUPS   (xoff)(XP), Z \
	VPERMT2PS (xoff+72)(XP), Z21, Z \
	VMOVUPS   (xoff+144)(XP), Z30 \
	VPERMT2PS (xoff+216)(XP), Z21, Z30 \
	VPERMT2PS Z30, Z22, Z

// X4SUMS turns the half sums QA (blocks 0..7) and QB (blocks 8..15) into
// the sixteen block sums in π order, converted to float32, in Z24.
// Clobbers Z25.
#define X4SUMS(QA, QB) \
	VSHUFI32X4 $0x88, QB, QA, Z24 \
	VSHUFI32X4 $0xdd, QB, QA, Z25 \
	VPADDD     Z25, Z24, Z24 \
	VCVTDQ2PS  Z24, Z24

// X4TERMS16 multiplies the sums of X4SUMS by the scales f16(d_w)·d_x of the
// sixteen blocks from 0(XP), giving the terms in Z24. Clobbers Z25, Z26
// and Z30.
#define X4TERMS16(XP) \
	X4SCALES8(XP, 0, Z25) \
	X4SCALES8(XP, 288, Z26) \
	VINSERTF64X4 $1, Y26, Z25, Z25 \
	VMULPS       Z25, Z20, Z25 \
	VMULPS       Z25, Z24, Z24

// X4TERMS8 is X4TERMS16 for the eight blocks from 0(XP): the low half of Z24
// holds their terms.
#define X4TERMS8(XP) \
	X4SCALES8(XP, 0, Z25) \
	VMULPS Y25, Y20, Y25 \
	VMULPS Y25, Y24, Y24

// X4ADD16 adds the terms of X4TERMS16 to the eight lanes of ACC: blocks 0..7
// first, then blocks 8..15, as the AVX2 kernel adds its two groups.
#define X4ADD16(ACC) \
	VEXTRACTF64X4 $1, Z24, Y25 \
	VADDPS        Y24, ACC, ACC \
	VADDPS        Y25, ACC, ACC

// X4HALF2 finishes sixteen blocks for one activation: the second half's
// sums, then the terms added to ACC; QA holds the first half's sums.
#define X4HALF2(XP, QA, ACC) \
	X4AHALF(XP, 288, Z27) \
	X4SUMS(QA, Z27) \
	X4TERMS16(XP) \
	X4ADD16(ACC)

// X4STEP8 makes a step of eight blocks for one activation.
#define X4STEP8(XP, ACC) \
	X4AHALF(XP, 0, Z8) \
	X4SUMS(Z8, Z23) \
	X4TERMS8(XP) \
	VADDPS Y24, ACC, ACC

// func dotQ8_0x4AVX512Asm(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32)
//
// Four activations at once, sixteen blocks a step, then at most one step of
// eight, the lane trees and the last len%8 blocks one by one. Each group of
// eight weight blocks is loaded, and its magnitudes and sign masks formed,
// once for all four activations, and the weight scales are fetched once.
// Each activation's block terms and float additions are those
// dotQ8_0AVX512Asm makes for it, in the same order, so out[t] is its
// result bit for bit; only the integer block sums, which are exact, are
// formed another way.
TEXT ·dotQ8_0x4AVX512Asm(SB), NOSPLIT, $0-128
	MOVQ   w_base+0(FP), SI
	MOVQ   x0_base+24(FP), DI
	MOVQ   x0_len+32(FP), CX
	MOVQ   x1_base+48(FP), R8
	MOVQ   x2_base+72(FP), R9
	MOVQ   x3_base+96(FP), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	SETUP
	SUBQ   $16, CX
	JLT    q8

q16loop:
	X4WSCALES16
	X4WHALF(0)
	X4AHALF(DI, 0, Z8)
	X4AHALF(R8, 0, Z9)
	X4AHALF(R9, 0, Z10)
	X4AHALF(R10, 0, Z11)
	X4WHALF(272)
	X4HALF2(DI, Z8, Y0)
	X4HALF2(R8, Z9, Y1)
	X4HALF2(R9, Z10, Y2)
	X4HALF2(R10, Z11, Y3)
	ADDQ $544, SI
	ADDQ $576, DI
	ADDQ $576, R8
	ADDQ $576, R9
	ADDQ $576, R10
	SUBQ $16, CX
	JGE  q16loop

q8:
	ADDQ $8, CX
	JLT  q8done

	X4WSCALES8
	X4WHALF(0)
	X4STEP8(DI, Y0)
	X4STEP8(R8, Y1)
	X4STEP8(R9, Y2)
	X4STEP8(R10, Y3)
	ADDQ $272, SI
	ADDQ $288, DI
	ADDQ $288, R8
	ADDQ $288, R9
	ADDQ $288, R10
	SUBQ $8, CX

q8done:
	VMOVDQU64 q8Unperm<>(SB), Y26
	LANES(Y0, X0)
	LANES(Y1, X1)
	LANES(Y2, X2)
	LANES(Y3, X3)
	ADDQ $8, CX
	JZ   q4done

q1loop:
	ONEW
	ONE(DI, X0)
	ONE(R8, X1)
	ONE(R9, X2)
	ONE(R10, X3)
	ADDQ $34, SI
	ADDQ $36, DI
	ADDQ $36, R8
	ADDQ $36, R9
	ADDQ $36, R10
	DECQ CX
	JNZ  q1loop

q4done:
	VZEROUPPER
	MOVQ  out+120(FP), DX
	MOVSS X0, 0(DX)
	MOVSS X1, 4(DX)
	MOVSS X2, 8(DX)
	MOVSS X3, 12(DX)
	RET

// The n-token kernel, n from 1 to 8: the four-token kernel's steps of
// eight blocks (X4WSCALES8, X4WHALF, X4STEP8) for up to eight activations,
// the accumulators in Y0..Y3, Y9..Y11 and Y31. A column past n is skipped
// by a branch that goes the same way for the whole row, so a call of n
// tokens costs the weight's part once and the activations' part n times.
// Steps of eight, not sixteen as in the four-token kernel, because the
// second half's sums of eight activations would need eight more registers.

// XNSKIP jumps to L when the column count in DX is at most c: the columns
// from c on are unused.
#define XNSKIP(c, L) \
	CMPQ DX, $c \
	JLE  L

// XNPTRS points DI, R8..R13 and BX at the DX columns, AX bytes apart from
// DI on, jumping to L once the columns run out; the unused ones point at
// the first column, so that every pointer stays inside the activations,
// and are never read.
#define XNPTRS(L) \
	MOVQ DI, R8 \
	MOVQ DI, R9 \
	MOVQ DI, R10 \
	MOVQ DI, R11 \
	MOVQ DI, R12 \
	MOVQ DI, R13 \
	MOVQ DI, BX \
	XNSKIP(1, L) \
	LEAQ (DI)(AX*1), R8 \
	XNSKIP(2, L) \
	LEAQ (R8)(AX*1), R9 \
	XNSKIP(3, L) \
	LEAQ (R9)(AX*1), R10 \
	XNSKIP(4, L) \
	LEAQ (R10)(AX*1), R11 \
	XNSKIP(5, L) \
	LEAQ (R11)(AX*1), R12 \
	XNSKIP(6, L) \
	LEAQ (R12)(AX*1), R13 \
	XNSKIP(7, L) \
	LEAQ (R13)(AX*1), BX

// func dotQ8_0xNAVX512Asm(w []byte, x []BlockQ8_0, nb, n int, out *[8]float32)
//
// n activations of nb blocks each, one after the other in x, against one
// row: eight blocks a step for every activation, then the lane trees and
// the last nb%8 blocks one by one. Each activation's block terms and float
// additions are those dotQ8_0AVX512Asm makes for it, in the same order, so
// out[t] is its result bit for bit; out[t] for t ≥ n is 0. The weight
// blocks are loaded, and their magnitudes, sign masks and scales formed,
// once per step for all n activations: that is what makes n tokens cheaper
// than n single-token calls.
TEXT ·dotQ8_0xNAVX512Asm(SB), NOSPLIT, $0-72
	MOVQ w_base+0(FP), SI
	MOVQ x_base+24(FP), DI
	MOVQ nb+48(FP), CX
	MOVQ n+56(FP), DX
	MOVQ CX, AX
	IMULQ $36, AX

	XNPTRS(xnptrs)

xnptrs:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VPXORD Z31, Z31, Z31
	SETUP
	SUBQ $8, CX
	JLT  xntail

xn8loop:
	X4WSCALES8
	X4WHALF(0)
	X4STEP8(DI, Y0)
	XNSKIP(1, xn8next)
	X4STEP8(R8, Y1)
	XNSKIP(2, xn8next)
	X4STEP8(R9, Y2)
	XNSKIP(3, xn8next)
	X4STEP8(R10, Y3)
	XNSKIP(4, xn8next)
	X4STEP8(R11, Y9)
	XNSKIP(5, xn8next)
	X4STEP8(R12, Y10)
	XNSKIP(6, xn8next)
	X4STEP8(R13, Y11)
	XNSKIP(7, xn8next)
	X4STEP8(BX, Y31)

xn8next:
	ADDQ $272, SI
	ADDQ $288, DI
	ADDQ $288, R8
	ADDQ $288, R9
	ADDQ $288, R10
	ADDQ $288, R11
	ADDQ $288, R12
	ADDQ $288, R13
	ADDQ $288, BX
	SUBQ $8, CX
	JGE  xn8loop

xntail:
	VMOVDQU64 q8Unperm<>(SB), Y26
	VMOVAPS   Y31, Y8
	LANES(Y0, X0)
	LANES(Y1, X1)
	LANES(Y2, X2)
	LANES(Y3, X3)
	LANES(Y9, X9)
	LANES(Y10, X10)
	LANES(Y11, X11)
	LANES(Y8, X8)
	ADDQ $8, CX
	JZ   xndone

xn1loop:
	ONEW
	ONE(DI, X0)
	XNSKIP(1, xn1next)
	ONE(R8, X1)
	XNSKIP(2, xn1next)
	ONE(R9, X2)
	XNSKIP(3, xn1next)
	ONE(R10, X3)
	XNSKIP(4, xn1next)
	ONE(R11, X9)
	XNSKIP(5, xn1next)
	ONE(R12, X10)
	XNSKIP(6, xn1next)
	ONE(R13, X11)
	XNSKIP(7, xn1next)
	ONE(BX, X8)

xn1next:
	ADDQ $34, SI
	ADDQ $36, DI
	ADDQ $36, R8
	ADDQ $36, R9
	ADDQ $36, R10
	ADDQ $36, R11
	ADDQ $36, R12
	ADDQ $36, R13
	ADDQ $36, BX
	DECQ CX
	JNZ  xn1loop

xndone:
	VZEROUPPER
	MOVQ  out+64(FP), AX
	MOVSS X0, 0(AX)
	MOVSS X1, 4(AX)
	MOVSS X2, 8(AX)
	MOVSS X3, 12(AX)
	MOVSS X9, 16(AX)
	MOVSS X10, 20(AX)
	MOVSS X11, 24(AX)
	MOVSS X8, 28(AX)
	RET

// The prepared n-token kernel, n from 1 to 8, takes its activations in the
// form PrepareQ8_0 gives them (dot_pre.go): per group of eight blocks the
// eight scales in π order in the first 32 of 64 bytes, then the codes plus
// 128, unsigned, 32 bytes a block with no scale between, so that on a
// 64-byte aligned buffer no load crosses a cache line. It is faster than the n-token kernel
// above for three reasons. The activation's codes are unsigned, so
// VPDPBUSD takes them as they are against the signed weight codes: the
// weight, not each activation, bears the sign, and the accumulator starts
// at -128·Σw (each int32 lane's four weights), formed once per weight
// register for all activations, so that the lane sums Σ(x+128)·w - 128·Σw
// = Σx·w, exactly (the same integers as the other kernels' lanes). Two
// blocks' codes are one 64-byte load instead of a load and an
// insert, and the eight scales one 32-byte load instead of four loads and
// three permutes. And the third reduction level, the conversion and the
// float operations run on two activations at once, the low 256 bits of a
// register for the even one and the high for the odd one, each lane the
// same operations on the same operands as the n-token kernel's, so every
// activation's result is its single-token one bit for bit.
//
// The kernel asks for the weights 4 KB ahead, the next row's when the
// rows are about that long: a batched decode streams the rows from page
// cache mappings of 4 KB pages, at whose boundaries the hardware
// prefetchers stop, and without the requests the kernel ran slower in the
// engine than the tile kernels, whose packs make such requests.
//
// Register use: Z0..Z3 accumulate the pairs of activations (0,1) .. (6,7),
// Z4..Z7 hold the current eight weight blocks (two per register, signed),
// Z8..Z11 their -128·Σw lanes, Z20 the eight converted weight scales in π
// order in both halves, Z27 the bytes 0x80; Z12..Z19, Z21, Z22, Z24, Z25
// and Z30 are scratch.

DATA q8Bias<>+0(SB)/4, $0x80808080
GLOBL q8Bias<>(SB), RODATA|NOPTR, $4

// PW2 loads the weight blocks at woff(SI) and woff+34(SI) into ZW and
// leaves -128·Σ of each int32 lane's four weights in ZC.
#define PW2(woff, YW, ZW, ZC) \
	VMOVDQU64    (woff+2)(SI), YW \
	VINSERTI64X4 $1, (woff+36)(SI), ZW, ZW \
	VPXORD       ZC, ZC, ZC \
	VPDPBUSD     ZW, Z27, ZC \
	VPSUBD       ZC, Z23, ZC

// PWGROUP prepares the eight weight blocks from 0(SI).
#define PWGROUP \
	X4WSCALES8 \
	VINSERTF64X4 $1, Y20, Z20, Z20 \
	PW2(0, Y4, Z4, Z8) \
	PW2(68, Y5, Z5, Z9) \
	PW2(136, Y6, Z6, Z10) \
	PW2(204, Y7, Z7, Z11)

// PA2 sums the products of the prepared activation blocks at xoff(XP) and
// xoff+32(XP) with the weight blocks of ZW into the int32 lanes of ZACC,
// starting from ZC.
#define PA2(XP, xoff, ZA, ZW, ZC, ZACC) \
	VMOVDQU64 (xoff)(XP), ZA \
	VMOVDQA64 ZC, ZACC \
	VPDPBUSD  ZW, ZA, ZACC

// PAGROUP sums the eight prepared activation blocks of the group at 0(XP)
// and leaves in Q what X4AHALF leaves: two of the three reduction levels.
#define PAGROUP(XP, Q) \
	PA2(XP, 64, Z12, Z4, Z8, Z16) \
	PA2(XP, 128, Z13, Z5, Z9, Z17) \
	PA2(XP, 192, Z14, Z6, Z10, Z18) \
	PA2(XP, 256, Z15, Z7, Z11, Z19) \
	VPUNPCKLDQ  Z17, Z16, Z12 \
	VPUNPCKHDQ  Z17, Z16, Z16 \
	VPADDD      Z12, Z16, Z16 \
	VPUNPCKLDQ  Z19, Z18, Z13 \
	VPUNPCKHDQ  Z19, Z18, Z18 \
	VPADDD      Z13, Z18, Z18 \
	VPUNPCKLQDQ Z18, Z16, Z12 \
	VPUNPCKHQDQ Z18, Z16, Z16 \
	VPADDD      Z12, Z16, Q

// PPAIR adds the terms of the group for the activations at 0(XA) and
// 0(XB) to the low and high halves of ACC: the third reduction level pairs
// the 128-bit lanes of one block's halves (X4SUMS), leaving XA's eight sums
// in the low half and XB's in the high one, and the sums are converted,
// multiplied by f16(d_w)·d_x and added as SSTEP8 does.
#define PPAIR(XA, XB, ACC) \
	PAGROUP(XA, Z21) \
	PAGROUP(XB, Z22) \
	VSHUFI32X4   $0x88, Z22, Z21, Z24 \
	VSHUFI32X4   $0xdd, Z22, Z21, Z25 \
	VPADDD       Z25, Z24, Z24 \
	VCVTDQ2PS    Z24, Z24 \
	VMOVUPS      (XA), Y25 \
	VINSERTF64X4 $1, (XB), Z25, Z25 \
	VMULPS       Z25, Z20, Z25 \
	VMULPS       Z25, Z24, Z24 \
	VADDPS       Z24, ACC, ACC

// func dotQ8_0xNPreAVX512Asm(w []byte, p []byte, ng, n int, out *[8]float32)
//
// n prepared activations of ng groups each, one after the other in p,
// against one row of 8·ng blocks. A pair past n is skipped by a branch that
// goes the same way for the whole row; the odd activation of the last pair
// when n is odd reads the even one, and the caller discards its result.
TEXT ·dotQ8_0xNPreAVX512Asm(SB), NOSPLIT, $0-72
	MOVQ w_base+0(FP), SI
	MOVQ p_base+24(FP), DI
	MOVQ ng+48(FP), CX
	MOVQ n+56(FP), DX
	MOVQ CX, AX
	IMULQ $320, AX

	XNPTRS(xpptrs)

xpptrs:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	SETUP
	VPBROADCASTD q8Bias<>(SB), Z27
	TESTQ CX, CX
	JZ    xpdone

xploop:
	PWGROUP
	PREFETCHT0 4096(SI)
	PREFETCHT0 4160(SI)
	PREFETCHT0 4224(SI)
	PREFETCHT0 4288(SI)
	PREFETCHT0 4367(SI)
	PPAIR(DI, R8, Z0)
	XNSKIP(2, xpnext)
	PPAIR(R9, R10, Z1)
	XNSKIP(4, xpnext)
	PPAIR(R11, R12, Z2)
	XNSKIP(6, xpnext)
	PPAIR(R13, BX, Z3)

xpnext:
	ADDQ $272, SI
	ADDQ $320, DI
	ADDQ $320, R8
	ADDQ $320, R9
	ADDQ $320, R10
	ADDQ $320, R11
	ADDQ $320, R12
	ADDQ $320, R13
	ADDQ $320, BX
	DECQ CX
	JNZ  xploop

xpdone:
	VMOVDQU64     q8Unperm<>(SB), Y26
	VEXTRACTF64X4 $1, Z0, Y4
	VEXTRACTF64X4 $1, Z1, Y5
	VEXTRACTF64X4 $1, Z2, Y6
	VEXTRACTF64X4 $1, Z3, Y7
	LANES(Y0, X0)
	LANES(Y4, X4)
	LANES(Y1, X1)
	LANES(Y5, X5)
	LANES(Y2, X2)
	LANES(Y6, X6)
	LANES(Y3, X3)
	LANES(Y7, X7)
	VZEROUPPER
	MOVQ  out+64(FP), AX
	MOVSS X0, 0(AX)
	MOVSS X4, 4(AX)
	MOVSS X1, 8(AX)
	MOVSS X5, 12(AX)
	MOVSS X2, 16(AX)
	MOVSS X6, 20(AX)
	MOVSS X3, 24(AX)
	MOVSS X7, 28(AX)
	RET
