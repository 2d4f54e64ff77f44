//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

// vectorKernelSets returns the kernel sets this CPU can run, the fastest
// first.
func vectorKernelSets() []Kernels {
	avx2, ok := avx2Kernels()
	if !ok {
		return nil
	}
	return []Kernels{avx2}
}

// avx2Kernels returns the AVX2 kernels. Every one needs AVX2 and FMA, and
// F16C converts the f16 scales and weights; x/sys/cpu reports AVX2 only
// when the OS saves the YMM registers. Every CPU with AVX2 so far also has
// F16C and FMA, so requiring all three loses nothing.
func avx2Kernels() (Kernels, bool) {
	x := cpu.X86
	if !x.HasAVX2 || !x.HasFMA || !x.HasF16C {
		return Kernels{}, false
	}
	return Kernels{
		Name:     "avx2",
		Q8_0:     dotQ8_0AVX2,
		Q8_0x4:   dotQ8_0x4AVX2,
		Q2K:      dotQ2KAVX2,
		Q4K:      dotQ4KAVX2,
		IQ2XXS:   dotIQ2XXSAVX2,
		IQ2XXSx4: dotIQ2XXSx4AVX2,
		F16:      dotF16AVX2,
		F32:      dotF32AVX2,
	}, true
}
