//go:build amd64 && !purego

package quant

import "github.com/ds4-go/ds4/internal/cpufeat"

// kernelSets returns the kernel sets a CPU of level l runs, the fastest
// first: avx512 where it has every extension the AVX-512 kernels use
// (cpufeat.AVX512VBMI), avx512vnni where it has those of the Q8_0 kernels
// and the Q2_K tile kernels (cpufeat.AVX512VNNI, as Cascade Lake has), and
// avx2 (cpufeat.AVX2, F16C converting the f16 scales and weights). A CPU
// with every extension gets all three, so that the tests hold the middle
// set to the others there too.
func kernelSets(l cpufeat.Level) []Kernels {
	if l < cpufeat.AVX2 {
		return nil
	}
	avx2 := avx2Kernels()
	if l < cpufeat.AVX512VNNI {
		return []Kernels{avx2}
	}
	vnni := avx512VNNIKernels(avx2)
	if l < cpufeat.AVX512VBMI {
		return []Kernels{vnni, avx2}
	}
	return []Kernels{avx512Kernels(vnni), vnni, avx2}
}

// avx512VNNIKernels returns the AVX2 kernels avx2 with the Q8_0 ones and
// the Q8_0 (tile_amd64.go) and Q2_K (tile_q2k_amd64.go) tile kernels
// replaced by their AVX-512 versions: all of them need AVX512F/BW/VL and
// VNNI only. The IQ2_XXS tile kernels stay AVX2's.
func avx512VNNIKernels(avx2 Kernels) Kernels {
	k := avx2
	k.Name = "avx512vnni"
	k.Q8_0 = dotQ8_0AVX512
	k.Q8_0x4 = dotQ8_0x4AVX512
	k.Q8_0xN = dotQ8_0xNAVX512
	k.Q8_0xNPre = dotQ8_0xNPreAVX512
	k.PackQ8_0Tile = packQ8_0TileAVX512
	k.Q8_0Tile = q8_0TileAVX512
	k.PackQ2KTile = packQ2KTileAVX512
	k.Q2KTile = q2KTileAVX512
	return k
}

// avx512Kernels returns the avx512vnni kernels vnni with the IQ2_XXS and
// Q2_K row kernels replaced by their AVX-512 versions, which also need VBMI
// and, for IQ2_XXS, GFNI and BITALG, and with the IQ2_XXS tile kernels
// (tile_iq2_amd64.go, VBMI and GFNI besides) added.
func avx512Kernels(vnni Kernels) Kernels {
	k := vnni
	k.Name = "avx512"
	k.IQ2XXS = dotIQ2XXSAVX512
	k.IQ2XXSx4 = dotIQ2XXSx4AVX512
	k.Q2K = dotQ2KAVX512
	k.Q2Kx4 = dotQ2Kx4AVX512
	k.PackIQ2XXSTile = packIQ2XXSTileAVX512
	k.IQ2XXSTile = iq2xxsTileAVX512
	return k
}

// avx2Kernels returns the AVX2 kernels, the tile kernels of all three
// kinds (tile_avx2_amd64.go) among them. Every one needs AVX2 and FMA, and
// F16C converts the f16 scales and weights.
func avx2Kernels() Kernels {
	return Kernels{
		Name:     "avx2",
		Q8_0:     dotQ8_0AVX2,
		Q8_0x4:   dotQ8_0x4AVX2,
		Q8_0xN:   dotQ8_0xNAVX2,
		Q2K:      dotQ2KAVX2,
		Q2Kx4:    dotQ2Kx4AVX2,
		Q4K:      dotQ4KAVX2,
		IQ2XXS:   dotIQ2XXSAVX2,
		IQ2XXSx4: dotIQ2XXSx4AVX2,
		F16:      dotF16AVX2,
		F16x2x3:  dotF16x2x3AVX2,
		F32:      dotF32AVX2,

		PackQ8_0Tile:   packQ8_0TileAVX2,
		Q8_0Tile:       q8_0TileAVX2,
		PackIQ2XXSTile: packIQ2XXSTileAVX2,
		IQ2XXSTile:     iq2xxsTileAVX2,
		PackQ2KTile:    packQ2KTileAVX2,
		Q2KTile:        q2KTileAVX2,
	}
}
