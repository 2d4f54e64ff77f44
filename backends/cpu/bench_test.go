package cpu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// benchSink keeps benchmark results alive.
var benchSink float32

// benchWeights returns a cols×rows matrix of type t filled with random bytes,
// every block's f16 scale set to a finite normal number of magnitude in
// [2^-6, 2^-5) (random scales could be Inf/NaN or slow subnormals). Quantizing
// real data would take far longer than the benchmark, and the dot kernels'
// cost does not depend on the values.
func benchWeights(b *testing.B, t quant.Type, cols, rows int) backends.Matrix {
	b.Helper()
	rb, err := t.RowBytes(cols)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, rb*rows)
	r := newRand(uint64(t))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	bb := t.BlockBytes()
	for off := 0; off < len(data); off += bb {
		// Q8_0 and IQ2_XXS both start their block with the f16 scale.
		h := binary.LittleEndian.Uint16(data[off:])&0x83ff | 9<<10
		binary.LittleEndian.PutUint16(data[off:], h)
	}
	m, err := backends.NewMatrix("bench", t, []uint64{uint64(cols), uint64(rows)}, data)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchMatVec(b *testing.B, t quant.Type, cols, rows int) {
	w := benchWeights(b, t, cols, rows)
	x := randVec(newRand(1), cols, 1)
	dst := make([]float32, rows)
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			be := New(workers)
			defer be.Close()
			b.SetBytes(int64(len(w.Data)))
			b.ReportAllocs()
			for b.Loop() {
				be.MatVec(dst, w, x)
			}
			benchSink = dst[0]
		})
	}
}

// BenchmarkMatVecQ8_0 is an attention-sized 4096×4096 Q8_0 product (MB/s =
// weight bytes per second).
func BenchmarkMatVecQ8_0(b *testing.B) { benchMatVec(b, quant.Q8_0, 4096, 4096) }

// BenchmarkMatVecIQ2_XXS is one routed expert's gate/up projection: 2048
// rows of 4096 IQ2_XXS weights.
func BenchmarkMatVecIQ2_XXS(b *testing.B) { benchMatVec(b, quant.IQ2_XXS, 4096, 2048) }
