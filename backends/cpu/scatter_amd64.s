//go:build amd64 && !purego

#include "textflag.h"

// func scatterNTAsm(dst *float32, strideBytes int, src *float32, n int)
//
// VMOVNTPS writes each 64-byte line whole without reading it first; the
// SFENCE orders these weakly ordered stores before whatever tells another
// worker that the task is done.
TEXT ·scatterNTAsm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ strideBytes+8(FP), DX
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX

scatterloop:
	VMOVUPS  (SI), Z0
	VMOVNTPS Z0, (DI)
	ADDQ     $64, SI
	ADDQ     DX, DI
	DECQ     CX
	JNZ      scatterloop
	SFENCE
	VZEROUPPER
	RET

// func scatterNTAVX2Asm(dst *float32, strideBytes int, src *float32, n int)
//
// scatterNTAsm with two 32-byte VMOVNTPS a line; the line is still written
// whole, the two halves combining in the write buffer.
TEXT ·scatterNTAVX2Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ strideBytes+8(FP), DX
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX

scatter2loop:
	VMOVUPS  (SI), Y0
	VMOVUPS  32(SI), Y1
	VMOVNTPS Y0, (DI)
	VMOVNTPS Y1, 32(DI)
	ADDQ     $64, SI
	ADDQ     DX, DI
	DECQ     CX
	JNZ      scatter2loop
	SFENCE
	VZEROUPPER
	RET
