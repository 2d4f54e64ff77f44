package quant

import (
	"math"
	"testing"
)

// refF32ToF16 rounds through float64 arithmetic: an independent check of the
// bit-twiddling encoder.
func refF32ToF16(f float32) uint16 {
	if math.IsNaN(float64(f)) {
		return uint16(math.Float32bits(f)>>16)&0x8000 | 0x7e00
	}
	sign := uint16(0)
	x := float64(f)
	if math.Signbit(x) {
		sign = 0x8000
		x = -x
	}
	if x == 0 {
		return sign
	}
	// Candidates: all 2^15 non-negative halves; find the nearest by
	// binary search over the monotone finite range.
	lo, hi := uint16(0), uint16(0x7c00)
	for lo < hi {
		mid := (lo + hi) / 2
		if float64(F16ToF32(mid)) < x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	// lo is the first half ≥ x (0x7c00 = Inf if none finite).
	if lo == 0 {
		return sign
	}
	up, down := lo, lo-1
	if lo == 0x7c00 {
		// Above max finite: round to Inf only at or past 65520.
		if x >= 65520 {
			return sign | 0x7c00
		}
		return sign | 0x7bff
	}
	du := float64(F16ToF32(up)) - x
	dd := x - float64(F16ToF32(down))
	switch {
	case du < dd:
		return sign | up
	case dd < du:
		return sign | down
	case up&1 == 0:
		return sign | up
	}
	return sign | down
}

func TestF16RoundTripAllHalves(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		got := F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x encoded to non-NaN %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("half %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	// Every float32 whose top 19 bits vary, with low bits chosen to land on
	// exact ties, just above and just below them.
	lows := []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000}
	for hi := uint32(0); hi < 1<<19; hi += 7 {
		for _, lo := range lows {
			b := hi<<13 | lo
			f := math.Float32frombits(b)
			if got, want := F32ToF16(f), refF32ToF16(f); got != want {
				t.Fatalf("F32ToF16(%g = %#08x) = %#04x, want %#04x", f, b, got, want)
			}
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie → even
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie → even (up)
		{math.Float32frombits(0x3f808001), 0x3f81},
		{float32(math.Inf(1)), 0x7f80},
	}
	for _, c := range cases {
		if got := F32ToBF16(c.in); got != c.want {
			t.Errorf("F32ToBF16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
		if c.in == c.in && BF16ToF32(c.want) != math.Float32frombits(uint32(c.want)<<16) {
			t.Errorf("BF16ToF32(%#04x) wrong", c.want)
		}
	}
	if got := F32ToBF16(math.Float32frombits(0x7f800001)); got != 0x7fc0 {
		t.Errorf("NaN quieting: got %#04x", got)
	}
}
