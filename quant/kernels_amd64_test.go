//go:build amd64 && !purego

package quant

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKernelSetsByLevel checks which sets each level of x86 extensions
// gets, that the avx512vnni set takes from AVX-512 only the kernels that
// need no VBMI, GFNI or BITALG (a Cascade Lake CPU must not be handed an
// instruction it lacks), and which tile kernels the avx2 set has. Only the names and the functions picked are
// checked here, so every level is covered whatever this CPU has.
func TestKernelSetsByLevel(t *testing.T) {
	names := func(sets []Kernels) []string {
		var n []string
		for _, k := range sets {
			n = append(n, k.Name)
		}
		return n
	}
	for _, tc := range []struct {
		l    cpuLevels
		want []string
	}{
		{cpuLevels{}, nil},
		{cpuLevels{avx512VNNI: true, avx512All: true}, nil},
		{cpuLevels{avx2: true}, []string{"avx2"}},
		{cpuLevels{avx2: true, avx512All: true}, []string{"avx2"}},
		{cpuLevels{avx2: true, avx512VNNI: true}, []string{"avx512vnni", "avx2"}},
		{cpuLevels{avx2: true, avx512VNNI: true, avx512All: true}, []string{"avx512", "avx512vnni", "avx2"}},
	} {
		require.Equal(t, tc.want, names(kernelSets(tc.l)), "%+v", tc.l)
	}

	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	vnni := kernelSets(cpuLevels{avx2: true, avx512VNNI: true})[0]
	require.True(t, same(vnni.Q8_0, dotQ8_0AVX512))
	require.True(t, same(vnni.Q8_0x4, dotQ8_0x4AVX512))
	require.True(t, same(vnni.Q2KTile, q2KTileAVX512))
	require.True(t, same(vnni.Q2K, dotQ2KAVX2), "the AVX-512 Q2_K row kernel needs VBMI")
	require.True(t, same(vnni.Q2Kx4, dotQ2Kx4AVX2), "the AVX-512 Q2_K four-token kernel needs VBMI")
	require.True(t, same(vnni.IQ2XXS, dotIQ2XXSAVX2), "the AVX-512 IQ2_XXS kernels need VBMI, GFNI and BITALG")
	require.True(t, same(vnni.IQ2XXSx4, dotIQ2XXSx4AVX2))
	require.True(t, same(vnni.PackIQ2XXSTile, packIQ2XXSTileAVX2), "the AVX-512 IQ2_XXS tile kernels need VBMI and GFNI")
	require.True(t, same(vnni.IQ2XXSTile, iq2xxsTileAVX2))

	avx2 := kernelSets(cpuLevels{avx2: true})[0]
	require.True(t, same(avx2.PackQ8_0Tile, packQ8_0TileAVX2))
	require.True(t, same(avx2.Q8_0Tile, q8_0TileAVX2))
	require.True(t, same(avx2.PackIQ2XXSTile, packIQ2XXSTileAVX2))
	require.True(t, same(avx2.IQ2XXSTile, iq2xxsTileAVX2))
	require.True(t, same(avx2.PackQ2KTile, packQ2KTileAVX2))
	require.True(t, same(avx2.Q2KTile, q2KTileAVX2))
}

// hasKernelSet reports whether this CPU runs the vector kernel set of the
// given name.
func hasKernelSet(name string) bool {
	for _, k := range vectorKernelSets() {
		if k.Name == name {
			return true
		}
	}
	return false
}
