//go:build amd64 && !purego

package cpu

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestScatterNTForms runs each non-temporal scatter this CPU can run, the
// AVX2 one also where AVX-512 would be taken, on 64-byte aligned rows, and
// checks that scatterNT takes one wherever AVX2 is present.
func TestScatterNTForms(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2 on this CPU")
	}
	const n, ds = 9, 48
	forms := []struct {
		name string
		run  func(dst *float32, strideBytes int, src *float32, n int)
	}{{"avx2", scatterNTAVX2Asm}}
	if hasAVX512() {
		forms = append(forms, struct {
			name string
			run  func(dst *float32, strideBytes int, src *float32, n int)
		}{"avx512", scatterNTAsm})
	}
	out := randVec(newRand(5), 16*n, 1)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			buf := make([]float32, n*ds+16)
			off := int((64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64 / 4)
			dst := buf[off : off+n*ds]
			require.True(t, aligned64(unsafe.Pointer(&dst[0]), ds*4))
			f.run(&dst[0], ds*4, &out[0], n)
			for tok := range n {
				require.Equal(t, out[16*tok:16*tok+16], dst[tok*ds:tok*ds+16], "input %d", tok)
				require.Equal(t, make([]float32, ds-16), dst[tok*ds+16:(tok+1)*ds], "input %d: past its 16 results", tok)
			}
			clear(dst)
			require.True(t, scatterNT(loopsFor(cpuLevel()).scatter, dst, ds, out, n), "an aligned scatter with AVX2 must take the non-temporal stores")
			for tok := range n {
				require.Equal(t, out[16*tok:16*tok+16], dst[tok*ds:tok*ds+16], "input %d", tok)
			}
		})
	}
}
