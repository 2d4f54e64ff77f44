//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// dotQ2Kx4Asm: the Q2_K dot of one weight row with four Q8_K activations
// (see dot_q2k_x4_amd64.go), for prefill, where several tokens meet the
// same expert row. Each token's exact integer sums isum and summs are
// those of dotQ2KAsm, and its float32 arithmetic is that kernel's, one
// lane per token with the same operations, operand order included, so
// every token gets the single-token kernel's bits (NaN payloads too).
//
// Why it is faster than four dotQ2KAsm calls: the single-token kernel
// spends as many instructions decoding a 32-element slice (shift, mask,
// scale shuffle) as applying it, and multiplies twice per slice
// (VPMADDUBSW, then VPMADDWD by the 16-element scales). Here the decoding
// is done once per block and, further, the scale is folded into the
// weight bytes: code·scale is at most 3·15 = 45, so one VPMULLW of the
// code bytes by the scale as an int16 word gives both bytes of each word
// their product without a carry between them (each 16-element scale group
// starts at an even byte). Each token then needs one VPMADDUBSW per slice
// (a pair of products is at most 2·45·128 = 11520 in magnitude, so no
// int16 saturates), a VPADDW of two slices (at most 23040) and one
// VPMADDWD by ones per two slices: 1.5 multiplies per slice instead of 2,
// and about half the instructions of four single calls in all.

// q2kx4ScaleShuf holds four VPSHUFB controls. Applied to a register whose
// two 128-bit lanes both hold eight int16 scales, control j puts scale 2j
// in every word of the low lane and scale 2j+1 in every word of the high
// lane: the scales of the two 16-element halves of the j-th 32-element
// slice.
DATA q2kx4ScaleShuf<>+0(SB)/8, $0x0100010001000100
DATA q2kx4ScaleShuf<>+8(SB)/8, $0x0100010001000100
DATA q2kx4ScaleShuf<>+16(SB)/8, $0x0302030203020302
DATA q2kx4ScaleShuf<>+24(SB)/8, $0x0302030203020302
DATA q2kx4ScaleShuf<>+32(SB)/8, $0x0504050405040504
DATA q2kx4ScaleShuf<>+40(SB)/8, $0x0504050405040504
DATA q2kx4ScaleShuf<>+48(SB)/8, $0x0706070607060706
DATA q2kx4ScaleShuf<>+56(SB)/8, $0x0706070607060706
DATA q2kx4ScaleShuf<>+64(SB)/8, $0x0908090809080908
DATA q2kx4ScaleShuf<>+72(SB)/8, $0x0908090809080908
DATA q2kx4ScaleShuf<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q2kx4ScaleShuf<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q2kx4ScaleShuf<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q2kx4ScaleShuf<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q2kx4ScaleShuf<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q2kx4ScaleShuf<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q2kx4ScaleShuf<>(SB), RODATA|NOPTR, $128

// Registers of the block loop:
//
//	Y0..Y3   isum lanes of tokens 0..3 (activations at DI, R11, R12, R13)
//	Y4       0x03 bytes
//	Y5       the 32 code bytes of the current half
//	Y6, Y7   the weights code·scale of the two slices being applied
//	Y8       scale words of the current slice
//	Y9, Y14  per-token products
//	Y10, Y11 int16 scales 0..7 and 8..15, each in both lanes
//	X12      sumf of the four tokens
//	Y13      int16 ones
//	Y15      0x0f bytes

// Q2X4WEIGHT sets Yw to the weights code·scale of slice j of the current
// half, whose codes are the low two bits of the bytes of Yc, with the
// half's scales in Ys.
#define Q2X4WEIGHT(Yc, Ys, j, Yw) \
	VPAND   Y4, Yc, Yw; \
	VPSHUFB q2kx4ScaleShuf<>+(j*32)(SB), Ys, Y8; \
	VPMULLW Y8, Yw, Yw

// Q2X4TOKEN adds to Yacc the sums of two slices against the Q8_K codes at
// offsets off and off+32 of the activation block at Py, with the weights
// of the slices in Y6 and Y7.
#define Q2X4TOKEN(Py, off, Yacc) \
	VPMADDUBSW (off+BlockQ8K_Qs)(Py), Y6, Y9; \
	VPMADDUBSW (off+32+BlockQ8K_Qs)(Py), Y7, Y14; \
	VPADDW     Y14, Y9, Y9; \
	VPMADDWD   Y13, Y9, Y9; \
	VPADDD     Y9, Yacc, Yacc

// Q2X4TOKENS applies the slices in Y6 and Y7 to the four activations.
#define Q2X4TOKENS(off) \
	Q2X4TOKEN(DI, off, Y0); \
	Q2X4TOKEN(R11, off, Y1); \
	Q2X4TOKEN(R12, off, Y2); \
	Q2X4TOKEN(R13, off, Y3)

// Q2X4HALF applies half h of the block (elements 128h to 128h+127), whose
// code bytes hold slice j in bits 2j..2j+1, with its scales in Ys.
#define Q2X4HALF(h, Ys) \
	VMOVDQU (h*32+16)(SI), Y5; \
	Q2X4WEIGHT(Y5, Ys, 0, Y6); \
	VPSRLW  $2, Y5, Y7; \
	Q2X4WEIGHT(Y7, Ys, 1, Y7); \
	Q2X4TOKENS(h*128); \
	VPSRLW  $4, Y5, Y6; \
	Q2X4WEIGHT(Y6, Ys, 2, Y6); \
	VPSRLW  $6, Y5, Y7; \
	Q2X4WEIGHT(Y7, Ys, 3, Y7); \
	Q2X4TOKENS(h*128+64)

// func dotQ2Kx4Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
TEXT ·dotQ2Kx4Asm(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ y0+8(FP), DI
	MOVQ y1+16(FP), R11
	MOVQ y2+24(FP), R12
	MOVQ y3+32(FP), R13
	MOVQ nb+40(FP), CX
	VXORPS X12, X12, X12
	MOVL         $0x03030303, AX
	VMOVD        AX, X4
	VPBROADCASTD X4, Y4
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x00010001, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13

q2x4loop:
	// Scale codes (low nibbles) as int16: 0..7 in both lanes of Y10,
	// 8..15 in both lanes of Y11.
	VMOVDQU   (SI), X8
	VPAND     X15, X8, X8
	VPMOVZXBW X8, Y8
	VPERMQ    $0x44, Y8, Y10
	VPERMQ    $0xee, Y8, Y11

	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	Q2X4HALF(0, Y10)
	Q2X4HALF(1, Y11)

	// Min term of each token: Σ_g bsum_g·m_g, m_g the high nibble of
	// scales[g], as eight int32 lanes in Y6..Y9.
	VMOVDQU   (SI), X5
	VPSRLW    $4, X5, X5
	VPAND     X15, X5, X5
	VPMOVZXBW X5, Y5
	VPMADDWD  BlockQ8K_Bsums(DI), Y5, Y6
	VPMADDWD  BlockQ8K_Bsums(R11), Y5, Y7
	VPMADDWD  BlockQ8K_Bsums(R12), Y5, Y8
	VPMADDWD  BlockQ8K_Bsums(R13), Y5, Y9

	// Fold the lanes: X0 = isum of tokens 0..3, X6 = summs of tokens
	// 0..3, converted to float32.
	VPHADDD      Y1, Y0, Y0
	VPHADDD      Y3, Y2, Y2
	VPHADDD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPHADDD      Y7, Y6, Y6
	VPHADDD      Y9, Y8, Y8
	VPHADDD      Y8, Y6, Y6
	VEXTRACTI128 $1, Y6, X7
	VPADDD       X7, X6, X6
	VCVTDQ2PS    X0, X0
	VCVTDQ2PS    X6, X6

	// sumf += float32((d·D)·isum) - float32((dmin·D)·summs), lane t for
	// token t, in dotQ2KAsm's operations and operand order.
	VMOVD        80(SI), X1
	VCVTPH2PS    X1, X1
	VBROADCASTSS X1, X2
	VSHUFPS      $0x55, X1, X1, X3
	VMOVSS       BlockQ8K_D(DI), X7
	VINSERTPS    $0x10, BlockQ8K_D(R11), X7, X7
	VINSERTPS    $0x20, BlockQ8K_D(R12), X7, X7
	VINSERTPS    $0x30, BlockQ8K_D(R13), X7, X7
	VMULPS       X7, X2, X2
	VMULPS       X7, X3, X3
	VMULPS       X2, X0, X0
	VMULPS       X3, X6, X6
	VSUBPS       X6, X0, X0
	VADDPS       X0, X12, X12

	ADDQ $const_dotQ2KBytes, SI
	ADDQ $BlockQ8K__size, DI
	ADDQ $BlockQ8K__size, R11
	ADDQ $BlockQ8K__size, R12
	ADDQ $BlockQ8K__size, R13
	DECQ CX
	JNZ  q2x4loop

	MOVQ    out+48(FP), AX
	VMOVUPS X12, (AX)
	VZEROUPPER
	RET
