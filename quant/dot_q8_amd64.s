//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 bodies of the Q8_0, F16 and F32 dot products; dot_q8_amd64.go
// states their numerics against the references in dot.go.

// Q8ISUM sums the 32 int8·int8 products of the weight block at woff(SI)
// and the activation block at xoff(DI) into the eight int32 lanes of R;
// Y12 holds sixteen int16 ones. VPMADDUBSW multiplies unsigned by signed
// bytes, so the weight's sign moves onto the activation (VPSIGNB) and its
// magnitude, 128 included, is read unsigned (VPABSB). Pair sums are at
// most 2·128·127 and do not saturate. The one input this gets wrong is an
// activation code of -128 against a negative weight, which QuantizeQ8_0
// never produces (its codes lie in -127..127). Four ALU operations a
// block and no shuffles, where widening both operands took four shuffles.
// Clobbers Y13 and Y14.
#define Q8ISUM(woff, xoff, R) \
	VMOVDQU    woff+2(SI), Y13 \
	VMOVDQU    xoff+4(DI), Y14 \
	VPSIGNB    Y13, Y14, Y14 \
	VPABSB     Y13, Y13 \
	VPMADDUBSW Y14, Y13, R \
	VPMADDWD   Y12, R, R

// func dotQ8_0Asm(w []byte, x []BlockQ8_0) float32
//
// Weight blocks are 34 bytes (f16 scale, 32 codes), activation blocks 36
// (float32 scale, 32 codes). Groups of eight blocks share the horizontal
// sums and the scale arithmetic; their eight float terms go to eight
// float32 lanes, summed as a tree at the end.
// The scales are gathered with inserts rather than through stack stores:
// a vector load of eight narrow stores cannot be store-forwarded, which
// made the loop almost twice as slow.
TEXT ·dotQ8_0Asm(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   x_base+24(FP), DI
	MOVQ   x_len+32(FP), CX
	VXORPS X0, X0, X0
	MOVL   $0x00010001, AX
	VMOVD  AX, X12
	VPBROADCASTD X12, Y12
	SUBQ   $8, CX
	JLT    q8tail

q8loop8:
	Q8ISUM(0, 0, Y1)
	Q8ISUM(34, 36, Y2)
	Q8ISUM(68, 72, Y3)
	Q8ISUM(102, 108, Y4)
	Q8ISUM(136, 144, Y5)
	Q8ISUM(170, 180, Y6)
	Q8ISUM(204, 216, Y7)
	Q8ISUM(238, 252, Y8)

	// The eight weight scales, converted, times the activation scales.
	MOVWLZX     0(SI), AX
	VMOVD       AX, X9
	VPINSRW     $1, 34(SI), X9, X9
	VPINSRW     $2, 68(SI), X9, X9
	VPINSRW     $3, 102(SI), X9, X9
	VPINSRW     $4, 136(SI), X9, X9
	VPINSRW     $5, 170(SI), X9, X9
	VPINSRW     $6, 204(SI), X9, X9
	VPINSRW     $7, 238(SI), X9, X9
	VMOVSS      0(DI), X10
	VINSERTPS   $0x10, 36(DI), X10, X10
	VINSERTPS   $0x20, 72(DI), X10, X10
	VINSERTPS   $0x30, 108(DI), X10, X10
	VMOVSS      144(DI), X11
	VINSERTPS   $0x10, 180(DI), X11, X11
	VINSERTPS   $0x20, 216(DI), X11, X11
	VINSERTPS   $0x30, 252(DI), X11, X11
	VINSERTF128 $1, X11, Y10, Y10
	VCVTPH2PS   X9, Y9
	VMULPS      Y10, Y9, Y9

	// Y1..Y8 hold the lane sums of blocks 0..7; reduce them to one vector
	// of eight block sums in block order.
	VPHADDD    Y2, Y1, Y1
	VPHADDD    Y4, Y3, Y3
	VPHADDD    Y6, Y5, Y5
	VPHADDD    Y8, Y7, Y7
	VPHADDD    Y3, Y1, Y1
	VPHADDD    Y7, Y5, Y5
	VPERM2I128 $0x20, Y5, Y1, Y2
	VPERM2I128 $0x31, Y5, Y1, Y3
	VPADDD     Y3, Y2, Y2

	// |sum| <= 32·128·128 < 2^24, so the conversion is exact.
	VCVTDQ2PS Y2, Y2
	VMULPS    Y9, Y2, Y2

	// Lane k accumulates the terms of blocks ≡ k mod 8: no serial chain
	// of scalar adds, which bounded the loop at one add latency per block.
	VADDPS Y2, Y0, Y0

	ADDQ $272, SI
	ADDQ $288, DI
	SUBQ $8, CX
	JGE  q8loop8

q8tail:
	// Sum the eight lanes as a tree, then add the remaining blocks one by
	// one.
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	ADDQ         $8, CX
	JZ           q8done

q8loop1:
	Q8ISUM(0, 0, Y1)
	VEXTRACTI128 $1, Y1, X2
	VPADDD       X2, X1, X1
	VPSHUFD      $0x4e, X1, X2
	VPADDD       X2, X1, X1
	VPSHUFD      $0xb1, X1, X2
	VPADDD       X2, X1, X1
	VCVTDQ2PS    X1, X1
	MOVWLZX      0(SI), AX
	VMOVD        AX, X2
	VCVTPH2PS    X2, X2
	VMULSS       0(DI), X2, X2
	VMULSS       X2, X1, X1
	VADDSS       X1, X0, X0
	ADDQ         $34, SI
	ADDQ         $36, DI
	DECQ         CX
	JNZ          q8loop1

q8done:
	VZEROUPPER
	MOVSS X0, ret+48(FP)
	RET

// func dotF16Asm(w []byte, x []float32) float32
//
// Eight accumulators of eight float32 lanes take 64 elements a step, then
// steps of eight go to the first one, the lanes are summed as a tree and
// the last len%8 elements are added one by one. Eight independent FMA
// chains cover the FMA latency times its throughput, so the loop is not
// bound by the latency of one accumulator.
TEXT ·dotF16Asm(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   x_base+24(FP), DI
	MOVQ   x_len+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, BX
	SHRQ   $6, BX
	JZ     f16by8

f16loop64:
	VCVTPH2PS   0(SI), Y8
	VCVTPH2PS   16(SI), Y9
	VCVTPH2PS   32(SI), Y10
	VCVTPH2PS   48(SI), Y11
	VCVTPH2PS   64(SI), Y12
	VCVTPH2PS   80(SI), Y13
	VCVTPH2PS   96(SI), Y14
	VCVTPH2PS   112(SI), Y15
	VFMADD231PS 0(DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y11, Y3
	VFMADD231PS 128(DI), Y12, Y4
	VFMADD231PS 160(DI), Y13, Y5
	VFMADD231PS 192(DI), Y14, Y6
	VFMADD231PS 224(DI), Y15, Y7
	ADDQ        $128, SI
	ADDQ        $256, DI
	DECQ        BX
	JNZ         f16loop64

f16by8:
	MOVQ CX, BX
	ANDQ $63, BX
	SHRQ $3, BX
	JZ   f16reduce

f16loop8:
	VCVTPH2PS   0(SI), Y8
	VFMADD231PS 0(DI), Y8, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	DECQ        BX
	JNZ         f16loop8

f16reduce:
	VADDPS       Y4, Y0, Y0
	VADDPS       Y5, Y1, Y1
	VADDPS       Y6, Y2, Y2
	VADDPS       Y7, Y3, Y3
	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	ANDQ         $7, CX
	JZ           f16done

f16loop1:
	MOVWLZX     0(SI), AX
	VMOVD       AX, X1
	VCVTPH2PS   X1, X1
	VFMADD231SS 0(DI), X1, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f16loop1

f16done:
	VZEROUPPER
	MOVSS X0, ret+48(FP)
	RET

// func dotF32Asm(w []byte, x []float32) float32
//
// Both operands widen to float64, where the product is exact and the FMA
// rounds only the addition. Four accumulators of four float64 lanes take
// 16 elements a step, then steps of four go to the first one, the lanes
// are summed as a tree, the last len%4 elements are added one by one and
// the total is rounded to float32 once.
TEXT ·dotF32Asm(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   x_base+24(FP), DI
	MOVQ   x_len+32(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	MOVQ   CX, BX
	SHRQ   $4, BX
	JZ     f32by4

f32loop16:
	VCVTPS2PD   0(SI), Y4
	VCVTPS2PD   0(DI), Y8
	VCVTPS2PD   16(SI), Y5
	VCVTPS2PD   16(DI), Y9
	VCVTPS2PD   32(SI), Y6
	VCVTPS2PD   32(DI), Y10
	VCVTPS2PD   48(SI), Y7
	VCVTPS2PD   48(DI), Y11
	VFMADD231PD Y8, Y4, Y0
	VFMADD231PD Y9, Y5, Y1
	VFMADD231PD Y10, Y6, Y2
	VFMADD231PD Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        BX
	JNZ         f32loop16

f32by4:
	MOVQ CX, BX
	ANDQ $15, BX
	SHRQ $2, BX
	JZ   f32reduce

f32loop4:
	VCVTPS2PD   0(SI), Y4
	VCVTPS2PD   0(DI), Y8
	VFMADD231PD Y8, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	DECQ        BX
	JNZ         f32loop4

f32reduce:
	VADDPD       Y2, Y0, Y0
	VADDPD       Y3, Y1, Y1
	VADDPD       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0
	VUNPCKHPD    X0, X0, X1
	VADDSD       X1, X0, X0
	ANDQ         $3, CX
	JZ           f32done

f32loop1:
	VCVTSS2SD   0(SI), X4, X4
	VCVTSS2SD   0(DI), X8, X8
	VFMADD231SD X8, X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         f32loop1

f32done:
	VCVTSD2SS X0, X0, X0
	VZEROUPPER
	MOVSS     X0, ret+48(FP)
	RET
