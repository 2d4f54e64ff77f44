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
	if avx512, ok := avx512Kernels(avx2); ok {
		return []Kernels{avx512, avx2}
	}
	return []Kernels{avx2}
}

// avx512Kernels returns the AVX2 kernels avx2 with the IQ2_XXS, Q2_K and
// Q8_0 ones replaced by their AVX-512 versions, which need AVX512F/BW/VL
// and VNNI, for Q2_K also VBMI and for IQ2_XXS VBMI, GFNI and BITALG, and with the
// Q8_0 tile kernels (tile_amd64.go, AVX512F/BW/VL and VNNI), the IQ2_XXS ones
// (tile_iq2_amd64.go, all of the above) and the Q2_K ones
// (tile_q2k_amd64.go, AVX512F/BW/VL and VNNI) added; x/sys/cpu reports
// AVX512F only when the OS saves the ZMM and mask registers.
func avx512Kernels(avx2 Kernels) (Kernels, bool) {
	x := cpu.X86
	if !x.HasAVX512F || !x.HasAVX512BW || !x.HasAVX512VL || !x.HasAVX512VBMI ||
		!x.HasAVX512VNNI || !x.HasAVX512GFNI || !x.HasAVX512BITALG {
		return Kernels{}, false
	}
	k := avx2
	k.Name = "avx512"
	k.IQ2XXS = dotIQ2XXSAVX512
	k.IQ2XXSx4 = dotIQ2XXSx4AVX512
	k.Q2K = dotQ2KAVX512
	k.Q2Kx4 = dotQ2Kx4AVX512
	k.Q8_0 = dotQ8_0AVX512
	k.Q8_0x4 = dotQ8_0x4AVX512
	k.PackQ8_0Tile = packQ8_0TileAVX512
	k.Q8_0Tile = q8_0TileAVX512
	k.PackIQ2XXSTile = packIQ2XXSTileAVX512
	k.IQ2XXSTile = iq2xxsTileAVX512
	k.PackQ2KTile = packQ2KTileAVX512
	k.Q2KTile = q2KTileAVX512
	return k, true
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
		Q2Kx4:    dotQ2Kx4AVX2,
		Q4K:      dotQ4KAVX2,
		IQ2XXS:   dotIQ2XXSAVX2,
		IQ2XXSx4: dotIQ2XXSx4AVX2,
		F16:      dotF16AVX2,
		F32:      dotF32AVX2,
	}, true
}
