//go:build amd64 && !purego

#include "textflag.h"

// DOTSUM leaves in lane 0 of xa the sum of the dot's four chains ya..yd
// (dotAVX2Asm's order, which every AVX2 dot keeps), using xb as scratch.
#define DOTSUM(ya, yb, yc, yd, xa, xb) \
	VADDPS       yb, ya, ya; \
	VADDPS       yd, yc, yc; \
	VADDPS       yc, ya, ya; \
	VEXTRACTF128 $1, ya, xb; \
	VADDPS       xb, xa, xa; \
	VMOVHLPS     xa, xb, xb; \
	VADDPS       xb, xa, xa; \
	VMOVSHDUP    xa, xb;     \
	VADDSS       xb, xa, xa

// WEIGH4_ARGS loads the weigh4 kernels' arguments: SI, BX, R12 and R13
// point at the four heads' outputs (d floats apart), R8 at the weights,
// R9 at the rows, R10 and R11 hold nrows and n, and CX the first column.
#define WEIGH4_ARGS \
	MOVQ out+0(FP), SI \
	MOVQ d+8(FP), DX \
	SHLQ $2, DX \
	LEAQ (SI)(DX*1), BX \
	LEAQ (BX)(DX*1), R12 \
	LEAQ (R12)(DX*1), R13 \
	MOVQ w+16(FP), R8 \
	MOVQ rows+24(FP), R9 \
	MOVQ nrows+32(FP), R10 \
	MOVQ n+40(FP), R11 \
	XORQ CX, CX

// func dotAVX2Asm(a, b *float32, n int) float32
// Four independent FMA chains over 32 floats a step hide the FMA latency;
// a remaining 8-float step goes to the first chain.
TEXT ·dotAVX2Asm(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ CX, $32
	JLT  dot8

dot32:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JGE         dot32

dot8:
	TESTQ CX, CX
	JZ    dotsum

dot8loop:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNZ         dot8loop

dotsum:
	DOTSUM(Y0, Y1, Y2, Y3, X0, X1)
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func axpyAVX2Asm(acc *float32, w float32, x *float32, n int)
TEXT ·axpyAVX2Asm(SB), NOSPLIT, $0-32
	MOVQ         acc+0(FP), DI
	VBROADCASTSS w+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $32
	JLT          axpy8

axpy32:
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JGE         axpy32

axpy8:
	TESTQ CX, CX
	JZ    axpydone

axpy8loop:
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNZ         axpy8loop

axpydone:
	VZEROUPPER
	RET

// The AVX-512 loops below keep the AVX2 loops' float order exactly, so a
// CPU with AVX-512 gets the same bits as one with AVX2 only. The dot's
// four 8-lane chains live in two ZMM registers, chains 0|1 and 2|3: a
// 32-float step is then two loads and two FMAs instead of four, a
// remaining 8-float step is masked (K1 = 0xff) into chain 0 alone, and the
// pairwise reduction adds the same vectors in the same order. Every FMA,
// add and multiply keeps the AVX2 loops' operand roles (q or w the second
// FMA operand, the row the third; the accumulator first in a sum), which
// fix the NaN an operation on two NaNs keeps. The many-row loops read
// rows as nrows slice headers of 24 bytes, the data pointer first.

// REDUCE2 leaves in lane 0 of xa the AVX2 dot's sum of the chains
// za = 0|1 and zb = 2|3, using yt and yu as scratch.
#define REDUCE2(za, zb, ya, yb, xa, xb, yt, yu) \
	VEXTRACTF64X4 $1, za, yt; \
	VADDPS        yt, ya, ya; \
	VEXTRACTF64X4 $1, zb, yu; \
	VADDPS        yu, yb, yb; \
	VADDPS        yb, ya, ya; \
	VEXTRACTF128  $1, ya, xb; \
	VADDPS        xb, xa, xa; \
	VMOVHLPS      xa, xb, xb; \
	VADDPS        xb, xa, xa; \
	VMOVSHDUP     xa, xb; \
	VADDSS        xb, xa, xa

// func dotAVX512Asm(a, b *float32, n int) float32
TEXT ·dotAVX512Asm(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	CMPQ   CX, $32
	JLT    dot8

dot32:
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JGE         dot32

dot8:
	TESTQ CX, CX
	JZ    dotsum
	MOVL  $0xff, AX
	KMOVW AX, K1

dot8loop:
	VMOVUPS     (SI), Y4
	VMOVUPS     (DI), Y5
	VFMADD231PS Z5, Z4, K1, Z0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNZ         dot8loop

dotsum:
	REDUCE2(Z0, Z1, Y0, Y1, X0, X1, Y4, Y5)
	VZEROUPPER
	VMOVSS X0, ret+24(FP)
	RET

// func axpyAVX512Asm(acc *float32, w float32, x *float32, n int)
TEXT ·axpyAVX512Asm(SB), NOSPLIT, $0-32
	MOVQ         acc+0(FP), DI
	VBROADCASTSS w+8(FP), Z0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $64
	JLT          axpy16

axpy64:
	VMOVUPS     (DI), Z1
	VMOVUPS     64(DI), Z2
	VMOVUPS     128(DI), Z3
	VMOVUPS     192(DI), Z4
	VFMADD231PS (SI), Z0, Z1
	VFMADD231PS 64(SI), Z0, Z2
	VFMADD231PS 128(SI), Z0, Z3
	VFMADD231PS 192(SI), Z0, Z4
	VMOVUPS     Z1, (DI)
	VMOVUPS     Z2, 64(DI)
	VMOVUPS     Z3, 128(DI)
	VMOVUPS     Z4, 192(DI)
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JGE         axpy64

axpy16:
	CMPQ CX, $16
	JLT  axpy8

axpy16loop:
	VMOVUPS     (DI), Z1
	VFMADD231PS (SI), Z0, Z1
	VMOVUPS     Z1, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JGE         axpy16loop

axpy8:
	TESTQ CX, CX
	JZ    axpydone
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)

axpydone:
	VZEROUPPER
	RET

// func dots4AVX512Asm(dst, q *float32, d int, rows *[]float32, nrows int, n int)
//
// For each row j, dst[4j+h] = the AVX2 dot of the first n floats of head h
// of q (the 4 heads d floats apart) and of rows[j]. One load of a row
// serves the four heads, whose eight chains are independent, so the FMAs
// are no longer held back by their latency; a row is read from memory
// once per four heads instead of once per head.
TEXT ·dots4AVX512Asm(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R8
	MOVQ q+8(FP), SI
	MOVQ d+16(FP), DX
	SHLQ $2, DX
	LEAQ (SI)(DX*1), BX
	LEAQ (BX)(DX*1), R12
	LEAQ (R12)(DX*1), R13
	MOVQ rows+24(FP), R9
	MOVQ nrows+32(FP), R10
	MOVQ n+40(FP), R11
	MOVL $0xff, AX
	KMOVW AX, K1

	// Two rows at a time: each q load serves two rows too, so the loop
	// waits on the FMA units rather than the loads. Chains: head h, row
	// r in Z(4h+2r), Z(4h+2r+1).
drow2:
	CMPQ   R10, $2
	JLT    drow
	MOVQ   (R9), DI
	MOVQ   24(R9), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	XORQ   CX, CX
	MOVQ   R11, R14
	CMPQ   R14, $32
	JLT    d8x2

d32x2:
	VMOVUPS     (DI)(CX*1), Z16
	VMOVUPS     64(DI)(CX*1), Z17
	VMOVUPS     (DX)(CX*1), Z18
	VMOVUPS     64(DX)(CX*1), Z19
	VMOVUPS     (SI)(CX*1), Z20
	VMOVUPS     64(SI)(CX*1), Z21
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z21, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z21, Z3
	VMOVUPS     (BX)(CX*1), Z22
	VMOVUPS     64(BX)(CX*1), Z23
	VFMADD231PS Z16, Z22, Z4
	VFMADD231PS Z17, Z23, Z5
	VFMADD231PS Z18, Z22, Z6
	VFMADD231PS Z19, Z23, Z7
	VMOVUPS     (R12)(CX*1), Z24
	VMOVUPS     64(R12)(CX*1), Z25
	VFMADD231PS Z16, Z24, Z8
	VFMADD231PS Z17, Z25, Z9
	VFMADD231PS Z18, Z24, Z10
	VFMADD231PS Z19, Z25, Z11
	VMOVUPS     (R13)(CX*1), Z26
	VMOVUPS     64(R13)(CX*1), Z27
	VFMADD231PS Z16, Z26, Z12
	VFMADD231PS Z17, Z27, Z13
	VFMADD231PS Z18, Z26, Z14
	VFMADD231PS Z19, Z27, Z15
	ADDQ        $128, CX
	SUBQ        $32, R14
	CMPQ        R14, $32
	JGE         d32x2

d8x2:
	TESTQ R14, R14
	JZ    dsumx2

d8x2loop:
	VMOVUPS     (DI)(CX*1), Y16
	VMOVUPS     (DX)(CX*1), Y18
	VMOVUPS     (SI)(CX*1), Y20
	VMOVUPS     (BX)(CX*1), Y22
	VMOVUPS     (R12)(CX*1), Y24
	VMOVUPS     (R13)(CX*1), Y26
	VFMADD231PS Z16, Z20, K1, Z0
	VFMADD231PS Z18, Z20, K1, Z2
	VFMADD231PS Z16, Z22, K1, Z4
	VFMADD231PS Z18, Z22, K1, Z6
	VFMADD231PS Z16, Z24, K1, Z8
	VFMADD231PS Z18, Z24, K1, Z10
	VFMADD231PS Z16, Z26, K1, Z12
	VFMADD231PS Z18, Z26, K1, Z14
	ADDQ        $32, CX
	SUBQ        $8, R14
	JNZ         d8x2loop

dsumx2:
	REDUCE2(Z0, Z1, Y0, Y1, X0, X1, Y16, Y17)
	REDUCE2(Z2, Z3, Y2, Y3, X2, X3, Y18, Y19)
	REDUCE2(Z4, Z5, Y4, Y5, X4, X5, Y20, Y21)
	REDUCE2(Z6, Z7, Y6, Y7, X6, X7, Y22, Y23)
	REDUCE2(Z8, Z9, Y8, Y9, X8, X9, Y24, Y25)
	REDUCE2(Z10, Z11, Y10, Y11, X10, X11, Y26, Y27)
	REDUCE2(Z12, Z13, Y12, Y13, X12, X13, Y28, Y29)
	REDUCE2(Z14, Z15, Y14, Y15, X14, X15, Y30, Y31)
	VMOVSS X0, (R8)
	VMOVSS X4, 4(R8)
	VMOVSS X8, 8(R8)
	VMOVSS X12, 12(R8)
	VMOVSS X2, 16(R8)
	VMOVSS X6, 20(R8)
	VMOVSS X10, 24(R8)
	VMOVSS X14, 28(R8)
	ADDQ   $32, R8
	ADDQ   $48, R9
	SUBQ   $2, R10
	JMP    drow2

drow:
	TESTQ  R10, R10
	JZ     ddone
	MOVQ   (R9), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   CX, CX
	MOVQ   R11, R14
	CMPQ   R14, $32
	JLT    d8

d32:
	VMOVUPS     (DI)(CX*1), Z8
	VMOVUPS     64(DI)(CX*1), Z9
	VMOVUPS     (SI)(CX*1), Z10
	VMOVUPS     64(SI)(CX*1), Z11
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z9, Z11, Z1
	VMOVUPS     (BX)(CX*1), Z12
	VMOVUPS     64(BX)(CX*1), Z13
	VFMADD231PS Z8, Z12, Z2
	VFMADD231PS Z9, Z13, Z3
	VMOVUPS     (R12)(CX*1), Z14
	VMOVUPS     64(R12)(CX*1), Z15
	VFMADD231PS Z8, Z14, Z4
	VFMADD231PS Z9, Z15, Z5
	VMOVUPS     (R13)(CX*1), Z16
	VMOVUPS     64(R13)(CX*1), Z17
	VFMADD231PS Z8, Z16, Z6
	VFMADD231PS Z9, Z17, Z7
	ADDQ        $128, CX
	SUBQ        $32, R14
	CMPQ        R14, $32
	JGE         d32

d8:
	TESTQ R14, R14
	JZ    dsum

d8loop:
	VMOVUPS     (DI)(CX*1), Y8
	VMOVUPS     (SI)(CX*1), Y9
	VMOVUPS     (BX)(CX*1), Y10
	VMOVUPS     (R12)(CX*1), Y11
	VMOVUPS     (R13)(CX*1), Y12
	VFMADD231PS Z8, Z9, K1, Z0
	VFMADD231PS Z8, Z10, K1, Z2
	VFMADD231PS Z8, Z11, K1, Z4
	VFMADD231PS Z8, Z12, K1, Z6
	ADDQ        $32, CX
	SUBQ        $8, R14
	JNZ         d8loop

dsum:
	REDUCE2(Z0, Z1, Y0, Y1, X0, X1, Y8, Y9)
	REDUCE2(Z2, Z3, Y2, Y3, X2, X3, Y10, Y11)
	REDUCE2(Z4, Z5, Y4, Y5, X4, X5, Y12, Y13)
	REDUCE2(Z6, Z7, Y6, Y7, X6, X7, Y14, Y15)
	VMOVSS X0, (R8)
	VMOVSS X2, 4(R8)
	VMOVSS X4, 8(R8)
	VMOVSS X6, 12(R8)
	ADDQ   $16, R8
	ADDQ   $24, R9
	DECQ   R10
	JMP    drow

ddone:
	VZEROUPPER
	RET

// func weigh4AVX512Asm(out *float32, d int, w *float32, rows *[]float32, nrows int, n int, r *float32)
//
// For each of the four heads h (out + h·d floats), acc_k starts at zero
// and takes acc_k = fma(w[4j+h], rows[j][k], acc_k) for each row j in
// order; out_h[k] = acc_k·r[h], for k < n. A slice of 64 floats of the
// four heads' sums stays in sixteen registers while every row passes
// through it: each row load serves four heads, and out is written once
// per slice instead of read and written once per row.
TEXT ·weigh4AVX512Asm(SB), NOSPLIT, $0-56
	MOVQ r+48(FP), AX
	VBROADCASTSS (AX), Z24
	VBROADCASTSS 4(AX), Z25
	VBROADCASTSS 8(AX), Z26
	VBROADCASTSS 12(AX), Z27
	WEIGH4_ARGS

a64:
	CMPQ    R11, $64
	JLT     a16
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	VXORPS  Y8, Y8, Y8
	VXORPS  Y9, Y9, Y9
	VXORPS  Y10, Y10, Y10
	VXORPS  Y11, Y11, Y11
	VXORPS  Y12, Y12, Y12
	VXORPS  Y13, Y13, Y13
	VXORPS  Y14, Y14, Y14
	VXORPS  Y15, Y15, Y15
	MOVQ    R9, AX
	MOVQ    R8, DI
	MOVQ    R10, R14

a64row:
	MOVQ         (AX), DX
	VMOVUPS      (DX)(CX*1), Z16
	VMOVUPS      64(DX)(CX*1), Z17
	VMOVUPS      128(DX)(CX*1), Z18
	VMOVUPS      192(DX)(CX*1), Z19
	VBROADCASTSS (DI), Z20
	VBROADCASTSS 4(DI), Z21
	VBROADCASTSS 8(DI), Z22
	VBROADCASTSS 12(DI), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         $24, AX
	ADDQ         $16, DI
	DECQ         R14
	JNZ          a64row
	VMULPS       Z24, Z0, Z0
	VMULPS       Z24, Z1, Z1
	VMULPS       Z24, Z2, Z2
	VMULPS       Z24, Z3, Z3
	VMULPS       Z25, Z4, Z4
	VMULPS       Z25, Z5, Z5
	VMULPS       Z25, Z6, Z6
	VMULPS       Z25, Z7, Z7
	VMULPS       Z26, Z8, Z8
	VMULPS       Z26, Z9, Z9
	VMULPS       Z26, Z10, Z10
	VMULPS       Z26, Z11, Z11
	VMULPS       Z27, Z12, Z12
	VMULPS       Z27, Z13, Z13
	VMULPS       Z27, Z14, Z14
	VMULPS       Z27, Z15, Z15
	VMOVUPS      Z0, (SI)(CX*1)
	VMOVUPS      Z1, 64(SI)(CX*1)
	VMOVUPS      Z2, 128(SI)(CX*1)
	VMOVUPS      Z3, 192(SI)(CX*1)
	VMOVUPS      Z4, (BX)(CX*1)
	VMOVUPS      Z5, 64(BX)(CX*1)
	VMOVUPS      Z6, 128(BX)(CX*1)
	VMOVUPS      Z7, 192(BX)(CX*1)
	VMOVUPS      Z8, (R12)(CX*1)
	VMOVUPS      Z9, 64(R12)(CX*1)
	VMOVUPS      Z10, 128(R12)(CX*1)
	VMOVUPS      Z11, 192(R12)(CX*1)
	VMOVUPS      Z12, (R13)(CX*1)
	VMOVUPS      Z13, 64(R13)(CX*1)
	VMOVUPS      Z14, 128(R13)(CX*1)
	VMOVUPS      Z15, 192(R13)(CX*1)
	ADDQ         $256, CX
	SUBQ         $64, R11
	JMP          a64

a16:
	CMPQ    R11, $16
	JLT     a8
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	MOVQ    R9, AX
	MOVQ    R8, DI
	MOVQ    R10, R14

a16row:
	MOVQ         (AX), DX
	VMOVUPS      (DX)(CX*1), Z16
	VBROADCASTSS (DI), Z20
	VBROADCASTSS 4(DI), Z21
	VBROADCASTSS 8(DI), Z22
	VBROADCASTSS 12(DI), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z1
	VFMADD231PS  Z16, Z22, Z2
	VFMADD231PS  Z16, Z23, Z3
	ADDQ         $24, AX
	ADDQ         $16, DI
	DECQ         R14
	JNZ          a16row
	VMULPS       Z24, Z0, Z0
	VMULPS       Z25, Z1, Z1
	VMULPS       Z26, Z2, Z2
	VMULPS       Z27, Z3, Z3
	VMOVUPS      Z0, (SI)(CX*1)
	VMOVUPS      Z1, (BX)(CX*1)
	VMOVUPS      Z2, (R12)(CX*1)
	VMOVUPS      Z3, (R13)(CX*1)
	ADDQ         $64, CX
	SUBQ         $16, R11
	JMP          a16

a8:
	TESTQ   R11, R11
	JZ      adone
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	MOVQ    R9, AX
	MOVQ    R8, DI
	MOVQ    R10, R14

a8row:
	MOVQ         (AX), DX
	VMOVUPS      (DX)(CX*1), Y4
	VBROADCASTSS (DI), Y5
	VBROADCASTSS 4(DI), Y6
	VBROADCASTSS 8(DI), Y7
	VBROADCASTSS 12(DI), Y8
	VFMADD231PS  Y4, Y5, Y0
	VFMADD231PS  Y4, Y6, Y1
	VFMADD231PS  Y4, Y7, Y2
	VFMADD231PS  Y4, Y8, Y3
	ADDQ         $24, AX
	ADDQ         $16, DI
	DECQ         R14
	JNZ          a8row
	VMULPS       Y24, Y0, Y0
	VMULPS       Y25, Y1, Y1
	VMULPS       Y26, Y2, Y2
	VMULPS       Y27, Y3, Y3
	VMOVUPS      Y0, (SI)(CX*1)
	VMOVUPS      Y1, (BX)(CX*1)
	VMOVUPS      Y2, (R12)(CX*1)
	VMOVUPS      Y3, (R13)(CX*1)

adone:
	VZEROUPPER
	RET

// The AVX2 group loops below do for AVX2 CPUs what dots4AVX512Asm and
// weigh4AVX512Asm do, with the AVX2 loops' float order and operand roles
// (q or w the second FMA operand, the row the third; the accumulator
// first in a sum), so they give the same bits.

// func dots4AVX2Asm(dst, q *float32, d int, rows *[]float32, nrows int, n int)
//
// For each row j, dst[4j+h] = the AVX2 dot of the first n floats of head h
// of q (the 4 heads d floats apart) and of rows[j]. The heads go in pairs:
// one load of a row chunk serves two heads, and the pair's eight chains
// (head 2p in Y0..Y3, 2p+1 in Y4..Y7) are independent, where one head's
// four leave the FMA units waiting on their latency half the time.
TEXT ·dots4AVX2Asm(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R8
	MOVQ d+16(FP), DX
	SHLQ $2, DX
	MOVQ rows+24(FP), R9
	MOVQ nrows+32(FP), R10
	MOVQ n+40(FP), R13

p2row:
	MOVQ (R9), DI
	MOVQ q+8(FP), BX
	MOVQ $2, R14

p2pair:
	LEAQ   (BX)(DX*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   CX, CX
	MOVQ   R13, R11
	CMPQ   R11, $32
	JLT    p2eight

p2step:
	VMOVUPS     (DI)(CX*1), Y8
	VMOVUPS     (BX)(CX*1), Y9
	VMOVUPS     (R12)(CX*1), Y10
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y4
	VMOVUPS     32(DI)(CX*1), Y11
	VMOVUPS     32(BX)(CX*1), Y12
	VMOVUPS     32(R12)(CX*1), Y13
	VFMADD231PS Y11, Y12, Y1
	VFMADD231PS Y11, Y13, Y5
	VMOVUPS     64(DI)(CX*1), Y8
	VMOVUPS     64(BX)(CX*1), Y9
	VMOVUPS     64(R12)(CX*1), Y10
	VFMADD231PS Y8, Y9, Y2
	VFMADD231PS Y8, Y10, Y6
	VMOVUPS     96(DI)(CX*1), Y11
	VMOVUPS     96(BX)(CX*1), Y12
	VMOVUPS     96(R12)(CX*1), Y13
	VFMADD231PS Y11, Y12, Y3
	VFMADD231PS Y11, Y13, Y7
	ADDQ        $128, CX
	SUBQ        $32, R11
	CMPQ        R11, $32
	JGE         p2step

p2eight:
	TESTQ R11, R11
	JZ    p2sum

p2eightloop:
	VMOVUPS     (DI)(CX*1), Y8
	VMOVUPS     (BX)(CX*1), Y9
	VMOVUPS     (R12)(CX*1), Y10
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y4
	ADDQ        $32, CX
	SUBQ        $8, R11
	JNZ         p2eightloop

p2sum:
	DOTSUM(Y0, Y1, Y2, Y3, X0, X1)
	DOTSUM(Y4, Y5, Y6, Y7, X4, X5)
	VMOVSS X0, (R8)
	VMOVSS X4, 4(R8)
	ADDQ   $8, R8
	LEAQ   (R12)(DX*1), BX
	DECQ   R14
	JNZ    p2pair

	ADDQ $24, R9
	DECQ R10
	JNZ  p2row
	VZEROUPPER
	RET

// func weigh4AVX2Asm(out *float32, d int, w *float32, rows *[]float32, nrows int, n int, r *float32)
//
// weigh4AVX512Asm with AVX2: a slice of 16 floats of the four heads' sums
// stays in eight registers while every row passes through it, each row
// load serving four heads, and out is written once per slice instead of
// read and written once per row as axpyAVX2Asm does.
TEXT ·weigh4AVX2Asm(SB), NOSPLIT, $0-56
	WEIGH4_ARGS

v16:
	CMPQ   R11, $16
	JLT    v8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   R9, AX
	MOVQ   R8, DI
	MOVQ   R10, R14

v16row:
	MOVQ         (AX), DX
	VMOVUPS      (DX)(CX*1), Y8
	VMOVUPS      32(DX)(CX*1), Y9
	VBROADCASTSS (DI), Y10
	VBROADCASTSS 4(DI), Y11
	VBROADCASTSS 8(DI), Y12
	VBROADCASTSS 12(DI), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $24, AX
	ADDQ         $16, DI
	DECQ         R14
	JNZ          v16row
	MOVQ         r+48(FP), AX
	VBROADCASTSS (AX), Y10
	VBROADCASTSS 4(AX), Y11
	VBROADCASTSS 8(AX), Y12
	VBROADCASTSS 12(AX), Y13
	VMULPS       Y10, Y0, Y0
	VMULPS       Y10, Y1, Y1
	VMULPS       Y11, Y2, Y2
	VMULPS       Y11, Y3, Y3
	VMULPS       Y12, Y4, Y4
	VMULPS       Y12, Y5, Y5
	VMULPS       Y13, Y6, Y6
	VMULPS       Y13, Y7, Y7
	VMOVUPS      Y0, (SI)(CX*1)
	VMOVUPS      Y1, 32(SI)(CX*1)
	VMOVUPS      Y2, (BX)(CX*1)
	VMOVUPS      Y3, 32(BX)(CX*1)
	VMOVUPS      Y4, (R12)(CX*1)
	VMOVUPS      Y5, 32(R12)(CX*1)
	VMOVUPS      Y6, (R13)(CX*1)
	VMOVUPS      Y7, 32(R13)(CX*1)
	ADDQ         $64, CX
	SUBQ         $16, R11
	JMP          v16

v8:
	TESTQ  R11, R11
	JZ     vdone
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   R9, AX
	MOVQ   R8, DI
	MOVQ   R10, R14

v8row:
	MOVQ         (AX), DX
	VMOVUPS      (DX)(CX*1), Y8
	VBROADCASTSS (DI), Y10
	VBROADCASTSS 4(DI), Y11
	VBROADCASTSS 8(DI), Y12
	VBROADCASTSS 12(DI), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y8, Y11, Y1
	VFMADD231PS  Y8, Y12, Y2
	VFMADD231PS  Y8, Y13, Y3
	ADDQ         $24, AX
	ADDQ         $16, DI
	DECQ         R14
	JNZ          v8row
	MOVQ         r+48(FP), AX
	VBROADCASTSS (AX), Y10
	VBROADCASTSS 4(AX), Y11
	VBROADCASTSS 8(AX), Y12
	VBROADCASTSS 12(AX), Y13
	VMULPS       Y10, Y0, Y0
	VMULPS       Y11, Y1, Y1
	VMULPS       Y12, Y2, Y2
	VMULPS       Y13, Y3, Y3
	VMOVUPS      Y0, (SI)(CX*1)
	VMOVUPS      Y1, (BX)(CX*1)
	VMOVUPS      Y2, (R12)(CX*1)
	VMOVUPS      Y3, (R13)(CX*1)

vdone:
	VZEROUPPER
	RET
