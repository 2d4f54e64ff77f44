//go:build amd64 && !purego

#include "textflag.h"

// func readSumAVX2(b []byte) uint64
// Four 32-byte loads per iteration into four independent VPADDQ chains:
// the loop is bound by the loads, not by the adds.
TEXT ·readSumAVX2(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	SHRQ $7, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
loop:
	VPADDQ 0(SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	ADDQ $128, SI
	DECQ CX
	JNZ loop
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET

DATA half<>+0(SB)/4, $0x3f000000
GLOBL half<>(SB), RODATA|NOPTR, $4
DATA one<>+0(SB)/4, $0x3f800000
GLOBL one<>(SB), RODATA|NOPTR, $4

// func fmaLoopAVX2(n int) float32
// Twelve independent VFMADD231PS chains: enough to cover the FMA latency
// on two pipes, so the loop runs at the FMA throughput.
TEXT ·fmaLoopAVX2(SB), NOSPLIT, $0-12
	MOVQ n+0(FP), CX
	VBROADCASTSS half<>(SB), Y14
	VBROADCASTSS one<>(SB), Y15
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
floop:
	// acc = acc·Y14 + Y15 (Intel: vfmadd213ps acc, y14, y15)
	VFMADD213PS Y15, Y14, Y0
	VFMADD213PS Y15, Y14, Y1
	VFMADD213PS Y15, Y14, Y2
	VFMADD213PS Y15, Y14, Y3
	VFMADD213PS Y15, Y14, Y4
	VFMADD213PS Y15, Y14, Y5
	VFMADD213PS Y15, Y14, Y6
	VFMADD213PS Y15, Y14, Y7
	VFMADD213PS Y15, Y14, Y8
	VFMADD213PS Y15, Y14, Y9
	VFMADD213PS Y15, Y14, Y10
	VFMADD213PS Y15, Y14, Y11
	DECQ CX
	JNZ floop
	VMOVSS X0, ret+8(FP)
	VZEROUPPER
	RET

DATA bytes1<>+0(SB)/8, $0x0101010101010101
GLOBL bytes1<>(SB), RODATA|NOPTR, $8
DATA words1<>+0(SB)/8, $0x0001000100010001
GLOBL words1<>(SB), RODATA|NOPTR, $8

// I8_START loads n, the byte and word ones and clears the six sums of the
// AVX2 int8 loops.
#define I8_START \
	MOVQ n+0(FP), CX \
	VPBROADCASTQ bytes1<>(SB), Y12 \
	VPBROADCASTQ words1<>(SB), Y13 \
	VPXOR Y0, Y0, Y0 \
	VPXOR Y1, Y1, Y1 \
	VPXOR Y2, Y2, Y2 \
	VPXOR Y3, Y3, Y3 \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5

// I8_WIDEN_ADD widens the int16 pairs of the six chains in Y6..Y11 to
// int32 (VPMADDWD by ones) and adds them to the sums Y0..Y5.
#define I8_WIDEN_ADD \
	VPMADDWD Y13, Y6, Y6 \
	VPMADDWD Y13, Y7, Y7 \
	VPMADDWD Y13, Y8, Y8 \
	VPMADDWD Y13, Y9, Y9 \
	VPMADDWD Y13, Y10, Y10 \
	VPMADDWD Y13, Y11, Y11 \
	VPADDD Y6, Y0, Y0 \
	VPADDD Y7, Y1, Y1 \
	VPADDD Y8, Y2, Y2 \
	VPADDD Y9, Y3, Y3 \
	VPADDD Y10, Y4, Y4 \
	VPADDD Y11, Y5, Y5

// I8_RESULT moves lane 0 of the first sum to AX, the result.
#define I8_RESULT \
	VMOVD X0, AX \
	VZEROUPPER

// func dotI8LoopAVX2(n int) int32
// The AVX2 int8 dot in six independent accumulators: VPMADDUBSW (u8·s8
// pairs to int16), VPMADDWD by ones (int16 pairs to int32), VPADDD into
// the sum.
TEXT ·dotI8LoopAVX2(SB), NOSPLIT, $0-12
	I8_START
iloop:
	VPMADDUBSW Y12, Y12, Y6
	VPMADDUBSW Y12, Y12, Y7
	VPMADDUBSW Y12, Y12, Y8
	VPMADDUBSW Y12, Y12, Y9
	VPMADDUBSW Y12, Y12, Y10
	VPMADDUBSW Y12, Y12, Y11
	I8_WIDEN_ADD
	DECQ CX
	JNZ iloop
	I8_RESULT
	MOVL AX, ret+8(FP)
	RET

// func dotQ8_0LoopAVX2(n int) int32
// The AVX2 Q8_0 dot in six independent accumulators: dotI8LoopAVX2's
// chain after a VPSIGNB, which the Q8_0 kernels need because both of its
// operands are signed: the weights' signs go onto the activation codes
// before VPMADDUBSW multiplies them by the weights' magnitudes.
TEXT ·dotQ8_0LoopAVX2(SB), NOSPLIT, $0-12
	I8_START
qloop:
	VPSIGNB Y12, Y12, Y6
	VPSIGNB Y12, Y12, Y7
	VPSIGNB Y12, Y12, Y8
	VPSIGNB Y12, Y12, Y9
	VPSIGNB Y12, Y12, Y10
	VPSIGNB Y12, Y12, Y11
	VPMADDUBSW Y6, Y12, Y6
	VPMADDUBSW Y7, Y12, Y7
	VPMADDUBSW Y8, Y12, Y8
	VPMADDUBSW Y9, Y12, Y9
	VPMADDUBSW Y10, Y12, Y10
	VPMADDUBSW Y11, Y12, Y11
	I8_WIDEN_ADD
	DECQ CX
	JNZ qloop
	I8_RESULT
	MOVL AX, ret+8(FP)
	RET

// func dotVNNILoop(n int) int32
// Twelve independent VPDPBUSD chains over 16 int32 lanes: enough to cover
// the instruction's latency on two pipes.
TEXT ·dotVNNILoop(SB), NOSPLIT, $0-12
	MOVQ n+0(FP), CX
	VPBROADCASTQ bytes1<>(SB), Z12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
vloop:
	VPDPBUSD Z12, Z12, Z0
	VPDPBUSD Z12, Z12, Z1
	VPDPBUSD Z12, Z12, Z2
	VPDPBUSD Z12, Z12, Z3
	VPDPBUSD Z12, Z12, Z4
	VPDPBUSD Z12, Z12, Z5
	VPDPBUSD Z12, Z12, Z6
	VPDPBUSD Z12, Z12, Z7
	VPDPBUSD Z12, Z12, Z8
	VPDPBUSD Z12, Z12, Z9
	VPDPBUSD Z12, Z12, Z10
	VPDPBUSD Z12, Z12, Z11
	DECQ CX
	JNZ vloop
	VMOVD X0, AX
	VZEROUPPER
	MOVL AX, ret+8(FP)
	RET
