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
// never produces (its codes lie in -127..127; act.go gives a block too
// small for a finite 1/d codes 0). Four ALU operations a
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
// Each group asks for the weight lines 1.5 KiB ahead (five PREFETCHT0 for
// its 272 bytes). Decode streams its rows from memory, where the hardware
// prefetchers alone fall behind (docs/performance.md#kernel-design-notes).
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
	PREFETCHT0 1536(SI)
	PREFETCHT0 1600(SI)
	PREFETCHT0 1664(SI)
	PREFETCHT0 1728(SI)
	PREFETCHT0 1792(SI)
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

// Q8TOK sums the products of a weight block, its codes in S and their
// magnitudes in W, and the activation block at xoff(XP) into the eight
// int32 lanes of R, as Q8ISUM does; S and W are left intact, so one load
// and one VPABSB of the weight serve four activations.
#define Q8TOK(W, S, XP, xoff, R) \
	VMOVDQU    xoff+4(XP), R \
	VPSIGNB    S, R, R \
	VPMADDUBSW R, W, R \
	VPMADDWD   Y12, R, R

// Q8HALF sums four consecutive blocks, the weight's codes in Y8, Y13, Y14
// and Y15 with their magnitudes in Y4..Y7 and the activation's from
// xoff(XP), into the four int32 lanes of X9, in block order. Clobbers Y10
// and Y11.
#define Q8HALF(XP, xoff) \
	Q8TOK(Y4, Y8, XP, xoff, Y9) \
	Q8TOK(Y5, Y13, XP, xoff+36, Y10) \
	VPHADDD      Y10, Y9, Y9 \
	Q8TOK(Y6, Y14, XP, xoff+72, Y10) \
	Q8TOK(Y7, Y15, XP, xoff+108, Y11) \
	VPHADDD      Y11, Y10, Y10 \
	VPHADDD      Y10, Y9, Y9 \
	VEXTRACTI128 $1, Y9, X10 \
	VPADDD       X10, X9, X9

// Q8ACC finishes a group of eight blocks for one activation: the sums of
// blocks 0..3 at soff(SP) and of blocks 4..7 in X9 become eight float
// terms, (f16(d_w)·d_x)·Σ with the weight scales at 0(SP), added to the
// lanes of ACC exactly as dotQ8_0Asm adds them. Clobbers Y9..Y11.
#define Q8ACC(XP, soff, ACC) \
	VMOVDQU     soff(SP), X10 \
	VINSERTI128 $1, X9, Y10, Y10 \
	VCVTDQ2PS   Y10, Y10 \
	VMOVSS      0(XP), X11 \
	VINSERTPS   $0x10, 36(XP), X11, X11 \
	VINSERTPS   $0x20, 72(XP), X11, X11 \
	VINSERTPS   $0x30, 108(XP), X11, X11 \
	VMOVSS      144(XP), X9 \
	VINSERTPS   $0x10, 180(XP), X9, X9 \
	VINSERTPS   $0x20, 216(XP), X9, X9 \
	VINSERTPS   $0x30, 252(XP), X9, X9 \
	VINSERTF128 $1, X9, Y11, Y11 \
	VMULPS      0(SP), Y11, Y11 \
	VMULPS      Y11, Y10, Y10 \
	VADDPS      Y10, ACC, ACC

// Q8LANES sums the eight float32 lanes of Y as dotQ8_0Asm's q8tail does,
// into the low lane of X. Clobbers X15.
#define Q8LANES(Y, X) \
	VEXTRACTF128 $1, Y, X15 \
	VADDPS       X15, X, X \
	VMOVHLPS     X, X, X15 \
	VADDPS       X15, X, X \
	VMOVSHDUP    X, X15 \
	VADDSS       X15, X, X

// Q8ONE adds the term of one tail block, the weight's codes in Y8, their
// magnitudes in Y4 and its converted scale in X5, and the activation's at
// 0(XP), to the low lane of ACC, as dotQ8_0Asm's q8loop1 does. Clobbers
// Y9 and Y10.
#define Q8ONE(XP, ACC) \
	Q8TOK(Y4, Y8, XP, 0, Y9) \
	VEXTRACTI128 $1, Y9, X10 \
	VPADDD       X10, X9, X9 \
	VPSHUFD      $0x4e, X9, X10 \
	VPADDD       X10, X9, X9 \
	VPSHUFD      $0xb1, X9, X10 \
	VPADDD       X10, X9, X9 \
	VCVTDQ2PS    X9, X9 \
	VMULSS       0(XP), X5, X10 \
	VMULSS       X10, X9, X9 \
	VADDSS       X9, ACC, ACC

// func dotQ8_0x4Asm(w []byte, x0, x1, x2, x3 []BlockQ8_0, out *[4]float32)
//
// The dots of one weight row with four activations of len(x0) blocks
// each. Every term and every float addition of activation t is the one
// dotQ8_0Asm makes for it, in the same order, so out[t] equals
// dotQ8_0Asm(w, xt) bit for bit; only the integer block sums, which are
// exact, are formed differently. What four activations share is done once:
// the loads of the weight blocks, their magnitudes (VPABSB) and the
// conversion of the weight scales. Sixteen registers cannot hold eight
// blocks' codes and magnitudes and four activations' sums, so a group of
// eight blocks is taken in two halves of four, the first half's integer
// sums and the converted weight scales waiting on the stack (0(SP): eight
// weight scales; 32(SP)+16t: the sums of blocks 0..3 of activation t).
// Reading the weight codes for VPSIGNB from memory, once per activation,
// instead of keeping them in registers cost about 10% in cache.
TEXT ·dotQ8_0x4Asm(SB), NOSPLIT, $96-128
	MOVQ   w_base+0(FP), SI
	MOVQ   x0_base+24(FP), DI
	MOVQ   x0_len+32(FP), CX
	MOVQ   x1_base+48(FP), R8
	MOVQ   x2_base+72(FP), R9
	MOVQ   x3_base+96(FP), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVL   $0x00010001, AX
	VMOVD  AX, X12
	VPBROADCASTD X12, Y12
	SUBQ   $8, CX
	JLT    q4tail

q4loop8:
	MOVWLZX   0(SI), AX
	VMOVD     AX, X9
	VPINSRW   $1, 34(SI), X9, X9
	VPINSRW   $2, 68(SI), X9, X9
	VPINSRW   $3, 102(SI), X9, X9
	VPINSRW   $4, 136(SI), X9, X9
	VPINSRW   $5, 170(SI), X9, X9
	VPINSRW   $6, 204(SI), X9, X9
	VPINSRW   $7, 238(SI), X9, X9
	VCVTPH2PS X9, Y9
	VMOVUPS   Y9, 0(SP)

	VMOVDQU 2(SI), Y8
	VMOVDQU 36(SI), Y13
	VMOVDQU 70(SI), Y14
	VMOVDQU 104(SI), Y15
	VPABSB  Y8, Y4
	VPABSB  Y13, Y5
	VPABSB  Y14, Y6
	VPABSB  Y15, Y7
	Q8HALF(DI, 0)
	VMOVDQU X9, 32(SP)
	Q8HALF(R8, 0)
	VMOVDQU X9, 48(SP)
	Q8HALF(R9, 0)
	VMOVDQU X9, 64(SP)
	Q8HALF(R10, 0)
	VMOVDQU X9, 80(SP)

	VMOVDQU 138(SI), Y8
	VMOVDQU 172(SI), Y13
	VMOVDQU 206(SI), Y14
	VMOVDQU 240(SI), Y15
	VPABSB  Y8, Y4
	VPABSB  Y13, Y5
	VPABSB  Y14, Y6
	VPABSB  Y15, Y7
	Q8HALF(DI, 144)
	Q8ACC(DI, 32, Y0)
	Q8HALF(R8, 144)
	Q8ACC(R8, 48, Y1)
	Q8HALF(R9, 144)
	Q8ACC(R9, 64, Y2)
	Q8HALF(R10, 144)
	Q8ACC(R10, 80, Y3)

	ADDQ $272, SI
	ADDQ $288, DI
	ADDQ $288, R8
	ADDQ $288, R9
	ADDQ $288, R10
	SUBQ $8, CX
	JGE  q4loop8

q4tail:
	Q8LANES(Y0, X0)
	Q8LANES(Y1, X1)
	Q8LANES(Y2, X2)
	Q8LANES(Y3, X3)
	ADDQ $8, CX
	JZ   q4done

q4loop1:
	VMOVDQU   2(SI), Y8
	VPABSB    Y8, Y4
	MOVWLZX   0(SI), AX
	VMOVD     AX, X5
	VCVTPH2PS X5, X5
	Q8ONE(DI, X0)
	Q8ONE(R8, X1)
	Q8ONE(R9, X2)
	Q8ONE(R10, X3)
	ADDQ      $34, SI
	ADDQ      $36, DI
	ADDQ      $36, R8
	ADDQ      $36, R9
	ADDQ      $36, R10
	DECQ      CX
	JNZ       q4loop1

q4done:
	VZEROUPPER
	MOVQ  out+120(FP), DX
	MOVSS X0, 0(DX)
	MOVSS X1, 4(DX)
	MOVSS X2, 8(DX)
	MOVSS X3, 12(DX)
	RET

// F16REDUCE adds the two accumulators of the F16 kernels, A1 to A0, and
// sums that vector's eight lanes as a tree into the low lane of X0, A0's
// low half; T is a scratch X register.
#define F16REDUCE(A0, A1, X0, T) \
	VADDPS       A1, A0, A0 \
	VEXTRACTF128 $1, A0, T \
	VADDPS       T, X0, X0 \
	VMOVHLPS     X0, X0, T \
	VADDPS       T, X0, X0 \
	VMOVSHDUP    X0, T \
	VADDSS       T, X0, X0

// func dotF16Asm(w []byte, x []float32) float32
//
// Two accumulators of eight float32 lanes take 16 elements a step (the
// first eight to the first), an eighth step goes to the first, the two
// are added and the lanes summed as a tree (F16REDUCE), and the last
// len%8 elements are added one by one. Two FMA chains bound the loop by
// their latency: on AMD Zen 3 it runs at 0.6 of the speed eight chains
// gave (about 19 GB/s of weights a core in cache, still faster than
// decode reads them from memory), and leaves dotF16x2x3Asm the registers
// to apply two rows to three activations with the same sums, which
// prefill gains more from.
TEXT ·dotF16Asm(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   x_base+24(FP), DI
	MOVQ   x_len+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   CX, BX
	SHRQ   $4, BX
	JZ     f16by8

f16loop16:
	// The line 4 KB ahead: decode reads the F16 rows (router,
	// hyper-connection mixes, compressors) from memory, and the
	// latency-bound loop left the hardware prefetchers behind; 4 KB is the
	// distance that measured best (docs/performance.md#kernel-design-notes).
	PREFETCHT0  4096(SI)
	VCVTPH2PS   0(SI), Y8
	VCVTPH2PS   16(SI), Y9
	VFMADD231PS 0(DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	ADDQ        $32, SI
	ADDQ        $64, DI
	DECQ        BX
	JNZ         f16loop16

f16by8:
	TESTQ $8, CX
	JZ    f16reduce
	VCVTPH2PS   0(SI), Y8
	VFMADD231PS 0(DI), Y8, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI

f16reduce:
	F16REDUCE(Y0, Y1, X0, X1)
	ANDQ $7, CX
	JZ   f16done

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

// F16X23 converts the eight weights at off(SI) and off(R10) (rows 0 and
// 1) and adds their products with the eight elements at 2·off of the
// three activations (DI, R8, R9) to accumulator j of each row and token:
// Y(j), Y(2+j), Y(4+j) for row 0 and tokens 0..2, Y(6+j), Y(8+j), Y(10+j)
// for row 1, here A0..A2 and B0..B2.
#define F16X23(off, A0, A1, A2, B0, B1, B2) \
	VCVTPH2PS   off(SI), Y12 \
	VCVTPH2PS   off(R10), Y13 \
	VMOVUPS     (2*off)(DI), Y14 \
	VFMADD231PS Y14, Y12, A0 \
	VFMADD231PS Y14, Y13, B0 \
	VMOVUPS     (2*off)(R8), Y14 \
	VFMADD231PS Y14, Y12, A1 \
	VFMADD231PS Y14, Y13, B1 \
	VMOVUPS     (2*off)(R9), Y14 \
	VFMADD231PS Y14, Y12, A2 \
	VFMADD231PS Y14, Y13, B2

// F16TAIL1 adds the product of the weight in X12 with the element at
// (P) to X.
#define F16TAIL1(P, X) \
	VFMADD231SS (P), X12, X

// func dotF16x2x3Asm(w0, w1 *byte, x0, x1, x2 *float32, n int, out *[6]float32)
//
// dotF16Asm for two rows and three activations of n elements at once: the
// six dots each in their own two accumulators, with dotF16Asm's very
// operations and order, so each result is its bits. A step loads 64
// bytes of weights and 192 of activations for 96 multiply-adds in twelve
// FMA chains, where dotF16Asm loads 96 bytes for 16 in two.
TEXT ·dotF16x2x3Asm(SB), NOSPLIT, $0-56
	MOVQ   w0+0(FP), SI
	MOVQ   w1+8(FP), R10
	MOVQ   x0+16(FP), DI
	MOVQ   x1+24(FP), R8
	MOVQ   x2+32(FP), R9
	MOVQ   n+40(FP), CX
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
	MOVQ   CX, BX
	SHRQ   $4, BX
	JZ     f23by8

f23loop16:
	F16X23(0, Y0, Y2, Y4, Y6, Y8, Y10)
	F16X23(16, Y1, Y3, Y5, Y7, Y9, Y11)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, R9
	DECQ BX
	JNZ  f23loop16

f23by8:
	TESTQ $8, CX
	JZ    f23reduce
	F16X23(0, Y0, Y2, Y4, Y6, Y8, Y10)
	ADDQ  $16, SI
	ADDQ  $16, R10
	ADDQ  $32, DI
	ADDQ  $32, R8
	ADDQ  $32, R9

f23reduce:
	F16REDUCE(Y0, Y1, X0, X12)
	F16REDUCE(Y2, Y3, X2, X12)
	F16REDUCE(Y4, Y5, X4, X12)
	F16REDUCE(Y6, Y7, X6, X12)
	F16REDUCE(Y8, Y9, X8, X12)
	F16REDUCE(Y10, Y11, X10, X12)
	ANDQ $7, CX
	JZ   f23done

f23loop1:
	MOVWLZX   0(SI), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	F16TAIL1(DI, X0)
	F16TAIL1(R8, X2)
	F16TAIL1(R9, X4)
	MOVWLZX   0(R10), AX
	VMOVD     AX, X12
	VCVTPH2PS X12, X12
	F16TAIL1(DI, X6)
	F16TAIL1(R8, X8)
	F16TAIL1(R9, X10)
	ADDQ      $2, SI
	ADDQ      $2, R10
	ADDQ      $4, DI
	ADDQ      $4, R8
	ADDQ      $4, R9
	DECQ      CX
	JNZ       f23loop1

f23done:
	VZEROUPPER
	MOVQ  out+48(FP), DX
	MOVSS X0, 0(DX)
	MOVSS X2, 4(DX)
	MOVSS X4, 8(DX)
	MOVSS X6, 12(DX)
	MOVSS X8, 16(DX)
	MOVSS X10, 20(DX)
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
