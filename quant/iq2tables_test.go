package quant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"testing"
)

func TestIQ2XXSGridChecksum(t *testing.T) {
	var buf [2048]byte
	for i, v := range iq2xxsGrid {
		binary.LittleEndian.PutUint64(buf[8*i:], v)
	}
	sum := sha256.Sum256(buf[:])
	const want = "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("iq2xxs grid sha256 = %s, want %s", got, want)
	}
}

func TestIQ2XXSKGridMatchesGrid(t *testing.T) {
	mags := [3]uint64{0x08, 0x19, 0x2b}
	for k := range 256 {
		var g uint64
		for i := range 8 {
			l := iq2xxsKGrid[k] >> (2 * i) & 3
			if l > 2 {
				t.Fatalf("kgrid[%d] has level 3", k)
			}
			g |= mags[l] << (8 * i)
		}
		if g != iq2xxsGrid[k] {
			t.Fatalf("kgrid[%d] = %#x decodes to %#x, grid has %#x", k, iq2xxsKGrid[k], g, iq2xxsGrid[k])
		}
		if k > 0 && iq2xxsKGrid[k] <= iq2xxsKGrid[k-1] {
			t.Fatalf("kgrid not strictly ascending at %d", k)
		}
	}
}

func TestIQ2Sign(t *testing.T) {
	for s := range uint32(128) {
		want := uint8(s) | uint8(bits.OnesCount32(s)&1)<<7
		if got := iq2Sign(s); got != want {
			t.Fatalf("iq2Sign(%d) = %#x, want %#x", s, got, want)
		}
		if bits.OnesCount8(iq2Sign(s))%2 != 0 {
			t.Fatalf("iq2Sign(%d) has odd parity", s)
		}
	}
}
