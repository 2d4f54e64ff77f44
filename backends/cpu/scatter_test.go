package cpu

import (
	"testing"
	"unsafe"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
	"github.com/stretchr/testify/require"
)

// TestScatterTile checks scatterTile on outputs above and below the
// non-temporal threshold, aligned and not (the fallback copy), against
// the plain copy, and that nothing between the tiles is touched.
func TestScatterTile(t *testing.T) {
	const n = 130
	for _, c := range []struct {
		name   string
		ds     int
		offset int // floats from an aligned start
	}{
		{"nt", scatterNTBytes/(4*n)/16*16 + 16, 0},
		{"nt_unaligned_start", scatterNTBytes/(4*n)/16*16 + 16, 3},
		{"nt_unaligned_stride", scatterNTBytes/(4*n)/16*16 + 17, 0},
		{"small", 48, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.True(t, c.name == "small" || n*c.ds*4 >= scatterNTBytes)
			buf := make([]float32, c.offset+n*c.ds)
			const guard = 7.5
			for i := range buf {
				buf[i] = guard
			}
			dst := buf[c.offset:]
			if c.name == "nt" { // so that an AVX2 CPU takes the non-temporal stores
				require.True(t, aligned64(unsafe.Pointer(&dst[0]), c.ds*4))
			}
			out := randVec(newRand(3), 16*n, 1)
			scatterTile(dst, c.ds, out, n)
			for tok := range n {
				require.Equal(t, out[16*tok:16*tok+16], dst[tok*c.ds:tok*c.ds+16], "input %d", tok)
				if tok == n-1 {
					break
				}
				for i := tok*c.ds + 16; i < (tok+1)*c.ds; i++ {
					if dst[i] != guard {
						t.Fatalf("between tiles, index %d: %v", i, dst[i])
					}
				}
			}
		})
	}
}

// TestMatMulTileNT runs a Q8_0 product whose output (128 inputs × 16384
// rows, 8 MB) takes the non-temporal scatter and holds it to MatVec bit
// for bit.
func TestMatMulTileNT(t *testing.T) {
	const cols, rows, n = 64, 16384, 128
	w := testMatrix(t, quant.Q8_0, cols, rows, 1, 5)
	x := randVec(newRand(4), n*cols, 1)
	require.GreaterOrEqual(t, n*rows*4, scatterNTBytes)
	be := New(2)
	defer be.Close()
	got := make([]float32, n*rows)
	be.MatMulBatch([]backends.Product{{Dst: got, W: w, X: x, N: n}})
	want := make([]float32, rows)
	for tok := range n {
		be.MatVec(want, w, x[tok*cols:(tok+1)*cols])
		require.Equal(t, want, got[tok*rows:(tok+1)*rows], "input %d", tok)
	}
}
