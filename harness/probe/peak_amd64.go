//go:build amd64 && !purego

package probe

import "github.com/ds4-go/ds4/internal/cpufeat"

// The probes measure what the machine can do, so they run at the CPU's
// level whatever DS4_PUREGO, which chooses the kernels, says.
var (
	// hasAVX2 reports whether the AVX2 probes of peak_amd64.s can run.
	hasAVX2 = cpufeat.Host().CPULevel() >= cpufeat.AVX2
	// hasVNNI reports whether the AVX-512 VNNI probe can run.
	hasVNNI = cpufeat.Host().CPULevel() >= cpufeat.AVX512VNNI
)

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
