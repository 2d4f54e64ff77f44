//go:build amd64 && !purego

#include "textflag.h"

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
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X1, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
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

// func prefetchAsm(p *byte, n int)
//
// One PREFETCHT0 per 64 bytes of [p, p+n), n > 0.
TEXT ·prefetchAsm(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX

pf:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JLT        pf
	RET
