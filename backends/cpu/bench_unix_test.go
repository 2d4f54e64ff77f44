//go:build unix

package cpu

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ds4-go/ds4/quant"
)

// BenchmarkMatMulQ8_0Decode is a batched decode step's output head in
// small: 32768 rows of 4096 Q8_0 weights (136 MiB, past the caches) times
// n = 1..8 inputs on every worker, way=pre with the kernel set as it is
// (Q8_0xNPre from preMinQ8_0 to preMaxQ8_0 inputs, where it has it),
// way=tile without Q8_0xNPre (the tiles from tileMinQ8_0 inputs on),
// way=xn with Q8_0xN for every n (the set without its tiles either).
// ns/col is the time per row and input; MB/s counts the weights once per
// call, cpu-ns/col the process's CPU time per row and input, which other
// processes on a shared machine disturb less than the elapsed time.
func BenchmarkMatMulQ8_0Decode(b *testing.B) {
	const cols, rows = 4096, 32768
	w := benchWeights(b, quant.Q8_0, cols, rows)
	x := randVec(newRand(1), quant.Q8_0xNMax*cols, 1)
	dst := make([]float32, quant.Q8_0xNMax*rows)
	pre := quant.BestKernels()
	k := pre
	k.Q8_0xNPre = nil
	xn := k
	xn.PackQ8_0Tile, xn.Q8_0Tile = nil, nil
	for n := 1; n <= quant.Q8_0xNMax; n++ {
		for _, way := range []struct {
			name string
			k    quant.Kernels
		}{{"pre", pre}, {"tile", k}, {"xn", xn}} {
			if n < tileMinQ8_0 && way.name == "xn" {
				continue // the same path as way=tile
			}
			if way.name == "pre" && (pre.Q8_0xNPre == nil || n < preMinQ8_0 || n > preMaxQ8_0) {
				continue // the same path as way=tile
			}
			b.Run(fmt.Sprintf("n=%d/way=%s", n, way.name), func(b *testing.B) {
				be := NewWithKernels(0, way.k)
				defer be.Close()
				b.SetBytes(int64(len(w.Data)))
				cpu0 := cpuTime()
				for b.Loop() {
					be.MatMul(dst, w, x[:n*cols], n)
				}
				benchSink = dst[0]
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*n), "ns/col")
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*rows*n), "cpu-ns/col")
			})
		}
	}
}

// cpuTime returns the user and system time this process has used.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
