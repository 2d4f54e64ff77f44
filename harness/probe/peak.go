// Package probe holds the roofline's measurement probes, which measure what
// the machine can do at best: ReadSum streams memory as fast as loads
// retire, FMALoop, DotI8Loop and DotQ8_0Loop run the instruction mixes of
// the CPU backend's dot kernels (float32 FMA, the int8 multiply and
// widening adds of the Q8_K dots, and those of the Q8_0 dots, which on AVX2
// also move signs) with enough independent chains to hide their latency,
// and DotVNNILoop runs the AVX-512 VNNI int8 dot. harness.MeasureMachine
// times them.
package probe

// ReadSumAlign is the granularity of ReadSum: it reads len(b) rounded down
// to a multiple of it.
const ReadSumAlign = 128

// FMAFlopsPerIter is the number of float32 floating-point operations one
// FMALoop iteration performs (12 chains of 8-lane fused multiply-adds).
const FMAFlopsPerIter = 12 * 8 * 2

// DotI8OpsPerIter is the number of int8 operations (a multiply and an add
// per byte pair) one DotI8Loop iteration performs (6 chains of 32 pairs).
const DotI8OpsPerIter = 6 * 32 * 2

// DotQ8_0OpsPerIter is the number of int8 operations one DotQ8_0Loop
// iteration performs (6 chains of 32 pairs).
const DotQ8_0OpsPerIter = 6 * 32 * 2

// DotVNNIOpsPerIter is the number of int8 operations one DotVNNILoop
// iteration performs (12 chains of 64 pairs).
const DotVNNIOpsPerIter = 12 * 64 * 2

// ReadSum returns the wrapping sum of the little-endian uint64 words of
// b[:len(b)/ReadSumAlign·ReadSumAlign], reading them with the widest loads
// the CPU has.
func ReadSum(b []byte) uint64 {
	b = b[:len(b)/ReadSumAlign*ReadSumAlign]
	if len(b) == 0 {
		return 0
	}
	return readSum(b)
}

// FMALoop runs n iterations of 12 independent chains acc = acc·0.5 + 1 over
// 8 float32 lanes, starting from 0, and returns lane 0 of the first chain.
func FMALoop(n int) float32 {
	if n <= 0 {
		return 0
	}
	return fmaLoop(n)
}

// DotI8Loop runs n iterations of 6 independent chains that add to 8 int32
// lanes the dot product of 4 unsigned bytes of 1 with 4 signed bytes of 1
// (widened through int16 as the AVX2 Q8 dots do), and returns lane 0 of
// the first chain (4n, wrapping).
func DotI8Loop(n int) int32 {
	if n <= 0 {
		return 0
	}
	return dotI8Loop(n)
}

// DotQ8_0Loop is DotI8Loop with the sign step of the AVX2 Q8_0 dots
// added to each chain: VPSIGNB puts the signs of one signed operand onto
// the other before the unsigned-times-signed multiply, as both Q8_0
// operands are signed. It returns the same value.
func DotQ8_0Loop(n int) int32 {
	if n <= 0 {
		return 0
	}
	return dotQ8_0Loop(n)
}

// HasVNNI reports whether DotVNNILoop runs the AVX-512 VNNI instruction
// (this CPU has it and the build is not purego).
func HasVNNI() bool { return hasVNNI }

// DotVNNILoop runs n iterations of 12 independent chains of the AVX-512
// VNNI int8 dot (VPDPBUSD: 4 unsigned bytes times 4 signed bytes added to
// each of 16 int32 lanes in one instruction), all bytes 1, and returns
// lane 0 of the first chain (4n, wrapping); without VNNI it computes the
// same value in Go.
func DotVNNILoop(n int) int32 {
	if n <= 0 {
		return 0
	}
	if !hasVNNI {
		return int32(4 * n)
	}
	return dotVNNILoop(n)
}

func readSumGo(b []byte) uint64 {
	// Eight independent sums keep the loop from waiting on one add chain.
	var s [8]uint64
	for len(b) >= 64 {
		w := b[:64:64]
		for i := range s {
			s[i] += uint64(w[8*i]) | uint64(w[8*i+1])<<8 | uint64(w[8*i+2])<<16 | uint64(w[8*i+3])<<24 |
				uint64(w[8*i+4])<<32 | uint64(w[8*i+5])<<40 | uint64(w[8*i+6])<<48 | uint64(w[8*i+7])<<56
		}
		b = b[64:]
	}
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
}

func fmaLoopGo(n int) float32 {
	var acc [12][8]float32
	for range n {
		for c := range acc {
			for l := range acc[c] {
				acc[c][l] = acc[c][l]*0.5 + 1
			}
		}
	}
	return acc[0][0]
}

func dotI8LoopGo(n int) int32 {
	var acc [6][8]int32
	var u [32]uint8
	var s [32]int8
	for i := range u {
		u[i], s[i] = 1, 1
	}
	for range n {
		for c := range acc {
			for l := range acc[c] {
				var d int32
				for k := range 4 {
					d += int32(u[4*l+k]) * int32(s[4*l+k])
				}
				acc[c][l] += d
			}
		}
	}
	return acc[0][0]
}
