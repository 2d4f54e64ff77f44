package quant_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// TestF16x2x3MatchesF16 holds every kernel set's F16x2x3 to six calls of
// its F16, bit for bit: prefill runs the first and decode the second, and
// the two must agree exactly. The rows cover every length to 70 (the
// steps of 16 and 8 and the one-by-one tail) and longer ones, with random
// values, f16 subnormals, and infinities and NaNs of distinct payloads in
// the weights and the activations.
func TestF16x2x3MatchesF16(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 23))
	lengths := []int{255, 256, 1024, 4096 + 7}
	for n := range 71 {
		lengths = append(lengths, n)
	}
	weight := func(kind string) uint16 {
		if kind != "random" && r.IntN(4) == 0 {
			switch {
			case kind == "subnormal":
				return uint16(r.IntN(0x400)) | uint16(r.IntN(2))<<15
			case r.IntN(3) == 0:
				return 0x7c00 | uint16(r.IntN(2))<<15 // ±Inf
			default:
				return 0x7e00 | uint16(r.IntN(0x200)) | uint16(r.IntN(2))<<15 // NaNs of many payloads
			}
		}
		return quant.F32ToF16(float32(r.NormFloat64()))
	}
	act := func(kind string) float32 {
		if kind == "special" && r.IntN(8) == 0 {
			return math.Float32frombits(0x7fc00000 | uint32(r.IntN(1<<22)) | uint32(r.IntN(2))<<31)
		}
		return float32(r.NormFloat64() * 4)
	}
	for _, kind := range []string{"random", "subnormal", "special"} {
		for _, n := range lengths {
			var w [2][]byte
			for i := range w {
				w[i] = make([]byte, 2*n)
				for j := range n {
					binary.LittleEndian.PutUint16(w[i][2*j:], weight(kind))
				}
			}
			var x [3][]float32
			for i := range x {
				x[i] = make([]float32, n)
				for j := range x[i] {
					x[i][j] = act(kind)
				}
			}
			for _, k := range kernelSets() {
				var got [6]float32
				k.F16x2x3(w[0], w[1], x[0], x[1], x[2], &got)
				for row := range w {
					for tok := range x {
						want := k.F16(w[row], x[tok])
						require.Equal(t, math.Float32bits(want), math.Float32bits(got[3*row+tok]),
							"%s %s n=%d row %d token %d: F16x2x3 %v, F16 %v", k.Name, kind, n, row, tok, got[3*row+tok], want)
					}
				}
			}
		}
	}
}

// TestF16x2x3BadInputPanics checks that F16x2x3 panics on a short row and
// on activations of unequal lengths, and gives zeros for empty rows.
func TestF16x2x3BadInputPanics(t *testing.T) {
	const n = 40
	w := make([]byte, 2*n)
	x := make([]float32, n)
	for _, k := range kernelSets() {
		var out [6]float32
		short := w[: 2*n-1 : 2*n-1]
		require.Panics(t, func() { k.F16x2x3(short, w, x, x, x, &out) }, "%s: row 0 one weight short", k.Name)
		require.Panics(t, func() { k.F16x2x3(w, short, x, x, x, &out) }, "%s: row 1 one weight short", k.Name)
		require.Panics(t, func() { k.F16x2x3(w, w, x, x[:n-1], x, &out) }, "%s: activation 1 shorter", k.Name)
		require.Panics(t, func() { k.F16x2x3(w, w, x, x, x[:n-1], &out) }, "%s: activation 2 shorter", k.Name)
		out = [6]float32{1, 2, 3, 4, 5, 6}
		k.F16x2x3(nil, nil, nil, nil, nil, &out)
		require.Equal(t, [6]float32{}, out, "%s: empty rows", k.Name)
	}
}
