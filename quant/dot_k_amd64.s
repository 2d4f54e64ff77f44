//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// AVX2 dot products of Q2_K, Q4_K and IQ2_XXS weight rows with Q8_K
// activations (see dot_k_amd64.go). Each kernel forms a block's exact
// integer sums in 256-bit registers, folds them to scalars and then does
// the block's float32 arithmetic one operation at a time, in dot.go's
// order, so the results match the pure-Go kernels bit for bit.
//
// The work per 32 elements is one VPMADDUBSW (unsigned 2- or 4-bit codes,
// or grid magnitudes, times signed activation bytes, adjacent pairs summed
// to int16) and one VPMADDWD (the int16 pairs times their 16-element or
// 32-element scale, summed to int32). No int16 sum can saturate: a pair is
// at most 2·3·128 = 768 for Q2_K and 2·15·128 = 3840 for Q4_K, activation
// codes of -128 included, and 2·43·127 = 10922 for IQ2_XXS, whose signed
// activation bytes are the codes times the weights' signs, so its codes
// must lie in -127..127 (-(-128) is not a byte) in every block whose
// scale D is not zero, which QuantizeQ8K guarantees (act.go; a block of
// D = ±0 has a term of ±0 or NaN whatever its integer sum). The 16-element activation sums are used as
// stored and multiplied in int32 (VPMADDWD), as the reference does.
//
// On one core all three are bound by instruction throughput, not memory
// bandwidth; IQ2_XXS most of all, by its table work (four grid rows
// gathered and four sign patterns decoded per 32 elements). dotIQ2XXSx4Asm
// shares that work among four activations, which prefill has when several
// tokens are routed to one expert.

// q2kScaleShuf holds four VPSHUFB controls. Applied to a register whose two
// 128-bit lanes both hold eight int16 scales, control j puts scale 2j in
// every word of the low lane and scale 2j+1 in every word of the high lane:
// the scales of the two 16-element halves of the j-th 32-element slice.
DATA q2kScaleShuf<>+0(SB)/8, $0x0100010001000100
DATA q2kScaleShuf<>+8(SB)/8, $0x0100010001000100
DATA q2kScaleShuf<>+16(SB)/8, $0x0302030203020302
DATA q2kScaleShuf<>+24(SB)/8, $0x0302030203020302
DATA q2kScaleShuf<>+32(SB)/8, $0x0504050405040504
DATA q2kScaleShuf<>+40(SB)/8, $0x0504050405040504
DATA q2kScaleShuf<>+48(SB)/8, $0x0706070607060706
DATA q2kScaleShuf<>+56(SB)/8, $0x0706070607060706
DATA q2kScaleShuf<>+64(SB)/8, $0x0908090809080908
DATA q2kScaleShuf<>+72(SB)/8, $0x0908090809080908
DATA q2kScaleShuf<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q2kScaleShuf<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q2kScaleShuf<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q2kScaleShuf<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q2kScaleShuf<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q2kScaleShuf<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q2kScaleShuf<>(SB), RODATA|NOPTR, $128

// q4kScaleShuf holds eight VPSHUFB controls; control j broadcasts int16
// word j of each 128-bit lane to the whole lane.
DATA q4kScaleShuf<>+0(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+8(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+16(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+24(SB)/8, $0x0100010001000100
DATA q4kScaleShuf<>+32(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+40(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+48(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+56(SB)/8, $0x0302030203020302
DATA q4kScaleShuf<>+64(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+72(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+80(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+88(SB)/8, $0x0504050405040504
DATA q4kScaleShuf<>+96(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+104(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+112(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+120(SB)/8, $0x0706070607060706
DATA q4kScaleShuf<>+128(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+136(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+144(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+152(SB)/8, $0x0908090809080908
DATA q4kScaleShuf<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q4kScaleShuf<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q4kScaleShuf<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kScaleShuf<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kScaleShuf<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q4kScaleShuf<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q4kScaleShuf<>(SB), RODATA|NOPTR, $256

// q4kMinDup is the VPSHUFB control that turns bytes 8..15 (the eight Q4_K
// min codes) into the sixteen bytes m0 m0 m1 m1 … m7 m7, one per Q8_K
// 16-element sum.
DATA q4kMinDup<>+0(SB)/8, $0x0b0b0a0a09090808
DATA q4kMinDup<>+8(SB)/8, $0x0f0f0e0e0d0d0c0c
GLOBL q4kMinDup<>(SB), RODATA|NOPTR, $16

// iq2xxsScales holds, for each 4-bit IQ2_XXS group scale ls, the int16
// pair (2ls+1, 2ls+1): one VPBROADCASTD from it gives the VPMADDWD
// multiplier of a group in a single load.
DATA iq2xxsScales<>+0(SB)/4, $0x00010001
DATA iq2xxsScales<>+4(SB)/4, $0x00030003
DATA iq2xxsScales<>+8(SB)/4, $0x00050005
DATA iq2xxsScales<>+12(SB)/4, $0x00070007
DATA iq2xxsScales<>+16(SB)/4, $0x00090009
DATA iq2xxsScales<>+20(SB)/4, $0x000b000b
DATA iq2xxsScales<>+24(SB)/4, $0x000d000d
DATA iq2xxsScales<>+28(SB)/4, $0x000f000f
DATA iq2xxsScales<>+32(SB)/4, $0x00110011
DATA iq2xxsScales<>+36(SB)/4, $0x00130013
DATA iq2xxsScales<>+40(SB)/4, $0x00150015
DATA iq2xxsScales<>+44(SB)/4, $0x00170017
DATA iq2xxsScales<>+48(SB)/4, $0x00190019
DATA iq2xxsScales<>+52(SB)/4, $0x001b001b
DATA iq2xxsScales<>+56(SB)/4, $0x001d001d
DATA iq2xxsScales<>+60(SB)/4, $0x001f001f
GLOBL iq2xxsScales<>(SB), RODATA|NOPTR, $64

// The sign constants of IQ2EXPAND. iq2SignSel is the VPSHUFB control that
// puts in byte t of quadword j the byte of the group's sign word a1 that
// holds bit 7j+t, bit t of sign index j (t < 7); iq2SignBits the masks of
// those bits in their bytes, 0 in byte 7 of each quadword, and
// iq2SignTest the same with 0x80 in byte 7, which no masked byte equals;
// iq2Ones the bytes 0x01.
DATA ·iq2SignSel+0(SB)/8, $0x0000000000000000
DATA ·iq2SignSel+8(SB)/8, $0x0001010101010100
DATA ·iq2SignSel+16(SB)/8, $0x0002020202020101
DATA ·iq2SignSel+24(SB)/8, $0x0003030303020202
GLOBL ·iq2SignSel(SB), RODATA|NOPTR, $32

DATA ·iq2SignBits+0(SB)/8, $0x0040201008040201
DATA ·iq2SignBits+8(SB)/8, $0x0020100804020180
DATA ·iq2SignBits+16(SB)/8, $0x0010080402018040
DATA ·iq2SignBits+24(SB)/8, $0x0008040201804020
GLOBL ·iq2SignBits(SB), RODATA|NOPTR, $32

DATA ·iq2SignTest+0(SB)/8, $0x8040201008040201
DATA ·iq2SignTest+8(SB)/8, $0x8020100804020180
DATA ·iq2SignTest+16(SB)/8, $0x8010080402018040
DATA ·iq2SignTest+24(SB)/8, $0x8008040201804020
GLOBL ·iq2SignTest(SB), RODATA|NOPTR, $32

DATA ·iq2Ones+0(SB)/8, $0x0101010101010101
DATA ·iq2Ones+8(SB)/8, $0x0101010101010101
DATA ·iq2Ones+16(SB)/8, $0x0101010101010101
DATA ·iq2Ones+24(SB)/8, $0x0101010101010101
GLOBL ·iq2Ones(SB), RODATA|NOPTR, $32

// IQ2EXPAND expands IQ2_XXS group g (elements 32g to 32g+31) of the block
// at P: it sets Yg (low half Xg) to the group's 32 weight magnitudes (grid
// bytes), Ys to their signs as VPSIGNB controls (-1 or 1 each) and Yc to
// the group's VPMADDWD multiplier, the int16 pair (2ls+1, 2ls+1). One
// 64-bit load takes the group's four grid index bytes and its sign word
// a1 (whose top four bits are ls) into DX, rather than a byte load per
// index. The four grid rows (eight
// magnitude bytes each) come from the table at R8 by their index bytes,
// as 64-bit loads assembled into one register. The signs are decoded in
// vector registers, faster than a table of sign patterns: a1 is
// broadcast and one
// VPSHUFB gives byte t of quadword j the byte of a1 that holds bit t of
// sign index j (t < 7), which Bits then masks (a shift of each quadword
// by 7j and a VPSHUFB copying its low byte does the same in one
// instruction more); the
// eighth sign, the parity of the seven, is the low bit of their count of
// 0xff bytes (VPSADBW: 255 times the count), moved to the byte's top bit.
// ORing in 1 leaves every byte nonzero, negative where its weight is. The
// scale multiplier comes from the table at R10. Sel, Bits, Test and Ones
// are the constants above, in registers or as memory operands, and Zero a
// register or memory of zeros. Clobbers AX, BX, DX, X3 and Y5.
#define IQ2EXPAND(P, g, Yg, Xg, Ys, Yc, Sel, Bits, Test, Zero, Ones) \
	MOVQ    (g*8+2)(P), DX; \
	MOVBLZX DL, AX; \
	MOVBLZX DH, BX; \
	VMOVQ   (R8)(AX*8), Xg; \
	VPINSRQ $1, (R8)(BX*8), Xg, Xg; \
	SHRQ    $16, DX; \
	MOVBLZX DL, AX; \
	MOVBLZX DH, BX; \
	VMOVQ   (R8)(AX*8), X3; \
	VPINSRQ $1, (R8)(BX*8), X3, X3; \
	SHRQ    $44, DX; \
	VINSERTI128 $1, X3, Yg, Yg; \
	VPBROADCASTD (g*8+6)(P), Ys; \
	VPBROADCASTD (R10)(DX*4), Yc; \
	VPSHUFB Sel, Ys, Ys; \
	VPAND   Bits, Ys, Ys; \
	VPCMPEQB Test, Ys, Ys; \
	VPSADBW Zero, Ys, Y5; \
	VPSLLQ  $63, Y5, Y5; \
	VPOR    Y5, Ys, Ys; \
	VPOR    Ones, Ys, Ys

// IQ2APPLY adds to Yacc the integer sum of a group expanded by IQ2EXPAND
// into Yg, Ys and Yc times the Q8_K codes of group g of the block at Py:
// the weights' signs go onto the activation codes (VPSIGNB), which
// VPMADDUBSW then multiplies by the unsigned magnitudes. Against forming
// |q8|·(w·sgn(q8)), which also takes codes of -128, that is two
// instructions fewer per group.
// Clobbers Y5 and Y7; Yg, Ys and Yc are kept for the next activation.
#define IQ2APPLY(Py, g, Yacc, Yg, Ys, Yc) \
	VMOVDQU (g*32+BlockQ8K_Qs)(Py), Y5; \
	VPSIGNB Ys, Y5, Y7; \
	VPMADDUBSW Y7, Yg, Y5; \
	VPMADDWD Yc, Y5, Y5; \
	VPADDD  Y5, Yacc, Yacc

// IQ2NEXT expands group g+1 of the block at SI into the register set
// Yg, Ys, Yc and adds group g, already expanded into the other set Ag,
// As, Ac, to Y1 (the single-token kernel's software pipeline).
#define IQ2NEXT(g, Yg, Xg, Ys, Yc, Ag, As, Ac) \
	IQ2EXPAND(SI, (g+1), Yg, Xg, Ys, Yc, Y9, Y10, Y11, Y12, Y13); \
	IQ2APPLY(DI, g, Y1, Ag, As, Ac)

// func dotIQ2XXSAsm(w *byte, y *BlockQ8K, nb int) float32
//
// The groups are software-pipelined: group g+1 is expanded before group
// g's codes are multiplied, in two sets of registers (Y2, Y4, Y6 for the
// even groups, Y8, Y14, Y15 for the odd ones), and a block's last group
// expands the next block's first (the same block again at the last, the
// result unused), so that a group's table loads and sign decoding are in
// flight while the one before it is multiplied: the core does not overlap
// consecutive groups as well by itself. The kernel is then bound by its
// count of vector instructions, about 21 a group; the general registers'
// instructions count too, and the variants tried (eighth signs formed with
// PDEP, a table of grid-row pairs) were slower
// (docs/performance.md#kernel-design-notes).
TEXT ·dotIQ2XXSAsm(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	LEAQ ·iq2xxsGrid(SB), R8
	LEAQ iq2xxsScales<>(SB), R10
	VMOVDQU ·iq2SignSel(SB), Y9
	VMOVDQU ·iq2SignBits(SB), Y10
	VMOVDQU ·iq2SignTest(SB), Y11
	VPXOR   Y12, Y12, Y12
	VMOVDQU ·iq2Ones(SB), Y13
	VXORPS X0, X0, X0 // sumf
	IQ2EXPAND(SI, 0, Y2, X2, Y4, Y6, Y9, Y10, Y11, Y12, Y13)

iq2loop:
	VPXOR Y1, Y1, Y1
	IQ2NEXT(0, Y8, X8, Y14, Y15, Y2, Y4, Y6)
	IQ2NEXT(1, Y2, X2, Y4, Y6, Y8, Y14, Y15)
	IQ2NEXT(2, Y8, X8, Y14, Y15, Y2, Y4, Y6)
	IQ2NEXT(3, Y2, X2, Y4, Y6, Y8, Y14, Y15)
	IQ2NEXT(4, Y8, X8, Y14, Y15, Y2, Y4, Y6)
	IQ2NEXT(5, Y2, X2, Y4, Y6, Y8, Y14, Y15)
	IQ2NEXT(6, Y8, X8, Y14, Y15, Y2, Y4, Y6)
	LEAQ    const_dotIQ2XXSBytes(SI), R9
	CMPQ    CX, $1
	CMOVQEQ SI, R9
	IQ2EXPAND(R9, 0, Y2, X2, Y4, Y6, Y9, Y10, Y11, Y12, Y13)
	IQ2APPLY(DI, 7, Y1, Y8, Y14, Y15)

	// bsum = the eight int32 lanes of Y1 added.
	VEXTRACTI128 $1, Y1, X5
	VPADDD       X5, X1, X1
	VPSHUFD      $0x4e, X1, X5
	VPADDD       X5, X1, X1
	VPSHUFD      $0xb1, X1, X5
	VPADDD       X5, X1, X1
	VCVTDQ2PS    X1, X1

	// sumf += (f16(d)·D)·float32(bsum)
	MOVWLZX   (SI), AX
	VMOVD     AX, X5
	VCVTPH2PS X5, X5
	VMULSS    BlockQ8K_D(DI), X5, X5
	VMULSS    X1, X5, X5
	VADDSS    X5, X0, X0

	ADDQ $const_dotIQ2XXSBytes, SI
	ADDQ $BlockQ8K__size, DI
	DECQ CX
	JNZ  iq2loop

	MOVL   $0x3e000000, AX // 0.125
	VMOVD  AX, X1
	VMULSS X1, X0, X0
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// IQ2X4GROUP adds to Y8..Y11 the integer sums of IQ2_XXS group g of the
// block at SI against the Q8_K blocks at DI, R11, R12 and R13: the group is
// expanded once and applied to the four activations, which is where the
// four-token kernel saves its time.
#define IQ2X4GROUP(g) \
	IQ2EXPAND(SI, g, Y2, X2, Y4, Y6, ·iq2SignSel(SB), ·iq2SignBits(SB), ·iq2SignTest(SB), Y0, Y1); \
	IQ2APPLY(DI, g, Y8, Y2, Y4, Y6); \
	IQ2APPLY(R11, g, Y9, Y2, Y4, Y6); \
	IQ2APPLY(R12, g, Y10, Y2, Y4, Y6); \
	IQ2APPLY(R13, g, Y11, Y2, Y4, Y6)

// IQ2X4FLOAT adds to Xsum the float term (f16(d)·D)·float32(bsum) of the
// block at Py, bsum being the eight int32 lanes of Yacc (low half Xacc)
// added, with f16(d) in X2: the operations and their order are those of
// dotIQ2XXSAsm, so each token gets that kernel's bits.
#define IQ2X4FLOAT(Py, Yacc, Xacc, Xsum) \
	VEXTRACTI128 $1, Yacc, X3; \
	VPADDD       X3, Xacc, X3; \
	VPSHUFD      $0x4e, X3, X4; \
	VPADDD       X4, X3, X3; \
	VPSHUFD      $0xb1, X3, X4; \
	VPADDD       X4, X3, X3; \
	VCVTDQ2PS    X3, X3; \
	VMULSS       BlockQ8K_D(Py), X2, X4; \
	VMULSS       X3, X4, X4; \
	VADDSS       X4, Xsum, Xsum

// func dotIQ2XXSx4Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
TEXT ·dotIQ2XXSx4Asm(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ y0+8(FP), DI
	MOVQ y1+16(FP), R11
	MOVQ y2+24(FP), R12
	MOVQ y3+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ ·iq2xxsGrid(SB), R8
	LEAQ iq2xxsScales<>(SB), R10
	VPXOR   Y0, Y0, Y0
	VMOVDQU ·iq2Ones(SB), Y1
	VXORPS X12, X12, X12 // sumf of each token
	VXORPS X13, X13, X13
	VXORPS X14, X14, X14
	VXORPS X15, X15, X15

iq2x4loop:
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	IQ2X4GROUP(0)
	IQ2X4GROUP(1)
	IQ2X4GROUP(2)
	IQ2X4GROUP(3)
	IQ2X4GROUP(4)
	IQ2X4GROUP(5)
	IQ2X4GROUP(6)
	IQ2X4GROUP(7)

	MOVWLZX   (SI), AX
	VMOVD     AX, X2
	VCVTPH2PS X2, X2
	IQ2X4FLOAT(DI, Y8, X8, X12)
	IQ2X4FLOAT(R11, Y9, X9, X13)
	IQ2X4FLOAT(R12, Y10, X10, X14)
	IQ2X4FLOAT(R13, Y11, X11, X15)

	ADDQ $const_dotIQ2XXSBytes, SI
	ADDQ $BlockQ8K__size, DI
	ADDQ $BlockQ8K__size, R11
	ADDQ $BlockQ8K__size, R12
	ADDQ $BlockQ8K__size, R13
	DECQ CX
	JNZ  iq2x4loop

	MOVL   $0x3e000000, AX // 0.125
	VMOVD  AX, X1
	MOVQ   out+48(FP), AX
	VMULSS X1, X12, X12
	VMOVSS X12, 0(AX)
	VMULSS X1, X13, X13
	VMOVSS X13, 4(AX)
	VMULSS X1, X14, X14
	VMOVSS X14, 8(AX)
	VMULSS X1, X15, X15
	VMOVSS X15, 12(AX)
	VZEROUPPER
	RET

// Q2STEP adds to Y9 the sum of one 32-element slice whose 2-bit codes are
// the low two bits of the bytes of Yq, against the Q8_K codes at offset off
// of DI, with the slice's two scales taken from Ys by the shuffle control
// in Yc. Y15 holds 0x03 bytes.
#define Q2STEP(Yq, off, Ys, Yc) \
	VPAND      Y15, Yq, Y6; \
	VPMADDUBSW (off+BlockQ8K_Qs)(DI), Y6, Y6; \
	VPSHUFB    Yc, Ys, Y7; \
	VPMADDWD   Y7, Y6, Y6; \
	VPADDD     Y6, Y9, Y9

// Q2HALF adds to Y9 the scaled sums of half h (elements 128h to 128h+127),
// whose code bytes hold slice j in bits 2j..2j+1, with its scales in Ys.
#define Q2HALF(h, Ys) \
	VMOVDQU (h*32+16)(SI), Y5; \
	Q2STEP(Y5, h*128, Ys, Y10); \
	VPSRLW  $2, Y5, Y8; \
	Q2STEP(Y8, h*128+32, Ys, Y11); \
	VPSRLW  $4, Y5, Y8; \
	Q2STEP(Y8, h*128+64, Ys, Y12); \
	VPSRLW  $6, Y5, Y8; \
	Q2STEP(Y8, h*128+96, Ys, Y13)

// KSUMS folds the eight isum lanes of Y9 and the eight summs lanes of Y2
// into the int32 lanes isum, summs (and two more) of Xs with unpacks,
// shuffles and adds, which are cheaper than two VPHADDD. Clobbers Y6 and
// Y7.
#define KSUMS(Xs) \
	VPUNPCKLQDQ  Y2, Y9, Y6; \
	VPUNPCKHQDQ  Y2, Y9, Y7; \
	VPADDD       Y7, Y6, Y6; \
	VEXTRACTI128 $1, Y6, X7; \
	VPADDD       X7, X6, X6; \
	VPSHUFD      $0xb1, X6, X7; \
	VPADDD       X7, X6, Xs; \
	VPSHUFD      $0x08, Xs, Xs

// KFLOAT does sumf += float32((D·d)·float32(isum)) - float32((D·dmin)·
// float32(summs)) in X0, for the sums in Xs (KSUMS) of the weight block at
// Pw, whose f16 pair d, dmin is at doff, and the activation block at Py.
// Clobbers X5, X6 and X7.
#define KFLOAT(Xs, doff, Pw, Py) \
	VCVTDQ2PS    Xs, X5; \
	VMOVD        doff(Pw), X6; \
	VCVTPH2PS    X6, X6; \
	VBROADCASTSS BlockQ8K_D(Py), X7; \
	VMULPS       X7, X6, X6; \
	VMULPS       X6, X5, X5; \
	VMOVSHDUP    X5, X6; \
	VSUBSS       X6, X5, X5; \
	VADDSS       X5, X0, X0

// q2kNibbles holds 0x0f bytes, and q2kZero zeros: dotQ2KAsm's block
// "before" the first, whose term is +0.
DATA q2kNibbles<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q2kNibbles<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q2kNibbles<>(SB), RODATA|NOPTR, $16
GLOBL q2kZero<>(SB), RODATA|NOPTR, $128

// func dotQ2KAsm(w *byte, y *BlockQ8K, nb int) float32
//
// A block's float term is done in the middle of the next block's integer
// work (R8 and R9 point at the block before, X14 holds its folded sums;
// before the first block they point at zeros, whose term adds +0 to +0),
// so that its chain of conversions and dependent float operations
// overlaps that work instead of ending each block. The terms are still
// added to sumf in block order.
TEXT ·dotQ2KAsm(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS X0, X0, X0 // sumf
	MOVL         $0x03030303, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU q2kScaleShuf<>+0(SB), Y10
	VMOVDQU q2kScaleShuf<>+32(SB), Y11
	VMOVDQU q2kScaleShuf<>+64(SB), Y12
	VMOVDQU q2kScaleShuf<>+96(SB), Y13
	LEAQ    q2kZero<>(SB), R8
	MOVQ    R8, R9
	VPXOR   X14, X14, X14

q2loop:
	// Ask for the line 4 KB ahead, rows past the end of a short one: in
	// decode a worker runs down a routed expert's 672-byte rows, where
	// the kernel's arithmetic left the hardware prefetchers behind; 4 KB
	// is the distance that measured best
	// (docs/performance.md#kernel-design-notes).
	PREFETCHT0 4096(SI)

	// Min term: Σ_g bsum_g·m_g, m_g the high nibble of scales[g].
	VMOVDQU   (SI), X1
	VPSRLW    $4, X1, X2
	VPAND     q2kNibbles<>(SB), X2, X2
	VPAND     q2kNibbles<>(SB), X1, X1
	VPMOVZXBW X2, Y2
	VPMADDWD  (BlockQ8K_Bsums)(DI), Y2, Y2

	// Scale codes as int16: 0..7 in both lanes of Y3, 8..15 of Y4.
	VPMOVZXBW X1, Y1
	VPERMQ    $0x44, Y1, Y3
	VPERMQ    $0xee, Y1, Y4

	VPXOR Y9, Y9, Y9
	Q2HALF(0, Y3)
	KFLOAT(X14, 80, R8, R9)
	Q2HALF(1, Y4)
	KSUMS(X14)
	MOVQ SI, R8
	MOVQ DI, R9

	ADDQ $const_dotQ2KBytes, SI
	ADDQ $BlockQ8K__size, DI
	DECQ CX
	JNZ  q2loop
	KFLOAT(X14, 80, R8, R9)

	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// Q4PAIR adds to Y9 the scaled sums of sub-blocks 2p and 2p+1, whose codes
// are the low and high nibbles of the 32 bytes at qs[32p]. Y3 holds the
// eight int16 scales in both lanes, Y14 0x0f bytes.
#define Q4PAIR(p) \
	VMOVDQU    (p*32+16)(SI), Y4; \
	VPAND      Y14, Y4, Y5; \
	VPSRLW     $4, Y4, Y4; \
	VPAND      Y14, Y4, Y4; \
	VPMADDUBSW (p*64+BlockQ8K_Qs)(DI), Y5, Y5; \
	VPMADDUBSW (p*64+32+BlockQ8K_Qs)(DI), Y4, Y4; \
	VPSHUFB    q4kScaleShuf<>+(p*64)(SB), Y3, Y6; \
	VPSHUFB    q4kScaleShuf<>+(p*64+32)(SB), Y3, Y7; \
	VPMADDWD   Y6, Y5, Y5; \
	VPMADDWD   Y7, Y4, Y4; \
	VPADDD     Y5, Y9, Y9; \
	VPADDD     Y4, Y9, Y9

// func dotQ4KAsm(w *byte, y *BlockQ8K, nb int) float32
TEXT ·dotQ4KAsm(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS X0, X0, X0 // sumf
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	VMOVDQU      q4kMinDup<>(SB), X13

q4loop:
	// Unpack the 6-bit codes (dotQ4KScaleMin) four at a time:
	// sc0..3 = s[0:4]&63, m0..3 = s[4:8]&63,
	// sc4..7 = s[8:12]&15 | (s[0:4]>>6)<<4, m4..7 = s[8:12]>>4 | (s[4:8]>>6)<<4.
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
	MOVL AX, R10
	SHRL $6, R10
	ANDL $0x03030303, R10
	SHLL $4, R10
	MOVL DX, R11
	ANDL $0x0f0f0f0f, R11
	ORL  R11, R10
	MOVL BX, R11
	SHRL $6, R11
	ANDL $0x03030303, R11
	SHLL $4, R11
	SHRL $4, DX
	ANDL $0x0f0f0f0f, DX
	ORL  DX, R11
	ANDL $0x3f3f3f3f, AX
	ANDL $0x3f3f3f3f, BX
	VMOVD   AX, X1
	VPINSRD $1, R10, X1, X1
	VPINSRD $2, BX, X1, X1
	VPINSRD $3, R11, X1, X1 // bytes sc0..sc7, m0..m7

	// Min term: Σ_j m_j·(bsum_2j + bsum_2j+1), each pair in int32.
	VPSHUFB   X13, X1, X2
	VPMOVZXBW X2, Y2
	VPMADDWD  (BlockQ8K_Bsums)(DI), Y2, Y2

	VPMOVZXBW X1, Y1
	VPERMQ    $0x44, Y1, Y3

	VPXOR Y9, Y9, Y9
	Q4PAIR(0)
	Q4PAIR(1)
	Q4PAIR(2)
	Q4PAIR(3)
	KSUMS(X9)
	KFLOAT(X9, 0, SI, DI)

	ADDQ $const_dotQ4KBytes, SI
	ADDQ $BlockQ8K__size, DI
	DECQ CX
	JNZ  q4loop

	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
