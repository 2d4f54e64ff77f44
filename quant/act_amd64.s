//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// quantizeQ8_0AVX2 does quantizeQ8_0Act's float32 operations eight
// lanes at a time: |x| by clearing the sign bit, the block maximum, d =
// amax/127 and id = 1/d (0 when d is 0) as scalar divisions, x·id, and
// VCVTPS2DQ, which rounds to nearest even in the default MXCSR mode as
// actRoundI8 does. The saturating packs clamp to -128..127 as actRoundI8
// does, and VPERMD undoes their per-lane interleave. NaN blocks, whose
// result quantizeQ8_0Block leaves unspecified, may differ.

DATA q8act_abs<>+0(SB)/4, $0x7fffffff
GLOBL q8act_abs<>(SB), RODATA|NOPTR, $4
DATA q8act_127<>+0(SB)/4, $0x42fe0000
GLOBL q8act_127<>(SB), RODATA|NOPTR, $4
DATA q8act_one<>+0(SB)/4, $0x3f800000
GLOBL q8act_one<>(SB), RODATA|NOPTR, $4
DATA q8act_perm<>+0(SB)/4, $0
DATA q8act_perm<>+4(SB)/4, $4
DATA q8act_perm<>+8(SB)/4, $1
DATA q8act_perm<>+12(SB)/4, $5
DATA q8act_perm<>+16(SB)/4, $2
DATA q8act_perm<>+20(SB)/4, $6
DATA q8act_perm<>+24(SB)/4, $3
DATA q8act_perm<>+28(SB)/4, $7
GLOBL q8act_perm<>(SB), RODATA|NOPTR, $32

// func quantizeQ8_0AVX2(x *float32, dst *BlockQ8_0, nb int)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         dst+8(FP), DI
	MOVQ         nb+16(FP), CX
	VBROADCASTSS q8act_abs<>(SB), Y15
	VMOVSS       q8act_127<>(SB), X14
	VMOVSS       q8act_one<>(SB), X13
	VMOVDQU      q8act_perm<>(SB), Y12
	VXORPS       X11, X11, X11

q8loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3

	// amax = max |x|
	VANDPS       Y15, Y0, Y4
	VANDPS       Y15, Y1, Y5
	VANDPS       Y15, Y2, Y6
	VANDPS       Y15, Y3, Y7
	VMAXPS       Y5, Y4, Y4
	VMAXPS       Y7, Y6, Y6
	VMAXPS       Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VMOVHLPS     X4, X5, X5
	VMAXPS       X5, X4, X4
	VMOVSHDUP    X4, X5
	VMAXSS       X5, X4, X4

	// d = amax/127; id = 1/d, or 0 when d is 0 (1/0 is masked off).
	VDIVSS X14, X4, X5
	VMOVSS X5, BlockQ8_0_D(DI)
	VDIVSS X5, X13, X6
	VCMPSS $4, X11, X5, X7 // d != 0
	VANDPS X7, X6, X6
	VBROADCASTSS X6, Y6

	VMULPS    Y6, Y0, Y0
	VMULPS    Y6, Y1, Y1
	VMULPS    Y6, Y2, Y2
	VMULPS    Y6, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y12, Y0
	VMOVDQU   Y0, BlockQ8_0_Qs(DI)

	ADDQ $128, SI
	ADDQ $BlockQ8_0__size, DI
	DECQ CX
	JNZ  q8loop
	VZEROUPPER
	RET
