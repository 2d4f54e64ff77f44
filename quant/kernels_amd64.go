//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

// vectorKernels returns the AVX2 kernels; every one needs AVX2 and FMA,
// and the F16 kernel F16C as well.
func vectorKernels() (Kernels, bool) {
	x := cpu.X86
	if !x.HasAVX2 || !x.HasFMA {
		return Kernels{}, false
	}
	k := Kernels{Name: "avx2", Q8_0: dotQ8_0AVX2, Q2K: dotQ2KAVX2, Q4K: dotQ4KAVX2, IQ2XXS: dotIQ2XXSAVX2, F16: DotF16, F32: dotF32AVX2}
	if hasF16C() {
		k.F16 = dotF16AVX2
	}
	return k, true
}
