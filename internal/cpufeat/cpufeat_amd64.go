//go:build amd64 && !purego

package cpufeat

import "golang.org/x/sys/cpu"

// cpuFeatures reads the extensions from x/sys/cpu.
func cpuFeatures() Features {
	x := cpu.X86
	return Features{
		AVX: x.HasAVX, AVX2: x.HasAVX2, FMA: x.HasFMA, F16C: x.HasF16C,
		AVX512F: x.HasAVX512F, AVX512BW: x.HasAVX512BW, AVX512VL: x.HasAVX512VL, AVX512VNNI: x.HasAVX512VNNI,
		AVX512VBMI: x.HasAVX512VBMI, AVX512GFNI: x.HasAVX512GFNI, AVX512BITALG: x.HasAVX512BITALG,
	}
}
