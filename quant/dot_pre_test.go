package quant_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// TestQ8_0xNPreMatchesSingle holds each kernel set's Q8_0xNPre, where it
// has one, for every activation count from 1 to quant.Q8_0xNMax, to the
// same set's Q8_0 on each activation bit for bit (the CPU backend runs
// batched decode on the first and single decode on the second), and to the
// pure-Go DotQ8_0 within Q8_0's bound, on the Q8_0xN tests' random and
// extreme rows and activations of whole groups of blocks. Where NaNs meet,
// any NaN matches.
func TestQ8_0xNPreMatchesSingle(t *testing.T) {
	f := &kernelFields[0]
	require.Equal(t, "Q8_0", f.name)
	sizes := []int{8, 16, 24, 32, 64, 128}
	extreme := []int{8, 16}
	a := x4Cases(rand.New(rand.NewPCG(9, 1)), f, sizes, extreme)
	b := x4Cases(rand.New(rand.NewPCG(9, 2)), f, sizes, extreme)
	require.Equal(t, len(a), len(b))
	var ran bool
	for _, k := range kernelSets() {
		if k.Q8_0xNPre == nil {
			continue
		}
		ran = true
		t.Run(k.Name, func(t *testing.T) {
			checkXN(t, f, k, "Q8_0xNPre", a, b, func(w []byte, x []quant.BlockQ8_0, n int, out *[8]float32) {
				p := make([]byte, quant.Q8_0PreBytes(len(x)))
				quant.PrepareQ8_0(x, p)
				k.Q8_0xNPre(w, p, n, out)
			})
		})
	}
	if !ran {
		t.Skip("no kernel set here has Q8_0xNPre")
	}
}

// TestQ8_0xNPreBadInputPanics checks that PrepareQ8_0 panics on a partial
// group and Q8_0xNPre on a row one byte short and on activation counts out
// of range or not dividing the prepared bytes, and that Q8_0xNPre gives
// the known result of a constant row.
func TestQ8_0xNPreBadInputPanics(t *testing.T) {
	f := &kernelFields[0]
	const nb = 16
	c := f.blockCase("ones", nb, func() byte { return 1 }, func(int, int) uint16 { return 0x3c00 }, func(int) int8 { return 1 }, func(int) float32 { return 1 })
	x := make([]quant.BlockQ8_0, 0, 8*nb)
	for range 8 {
		x = append(x, c.q80...)
	}
	require.Panics(t, func() { quant.PrepareQ8_0(x[:9], make([]byte, 1024)) })
	p := make([]byte, quant.Q8_0PreBytes(len(x)))
	quant.PrepareQ8_0(x, p)
	pb := quant.Q8_0PreBytes(nb)
	row := c.w[: len(c.w)-1 : len(c.w)-1]
	for _, k := range kernelSets() {
		if k.Q8_0xNPre == nil {
			continue
		}
		var out [8]float32
		for _, bad := range []struct {
			w []byte
			p []byte
			n int
		}{
			{row, p[:2*pb], 2},
			{c.w, p[:2*pb], 0},
			{c.w, p[:8*pb], 9},
			{c.w, p[:2*pb+288], 2},
		} {
			require.Panics(t, func() { k.Q8_0xNPre(bad.w, bad.p, bad.n, &out) }, "%s: %d bytes, n=%d, row of %d bytes", k.Name, len(bad.p), bad.n, len(bad.w))
		}
		k.Q8_0xNPre(c.w, p, 8, &out)
		for _, v := range out {
			require.Equal(t, float32(nb*32), v, "%s on a constant row", k.Name)
		}
	}
}
