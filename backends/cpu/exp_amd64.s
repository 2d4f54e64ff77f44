//go:build amd64 && !purego

#include "textflag.h"

// The exp below repeats, eight float64 lanes at a time, the arithmetic of
// the FMA path of Go's math.Exp on amd64 (math/exp_amd64.s: Shibata's
// method): n = round(x·log2e), r = (x − n·ln2hi − n·ln2lo)/16, a degree-8
// polynomial p(r) with r·p(r) ≈ e^r − 1, four steps y ← y·(y+2) (the last
// fused with the +1) undoing the /16, then a multiply by 2^n. Every
// operation and its rounding is the same as in the scalar code, so for
// inputs whose result is a normal float64 the lanes are bit-identical to
// math.Exp: VRNDSCALEPD rounds to nearest even as CVTSD2SL does under Go's
// MXCSR, and VSCALEFPD multiplies by 2^n exactly, as the scalar code's
// multiply by the float64 2^n does when the product is normal. Inputs are
// clamped to [-110, 100] in float32 first: beyond that every float32
// result is +0 or +Inf, and within it n and the result stay in the normal
// float64 range, so the scalar code's overflow and denormal paths are
// never needed.

// expdata holds the float64 constants (bit patterns of the decimal
// literals of math/exp_amd64.s) and the float32 ones.
DATA expdata<>+0(SB)/8, $0x3ff71547652b82fe   // log2(e)
DATA expdata<>+8(SB)/8, $0x3fe62e42fefa3000   // ln2, upper part
DATA expdata<>+16(SB)/8, $0x3d53de6af278ece6  // ln2, lower part
DATA expdata<>+24(SB)/8, $0x3fb0000000000000  // 1/16
DATA expdata<>+32(SB)/8, $0x3efa01a01a01a01a  // 1/8!
DATA expdata<>+40(SB)/8, $0x3f2a01a01a01a01a  // 1/7!
DATA expdata<>+48(SB)/8, $0x3f56c16c16c16c17  // 1/6!
DATA expdata<>+56(SB)/8, $0x3f81111111111111  // 1/5!
DATA expdata<>+64(SB)/8, $0x3fa5555555555555  // 1/4!
DATA expdata<>+72(SB)/8, $0x3fc5555555555555  // 1/3!
DATA expdata<>+80(SB)/8, $0x3fe0000000000000  // 0.5
DATA expdata<>+88(SB)/8, $0x3ff0000000000000  // 1.0
DATA expdata<>+96(SB)/8, $0x4000000000000000  // 2.0
DATA expdata<>+104(SB)/4, $0xc2dc0000         // float32 -110
DATA expdata<>+108(SB)/4, $0x42c80000         // float32 100
DATA expdata<>+112(SB)/4, $0x00400000         // float32 quiet-NaN bit
DATA expdata<>+116(SB)/4, $0x80000000         // float32 sign bit
DATA expdata<>+120(SB)/4, $0x3f800000         // float32 1
GLOBL expdata<>(SB), RODATA|NOPTR, $124

// EXPCONSTS broadcasts the float64 constants into Z16-Z28 and the float32
// lower clamp into Z30.
#define EXPCONSTS \
	VBROADCASTSD expdata<>+0(SB), Z16;   \
	VBROADCASTSD expdata<>+8(SB), Z17;   \
	VBROADCASTSD expdata<>+16(SB), Z18;  \
	VBROADCASTSD expdata<>+24(SB), Z19;  \
	VBROADCASTSD expdata<>+32(SB), Z20;  \
	VBROADCASTSD expdata<>+40(SB), Z21;  \
	VBROADCASTSD expdata<>+48(SB), Z22;  \
	VBROADCASTSD expdata<>+56(SB), Z23;  \
	VBROADCASTSD expdata<>+64(SB), Z24;  \
	VBROADCASTSD expdata<>+72(SB), Z25;  \
	VBROADCASTSD expdata<>+80(SB), Z26;  \
	VBROADCASTSD expdata<>+88(SB), Z27;  \
	VBROADCASTSD expdata<>+96(SB), Z28;  \
	VBROADCASTSS expdata<>+104(SB), Z30

// EXP2 replaces the float64 lanes of x0 and x1 by their exp; p and n are
// scratch. One exp is a chain of some 23 dependent instructions: the
// chains are interleaved so that the latency of each step is covered by
// the other chain.
#define EXP2(x0, p0, n0, x1, p1, n1) \
	VMULPD       Z16, x0, p0; \
	VMULPD       Z16, x1, p1; \
	VRNDSCALEPD  $8, p0, n0;  \
	VRNDSCALEPD  $8, p1, n1;  \
	VFNMADD231PD Z17, n0, x0; \
	VFNMADD231PD Z17, n1, x1; \
	VFNMADD231PD Z18, n0, x0; \
	VFNMADD231PD Z18, n1, x1; \
	VMULPD       Z19, x0, x0; \
	VMULPD       Z19, x1, x1; \
	VMOVAPD      Z20, p0;     \
	VMOVAPD      Z20, p1;     \
	VFMADD213PD  Z21, x0, p0; \
	VFMADD213PD  Z21, x1, p1; \
	VFMADD213PD  Z22, x0, p0; \
	VFMADD213PD  Z22, x1, p1; \
	VFMADD213PD  Z23, x0, p0; \
	VFMADD213PD  Z23, x1, p1; \
	VFMADD213PD  Z24, x0, p0; \
	VFMADD213PD  Z24, x1, p1; \
	VFMADD213PD  Z25, x0, p0; \
	VFMADD213PD  Z25, x1, p1; \
	VFMADD213PD  Z26, x0, p0; \
	VFMADD213PD  Z26, x1, p1; \
	VFMADD213PD  Z27, x0, p0; \
	VFMADD213PD  Z27, x1, p1; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VFMADD213PD  Z27, p0, x0; \
	VFMADD213PD  Z27, p1, x1; \
	VSCALEFPD    n0, x0, x0;  \
	VSCALEFPD    n1, x1, x1

// EXP4 is EXP2 on four chains: with two, the long chains fill the FP
// scheduler and stall issue; four cut the time per float by about a fifth
// (Zen 5).
#define EXP4(x0, p0, n0, x1, p1, n1, x2, p2, n2, x3, p3, n3) \
	VMULPD       Z16, x0, p0; \
	VMULPD       Z16, x1, p1; \
	VMULPD       Z16, x2, p2; \
	VMULPD       Z16, x3, p3; \
	VRNDSCALEPD  $8, p0, n0;  \
	VRNDSCALEPD  $8, p1, n1;  \
	VRNDSCALEPD  $8, p2, n2;  \
	VRNDSCALEPD  $8, p3, n3;  \
	VFNMADD231PD Z17, n0, x0; \
	VFNMADD231PD Z17, n1, x1; \
	VFNMADD231PD Z17, n2, x2; \
	VFNMADD231PD Z17, n3, x3; \
	VFNMADD231PD Z18, n0, x0; \
	VFNMADD231PD Z18, n1, x1; \
	VFNMADD231PD Z18, n2, x2; \
	VFNMADD231PD Z18, n3, x3; \
	VMULPD       Z19, x0, x0; \
	VMULPD       Z19, x1, x1; \
	VMULPD       Z19, x2, x2; \
	VMULPD       Z19, x3, x3; \
	VMOVAPD      Z20, p0;     \
	VMOVAPD      Z20, p1;     \
	VMOVAPD      Z20, p2;     \
	VMOVAPD      Z20, p3;     \
	VFMADD213PD  Z21, x0, p0; \
	VFMADD213PD  Z21, x1, p1; \
	VFMADD213PD  Z21, x2, p2; \
	VFMADD213PD  Z21, x3, p3; \
	VFMADD213PD  Z22, x0, p0; \
	VFMADD213PD  Z22, x1, p1; \
	VFMADD213PD  Z22, x2, p2; \
	VFMADD213PD  Z22, x3, p3; \
	VFMADD213PD  Z23, x0, p0; \
	VFMADD213PD  Z23, x1, p1; \
	VFMADD213PD  Z23, x2, p2; \
	VFMADD213PD  Z23, x3, p3; \
	VFMADD213PD  Z24, x0, p0; \
	VFMADD213PD  Z24, x1, p1; \
	VFMADD213PD  Z24, x2, p2; \
	VFMADD213PD  Z24, x3, p3; \
	VFMADD213PD  Z25, x0, p0; \
	VFMADD213PD  Z25, x1, p1; \
	VFMADD213PD  Z25, x2, p2; \
	VFMADD213PD  Z25, x3, p3; \
	VFMADD213PD  Z26, x0, p0; \
	VFMADD213PD  Z26, x1, p1; \
	VFMADD213PD  Z26, x2, p2; \
	VFMADD213PD  Z26, x3, p3; \
	VFMADD213PD  Z27, x0, p0; \
	VFMADD213PD  Z27, x1, p1; \
	VFMADD213PD  Z27, x2, p2; \
	VFMADD213PD  Z27, x3, p3; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VMULPD       p2, x2, x2;  \
	VMULPD       p3, x3, x3;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VADDPD       Z28, x2, p2; \
	VADDPD       Z28, x3, p3; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VMULPD       p2, x2, x2;  \
	VMULPD       p3, x3, x3;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VADDPD       Z28, x2, p2; \
	VADDPD       Z28, x3, p3; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VMULPD       p2, x2, x2;  \
	VMULPD       p3, x3, x3;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VADDPD       Z28, x2, p2; \
	VADDPD       Z28, x3, p3; \
	VMULPD       p0, x0, x0;  \
	VMULPD       p1, x1, x1;  \
	VMULPD       p2, x2, x2;  \
	VMULPD       p3, x3, x3;  \
	VADDPD       Z28, x0, p0; \
	VADDPD       Z28, x1, p1; \
	VADDPD       Z28, x2, p2; \
	VADDPD       Z28, x3, p3; \
	VFMADD213PD  Z27, p0, x0; \
	VFMADD213PD  Z27, p1, x1; \
	VFMADD213PD  Z27, p2, x2; \
	VFMADD213PD  Z27, p3, x3; \
	VSCALEFPD    n0, x0, x0;  \
	VSCALEFPD    n1, x1, x1;  \
	VSCALEFPD    n2, x2, x2;  \
	VSCALEFPD    n3, x3, x3

// EXPF32 is EXPF16 on Z0 and Z8 at once, into Z2 and Z10 (using Z1-Z14,
// Z29, K1 and K3 as scratch).
#define EXPF32 \
	VCMPPS        $3, Z0, Z0, K1;                  \
	VCMPPS        $3, Z8, Z8, K3;                  \
	VMAXPS        Z30, Z0, Z1;                     \
	VMAXPS        Z30, Z8, Z9;                     \
	VMINPS        Z31, Z1, Z1;                     \
	VMINPS        Z31, Z9, Z9;                     \
	VCVTPS2PD     Y1, Z2;                          \
	VCVTPS2PD     Y9, Z10;                         \
	VEXTRACTF64X4 $1, Z1, Y3;                      \
	VEXTRACTF64X4 $1, Z9, Y11;                     \
	VCVTPS2PD     Y3, Z3;                          \
	VCVTPS2PD     Y11, Z11;                        \
	EXP4(Z2, Z4, Z5, Z3, Z6, Z7, Z10, Z12, Z13, Z11, Z14, Z29); \
	VCVTPD2PS     Z2, Y2;                          \
	VCVTPD2PS     Z3, Y3;                          \
	VCVTPD2PS     Z10, Y10;                        \
	VCVTPD2PS     Z11, Y11;                        \
	VINSERTF64X4  $1, Y3, Z2, Z2;                  \
	VINSERTF64X4  $1, Y11, Z10, Z10;               \
	VPORD         Z15, Z0, K1, Z2;                 \
	VPORD         Z15, Z8, K3, Z10

// EXPF16 sets Z2 to expf of the 16 float32 lanes of Z0 (Z31: upper clamp,
// Z15: quiet bit), using Z1-Z7 and K1. A NaN lane becomes that NaN, quiet,
// as the float32→float64→float32 round trip of the scalar code leaves it.
#define EXPF16 \
	VCMPPS        $3, Z0, Z0, K1;                  \
	VMAXPS        Z30, Z0, Z1;                     \
	VMINPS        Z31, Z1, Z1;                     \
	VCVTPS2PD     Y1, Z2;                          \
	VEXTRACTF64X4 $1, Z1, Y3;                      \
	VCVTPS2PD     Y3, Z3;                          \
	EXP2(Z2, Z4, Z5, Z3, Z6, Z7);                  \
	VCVTPD2PS     Z2, Y2;                          \
	VCVTPD2PS     Z3, Y3;                          \
	VINSERTF64X4  $1, Y3, Z2, Z2;                  \
	VPORD         Z15, Z0, K1, Z2

// func expfsAVX512(dst, src *float32, n int)
TEXT ·expfsAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	EXPCONSTS
	VBROADCASTSS expdata<>+108(SB), Z31
	VPBROADCASTD expdata<>+112(SB), Z15
	SUBQ         $32, CX
	JLT          expf16

expfloop32:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z8
	EXPF32
	VMOVUPS Z2, (DI)
	VMOVUPS Z10, 64(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JGE     expfloop32

expf16:
	// CX+32 floats are left (0-31): one block of 16, if there is one,
	// then the last 0-15 under a mask (masked-off lanes are neither read
	// nor written).
	ADDQ    $16, CX
	JLT     expftail
	VMOVUPS (SI), Z0
	EXPF16
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX

expftail:
	ADDQ      $16, CX
	JZ        expfdone
	MOVL      $1, AX
	SHLL      CX, AX
	DECL      AX
	KMOVW     AX, K2
	VMOVUPS.Z (SI), K2, Z0
	EXPF16
	VMOVUPS   Z2, K2, (DI)

expfdone:
	VZEROUPPER
	RET

// SWIGLU16 sets Z2 to the SwiGLU of the 16 lanes of g (Z0) and u (Z1),
// none of them NaN, with Z8 = clamp, Z9 = -clamp, Z10 = weight, Z11 =
// float32 1, Z12 = float32 sign bit, Z13 = 0. Go's min and max give -0 for
// min(-0, +0) and +0 for max(-0, +0), VMINPS/VMAXPS their second operand:
// lanes where the operands compare equal take their OR (min) or AND (max).
#define SWIGLU16 \
	VMINPS        Z8, Z0, Z2;                        \
	VCMPPS        $0, Z8, Z0, K1;                    \
	VPORD         Z8, Z0, K1, Z2;                    \
	VMAXPS        Z9, Z1, Z3;                        \
	VCMPPS        $0, Z9, Z1, K1;                    \
	VPANDD        Z9, Z1, K1, Z3;                    \
	VMINPS        Z8, Z3, Z1;                        \
	VCMPPS        $0, Z8, Z3, K1;                    \
	VPORD         Z8, Z3, K1, Z1;                    \
	VPORD         Z12, Z2, Z3;                       \
	VMAXPS        Z30, Z3, Z3;                       \
	VCVTPS2PD     Y3, Z4;                            \
	VEXTRACTF64X4 $1, Z3, Y5;                        \
	VCVTPS2PD     Y5, Z5;                            \
	EXP2(Z4, Z6, Z7, Z5, Z14, Z15);                  \
	VCVTPD2PS     Z4, Y4;                            \
	VCVTPD2PS     Z5, Y5;                            \
	VINSERTF64X4  $1, Y5, Z4, Z4;                    \
	VADDPS        Z11, Z4, Z5;                       \
	VCMPPS        $0x1d, Z13, Z2, K1;                \
	VMOVAPS       Z11, K1, Z4;                       \
	VDIVPS        Z5, Z4, Z4;                        \
	VMULPS        Z4, Z2, Z2;                        \
	VMULPS        Z1, Z2, Z2;                        \
	VMULPS        Z10, Z2, Z2

// func swigluAVX512(dst, gate, up *float32, n int, clamp, weight float32) int
// It stops at the first 16-float block of gate or up holding a NaN and returns
// the number of floats done (n when it found none).
TEXT ·swigluAVX512(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         gate+8(FP), SI
	MOVQ         up+16(FP), DX
	MOVQ         n+24(FP), CX
	EXPCONSTS
	VBROADCASTSS clamp+32(FP), Z8
	VPBROADCASTD expdata<>+116(SB), Z12
	VPXORD       Z12, Z8, Z9
	VBROADCASTSS weight+36(FP), Z10
	VBROADCASTSS expdata<>+120(SB), Z11
	VPXORD       Z13, Z13, Z13
	XORQ         AX, AX

swigluloop:
	LEAQ    16(AX), BX
	CMPQ    BX, CX
	JGT     swiglutail
	VMOVUPS (SI)(AX*4), Z0
	VMOVUPS (DX)(AX*4), Z1
	VCMPPS  $3, Z1, Z0, K1
	KORTESTW K1, K1
	JNZ     swiglustop
	SWIGLU16
	VMOVUPS Z2, (DI)(AX*4)
	MOVQ    BX, AX
	JMP     swigluloop

swiglutail:
	MOVQ      CX, BX
	SUBQ      AX, BX
	JZ        swiglustop
	MOVQ      CX, R8
	MOVL      $1, R9
	MOVQ      BX, CX
	SHLL      CX, R9
	DECL      R9
	KMOVW     R9, K2
	MOVQ      R8, CX
	VMOVUPS.Z (SI)(AX*4), K2, Z0
	VMOVUPS.Z (DX)(AX*4), K2, Z1
	VCMPPS    $3, Z1, Z0, K1
	KORTESTW  K1, K1
	JNZ       swiglustop
	SWIGLU16
	VMOVUPS   Z2, K2, (DI)(AX*4)
	MOVQ      CX, AX

swiglustop:
	MOVQ AX, ret+40(FP)
	VZEROUPPER
	RET
