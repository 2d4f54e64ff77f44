//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// quantizeQ8_0AVX2 does quantizeQ8_0Act's float32 operations eight
// lanes at a time: |x| by clearing the sign bit, the block maximum, d =
// amax/127 and id = 1/d as scalar divisions, id masked to 0 unless it is
// below +Inf (d of 0 or too small for a finite inverse), x·id, and
// VCVTPS2DQ, which rounds to nearest even in the default MXCSR mode as
// actRoundI8 does. The saturating packs clamp to -128..127 as actRoundI8
// does, and VPERMD undoes their per-lane interleave. NaN blocks, whose
// result QuantizeQ8_0 leaves unspecified, may differ.

DATA q8act_abs<>+0(SB)/4, $0x7fffffff
GLOBL q8act_abs<>(SB), RODATA|NOPTR, $4
DATA q8act_127<>+0(SB)/4, $0x42fe0000
GLOBL q8act_127<>(SB), RODATA|NOPTR, $4
DATA q8act_one<>+0(SB)/4, $0x3f800000
GLOBL q8act_one<>(SB), RODATA|NOPTR, $4
DATA q8act_inf<>+0(SB)/4, $0x7f800000
GLOBL q8act_inf<>(SB), RODATA|NOPTR, $4
DATA q8act_perm<>+0(SB)/4, $0
DATA q8act_perm<>+4(SB)/4, $4
DATA q8act_perm<>+8(SB)/4, $1
DATA q8act_perm<>+12(SB)/4, $5
DATA q8act_perm<>+16(SB)/4, $2
DATA q8act_perm<>+20(SB)/4, $6
DATA q8act_perm<>+24(SB)/4, $3
DATA q8act_perm<>+28(SB)/4, $7
GLOBL q8act_perm<>(SB), RODATA|NOPTR, $32

// HMAX leaves in the low float of X (the low half of Y) the maximum of
// the eight floats of Y, clobbering T.
#define HMAX(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VMAXPS       T, X, X  \
	VMOVHLPS     X, T, T  \
	VMAXPS       T, X, X  \
	VMOVSHDUP    X, T     \
	VMAXSS       T, X, X

// func quantizeQ8_0AVX2(x *float32, dst *BlockQ8_0, nb int)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         dst+8(FP), DI
	MOVQ         nb+16(FP), CX
	VBROADCASTSS q8act_abs<>(SB), Y15
	VMOVSS       q8act_127<>(SB), X14
	VMOVSS       q8act_one<>(SB), X13
	VMOVDQU      q8act_perm<>(SB), Y12
	VMOVSS       q8act_inf<>(SB), X11

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
	HMAX(Y4, X4, X5)

	// d = amax/127; id = 1/d, or 0 where that is +Inf (d is 0 or too
	// small for a finite inverse).
	VDIVSS X14, X4, X5
	VMOVSS X5, BlockQ8_0_D(DI)
	VDIVSS X5, X13, X6
	VCMPSS $1, X11, X6, X7 // id < +Inf
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

// quantizeQ8KAVX2 does quantizeQ8KBlock's float32 operations eight lanes
// at a time. The block maximum of |x| comes from a VMAXPS tree; the first
// element whose |x| equals it (the one the strictly-greater scan keeps, and
// whose sign decides d's) is found by a compare and VMOVMSKPS per eight
// elements. iscale = -127/max and d = 1/iscale are scalar divisions; a d
// of ±0 (iscale is ±Inf) zeroes the codes and sums and keeps d. Else the
// codes are x·iscale through VCVTPS2DQ, which rounds to nearest even as
// actRoundI8 does, and the saturating packs clamp as it does (|x·iscale|
// is at most 127 and a rounding error anyway). Each 16-code sum is one
// VPMADDUBSW by ones, one VPMADDWD by ones and two VPHADDD within a
// 128-bit lane, whose 16 codes it is. Blocks holding NaN or Inf, whose
// result QuantizeQ8K leaves unspecified, may differ.

DATA q8kact_m127<>+0(SB)/4, $0xc2fe0000
GLOBL q8kact_m127<>(SB), RODATA|NOPTR, $4
DATA q8kact_ones8<>+0(SB)/4, $0x01010101
GLOBL q8kact_ones8<>(SB), RODATA|NOPTR, $4
DATA q8kact_ones16<>+0(SB)/4, $0x00010001
GLOBL q8kact_ones16<>(SB), RODATA|NOPTR, $4

// func quantizeQ8KAVX2(x *float32, dst *BlockQ8K, nb int)
TEXT ·quantizeQ8KAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         dst+8(FP), DI
	MOVQ         nb+16(FP), CX
	VBROADCASTSS q8act_abs<>(SB), Y15
	VMOVSS       q8kact_m127<>(SB), X14
	VMOVSS       q8act_one<>(SB), X13
	VMOVDQU      q8act_perm<>(SB), Y12
	VPBROADCASTD q8kact_ones8<>(SB), Y11
	VPBROADCASTD q8kact_ones16<>(SB), Y10
	VXORPS       X9, X9, X9

q8kloop:
	// amax = max |x| over the 256 elements, four chains.
	VANDPS (SI), Y15, Y0
	VANDPS 32(SI), Y15, Y1
	VANDPS 64(SI), Y15, Y2
	VANDPS 96(SI), Y15, Y3
	MOVQ   $128, AX

q8kmax:
	VANDPS (SI)(AX*1), Y15, Y4
	VANDPS 32(SI)(AX*1), Y15, Y5
	VANDPS 64(SI)(AX*1), Y15, Y6
	VANDPS 96(SI)(AX*1), Y15, Y7
	VMAXPS Y4, Y0, Y0
	VMAXPS Y5, Y1, Y1
	VMAXPS Y6, Y2, Y2
	VMAXPS Y7, Y3, Y3
	ADDQ   $128, AX
	CMPQ   AX, $1024
	JLT    q8kmax
	VMAXPS       Y1, Y0, Y0
	VMAXPS       Y3, Y2, Y2
	VMAXPS       Y2, Y0, Y0
	HMAX(Y0, X0, X1)
	VXORPS       X1, X1, X1
	VUCOMISS     X1, X0
	JEQ          q8kzero

	// mx = the first element with |x| = amax (amax itself if none is,
	// which only NaN blocks can cause).
	VBROADCASTSS X0, Y1
	VMOVAPS      X0, X6
	XORQ         AX, AX

q8kfind:
	VANDPS    (SI)(AX*1), Y15, Y2
	VCMPPS    $0, Y1, Y2, Y2
	VMOVMSKPS Y2, DX
	TESTL     DX, DX
	JNZ       q8kfound
	ADDQ      $32, AX
	CMPQ      AX, $1024
	JLT       q8kfind
	JMP       q8kscale

q8kfound:
	BSFL   DX, DX
	LEAQ   (SI)(AX*1), R8
	VMOVSS (R8)(DX*4), X6

q8kscale:
	VDIVSS       X6, X14, X7 // iscale = -127/mx
	VDIVSS       X7, X13, X8 // d = 1/iscale
	VMOVSS       X8, BlockQ8K_D(DI)
	VUCOMISS     X9, X8
	JEQ          q8kcodes0 // d = ±0: iscale is ±Inf
	VBROADCASTSS X7, Y7
	XORQ         AX, AX
	LEAQ         BlockQ8K_Qs(DI), R9
	LEAQ         BlockQ8K_Bsums(DI), R10

q8kcodes:
	VMULPS       (SI)(AX*4), Y7, Y0
	VMULPS       32(SI)(AX*4), Y7, Y1
	VMULPS       64(SI)(AX*4), Y7, Y2
	VMULPS       96(SI)(AX*4), Y7, Y3
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VCVTPS2DQ    Y2, Y2
	VCVTPS2DQ    Y3, Y3
	VPACKSSDW    Y1, Y0, Y0
	VPACKSSDW    Y3, Y2, Y2
	VPACKSSWB    Y2, Y0, Y0
	VPERMD       Y0, Y12, Y0
	VMOVDQU      Y0, (R9)(AX*1)
	VPMADDUBSW   Y0, Y11, Y1
	VPMADDWD     Y10, Y1, Y1
	VPHADDD      Y1, Y1, Y1
	VPHADDD      Y1, Y1, Y1
	VMOVD        X1, R11
	MOVW         R11, (R10)
	VEXTRACTI128 $1, Y1, X1
	VMOVD        X1, R11
	MOVW         R11, 2(R10)
	ADDQ         $4, R10
	ADDQ         $32, AX
	CMPQ         AX, $256
	JLT          q8kcodes
	JMP          q8knext

q8kzero:
	MOVL $0, BlockQ8K_D(DI)

q8kcodes0:
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (BlockQ8K_Qs+0)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+32)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+64)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+96)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+128)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+160)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+192)(DI)
	VMOVDQU Y0, (BlockQ8K_Qs+224)(DI)
	VMOVDQU Y0, BlockQ8K_Bsums(DI)

q8knext:
	ADDQ $1024, SI
	ADDQ $BlockQ8K__size, DI
	DECQ CX
	JNZ  q8kloop
	VZEROUPPER
	RET
