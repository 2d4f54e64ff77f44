package probe

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestReadSum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 0x5eed))
	buf := make([]byte, 1<<16+77)
	for i := range buf {
		buf[i] = byte(r.Uint64())
	}
	for _, n := range []int{0, 127, 128, 256, 4096 + 50, len(buf)} {
		// The independent reference: one sequential wrapping sum of words.
		var want uint64
		for i := 0; i+8 <= n/ReadSumAlign*ReadSumAlign; i += 8 {
			want += binary.LittleEndian.Uint64(buf[i:])
		}
		if got := ReadSum(buf[:n]); got != want {
			t.Errorf("ReadSum(%d bytes) = %#x, want %#x", n, got, want)
		}
		if got := readSumGo(buf[:n/ReadSumAlign*ReadSumAlign]); got != want {
			t.Errorf("readSumGo(%d bytes) = %#x, want %#x", n, got, want)
		}
	}
}

func TestPeakLoops(t *testing.T) {
	for _, n := range []int{0, 1, 2, 30, 1000} {
		var acc float32
		for range n {
			acc = acc*0.5 + 1
		}
		if got := FMALoop(n); got != acc {
			t.Errorf("FMALoop(%d) = %v, want %v", n, got, acc)
		}
		if got := fmaLoopGo(n); got != acc {
			t.Errorf("fmaLoopGo(%d) = %v, want %v", n, got, acc)
		}
		if got, want := DotI8Loop(n), int32(4*n); got != want {
			t.Errorf("DotI8Loop(%d) = %d, want %d", n, got, want)
		}
		if got, want := dotI8LoopGo(n), int32(4*n); got != want {
			t.Errorf("dotI8LoopGo(%d) = %d, want %d", n, got, want)
		}
		if got, want := DotQ8_0Loop(n), int32(4*n); got != want {
			t.Errorf("DotQ8_0Loop(%d) = %d, want %d", n, got, want)
		}
		if got, want := DotVNNILoop(n), int32(4*n); got != want {
			t.Errorf("DotVNNILoop(%d) = %d, want %d (VNNI %v)", n, got, want, HasVNNI())
		}
	}
}
