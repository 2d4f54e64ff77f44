//go:build amd64 && !purego

#include "textflag.h"

// The products are VMULPS and the sums VADDPS, never a fused multiply-add:
// each product is rounded to float32 before it is added, as in elem.go.

// func mulToAVX2Asm(dst *float32, s float32, x *float32, n int)
TEXT ·mulToAVX2Asm(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS s+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $32
	JLT          mul8

mul32:
	VMULPS  (SI), Y0, Y1
	VMULPS  32(SI), Y0, Y2
	VMULPS  64(SI), Y0, Y3
	VMULPS  96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	CMPQ    CX, $32
	JGE     mul32

mul8:
	TESTQ CX, CX
	JZ    muldone

mul8loop:
	VMULPS  (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     mul8loop

muldone:
	VZEROUPPER
	RET

// func mulAddAVX2Asm(acc *float32, s float32, x *float32, n int)
TEXT ·mulAddAVX2Asm(SB), NOSPLIT, $0-32
	MOVQ         acc+0(FP), DI
	VBROADCASTSS s+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $32
	JLT          madd8

madd32:
	VMULPS  (SI), Y0, Y1
	VMULPS  32(SI), Y0, Y2
	VMULPS  64(SI), Y0, Y3
	VMULPS  96(SI), Y0, Y4
	VADDPS  (DI), Y1, Y1
	VADDPS  32(DI), Y2, Y2
	VADDPS  64(DI), Y3, Y3
	VADDPS  96(DI), Y4, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	CMPQ    CX, $32
	JGE     madd32

madd8:
	TESTQ CX, CX
	JZ    madddone

madd8loop:
	VMULPS  (SI), Y0, Y1
	VADDPS  (DI), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     madd8loop

madddone:
	VZEROUPPER
	RET

// func mulMulToAVX2Asm(dst *float32, s float32, x, w *float32, n int)
TEXT ·mulMulToAVX2Asm(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	VBROADCASTSS s+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         w+24(FP), DX
	MOVQ         n+32(FP), CX
	CMPQ         CX, $32
	JLT          mm8

mm32:
	VMULPS  (SI), Y0, Y1
	VMULPS  32(SI), Y0, Y2
	VMULPS  64(SI), Y0, Y3
	VMULPS  96(SI), Y0, Y4
	VMULPS  (DX), Y1, Y1
	VMULPS  32(DX), Y2, Y2
	VMULPS  64(DX), Y3, Y3
	VMULPS  96(DX), Y4, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	CMPQ    CX, $32
	JGE     mm32

mm8:
	TESTQ CX, CX
	JZ    mmdone

mm8loop:
	VMULPS  (SI), Y0, Y1
	VMULPS  (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     mm8loop

mmdone:
	VZEROUPPER
	RET
