package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/ds4-go/ds4/backends"
	"github.com/stretchr/testify/require"
)

// TestRMSNormHeads holds RMSNormHeads to RMSNorm of each row bit for bit,
// for row counts around the four-row step and odd widths.
func TestRMSNormHeads(t *testing.T) {
	r := newRand(21)
	for _, dim := range []int{1, 7, 512} {
		for rows := range 10 {
			t.Run(fmt.Sprintf("dim%d_rows%d", dim, rows), func(t *testing.T) {
				x := randVec(r, rows*dim, 3)
				if rows > 2 {
					x[2*dim] = 1e30 // a row whose squares are large
				}
				want := append([]float32(nil), x...)
				for h := range rows {
					row := want[h*dim : (h+1)*dim]
					RMSNorm(row, row, nil, 1e-6)
				}
				RMSNormHeads(x, dim, 1e-6)
				for i := range x {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(x[i]), "element %d", i)
				}
			})
		}
	}
}

// TestApplyRoPEHeads holds ApplyRoPEHeads to ApplyRoPE of each row's tail
// bit for bit, with and without YaRN, both directions, and checks that
// the floats outside the tails are left alone.
func TestApplyRoPEHeads(t *testing.T) {
	r := newRand(22)
	ropes := map[string]backends.RoPE{
		"plain": backends.NewRoPE(64, 10000, false, 1, 0, 0, 0),
		"yarn":  backends.NewRoPE(64, 160000, true, 16, 65536, 32, 1),
		"wide":  backends.NewRoPE(2*ropeMaxPairs+2, 10000, false, 1, 0, 0, 0), // past the stack table
	}
	for name, rope := range ropes {
		for _, inverse := range []bool{false, true} {
			for _, pos := range []int{0, 1, 4097, 1 << 20} {
				stride, off := rope.Dims+100, 70
				const rows = 5
				x := randVec(r, rows*stride, 2)
				want := append([]float32(nil), x...)
				for h := range rows {
					ApplyRoPE(rope, want[h*stride+off:h*stride+off+rope.Dims], pos, inverse)
				}
				ApplyRoPEHeads(rope, x, stride, off, pos, inverse)
				for i := range x {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(x[i]), "%s inverse=%v pos=%d: element %d", name, inverse, pos, i)
				}
			}
		}
	}
}

// TestApplyRoPEEmptyTailPanics checks that a tail too short for the
// rotation is refused, as before the rows form, empty or not.
func TestApplyRoPEEmptyTailPanics(t *testing.T) {
	rope := backends.NewRoPE(64, 10000, false, 1, 0, 0, 0)
	require.Panics(t, func() { ApplyRoPE(rope, nil, 3, false) })
	require.Panics(t, func() { ApplyRoPE(rope, make([]float32, 10), 3, false) })
}
