package harness

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/quant"
)

// KernelRate is one weight type's share of a decode step and how fast the
// dot kernel that reads it runs with its rows in cache, where memory
// bandwidth cannot be what limits it.
type KernelRate struct {
	Type        string  `parquet:"type"`
	DecodeBytes int64   `parquet:"decode_bytes"` // bytes of this type one decode step reads
	GBs1        float64 `parquet:"gbs_1"`        // weight GB/s of one goroutine; 0 for a type read without a dot (a lookup table)
	GBsAll      float64 `parquet:"gbs_all"`      // weight GB/s of all probe goroutines, each on its own rows
	FloorMs     float64 `parquet:"floor_ms"`     // DecodeBytes at the lesser of GBsAll and the all-threads read bandwidth
}

// KernelRecord is one row of a roofline run's kernel table.
type KernelRecord struct {
	RunMeta
	KernelRate
	Kernels string `parquet:"kernels"` // the kernel set's name
}

// RooflineKernelTable is the directory of roofline runs' kernel rows under
// a results root.
const RooflineKernelTable = "roofline_kernels"

// kernelProbeBytes is the size of the weight rows each kernel probe
// thread sweeps: well inside a core's L2 cache (512 KiB and up on the
// machines this runs on), so the kernels' arithmetic is what is timed.
const kernelProbeBytes = 256 << 10

// kernelProbeCols is the row length of the kernel probes, the model width.
const kernelProbeCols = 4096

// MeasureKernels times the dot kernel of k for every type in byType on
// rows in cache, with one goroutine and with cfg.Threads, and returns the
// rates with their floors (at mc's all-threads read bandwidth), largest
// DecodeBytes first; step, when not nil, is told each probe's name. Each
// timed run lasts at least a quarter of cfg.MinTime.
func MeasureKernels(ctx context.Context, k quant.Kernels, byType map[quant.Type]int64, mc Machine, cfg MachineConfig, step func(string)) ([]KernelRate, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if step == nil {
		step = func(string) {}
	}
	types := make([]quant.Type, 0, len(byType))
	for t, n := range byType {
		if n > 0 {
			types = append(types, t)
		}
	}
	slices.SortFunc(types, func(a, b quant.Type) int {
		return cmp.Or(cmp.Compare(byType[b], byType[a]), cmp.Compare(a, b))
	})
	rates := make([]KernelRate, 0, len(types))
	for _, t := range types {
		r := KernelRate{Type: t.String(), DecodeBytes: byType[t]}
		if !t.Emittable() {
			// Rows of lookup tables (I32) are read, not multiplied.
			rates = append(rates, r)
			continue
		}
		probes := make([]*kernelProbe, cfg.Threads)
		for i := range probes {
			p, err := newKernelProbe(k, t, uint64(i))
			if err != nil {
				return nil, fmt.Errorf("harness: roofline: %v kernel: %w", t, err)
			}
			probes[i] = p
		}
		for _, threads := range []int{1, cfg.Threads} {
			step(fmt.Sprintf("%v dot kernel, %d thread(s)", t, threads))
			for range cfg.Trials {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("harness: roofline: %w", err)
				}
				bytes, el := sweepProbes(probes[:threads], cfg.MinTime/4)
				gbs := bytes / el.Seconds() / 1e9
				if threads == 1 {
					r.GBs1 = max(r.GBs1, gbs)
				}
				if threads == cfg.Threads {
					r.GBsAll = max(r.GBsAll, gbs)
				}
			}
		}
		rates = append(rates, r)
	}
	SetFloors(rates, mc)
	return rates, nil
}

// SetFloors sets each rate's FloorMs from mc's all-threads read bandwidth:
// its bytes at the lesser of its kernel's rate and the bandwidth, or at
// the bandwidth for a type read without a kernel (GBsAll 0).
func SetFloors(rates []KernelRate, mc Machine) {
	for i := range rates {
		r := &rates[i]
		rate := mc.ReadGBsAll
		if r.GBsAll > 0 {
			rate = min(r.GBsAll, rate)
		}
		r.FloorMs = 0
		if rate > 0 {
			r.FloorMs = float64(r.DecodeBytes) / (rate * 1e9) * 1e3
		}
	}
}

// KernelLimit returns the decode rate in tokens/s that the kernels allow:
// one step takes at least the sum of its types' floors, each type's bytes
// streamed at the lesser of its kernel's rate and the read bandwidth. It
// counts nothing but the weight dots, so it is an upper bound, and at
// most the speed of light.
func KernelLimit(rates []KernelRate) float64 {
	var ms float64
	for _, r := range rates {
		if r.FloorMs <= 0 && r.DecodeBytes > 0 {
			return 0
		}
		ms += r.FloorMs
	}
	if ms == 0 {
		return 0
	}
	return 1e3 / ms
}

// kernelProbe is one goroutine's weight rows of one type and the dot that
// reads them.
type kernelProbe struct {
	w        []byte
	rowBytes int
	dot      func(row []byte) float32
}

// newKernelProbe quantizes kernelProbeBytes of seeded random weights to t
// and binds k's dot for t to a random activation quantized as the backend
// quantizes it.
func newKernelProbe(k quant.Kernels, t quant.Type, seed uint64) (*kernelProbe, error) {
	rowBytes, err := t.RowBytes(kernelProbeCols)
	if err != nil {
		return nil, err
	}
	rows := max(1, kernelProbeBytes/rowBytes)
	r := rand.New(rand.NewPCG(seed, uint64(t)))
	data := make([]float32, rows*kernelProbeCols)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	x := data[:kernelProbeCols:kernelProbeCols]
	w, err := quant.Quantize(t, data, kernelProbeCols, nil)
	if err != nil {
		return nil, err
	}
	p := &kernelProbe{w: w, rowBytes: rowBytes}
	switch t {
	case quant.Q8_0:
		y := make([]quant.BlockQ8_0, kernelProbeCols/32)
		quant.QuantizeQ8_0(x, y)
		p.dot = func(row []byte) float32 { return k.Q8_0(row, y) }
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		y := make([]quant.BlockQ8K, kernelProbeCols/quant.QK_K)
		quant.QuantizeQ8K(x, y)
		f := map[quant.Type]func([]byte, []quant.BlockQ8K) float32{quant.Q2_K: k.Q2K, quant.Q4_K: k.Q4K, quant.IQ2_XXS: k.IQ2XXS}[t]
		p.dot = func(row []byte) float32 { return f(row, y) }
	case quant.F16:
		p.dot = func(row []byte) float32 { return k.F16(row, x) }
	case quant.F32:
		p.dot = func(row []byte) float32 { return k.F32(row, x) }
	case quant.BF16:
		p.dot = func(row []byte) float32 { return cpu.DotBF16(row, x) }
	default:
		return nil, fmt.Errorf("no dot kernel for %v", t)
	}
	return p, nil
}

// sweep runs the dot over every row passes times.
func (p *kernelProbe) sweep(passes int) {
	var s float32
	for range passes {
		for off := 0; off+p.rowBytes <= len(p.w); off += p.rowBytes {
			s += p.dot(p.w[off : off+p.rowBytes])
		}
	}
	runtime.KeepAlive(s)
}

// sweepProbes sweeps each probe on its own goroutine, with as many passes
// as make one pass's time at least minTime, and returns the weight bytes
// read and the time taken.
func sweepProbes(probes []*kernelProbe, minTime time.Duration) (float64, time.Duration) {
	p0 := probes[0]
	passes := 1
	for {
		start := time.Now()
		p0.sweep(passes)
		el := time.Since(start)
		if el >= minTime/8 || passes > 1<<30 {
			passes = max(passes, int(float64(passes)*minTime.Seconds()/max(el.Seconds(), 1e-9)))
			break
		}
		passes *= 4
	}
	start := time.Now()
	parallelRange(len(probes), len(probes), func(lo, hi int) {
		for _, p := range probes[lo:hi] {
			p.sweep(passes)
		}
	})
	el := time.Since(start)
	var bytes float64
	for _, p := range probes {
		bytes += float64(passes * (len(p.w) / p.rowBytes * p.rowBytes))
	}
	return bytes, el
}
