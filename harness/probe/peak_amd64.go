//go:build amd64 && !purego

package probe

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether the AVX2 probes of peak_amd64.s can run.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// hasVNNI reports whether the AVX-512 VNNI probe can run (x/sys/cpu
// reports AVX-512 only when the OS saves the ZMM registers).
var hasVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VNNI

func readSum(b []byte) uint64 {
	if !hasAVX2 {
		return readSumGo(b)
	}
	return readSumAVX2(b)
}

func fmaLoop(n int) float32 {
	if !hasAVX2 {
		return fmaLoopGo(n)
	}
	return fmaLoopAVX2(n)
}

func dotI8Loop(n int) int32 {
	if !hasAVX2 {
		return dotI8LoopGo(n)
	}
	return dotI8LoopAVX2(n)
}

func dotQ8_0Loop(n int) int32 {
	if !hasAVX2 {
		return dotI8LoopGo(n)
	}
	return dotQ8_0LoopAVX2(n)
}

//go:noescape
func readSumAVX2(b []byte) uint64

func fmaLoopAVX2(n int) float32

func dotI8LoopAVX2(n int) int32

func dotQ8_0LoopAVX2(n int) int32

func dotVNNILoop(n int) int32
