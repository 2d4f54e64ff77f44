//go:build amd64 && !purego

package quant

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/internal/cpufeat"
)

// TestKernelSetsByLevel checks which sets (and which activation
// quantizers) each level of x86 extensions gets, that the avx512vnni set takes from AVX-512 only the kernels that
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
		l        cpufeat.Level
		want     []string
		wantBest string
		wantAct  string
	}{
		{cpufeat.Generic, nil, "go", "go"},
		{cpufeat.AVX2, []string{"avx2"}, "avx2", "avx2"},
		{cpufeat.AVX512, []string{"avx2"}, "avx2", "avx2"},
		{cpufeat.AVX512VNNI, []string{"avx512vnni", "avx2"}, "avx512vnni", "avx2"},
		{cpufeat.AVX512VBMI, []string{"avx512", "avx512vnni", "avx2"}, "avx512", "avx2"},
	} {
		require.Equal(t, tc.want, names(kernelSets(tc.l)), "%v", tc.l)
		require.Equal(t, tc.wantBest, KernelsFor(tc.l).Name, "%v", tc.l)
		require.Equal(t, tc.wantAct, actFor(tc.l).String(), "%v", tc.l)
	}
	// The pure-Go environment setting makes every CPU's choice generic.
	zen4 := cpufeat.Features{AVX: true, AVX2: true, FMA: true, F16C: true, AVX512F: true, AVX512BW: true, AVX512VL: true,
		AVX512VNNI: true, AVX512VBMI: true, AVX512GFNI: true, AVX512BITALG: true, PureGo: true}
	require.Equal(t, "go", KernelsFor(zen4.Level()).Name)
	require.Equal(t, "go", actFor(zen4.Level()).String())
	zen4.PureGo = false
	require.Equal(t, "avx512", KernelsFor(zen4.Level()).Name)

	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	vnni := kernelSets(cpufeat.AVX512VNNI)[0]
	require.True(t, same(vnni.Q8_0, dotQ8_0AVX512))
	require.True(t, same(vnni.Q8_0x4, dotQ8_0x4AVX512))
	require.True(t, same(vnni.Q2KTile, q2KTileAVX512))
	require.True(t, same(vnni.Q2K, dotQ2KAVX2), "the AVX-512 Q2_K row kernel needs VBMI")
	require.True(t, same(vnni.Q2Kx4, dotQ2Kx4AVX2), "the AVX-512 Q2_K four-token kernel needs VBMI")
	require.True(t, same(vnni.IQ2XXS, dotIQ2XXSAVX2), "the AVX-512 IQ2_XXS kernels need VBMI, GFNI and BITALG")
	require.True(t, same(vnni.IQ2XXSx4, dotIQ2XXSx4AVX2))
	require.True(t, same(vnni.PackIQ2XXSTile, packIQ2XXSTileAVX2), "the AVX-512 IQ2_XXS tile kernels need VBMI and GFNI")
	require.True(t, same(vnni.IQ2XXSTile, iq2xxsTileAVX2))

	avx2 := kernelSets(cpufeat.AVX2)[0]
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
	for _, k := range VectorKernelSets() {
		if k.Name == name {
			return true
		}
	}
	return false
}
