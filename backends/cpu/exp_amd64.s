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
DATA expdata<>+128(SB)/8, $0x43300000000003ff  // 2^52 + 1023 (AVX2: 2^n from n)
GLOBL expdata<>(SB), RODATA|NOPTR, $136

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

// OP4 applies OP to four chains: OP s_i, a_i, d_i for i = 0..3.
#define OP4(OP, s0, s1, s2, s3, a0, a1, a2, a3, d0, d1, d2, d3) \
	OP s0, a0, d0; \
	OP s1, a1, d1; \
	OP s2, a2, d2; \
	OP s3, a3, d3

// EXPSTEP4 is x = x·p, then p = x + two (two holding 2.0), on four
// chains. The first step finishes the polynomial, x = r·p = e^r - 1; each
// further one doubles r, (e^r - 1)(e^r + 1) = e^(2r) - 1, so after four
// x = e^(8r) - 1 and p = e^(8r) + 1, and the x·p + 1 that follows gives
// e^(16r), undoing the reduction by 16.
#define EXPSTEP4(two, x0, x1, x2, x3, p0, p1, p2, p3) \
	OP4(VMULPD, p0, p1, p2, p3, x0, x1, x2, x3, x0, x1, x2, x3); \
	OP4(VADDPD, two, two, two, two, x0, x1, x2, x3, p0, p1, p2, p3)

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
	EXPSTEP4(Z28, x0, x1, x2, x3, p0, p1, p2, p3); \
	EXPSTEP4(Z28, x0, x1, x2, x3, p0, p1, p2, p3); \
	EXPSTEP4(Z28, x0, x1, x2, x3, p0, p1, p2, p3); \
	EXPSTEP4(Z28, x0, x1, x2, x3, p0, p1, p2, p3); \
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

// The AVX2 forms, expfsAVX2 and swigluAVX2 (for CPUs without AVX-512;
// their TEXT follows the AVX-512 ones), do the same float64 arithmetic
// four lanes to a register, with two substitutes for
// instructions AVX2 lacks: VROUNDPD $8 rounds to nearest even as
// VRNDSCALEPD $8 does, and the multiply by 2^n takes 2^n built from n (an
// integer in [-159, 145]: adding 2^52 + 1023 leaves 1023 + n in the low
// mantissa bits, and a shift by 52 moves them into the exponent), which
// is exact and is the scalar code's own multiply. AVX2 has 16 vector
// registers, too few for the constants and four chains, so the constants
// are broadcast once a call into the stack frame and read from there as
// memory operands; NaN lanes are patched with VBLENDVPS instead of masks.

// The frame holds, 32 bytes each from offset 0: log2(e), ln2 upper,
// ln2 lower, 1/16, 1/8! … 1/3!, 0.5, 1.0, 2.0 and 2^52 + 1023 as float64,
// then from 448 -110, 100, the quiet-NaN bit, the sign bit and 1 as
// float32: 608 bytes.
//
// EXPVCONSTS fills the frame's constants from expdata, using Y0.
#define EXPVCONSTS \
	VBROADCASTSD expdata<>+0(SB), Y0;   \
	VMOVUPD      Y0, 0(SP);             \
	VBROADCASTSD expdata<>+8(SB), Y0;   \
	VMOVUPD      Y0, 32(SP);            \
	VBROADCASTSD expdata<>+16(SB), Y0;  \
	VMOVUPD      Y0, 64(SP);            \
	VBROADCASTSD expdata<>+24(SB), Y0;  \
	VMOVUPD      Y0, 96(SP);            \
	VBROADCASTSD expdata<>+32(SB), Y0;  \
	VMOVUPD      Y0, 128(SP);           \
	VBROADCASTSD expdata<>+40(SB), Y0;  \
	VMOVUPD      Y0, 160(SP);           \
	VBROADCASTSD expdata<>+48(SB), Y0;  \
	VMOVUPD      Y0, 192(SP);           \
	VBROADCASTSD expdata<>+56(SB), Y0;  \
	VMOVUPD      Y0, 224(SP);           \
	VBROADCASTSD expdata<>+64(SB), Y0;  \
	VMOVUPD      Y0, 256(SP);           \
	VBROADCASTSD expdata<>+72(SB), Y0;  \
	VMOVUPD      Y0, 288(SP);           \
	VBROADCASTSD expdata<>+80(SB), Y0;  \
	VMOVUPD      Y0, 320(SP);           \
	VBROADCASTSD expdata<>+88(SB), Y0;  \
	VMOVUPD      Y0, 352(SP);           \
	VBROADCASTSD expdata<>+96(SB), Y0;  \
	VMOVUPD      Y0, 384(SP);           \
	VBROADCASTSD expdata<>+128(SB), Y0; \
	VMOVUPD      Y0, 416(SP);           \
	VBROADCASTSS expdata<>+104(SB), Y0; \
	VMOVUPS      Y0, 448(SP);           \
	VBROADCASTSS expdata<>+108(SB), Y0; \
	VMOVUPS      Y0, 480(SP);           \
	VBROADCASTSS expdata<>+112(SB), Y0; \
	VMOVUPS      Y0, 512(SP);           \
	VBROADCASTSS expdata<>+116(SB), Y0; \
	VMOVUPS      Y0, 544(SP);           \
	VBROADCASTSS expdata<>+120(SB), Y0; \
	VMOVUPS      Y0, 576(SP)

// EXPY4 replaces the four float64 lanes of each of x0..x3 by their exp,
// the steps of EXP4 with the constants in the frame; p and n are
// scratch.
#define EXPY4(x0, p0, n0, x1, p1, n1, x2, p2, n2, x3, p3, n3) \
	VMULPD       0(SP), x0, p0; \
	VMULPD       0(SP), x1, p1; \
	VMULPD       0(SP), x2, p2; \
	VMULPD       0(SP), x3, p3; \
	VROUNDPD     $8, p0, n0; \
	VROUNDPD     $8, p1, n1; \
	VROUNDPD     $8, p2, n2; \
	VROUNDPD     $8, p3, n3; \
	VFNMADD231PD 32(SP), n0, x0; \
	VFNMADD231PD 32(SP), n1, x1; \
	VFNMADD231PD 32(SP), n2, x2; \
	VFNMADD231PD 32(SP), n3, x3; \
	VFNMADD231PD 64(SP), n0, x0; \
	VFNMADD231PD 64(SP), n1, x1; \
	VFNMADD231PD 64(SP), n2, x2; \
	VFNMADD231PD 64(SP), n3, x3; \
	VMULPD       96(SP), x0, x0; \
	VMULPD       96(SP), x1, x1; \
	VMULPD       96(SP), x2, x2; \
	VMULPD       96(SP), x3, x3; \
	VMOVUPD      128(SP), p0; \
	VMOVUPD      128(SP), p1; \
	VMOVUPD      128(SP), p2; \
	VMOVUPD      128(SP), p3; \
	VFMADD213PD  160(SP), x0, p0; \
	VFMADD213PD  160(SP), x1, p1; \
	VFMADD213PD  160(SP), x2, p2; \
	VFMADD213PD  160(SP), x3, p3; \
	VFMADD213PD  192(SP), x0, p0; \
	VFMADD213PD  192(SP), x1, p1; \
	VFMADD213PD  192(SP), x2, p2; \
	VFMADD213PD  192(SP), x3, p3; \
	VFMADD213PD  224(SP), x0, p0; \
	VFMADD213PD  224(SP), x1, p1; \
	VFMADD213PD  224(SP), x2, p2; \
	VFMADD213PD  224(SP), x3, p3; \
	VFMADD213PD  256(SP), x0, p0; \
	VFMADD213PD  256(SP), x1, p1; \
	VFMADD213PD  256(SP), x2, p2; \
	VFMADD213PD  256(SP), x3, p3; \
	VFMADD213PD  288(SP), x0, p0; \
	VFMADD213PD  288(SP), x1, p1; \
	VFMADD213PD  288(SP), x2, p2; \
	VFMADD213PD  288(SP), x3, p3; \
	VFMADD213PD  320(SP), x0, p0; \
	VFMADD213PD  320(SP), x1, p1; \
	VFMADD213PD  320(SP), x2, p2; \
	VFMADD213PD  320(SP), x3, p3; \
	VFMADD213PD  352(SP), x0, p0; \
	VFMADD213PD  352(SP), x1, p1; \
	VFMADD213PD  352(SP), x2, p2; \
	VFMADD213PD  352(SP), x3, p3; \
	EXPSTEP4(384(SP), x0, x1, x2, x3, p0, p1, p2, p3); \
	EXPSTEP4(384(SP), x0, x1, x2, x3, p0, p1, p2, p3); \
	EXPSTEP4(384(SP), x0, x1, x2, x3, p0, p1, p2, p3); \
	EXPSTEP4(384(SP), x0, x1, x2, x3, p0, p1, p2, p3); \
	VFMADD213PD  352(SP), p0, x0; \
	VFMADD213PD  352(SP), p1, x1; \
	VFMADD213PD  352(SP), p2, x2; \
	VFMADD213PD  352(SP), p3, x3; \
	VADDPD       416(SP), n0, n0; \
	VADDPD       416(SP), n1, n1; \
	VADDPD       416(SP), n2, n2; \
	VADDPD       416(SP), n3, n3; \
	VPSLLQ       $52, n0, n0; \
	VPSLLQ       $52, n1, n1; \
	VPSLLQ       $52, n2, n2; \
	VPSLLQ       $52, n3, n3; \
	VMULPD       n0, x0, x0; \
	VMULPD       n1, x1, x1; \
	VMULPD       n2, x2, x2; \
	VMULPD       n3, x3, x3


// EXPYNARROW rounds the exps of EXPY4 in Y4..Y7 to float32, lanes 0-7
// into Y4 and 8-15 into Y6.
#define EXPYNARROW \
	VCVTPD2PSY  Y4, X4;         \
	VCVTPD2PSY  Y5, X5;         \
	VINSERTF128 $1, X5, Y4, Y4; \
	VCVTPD2PSY  Y6, X6;         \
	VCVTPD2PSY  Y7, X7;         \
	VINSERTF128 $1, X7, Y6, Y6

// EXPY16 sets Y4 and Y6 to expf of the 16 floats at (SI) (Y8-Y15 and
// Y0-Y7 scratch): clamped to [-110, 100], widened, EXPY4, narrowed, and
// each NaN lane then replaced by its input made quiet.
#define EXPY16 \
	VMOVUPS      (SI), Y0;                \
	VMOVUPS      32(SI), Y1;              \
	VMAXPS       448(SP), Y0, Y0;         \
	VMAXPS       448(SP), Y1, Y1;         \
	VMINPS       480(SP), Y0, Y0;         \
	VMINPS       480(SP), Y1, Y1;         \
	VCVTPS2PD    X0, Y4;                  \
	VEXTRACTF128 $1, Y0, X0;              \
	VCVTPS2PD    X0, Y5;                  \
	VCVTPS2PD    X1, Y6;                  \
	VEXTRACTF128 $1, Y1, X1;              \
	VCVTPS2PD    X1, Y7;                  \
	EXPY4(Y4, Y8, Y12, Y5, Y9, Y13, Y6, Y10, Y14, Y7, Y11, Y15); \
	EXPYNARROW;                           \
	VMOVUPS      (SI), Y0;                \
	VCMPPS       $3, Y0, Y0, Y1;          \
	VORPS        512(SP), Y0, Y0;         \
	VBLENDVPS    Y1, Y0, Y4, Y4;          \
	VMOVUPS      32(SI), Y0;              \
	VCMPPS       $3, Y0, Y0, Y1;          \
	VORPS        512(SP), Y0, Y0;         \
	VBLENDVPS    Y1, Y0, Y6, Y6

// SWIGLUY8 takes the 8 lanes of g (Y0) and u (Y1), none NaN, stores
// g' = min(g, clamp) at goff(SP) and u' = min(max(u, -clamp), clamp) at
// uoff(SP), with Go's signed-zero rules as SWIGLU16 keeps them (equal
// operands take their OR for min, AND for max), and widens max(-|g'|,
// -110) into the float64 registers Ylo and Yhi. The clamp is at 608(SP),
// -clamp at 640(SP). Clobbers Y0-Y3.
#define SWIGLUY8(goff, uoff, Ylo, Yhi) \
	VMINPS       608(SP), Y0, Y2;         \
	VCMPPS       $0, 608(SP), Y0, Y3;     \
	VORPS        608(SP), Y0, Y0;         \
	VBLENDVPS    Y3, Y0, Y2, Y2;          \
	VMOVUPS      Y2, goff(SP);            \
	VMAXPS       640(SP), Y1, Y0;         \
	VCMPPS       $0, 640(SP), Y1, Y3;     \
	VANDPS       640(SP), Y1, Y1;         \
	VBLENDVPS    Y3, Y1, Y0, Y0;          \
	VMINPS       608(SP), Y0, Y1;         \
	VCMPPS       $0, 608(SP), Y0, Y3;     \
	VORPS        608(SP), Y0, Y0;         \
	VBLENDVPS    Y3, Y0, Y1, Y1;          \
	VMOVUPS      Y1, uoff(SP);            \
	VORPS        544(SP), Y2, Y2;         \
	VMAXPS       448(SP), Y2, Y2;         \
	VCVTPS2PD    X2, Ylo;                 \
	VEXTRACTF128 $1, Y2, X2;              \
	VCVTPS2PD    X2, Yhi

// SWIGLUOUT finishes 8 lanes from their exp(-|g'|) in Ye: the sigmoid
// 1/(1+e) where g' >= 0 and e/(1+e) below, times g', u' and the weight
// (at 672(SP)), into Ye. Clobbers Y0-Y2.
#define SWIGLUOUT(goff, uoff, Ye) \
	VADDPS       576(SP), Ye, Y1;         \
	VMOVUPS      goff(SP), Y2;            \
	VXORPS       Y0, Y0, Y0;              \
	VCMPPS       $0x1d, Y0, Y2, Y0;       \
	VBLENDVPS    Y0, 576(SP), Ye, Ye;     \
	VDIVPS       Y1, Ye, Ye;              \
	VMULPS       Ye, Y2, Ye;              \
	VMULPS       uoff(SP), Ye, Ye;        \
	VMULPS       672(SP), Ye, Ye

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

// func expfsAVX2(dst, src *float32, n int)
TEXT ·expfsAVX2(SB), 0, $608-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	EXPVCONSTS
	SHRQ $4, CX

expvloop:
	EXPY16
	VMOVUPS Y4, (DI)
	VMOVUPS Y6, 32(DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     expvloop
	VZEROUPPER
	RET

// func swigluAVX2(dst, gate, up *float32, n int, clamp, weight float32) int
// It does blocks of 16 floats and stops at the first one of gate or up
// holding a NaN, or where fewer than 16 are left; it returns the number
// of floats done.
TEXT ·swigluAVX2(SB), 0, $832-48
	MOVQ         dst+0(FP), DI
	MOVQ         gate+8(FP), SI
	MOVQ         up+16(FP), DX
	MOVQ         n+24(FP), CX
	EXPVCONSTS
	VBROADCASTSS clamp+32(FP), Y0
	VMOVUPS      Y0, 608(SP)
	VXORPS       544(SP), Y0, Y0
	VMOVUPS      Y0, 640(SP)
	VBROADCASTSS weight+36(FP), Y0
	VMOVUPS      Y0, 672(SP)
	XORQ         AX, AX

swigluvloop:
	LEAQ      16(AX), BX
	CMPQ      BX, CX
	JGT       swigluvstop
	VMOVUPS   (SI)(AX*4), Y0
	VCMPPS    $3, (DX)(AX*4), Y0, Y0
	VMOVUPS   32(SI)(AX*4), Y1
	VCMPPS    $3, 32(DX)(AX*4), Y1, Y1
	VORPS     Y1, Y0, Y0
	VPTEST    Y0, Y0
	JNZ       swigluvstop
	VMOVUPS   (SI)(AX*4), Y0
	VMOVUPS   (DX)(AX*4), Y1
	SWIGLUY8(704, 768, Y4, Y5)
	VMOVUPS   32(SI)(AX*4), Y0
	VMOVUPS   32(DX)(AX*4), Y1
	SWIGLUY8(736, 800, Y6, Y7)
	EXPY4(Y4, Y8, Y12, Y5, Y9, Y13, Y6, Y10, Y14, Y7, Y11, Y15)
	EXPYNARROW
	SWIGLUOUT(704, 768, Y4)
	SWIGLUOUT(736, 800, Y6)
	VMOVUPS   Y4, (DI)(AX*4)
	VMOVUPS   Y6, 32(DI)(AX*4)
	MOVQ      BX, AX
	JMP       swigluvloop

swigluvstop:
	MOVQ AX, ret+40(FP)
	VZEROUPPER
	RET
