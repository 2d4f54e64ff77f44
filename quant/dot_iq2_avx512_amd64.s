//go:build amd64 && !purego

#include "go_asm.h"
#include "textflag.h"

// AVX-512 dot products of IQ2_XXS weight rows with Q8_K activations (see
// dot_iq2_avx512_amd64.go). They use AVX512F/BW, VBMI (VPERMB, VPERMI2B,
// VPMULTISHIFTQB), VNNI (VPDPWSSD), GFNI (VGF2P8AFFINEQB) and, in the
// single-token kernel, BITALG (VPSHUFBITQMB).
//
// The AVX2 kernel is bound by scalar table work: per 32 elements it loads
// four 8-byte grid rows and four 8-byte sign patterns and assembles them
// into a register. Here one 64-byte load brings a block's eight groups
// (each four grid-index bytes and the word a1) and the block is expanded in
// registers, with no load that depends on the data:
//
//   - Grid rows. Every grid row is re-encoded as 16 bits, 2 per element
//     (·iq2xxsAVX512Codes: a low byte for elements 0..3, a high byte for
//     elements 4..7). The 512 table bytes stay in Z24..Z31 as four 128-byte
//     VPERMI2B tables (low or high byte, grid index below or above 128).
//     VPERMB puts each of the 32 indices in two bytes (iq2IndexPerm), four
//     VPERMI2B look all of them up in each table, and VGF2P8AFFINEQB
//     (bit 7 of the index copied to all eight bits) and three VPTERNLOGQ
//     pick per byte the table its index and half call for. A mask-register
//     version (merge-masked VPERMI2B) measured 15% slower in all: the mask
//     logic costs more than the selects. Gathering the grid rows with
//     VPGATHERDQ instead measured three times slower.
//   - Expansion. The codes land so that qword q holds those of rows q,
//     8+q, 16+q and 24+q: per 64 elements (eight rows, two groups) one
//     VPMULTISHIFTQB moves each element's code to the bottom of its byte,
//     and VGF2P8AFFINEQB maps the byte to the magnitude: with code bits a,
//     b the magnitude is 8 ^ a·0x11 ^ b·0x23 (8, 25, 43), affine over
//     GF(2), and the matrix ignores the bits above the code.
//   - Signs. One VPMULTISHIFTQB pulls a block's 32 7-bit sign indices into
//     bytes and one VGF2P8AFFINEQB appends each one's parity as bit 7
//     (matrix: identity on bits 0..6, bit 7 the XOR of bits 0..6), which
//     is iq2Sign. VPMOVQD stores the 32 sign bytes in row order, so the
//     64-bit word z is the sign mask of elements 64z..64z+63, one KMOVQ
//     away.
//   - Products (four-token kernel). The unsigned-by-signed byte multiply
//     (VPMADDUBSW) takes the weights' magnitudes as the unsigned side and
//     the activation codes as they are, so no activation is negated and a
//     code of -128 is exact; see IQ2Z5APPLYX4 for how the signs enter.
//     VPDPWSSD multiplies each int16 pair by its group's 2ls+1 and
//     accumulates in int32, exactly.
//   - Products (single-token kernel). Each weight w = ±m is taken as the
//     unsigned byte 64+w (VGF2P8AFFINEQB with constant 0x48 gives 64+m,
//     and where the sign mask is set a masked VPSUBB from 128 leaves
//     64-m), so one VPMADDUBSW per 64 elements forms Σ(64+w)·q8 in int16
//     pairs of at most 2·107·128 = 27392, no saturation. The bias
//     64·Σq8 is taken back once per block from the activation's Bsums:
//     the accumulator starts at -64·(2ls+1)·(Bsums[2g]+Bsums[2g+1]) for
//     each group g (one VPMADDWD of the Bsums broadcast to both halves,
//     masked to the dwords whose multipliers match), so the kernel is
//     exact only for Bsums that are the sums of their 16 codes, as
//     QuantizeQ8K makes them. The sign masks come straight from
//     registers: one VPSHUFBITQMB per 64 elements picks each element's
//     bit into a mask register. Compared with the four-token kernel's way
//     (two VPMADDUBSW per 64 elements, sign masks stored to the frame and
//     reloaded with KMOVQ) this takes 4 fewer operations per 64 elements.
//   - Single-token expansion. The kernel is bound by its operation count
//     spread over the vector pipes, not by one pipe or one chain: taking
//     out any part of a block's work (the lookups, the signs, the
//     magnitudes, the bias) saves time roughly in proportion to the
//     operations it had. So it does less per block than IQ2Z5BLOCK. The
//     grid rows of two blocks are looked up together (IQ2Z6LOOKUP): the
//     low code bytes of all 64 rows in the two low-byte tables, the high
//     ones in the two high-byte tables, then interleaved, which is two
//     VPERMI2B a block instead of four and drops the odd-byte select. One
//     VPMULTISHIFTQB pulls out both the sign indices and the scales, one
//     VGF2P8AFFINEQB adds the parity bits, and one VPERMB lays out the
//     sign bytes (odd bytes) and scales (even bytes) together, so the
//     multipliers are one VGF2P8AFFINEQB away (IQ2Z6SIGNS). A pair's
//     lookups run while the pair before it is multiplied. Two blocks'
//     products are interleaved (IQ2Z6PAIR).
//
// The 64-byte constants that the single-token kernel's loop reads as
// memory operands are copied once per call to a 64-byte-aligned area of
// the frame, or read as 8-byte broadcasts: the linker aligns read-only
// data to no more than 32 bytes, and constants that straddled cache lines
// cost that kernel up to a fifth of its speed in some links. (The
// four-token kernel still reads them from read-only data.) The code
// tables stay in registers but one: read from memory, all of them made
// the kernel slower.
//
// On Zen 5 (measured with independent instruction mixes) VPERMB,
// VPERMI2B, VPERMQ, VPERMD and VGF2P8AFFINEQB share two pipes,
// VPMULTISHIFTQB, VPMADDUBSW, VPMADDWD, VPDPWSSD and VPMULLW two others of
// which one is shared with the first group, VPSHUFBITQMB issues once a
// cycle, and the simple integer operations (VPTERNLOGQ, VPSUBB, VPBLENDMB)
// go to any of four. Tried in the single-token kernel and slower there:
// merge-masked broadcasts (or VPDPWSSD with masked broadcasts) in place
// of VPERMQ for the multipliers, and the two blocks of a pair sharing
// their sign parity transform or scale map; no faster: the four f16
// scales gathered in general registers.
//
// The block's int32 sum bsum is then folded and converted, and its float32
// terms are formed in dot.go's order, so each result is DotIQ2XXS's bit
// for bit.

// iq2ScalePerm is the VPERMB control that copies the top byte of group
// 2k+h's qword (a1's bits 24..31, the scale ls in the top four) to every
// byte of qword 4h+k: the multipliers of groups 0, 2, 4, 6 fill the low
// half of the register and those of groups 1, 3, 5, 7 the high half, so
// VPERMQ with an immediate gives each 64 elements theirs.
DATA iq2ScalePerm<>+0(SB)/8, $0x0707070707070707
DATA iq2ScalePerm<>+8(SB)/8, $0x1717171717171717
DATA iq2ScalePerm<>+16(SB)/8, $0x2727272727272727
DATA iq2ScalePerm<>+24(SB)/8, $0x3737373737373737
DATA iq2ScalePerm<>+32(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA iq2ScalePerm<>+40(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA iq2ScalePerm<>+48(SB)/8, $0x2f2f2f2f2f2f2f2f
DATA iq2ScalePerm<>+56(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL iq2ScalePerm<>(SB), RODATA|NOPTR, $64

// iq2CodeShift holds four VPMULTISHIFTQB controls: control z moves the
// code of element t of row 8z+q, held in bytes 2z (elements 0..3) and
// 2z+1 (elements 4..7) of qword q of the block's codes, to the bottom of
// byte t of qword q.
DATA iq2CodeShift<>+0(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+8(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+16(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+24(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+32(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+40(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+48(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+56(SB)/8, $0x0e0c0a0806040200
DATA iq2CodeShift<>+64(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+72(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+80(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+88(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+96(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+104(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+112(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+120(SB)/8, $0x1e1c1a1816141210
DATA iq2CodeShift<>+128(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+136(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+144(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+152(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+160(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+168(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+176(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+184(SB)/8, $0x2e2c2a2826242220
DATA iq2CodeShift<>+192(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+200(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+208(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+216(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+224(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+232(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+240(SB)/8, $0x3e3c3a3836343230
DATA iq2CodeShift<>+248(SB)/8, $0x3e3c3a3836343230
GLOBL iq2CodeShift<>(SB), RODATA|NOPTR, $256

// iq2IndexPerm is the VPERMB control that puts the grid index of row
// 8z+q of a block (byte 8g+l of the block's groups, g = 2z+q/4, l = q%4)
// in bytes 2z and 2z+1 of qword q, for the low and the high code byte:
// after the lookup, qword q holds the codes of rows q, 8+q, 16+q and
// 24+q, and the 64 elements 64z..64z+63 need no shuffle but their
// VPMULTISHIFTQB.
DATA iq2IndexPerm<>+0(SB)/8, $0x3030202010100000
DATA iq2IndexPerm<>+8(SB)/8, $0x3131212111110101
DATA iq2IndexPerm<>+16(SB)/8, $0x3232222212120202
DATA iq2IndexPerm<>+24(SB)/8, $0x3333232313130303
DATA iq2IndexPerm<>+32(SB)/8, $0x3838282818180808
DATA iq2IndexPerm<>+40(SB)/8, $0x3939292919190909
DATA iq2IndexPerm<>+48(SB)/8, $0x3a3a2a2a1a1a0a0a
DATA iq2IndexPerm<>+56(SB)/8, $0x3b3b2b2b1b1b0b0b
GLOBL iq2IndexPerm<>(SB), RODATA|NOPTR, $64

// iq2MagMatrix is the VGF2P8AFFINEQB matrix (with constant 8) that maps a
// byte whose low two bits hold a code a (bit 0), b (bit 1) to the
// magnitude 8 ^ a·0x11 ^ b·0x23: matrix byte 7-i is the row of output bit
// i, here 3, 2, 0, 0, 1, 2, 0, 0 for i = 0..7. With constant 0x48 it maps
// the code to 64+magnitude (no magnitude has bit 6 set).
DATA iq2MagMatrix<>+0(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+8(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+16(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+24(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+32(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+40(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+48(SB)/8, $0x0302000001020000
DATA iq2MagMatrix<>+56(SB)/8, $0x0302000001020000
GLOBL iq2MagMatrix<>(SB), RODATA|NOPTR, $64

// iq2SignShift is the VPMULTISHIFTQB control that puts sign index l of a
// group (bits 32+7l..38+7l of its qword, bits 7l.. of a1) in byte l,
// l = 0..3; bit 7 of those bytes is junk that iq2ParityMatrix ignores.
DATA iq2SignShift<>+0(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+8(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+16(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+24(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+32(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+40(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+48(SB)/8, $0x00000000352e2720
DATA iq2SignShift<>+56(SB)/8, $0x00000000352e2720
GLOBL iq2SignShift<>(SB), RODATA|NOPTR, $64

// iq2ParityMatrix is the VGF2P8AFFINEQB matrix that turns a 7-bit sign
// index into its sign byte iq2Sign: rows 1<<i for output bits i < 7 (bits
// 0..6 copied) and 0x7f for bit 7 (their parity).
DATA iq2ParityMatrix<>+0(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+8(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+16(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+24(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+32(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+40(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+48(SB)/8, $0x010204081020407f
DATA iq2ParityMatrix<>+56(SB)/8, $0x010204081020407f
GLOBL iq2ParityMatrix<>(SB), RODATA|NOPTR, $64

// iq2Bit7Matrix is the VGF2P8AFFINEQB matrix that copies bit 7 of a byte
// to all eight bits: 0xff for a grid index of 128 or more, else 0.
DATA iq2Bit7Matrix<>+0(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+8(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+16(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+24(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+32(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+40(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+48(SB)/8, $0x8080808080808080
DATA iq2Bit7Matrix<>+56(SB)/8, $0x8080808080808080
GLOBL iq2Bit7Matrix<>(SB), RODATA|NOPTR, $64

// iq2OddBytes selects the odd bytes, where the grid indices stand for the
// rows' high code bytes.
DATA iq2OddBytes<>+0(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+8(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+16(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+24(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+32(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+40(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+48(SB)/8, $0xff00ff00ff00ff00
DATA iq2OddBytes<>+56(SB)/8, $0xff00ff00ff00ff00
GLOBL iq2OddBytes<>(SB), RODATA|NOPTR, $64

// iq2ScaleMatrix is the VGF2P8AFFINEQB matrix (with constant 1) that
// maps a byte with the scale ls in its top four bits to 2ls+1: output bits
// 1..4 are input bits 4..7.
DATA iq2ScaleMatrix<>+0(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+8(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+16(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+24(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+32(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+40(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+48(SB)/8, $0x0010204080000000
DATA iq2ScaleMatrix<>+56(SB)/8, $0x0010204080000000
GLOBL iq2ScaleMatrix<>(SB), RODATA|NOPTR, $64

// iq2Compact is the VPERMD control that gathers dwords 0, 4, 8 and 12
// into dwords 0..3.
DATA iq2Compact<>+0(SB)/8, $0x0000000400000000
DATA iq2Compact<>+8(SB)/8, $0x0000000c00000008
DATA iq2Compact<>+16(SB)/8, $0x0000000000000000
DATA iq2Compact<>+24(SB)/8, $0x0000000000000000
DATA iq2Compact<>+32(SB)/8, $0x0000000000000000
DATA iq2Compact<>+40(SB)/8, $0x0000000000000000
DATA iq2Compact<>+48(SB)/8, $0x0000000000000000
DATA iq2Compact<>+56(SB)/8, $0x0000000000000000
GLOBL iq2Compact<>(SB), RODATA|NOPTR, $64

// iq2Bytes1 holds 64 bytes of 1.
DATA iq2Bytes1<>+0(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+8(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+16(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+24(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+32(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+40(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+48(SB)/8, $0x0101010101010101
DATA iq2Bytes1<>+56(SB)/8, $0x0101010101010101
GLOBL iq2Bytes1<>(SB), RODATA|NOPTR, $64

// iq2Bytes128 holds 64 bytes of 128.
DATA iq2Bytes128<>+0(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+8(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+16(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+24(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+32(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+40(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+48(SB)/8, $0x8080808080808080
DATA iq2Bytes128<>+56(SB)/8, $0x8080808080808080
GLOBL iq2Bytes128<>(SB), RODATA|NOPTR, $64

// iq2Neg64W holds 32 int16 -64, the factor of the bias terms (copied to
// the frame, see the register use).
DATA iq2Neg64W<>+0(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+8(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+16(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+24(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+32(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+40(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+48(SB)/8, $0xffc0ffc0ffc0ffc0
DATA iq2Neg64W<>+56(SB)/8, $0xffc0ffc0ffc0ffc0
GLOBL iq2Neg64W<>(SB), RODATA|NOPTR, $64

// iq2PairIndex is the VPERMT2B control that gathers the grid indices of
// two blocks (the first block's 64 bytes of groups, then the second's) in
// the order IQ2Z6LOOKUP looks them up: byte 16i+k (k = 0..7) gets the
// index of the first block's row that IQ2Z5BLOCK puts in bytes 2p and
// 2p+1 of its codes, p = 8i+k (row 8(p%4)+p/4), and byte 16i+8+k that of
// the second block's. VPUNPCKLBW and VPUNPCKHBW of the looked-up low and
// high code bytes then give the two blocks' codes.
DATA iq2PairIndex<>+0(SB)/8, $0x3121110130201000
DATA iq2PairIndex<>+8(SB)/8, $0x7161514170605040
DATA iq2PairIndex<>+16(SB)/8, $0x3323130332221202
DATA iq2PairIndex<>+24(SB)/8, $0x7363534372625242
DATA iq2PairIndex<>+32(SB)/8, $0x3929190938281808
DATA iq2PairIndex<>+40(SB)/8, $0x7969594978685848
DATA iq2PairIndex<>+48(SB)/8, $0x3b2b1b0b3a2a1a0a
DATA iq2PairIndex<>+56(SB)/8, $0x7b6b5b4b7a6a5a4a
GLOBL iq2PairIndex<>(SB), RODATA|NOPTR, $64

// iq2SignScaleShift is the VPMULTISHIFTQB control that puts sign index l
// of a group (bits 32+7l..38+7l of its qword) in byte l, l = 0..3, and
// the scale ls (bits 60..63) in the low four bits of byte 4; the bits
// above them in each byte are junk that the later maps ignore.
DATA iq2SignScaleShift<>+0(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+8(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+16(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+24(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+32(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+40(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+48(SB)/8, $0x0000003c352e2720
DATA iq2SignScaleShift<>+56(SB)/8, $0x0000003c352e2720
GLOBL iq2SignScaleShift<>(SB), RODATA|NOPTR, $64

// iq2SignScaleLayout is the VPERMB control that lays out a block's sign
// bytes and scales for the single-token kernel: in qword q, byte 2z+1
// (z = 0..3) gets the sign byte of row 8z+q (byte l of qword g, row 4g+l,
// after the parity map) and the even bytes the scale byte (byte 4) of
// group 2k+h, q = 4h+k, as iq2ScalePerm lays out the multipliers.
DATA iq2SignScaleLayout<>+0(SB)/8, $0x3004200410040004
DATA iq2SignScaleLayout<>+8(SB)/8, $0x3114211411140114
DATA iq2SignScaleLayout<>+16(SB)/8, $0x3224222412240224
DATA iq2SignScaleLayout<>+24(SB)/8, $0x3334233413340334
DATA iq2SignScaleLayout<>+32(SB)/8, $0x380c280c180c080c
DATA iq2SignScaleLayout<>+40(SB)/8, $0x391c291c191c091c
DATA iq2SignScaleLayout<>+48(SB)/8, $0x3a2c2a2c1a2c0a2c
DATA iq2SignScaleLayout<>+56(SB)/8, $0x3b3c2b3c1b3c0b3c
GLOBL iq2SignScaleLayout<>(SB), RODATA|NOPTR, $64

// iq2LowScaleMatrix is the VGF2P8AFFINEQB matrix (with constant 1) that
// maps a byte with the scale ls in its low four bits to 2ls+1: output
// bits 1..4 are input bits 0..3.
DATA iq2LowScaleMatrix<>+0(SB)/8, $0x0001020408000000
GLOBL iq2LowScaleMatrix<>(SB), RODATA|NOPTR, $8

// iq2SignBits holds four VPSHUFBITQMB index vectors: vector z selects
// bit 16z+8+t of every qword for byte t, the sign of element t of row
// 8z+q in the layout of iq2SignScaleLayout (copied to the frame, see the
// register use).
DATA iq2SignBits<>+0(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+8(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+16(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+24(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+32(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+40(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+48(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+56(SB)/8, $0x0f0e0d0c0b0a0908
DATA iq2SignBits<>+64(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+72(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+80(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+88(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+96(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+104(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+112(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+120(SB)/8, $0x1f1e1d1c1b1a1918
DATA iq2SignBits<>+128(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+136(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+144(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+152(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+160(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+168(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+176(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+184(SB)/8, $0x2f2e2d2c2b2a2928
DATA iq2SignBits<>+192(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+200(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+208(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+216(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+224(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+232(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+240(SB)/8, $0x3f3e3d3c3b3a3938
DATA iq2SignBits<>+248(SB)/8, $0x3f3e3d3c3b3a3938
GLOBL iq2SignBits<>(SB), RODATA|NOPTR, $256

// Register use. Constants: Z2 iq2ScalePerm, Z16 and Z20..Z22 the
// iq2CodeShift controls, Z17 iq2MagMatrix (single-token kernel: bytes
// 128), Z18 iq2SignShift (single-token kernel: iq2SignScaleShift), Z19
// iq2Compact (single-token kernel: iq2SignScaleLayout), Z23 iq2IndexPerm
// (single-token kernel: iq2PairIndex), Z24..Z31 the code tables (in the
// single-token kernel Z31's in the frame), K7 the even bytes. Four-token
// kernel, per block: Z0 the block, Z1 its codes, Z3 its multipliers, K3 a
// sign mask; Z4, Z10, Z11, Z12 the int32 accumulators of the four tokens,
// Z14 their common term, Z5..Z9 scratch. Single-token kernel: Z1 and Z5
// the codes of the pair of blocks being multiplied, Z14 and Z31 those of
// the next pair; Z3, Z15 and Z9, Z11 the multipliers and sign bytes of
// two blocks; K3 and K4 their sign masks; Z4, Z10 and Z12 accumulators;
// Z0 and Z6..Z8 scratch; K1 the index bits 7, K6 the bias dwords; R12
// the 64-byte-aligned frame copies of iq2SignBits (bytes 0..255),
// iq2Neg64W (256..319) and the last code table (320..383). X13 the float
// sum(s).

// IQ2Z5SETUP loads the constants.
#define IQ2Z5SETUP \
	VMOVDQU64    ·iq2xxsAVX512Codes+0(SB), Z24; \
	VMOVDQU64    ·iq2xxsAVX512Codes+64(SB), Z25; \
	VMOVDQU64    ·iq2xxsAVX512Codes+128(SB), Z26; \
	VMOVDQU64    ·iq2xxsAVX512Codes+192(SB), Z27; \
	VMOVDQU64    ·iq2xxsAVX512Codes+256(SB), Z28; \
	VMOVDQU64    ·iq2xxsAVX512Codes+320(SB), Z29; \
	VMOVDQU64    ·iq2xxsAVX512Codes+384(SB), Z30; \
	VMOVDQU64    ·iq2xxsAVX512Codes+448(SB), Z31; \
	VMOVDQU64    iq2CodeShift<>+0(SB), Z16; \
	VMOVDQU64    iq2CodeShift<>+64(SB), Z20; \
	VMOVDQU64    iq2CodeShift<>+128(SB), Z21; \
	VMOVDQU64    iq2CodeShift<>+192(SB), Z22; \
	VMOVDQU64    iq2IndexPerm<>(SB), Z23; \
	VMOVDQU64    iq2MagMatrix<>(SB), Z17; \
	VMOVDQU64    iq2SignShift<>(SB), Z18; \
	VMOVDQU64    iq2Compact<>(SB), Z19; \
	VMOVDQU64    iq2ScalePerm<>(SB), Z2; \
	MOVQ         $0x5555555555555555, AX; \
	KMOVQ        AX, K7

// IQ2Z5BLOCK expands the block at woff(SI): Z1 gets in bytes 2z and 2z+1
// of qword q the low and high code bytes of row 8z+q, the 32 bytes at
// soff(SP) the rows' sign bytes, and Z3 in each int16 of qword 4h+k the
// multiplier 2ls+1 of group 2k+h. Clobbers Z0 and Z6..Z9.
#define IQ2Z5BLOCK(woff, soff) \
	VMOVDQU64      (woff+2)(SI), Z0; \
	VPERMB         Z0, Z23, Z1; \
	VGF2P8AFFINEQB $0, iq2Bit7Matrix<>(SB), Z1, Z9; \
	VMOVDQA64      Z1, Z6; \
	VMOVDQA64      Z1, Z7; \
	VMOVDQA64      Z1, Z8; \
	VPERMI2B       Z25, Z24, Z1; \
	VPERMI2B       Z27, Z26, Z6; \
	VPERMI2B       Z29, Z28, Z7; \
	VPERMI2B       Z31, Z30, Z8; \
	VPTERNLOGQ     $0xd8, Z9, Z6, Z1; \
	VPTERNLOGQ     $0xd8, Z9, Z8, Z7; \
	VPTERNLOGQ     $0xd8, iq2OddBytes<>(SB), Z7, Z1; \
	VPMULTISHIFTQB Z0, Z18, Z8; \
	VGF2P8AFFINEQB $0, iq2ParityMatrix<>(SB), Z8, Z8; \
	VPMOVQD        Z8, soff(SP); \
	VPERMB         Z0, Z2, Z3; \
	VGF2P8AFFINEQB.Z $1, iq2ScaleMatrix<>(SB), Z3, K7, Z3

// (VPTERNLOGQ $0xd8, C, B, A sets A to C ? B : A bit by bit: the three
// selects above take, per byte, the high-index table where bit 7 of the
// index is set, then the high-byte tables in the odd bytes.)

// IQ2Z6LOOKUP looks up the grid rows of the blocks at woff(SI) and
// woff2(SI) for the single-token kernel and sets ZcA and ZcB to their
// codes as IQ2Z5BLOCK leaves them in Z1. Looking each byte up in all four
// tables, as IQ2Z5BLOCK does, wastes half the lookups: the even bytes
// need only the low-byte tables and the odd ones the high-byte tables. So
// one VPERMT2B gathers the 64 indices of both blocks (iq2PairIndex), two
// VPERMI2B and a VPBLENDMB look all of them up in the low-byte tables and
// two more in the high-byte tables, and VPUNPCKLBW and VPUNPCKHBW
// interleave the two results into the blocks' codes: per block two
// VPERMI2B instead of four, and no odd-byte select. Clobbers Z0, Z6..Z8
// and K1.
#define IQ2Z6LOOKUP(woff, woff2, ZcA, ZcB) \
	VMOVDQU64        (woff+2)(SI), Z0; \
	VPERMT2B         (woff2+2)(SI), Z23, Z0; \
	VPMOVB2M         Z0, K1; \
	VMOVDQA64        Z0, Z6; \
	VMOVDQA64        Z0, Z7; \
	VMOVDQA64        Z0, Z8; \
	VPERMI2B         Z25, Z24, Z0; \
	VPERMI2B         Z27, Z26, Z6; \
	VPERMI2B         Z29, Z28, Z7; \
	VPERMI2B         320(R12), Z30, Z8; \
	VPBLENDMB        Z6, Z0, K1, Z0; \
	VPBLENDMB        Z8, Z7, K1, Z7; \
	VPUNPCKLBW       Z7, Z0, ZcA; \
	VPUNPCKHBW       Z7, Z0, ZcB

// IQ2Z6SIGNS sets, for the single-token kernel, Zs to the sign bytes and
// scales of the block at woff(SI) laid out by iq2SignScaleLayout, Zm to
// its multipliers as IQ2Z5BLOCK leaves them in Z3, and Zacc to its bias
// term against the Q8_K block at yoff(DI): dword 2k of the low half gets
// -64·(2ls+1)·(Bsums[4k]+Bsums[4k+1]) for group 2k, dword 2k+1 of the
// high half the same for group 2k+1 (Bsums[4k+2], Bsums[4k+3]), the other
// dwords 0. One VPMULTISHIFTQB extracts the sign indices and the scales,
// one VGF2P8AFFINEQB adds the parity bits, and one VPERMB lays out both,
// so the multipliers are one VGF2P8AFFINEQB of the even bytes away.
// Clobbers Z6 and Z8.
#define IQ2Z6SIGNS(woff, yoff, Zacc, Zm, Zs) \
	VPMULTISHIFTQB   (woff+2)(SI), Z18, Z8; \
	VGF2P8AFFINEQB.BCST $0, iq2ParityMatrix<>(SB), Z8, Z8; \
	VPERMB           Z8, Z19, Zs; \
	VGF2P8AFFINEQB.BCST.Z $1, iq2LowScaleMatrix<>(SB), Zs, K7, Zm; \
	VBROADCASTI64X4  (yoff+BlockQ8K_Bsums)(DI), Z6; \
	VPMULLW          256(R12), Zm, Z8; \
	VPMADDWD.Z       Z8, Z6, K6, Zacc

// IQ2Z6APPLY adds to Zacc the scaled sum of elements 64z..64z+63 of the
// block expanded into Zc, Zm and Zs, each weight w taken as 64+w, times
// the Q8_K codes of the block at yoff(DI): VPMULTISHIFTQB and
// VGF2P8AFFINEQB (constant 0x48) make each weight's 64+magnitude,
// VPSHUFBITQMB the mask of the negative weights, whose bytes VPSUBB turns
// into 128-(64+m) = 64-m. Clobbers Zw, Zt and Kt.
#define IQ2Z6APPLY(Zshift, z, yoff, Zacc, Zc, Zm, Zs, Zw, Zt, Kt) \
	VPMULTISHIFTQB Zc, Zshift, Zw; \
	VGF2P8AFFINEQB.BCST $0x48, iq2MagMatrix<>(SB), Zw, Zw; \
	VPSHUFBITQMB   (64*z)(R12), Zs, Kt; \
	VPSUBB         Zw, Z17, Kt, Zw; \
	VPMADDUBSW     (yoff+z*64+BlockQ8K_Qs)(DI), Zw, Zw; \
	VPERMQ         $(0x55*z), Zm, Zt; \
	VPDPWSSD       Zt, Zw, Zacc

// IQ2Z6PAIR adds to Zout and Zb the products of the two blocks whose
// codes are in ZcA and ZcB and whose multipliers, sign bytes and bias
// terms IQ2Z6SIGNS left in Z3, Z15, Zout and Z9, Z11, Zb, against the Q8_K
// blocks at yoff(DI) and yoff+292(DI), and folds them into Zout as
// IQ2Z5SUM4's first step folds two accumulators. The two blocks'
// products are interleaved: a block's chain of products is long, and two
// side by side keep the pipes busy. Clobbers Z0, Z6..Z8, K3 and K4.
#define IQ2Z6PAIR(yoff, Zout, Zb, ZcA, ZcB) \
	IQ2Z6APPLY(Z16, 0, yoff, Zout, ZcA, Z3, Z15, Z6, Z7, K3); \
	IQ2Z6APPLY(Z16, 0, yoff+BlockQ8K__size, Zb, ZcB, Z9, Z11, Z8, Z0, K4); \
	IQ2Z6APPLY(Z20, 1, yoff, Zout, ZcA, Z3, Z15, Z6, Z7, K3); \
	IQ2Z6APPLY(Z20, 1, yoff+BlockQ8K__size, Zb, ZcB, Z9, Z11, Z8, Z0, K4); \
	IQ2Z6APPLY(Z21, 2, yoff, Zout, ZcA, Z3, Z15, Z6, Z7, K3); \
	IQ2Z6APPLY(Z21, 2, yoff+BlockQ8K__size, Zb, ZcB, Z9, Z11, Z8, Z0, K4); \
	IQ2Z6APPLY(Z22, 3, yoff, Zout, ZcA, Z3, Z15, Z6, Z7, K3); \
	IQ2Z6APPLY(Z22, 3, yoff+BlockQ8K__size, Zb, ZcB, Z9, Z11, Z8, Z0, K4); \
	VSHUFI64X2     $0x44, Zb, Zout, Z6; \
	VSHUFI64X2     $0xee, Zb, Zout, Z7; \
	VPADDD         Z7, Z6, Zout

// IQ2Z6SUM4 finishes IQ2Z5SUM4 from two IQ2Z6PAIR results in Z4 and Z10:
// X0 gets the four blocks' float32(bsum). Clobbers Z6..Z8.
#define IQ2Z6SUM4 \
	VSHUFI64X2 $0x88, Z10, Z4, Z7; \
	VSHUFI64X2 $0xdd, Z10, Z4, Z0; \
	VPADDD     Z7, Z0, Z0; \
	VPSHUFD    $0x4e, Z0, Z6; \
	VPADDD     Z6, Z0, Z0; \
	VPSHUFD    $0xb1, Z0, Z6; \
	VPADDD     Z6, Z0, Z0; \
	VMOVDQU64  iq2Compact<>(SB), Z8; \
	VPERMD     Z0, Z8, Z0; \
	VCVTDQ2PS  X0, X0

// IQ2Z5SUM4 sets X5 to the four float32 values float32(Σ lanes of Z4),
// float32(Σ Z10), float32(Σ Z11) and float32(Σ Z12). The four
// accumulators are folded together, each shuffle serving two or four of
// them, which takes half the shuffles of folding each on its own. Clobbers
// Z6 and Z7.
#define IQ2Z5SUM4 \
	VSHUFI64X2 $0x44, Z10, Z4, Z5; \
	VSHUFI64X2 $0xee, Z10, Z4, Z6; \
	VPADDD     Z6, Z5, Z5; \
	VSHUFI64X2 $0x44, Z12, Z11, Z6; \
	VSHUFI64X2 $0xee, Z12, Z11, Z7; \
	VPADDD     Z7, Z6, Z6; \
	VSHUFI64X2 $0x88, Z6, Z5, Z7; \
	VSHUFI64X2 $0xdd, Z6, Z5, Z5; \
	VPADDD     Z7, Z5, Z5; \
	VPSHUFD    $0x4e, Z5, Z6; \
	VPADDD     Z6, Z5, Z5; \
	VPSHUFD    $0xb1, Z5, Z6; \
	VPADDD     Z6, Z5, Z5; \
	VPERMD     Z5, Z19, Z5; \
	VCVTDQ2PS  X5, X5

// IQ2Z5SUM1 sets X5 to float32(Σ lanes of Z4). Clobbers Z6.
#define IQ2Z5SUM1 \
	VEXTRACTI64X4 $1, Z4, Y5; \
	VPADDD        Y5, Y4, Y5; \
	VEXTRACTI128  $1, Y5, X6; \
	VPADDD        X6, X5, X5; \
	VPSHUFD       $0x4e, X5, X6; \
	VPADDD        X6, X5, X5; \
	VPSHUFD       $0xb1, X5, X6; \
	VPADDD        X6, X5, X5; \
	VCVTDQ2PS     X5, X5

// func dotIQ2XXSAVX512Asm(w *byte, y *BlockQ8K, nb int) float32
//
// Four blocks at a time, two pairs: their integer sums are folded together
// (IQ2Z6PAIR, IQ2Z6SUM4) and their float terms (f16(d)·D)·float32(bsum)
// formed four wide, then added to sumf one at a time in block order, so
// every float operation is DotIQ2XXS's. The codes of each pair are looked
// up (IQ2Z6LOOKUP) while the pair before it is multiplied, so the lookups'
// long chain overlaps the products. The last nb%4 blocks go one at a time.
// The activations' Bsums must be their codes' sums (IQ2Z6SIGNS).
TEXT ·dotIQ2XXSAVX512Asm(SB), NOSPLIT, $448-28
	MOVQ w+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	IQ2Z5SETUP
	LEAQ      63(SP), R12
	ANDQ      $~63, R12
	VMOVDQU64 iq2SignBits<>+0(SB), Z0
	VMOVDQU64 Z0, 0(R12)
	VMOVDQU64 iq2SignBits<>+64(SB), Z0
	VMOVDQU64 Z0, 64(R12)
	VMOVDQU64 iq2SignBits<>+128(SB), Z0
	VMOVDQU64 Z0, 128(R12)
	VMOVDQU64 iq2SignBits<>+192(SB), Z0
	VMOVDQU64 Z0, 192(R12)
	VMOVDQU64 iq2Neg64W<>(SB), Z0
	VMOVDQU64 Z0, 256(R12)
	VMOVDQU64 ·iq2xxsAVX512Codes+448(SB), Z0
	VMOVDQU64 Z0, 320(R12)
	VMOVDQU64 iq2Bytes128<>(SB), Z17
	VMOVDQU64 iq2SignScaleShift<>(SB), Z18
	VMOVDQU64 iq2SignScaleLayout<>(SB), Z19
	VMOVDQU64 iq2PairIndex<>(SB), Z23
	MOVL      $0xaa55, AX
	KMOVW     AX, K6
	VXORPS    X13, X13, X13 // sumf
	CMPQ      CX, $4
	JLT       iq2z6tail
	IQ2Z6LOOKUP(0, const_dotIQ2XXSBytes, Z1, Z5)

	// The loop starts a cache line, wherever the linker puts the code.
	PCALIGN $64

iq2z6loop4:
	IQ2Z6SIGNS(0, 0, Z4, Z3, Z15)
	IQ2Z6SIGNS(const_dotIQ2XXSBytes, BlockQ8K__size, Z10, Z9, Z11)
	IQ2Z6LOOKUP(2*const_dotIQ2XXSBytes, 3*const_dotIQ2XXSBytes, Z14, Z31)
	IQ2Z6PAIR(0, Z4, Z10, Z1, Z5)
	CMPQ CX, $8
	JLT  iq2z6last
	IQ2Z6LOOKUP(4*const_dotIQ2XXSBytes, 5*const_dotIQ2XXSBytes, Z1, Z5)

iq2z6last:
	IQ2Z6SIGNS(2*const_dotIQ2XXSBytes, 2*BlockQ8K__size, Z10, Z3, Z15)
	IQ2Z6SIGNS(3*const_dotIQ2XXSBytes, 3*BlockQ8K__size, Z12, Z9, Z11)
	IQ2Z6PAIR(2*BlockQ8K__size, Z10, Z12, Z14, Z31)
	IQ2Z6SUM4

	// X6 = the four f16(d) as float32 (VMOVD also loads the word after d,
	// which VPINSRW then replaces), X7 = the four D.
	VMOVD     (SI), X6
	VPINSRW   $1, const_dotIQ2XXSBytes(SI), X6, X6
	VPINSRW   $2, (2*const_dotIQ2XXSBytes)(SI), X6, X6
	VPINSRW   $3, (3*const_dotIQ2XXSBytes)(SI), X6, X6
	VCVTPH2PS X6, X6
	VMOVSS    BlockQ8K_D(DI), X7
	VINSERTPS $0x10, (BlockQ8K__size+BlockQ8K_D)(DI), X7, X7
	VINSERTPS $0x20, (2*BlockQ8K__size+BlockQ8K_D)(DI), X7, X7
	VINSERTPS $0x30, (3*BlockQ8K__size+BlockQ8K_D)(DI), X7, X7
	VMULPS    X7, X6, X6 // dd = f16(d)·D
	VMULPS    X0, X6, X6 // dd·float32(bsum)
	VADDSS    X6, X13, X13
	VMOVSHDUP X6, X7
	VADDSS    X7, X13, X13
	VPERMILPS $2, X6, X7
	VADDSS    X7, X13, X13
	VPERMILPS $3, X6, X7
	VADDSS    X7, X13, X13

	ADDQ $(4*const_dotIQ2XXSBytes), SI
	ADDQ $(4*BlockQ8K__size), DI
	SUBQ $4, CX
	CMPQ CX, $4
	JGE  iq2z6loop4

iq2z6tail:
	TESTQ CX, CX
	JZ    iq2z6done

iq2z6loop1:
	IQ2Z6LOOKUP(0, 0, Z1, Z5)
	IQ2Z6SIGNS(0, 0, Z4, Z3, Z15)
	IQ2Z6APPLY(Z16, 0, 0, Z4, Z1, Z3, Z15, Z6, Z7, K3)
	IQ2Z6APPLY(Z20, 1, 0, Z4, Z1, Z3, Z15, Z6, Z7, K3)
	IQ2Z6APPLY(Z21, 2, 0, Z4, Z1, Z3, Z15, Z6, Z7, K3)
	IQ2Z6APPLY(Z22, 3, 0, Z4, Z1, Z3, Z15, Z6, Z7, K3)
	IQ2Z5SUM1
	MOVWLZX   (SI), AX
	VMOVD     AX, X6
	VCVTPH2PS X6, X6
	VMULSS    BlockQ8K_D(DI), X6, X6
	VMULSS    X5, X6, X6
	VADDSS    X6, X13, X13

	ADDQ $const_dotIQ2XXSBytes, SI
	ADDQ $BlockQ8K__size, DI
	DECQ CX
	JNZ  iq2z6loop1

iq2z6done:
	MOVL   $0x3e000000, AX // 0.125
	VMOVD  AX, X1
	VMULSS X1, X13, X13
	VMOVSS X13, ret+24(FP)
	VZEROUPPER
	RET

// IQ2Z5WEIGHTSX4 expands elements 64z..64z+63 of the block expanded by
// IQ2Z5BLOCK(0, 0) for the four-token kernel: Z5 gets the weights'
// magnitudes, Z6 0xff in the bytes of the negative weights and 0
// elsewhere, Z7 the VPDPWSSD multipliers, and Z14 accumulates the scaled
// sums of the negative weights' magnitudes (see IQ2Z5APPLYX4). Clobbers
// Z8 and K3.
#define IQ2Z5WEIGHTSX4(Zshift, z) \
	VPMULTISHIFTQB Z1, Zshift, Z5; \
	VGF2P8AFFINEQB $8, Z17, Z5, Z5; \
	KMOVQ          (8*z)(SP), K3; \
	VPMOVM2B       K3, Z6; \
	VMOVDQU8.Z     Z5, K3, Z8; \
	VPMADDUBSW     iq2Bytes1<>(SB), Z8, Z8; \
	VPERMQ         $(0x55*z), Z3, Z7; \
	VPDPWSSD       Z7, Z8, Z14

// IQ2Z5APPLYX4 adds to Zacc the scaled sum of elements 64z..64z+63 like
// IQ2Z5APPLY, in three operations instead of four, less a term that is the
// same for every token: for a negative weight -m, -m·q8 = m·(^q8) + m, so
// the activation bytes are XORed with the negative weights' 0xff bytes
// (^q8 stays in int8, even for -128) and multiplied by the magnitudes,
// and the m terms are left in Z14 for the caller to add once per block.
// That makes this kernel 10% faster; the single-token one, which would pay
// for the m terms alone, measured 7% slower with it. Clobbers Z9.
#define IQ2Z5APPLYX4(Py, z, Zacc) \
	VPXORQ     (z*64+BlockQ8K_Qs)(Py), Z6, Z9; \
	VPMADDUBSW Z9, Z5, Z9; \
	VPDPWSSD   Z7, Z9, Zacc

// IQ2Z5X4 adds the scaled sums of elements 64z..64z+63 of the block at SI
// against the Q8_K blocks at DI, R11, R12 and R13 to Z4, Z10, Z11 and Z12,
// less their common negative-weight term, which goes to Z14: the weights
// are expanded once and applied to the four activations.
#define IQ2Z5X4(z, Zshift) \
	IQ2Z5WEIGHTSX4(Zshift, z); \
	IQ2Z5APPLYX4(DI, z, Z4); \
	IQ2Z5APPLYX4(R11, z, Z10); \
	IQ2Z5APPLYX4(R12, z, Z11); \
	IQ2Z5APPLYX4(R13, z, Z12)

// IQ2Z5X4FLOAT folds the four tokens' accumulators and adds their float
// terms (f16(d)·D)·float32(bsum) to the lanes of X13, for the block at SI.
// Clobbers Z5..Z7.
#define IQ2Z5X4FLOAT \
	IQ2Z5SUM4; \
	VPBROADCASTW (SI), X6; \
	VCVTPH2PS    X6, X6; \
	VMOVSS       BlockQ8K_D(DI), X7; \
	VINSERTPS    $0x10, BlockQ8K_D(R11), X7, X7; \
	VINSERTPS    $0x20, BlockQ8K_D(R12), X7, X7; \
	VINSERTPS    $0x30, BlockQ8K_D(R13), X7, X7; \
	VMULPS       X7, X6, X6; \
	VMULPS       X5, X6, X6; \
	VADDPS       X6, X13, X13

// func dotIQ2XXSx4AVX512Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
//
// The four tokens' float sums are kept four wide, token t in lane t of
// X13, and each lane sees DotIQ2XXS's float operations in its order. The
// frame holds the block's sign bytes. This kernel is bound more by the
// latency of a block's chain (lookup, products, fold) than by throughput,
// so the next block is expanded before this one is folded: 8% faster.
TEXT ·dotIQ2XXSx4AVX512Asm(SB), NOSPLIT, $32-56
	MOVQ w+0(FP), SI
	MOVQ y0+8(FP), DI
	MOVQ y1+16(FP), R11
	MOVQ y2+24(FP), R12
	MOVQ y3+32(FP), R13
	MOVQ nb+40(FP), CX
	IQ2Z5SETUP
	VXORPS X13, X13, X13 // sumf of each token
	IQ2Z5BLOCK(0, 0)

iq2z5x4loop:
	VPXORD Z4, Z4, Z4
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z14, Z14, Z14
	IQ2Z5X4(0, Z16)
	IQ2Z5X4(1, Z20)
	IQ2Z5X4(2, Z21)
	IQ2Z5X4(3, Z22)
	VPADDD Z14, Z4, Z4
	VPADDD Z14, Z10, Z10
	VPADDD Z14, Z11, Z11
	VPADDD Z14, Z12, Z12

	// Expand the next block (this one's signs and codes are used up)
	// before folding this one, so that its lookup overlaps the fold.
	DECQ CX
	JZ   iq2z5x4last
	IQ2Z5BLOCK(const_dotIQ2XXSBytes, 0)
	IQ2Z5X4FLOAT
	ADDQ $const_dotIQ2XXSBytes, SI
	ADDQ $BlockQ8K__size, DI
	ADDQ $BlockQ8K__size, R11
	ADDQ $BlockQ8K__size, R12
	ADDQ $BlockQ8K__size, R13
	JMP  iq2z5x4loop

iq2z5x4last:
	IQ2Z5X4FLOAT

	MOVL         $0x3e000000, AX // 0.125
	VMOVD        AX, X1
	VBROADCASTSS X1, X1
	VMULPS       X1, X13, X13
	MOVQ         out+48(FP), AX
	VMOVUPS      X13, (AX)
	VZEROUPPER
	RET
