package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkDotx4Cached applies one in-cache row of benchRowElems elements
// to four activations, with the four-token kernel and with four calls of
// the single-token one, per weight type and kernel set; MB/s counts the
// row once per token, so the two ways' rates compare directly.
func BenchmarkDotx4Cached(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 5))
	var x8 [4][]BlockQ8_0
	var xk [4][]BlockQ8K
	for t := range 4 {
		x8[t] = make([]BlockQ8_0, benchRowElems/32)
		QuantizeQ8_0(randActivation(r, benchRowElems), x8[t])
		xk[t] = make([]BlockQ8K, benchRowElems/QK_K)
		QuantizeQ8K(randActivation(r, benchRowElems), xk[t])
	}
	types := []struct {
		t   Type
		x4  func(k Kernels, w []byte, out *[4]float32)
		one func(k Kernels, w []byte, tok int) float32
	}{
		{Q8_0, func(k Kernels, w []byte, out *[4]float32) { k.Q8_0x4(w, x8[0], x8[1], x8[2], x8[3], out) },
			func(k Kernels, w []byte, tok int) float32 { return k.Q8_0(w, x8[tok]) }},
		{Q2_K, func(k Kernels, w []byte, out *[4]float32) { k.Q2Kx4(w, xk[0], xk[1], xk[2], xk[3], out) },
			func(k Kernels, w []byte, tok int) float32 { return k.Q2K(w, xk[tok]) }},
		{IQ2_XXS, func(k Kernels, w []byte, out *[4]float32) { k.IQ2XXSx4(w, xk[0], xk[1], xk[2], xk[3], out) },
			func(k Kernels, w []byte, tok int) float32 { return k.IQ2XXS(w, xk[tok]) }},
	}
	for _, tc := range types {
		rowBytes, err := tc.t.RowBytes(benchRowElems)
		if err != nil {
			b.Fatal(err)
		}
		w := benchRows(tc.t, 1, rowBytes)
		for _, k := range benchKernelSets() {
			b.Run("type="+tc.t.String()+"/way=x4/kernels="+k.Name, func(b *testing.B) {
				b.SetBytes(int64(4 * len(w)))
				var out [4]float32
				var s float32
				for b.Loop() {
					tc.x4(k, w, &out)
					s += out[0] + out[1] + out[2] + out[3]
				}
				benchSinkF32 = s
			})
			b.Run("type="+tc.t.String()+"/way=1x4/kernels="+k.Name, func(b *testing.B) {
				b.SetBytes(int64(4 * len(w)))
				var s float32
				for b.Loop() {
					for tok := range 4 {
						s += tc.one(k, w, tok)
					}
				}
				benchSinkF32 = s
			})
		}
	}
}

// BenchmarkDotF16x2x3Cached is BenchmarkDotx4Cached for F16 rows: two
// in-cache rows applied to three activations, with F16x2x3 and with six
// calls of F16.
func BenchmarkDotF16x2x3Cached(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 6))
	var x [3][]float32
	for t := range x {
		x[t] = randActivation(r, benchRowElems)
	}
	w := benchRows(F16, 2, 2*benchRowElems)
	w0, w1 := w[:2*benchRowElems], w[2*benchRowElems:]
	for _, k := range benchKernelSets() {
		b.Run("way=x2x3/kernels="+k.Name, func(b *testing.B) {
			b.SetBytes(int64(3 * len(w)))
			var out [6]float32
			var s float32
			for b.Loop() {
				k.F16x2x3(w0, w1, x[0], x[1], x[2], &out)
				s += out[0] + out[5]
			}
			benchSinkF32 = s
		})
		b.Run("way=1x6/kernels="+k.Name, func(b *testing.B) {
			b.SetBytes(int64(3 * len(w)))
			var s float32
			for b.Loop() {
				for tok := range x {
					s += k.F16(w0, x[tok]) + k.F16(w1, x[tok])
				}
			}
			benchSinkF32 = s
		})
	}
}

// The dot benchmarks stream a weight matrix of about benchWeightBytes, far
// larger than any cache, computing one dot per row of benchRowElems elements,
// so the MB/s they report is weight bytes per second and can be set against
// BenchmarkReadBaseline and BenchmarkMemmove, the memory-bandwidth ceilings.
const (
	benchWeightBytes = 64 << 20
	benchRowElems    = 4096
)

// Sinks keep benchmark results alive.
var (
	benchSinkF32 float32
	benchSinkU64 uint64
)

// benchMatrix returns a random weight matrix of type t with rows of
// benchRowElems elements and about benchWeightBytes in all (benchRows).
func benchMatrix(b *testing.B, t Type) (w []byte, rowBytes, rows int) {
	b.Helper()
	rowBytes, err := t.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	rows = benchWeightBytes / rowBytes
	return benchRows(t, rows, rowBytes), rowBytes, rows
}

// benchRows returns rows random weight rows of type t and rowBytes bytes
// each, with every f16 field a finite normal number (subnormals would slow
// float code).
func benchRows(t Type, rows, rowBytes int) []byte {
	w := make([]byte, rows*rowBytes)
	r := rand.New(rand.NewPCG(1, uint64(t)))
	for i := 0; i+8 <= len(w); i += 8 {
		binary.LittleEndian.PutUint64(w[i:], r.Uint64())
	}
	// f16 with a random sign and mantissa and a magnitude in [2^-6, 2^-5).
	sane := func(p []byte) {
		h := binary.LittleEndian.Uint16(p)&0x83ff | 9<<10
		binary.LittleEndian.PutUint16(p, h)
	}
	bb := t.BlockBytes()
	for off := 0; off < len(w); off += bb {
		blk := w[off : off+bb]
		switch t {
		case F16, Q8_0, IQ2_XXS:
			sane(blk[0:])
		case Q2_K:
			sane(blk[80:])
			sane(blk[82:])
		case Q4_K:
			sane(blk[0:])
			sane(blk[2:])
		case F32:
			binary.LittleEndian.PutUint32(blk, math.Float32bits(float32(r.NormFloat64())))
		}
	}
	return w
}

// benchVector returns a random activation of benchRowElems elements.
func benchVector() []float32 {
	return randActivation(rand.New(rand.NewPCG(2, 3)), benchRowElems)
}

// benchKernelSets returns the kernel sets the dot benchmarks compare: the
// pure-Go one and every vector kernel set this CPU can run. Each runs
// as a sub-benchmark named kernels=NAME, so that benchstat -col /kernels
// sets them side by side.
func benchKernelSets() []Kernels {
	return append([]Kernels{GenericKernels()}, VectorKernelSets()...)
}

// benchDotQ8K benchmarks a Q8_K-activation kernel over a matrix of type t.
func benchDotQ8K(b *testing.B, t Type, dot func([]byte, []BlockQ8K) float32) {
	w, rowBytes, rows := benchMatrix(b, t)
	y := make([]BlockQ8K, benchRowElems/QK_K)
	QuantizeQ8K(benchVector(), y)
	b.SetBytes(int64(len(w)))
	var s float32
	for b.Loop() {
		for r := range rows {
			s += dot(w[r*rowBytes:(r+1)*rowBytes], y)
		}
	}
	benchSinkF32 = s
}

// benchDotFloat benchmarks a float-activation kernel over a matrix of type t.
func benchDotFloat(b *testing.B, t Type, dot func([]byte, []float32) float32) {
	w, rowBytes, rows := benchMatrix(b, t)
	x := benchVector()
	b.SetBytes(int64(len(w)))
	var s float32
	for b.Loop() {
		for r := range rows {
			s += dot(w[r*rowBytes:(r+1)*rowBytes], x)
		}
	}
	benchSinkF32 = s
}

// benchSetsQ8K runs benchDotQ8K on the kernel that dot picks from each
// kernel set.
func benchSetsQ8K(b *testing.B, t Type, dot func(Kernels) func([]byte, []BlockQ8K) float32) {
	for _, k := range benchKernelSets() {
		b.Run("kernels="+k.Name, func(b *testing.B) { benchDotQ8K(b, t, dot(k)) })
	}
}

// benchSetsFloat runs benchDotFloat on the kernel that dot picks from each
// kernel set.
func benchSetsFloat(b *testing.B, t Type, dot func(Kernels) func([]byte, []float32) float32) {
	for _, k := range benchKernelSets() {
		b.Run("kernels="+k.Name, func(b *testing.B) { benchDotFloat(b, t, dot(k)) })
	}
}

func BenchmarkDotQ8_0(b *testing.B) {
	w, rowBytes, rows := benchMatrix(b, Q8_0)
	y := make([]BlockQ8_0, benchRowElems/32)
	QuantizeQ8_0(benchVector(), y)
	for _, k := range benchKernelSets() {
		b.Run("kernels="+k.Name, func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			var s float32
			for b.Loop() {
				for r := range rows {
					s += k.Q8_0(w[r*rowBytes:(r+1)*rowBytes], y)
				}
			}
			benchSinkF32 = s
		})
	}
}

func BenchmarkDotQ2K(b *testing.B) {
	benchSetsQ8K(b, Q2_K, func(k Kernels) func([]byte, []BlockQ8K) float32 { return k.Q2K })
}

func BenchmarkDotIQ2XXS(b *testing.B) {
	benchSetsQ8K(b, IQ2_XXS, func(k Kernels) func([]byte, []BlockQ8K) float32 { return k.IQ2XXS })
}

func BenchmarkDotQ4K(b *testing.B) {
	benchSetsQ8K(b, Q4_K, func(k Kernels) func([]byte, []BlockQ8K) float32 { return k.Q4K })
}

func BenchmarkDotF16(b *testing.B) {
	benchSetsFloat(b, F16, func(k Kernels) func([]byte, []float32) float32 { return k.F16 })
}

func BenchmarkDotF32(b *testing.B) {
	benchSetsFloat(b, F32, func(k Kernels) func([]byte, []float32) float32 { return k.F32 })
}

// BenchmarkDotCached runs each kernel set on one row of benchRowElems
// elements that stays in the L1 cache, as prefill does when it applies a
// row to every token of a batch: it measures the kernels' arithmetic
// without the memory-bandwidth ceiling of the streaming benchmarks.
func BenchmarkDotCached(b *testing.B) {
	x := benchVector()
	y8 := make([]BlockQ8_0, len(x)/32)
	QuantizeQ8_0(x, y8)
	yk := make([]BlockQ8K, len(x)/QK_K)
	QuantizeQ8K(x, yk)
	row := func(t Type) []byte {
		rowBytes, err := t.RowBytes(benchRowElems)
		if err != nil {
			b.Fatal(err)
		}
		return benchRows(t, 1, rowBytes)
	}
	types := []struct {
		name string
		t    Type
		dot  func(Kernels, []byte) float32
	}{
		{"Q8_0", Q8_0, func(k Kernels, w []byte) float32 { return k.Q8_0(w, y8) }},
		{"Q2_K", Q2_K, func(k Kernels, w []byte) float32 { return k.Q2K(w, yk) }},
		{"Q4_K", Q4_K, func(k Kernels, w []byte) float32 { return k.Q4K(w, yk) }},
		{"IQ2_XXS", IQ2_XXS, func(k Kernels, w []byte) float32 { return k.IQ2XXS(w, yk) }},
		{"F16", F16, func(k Kernels, w []byte) float32 { return k.F16(w, x) }},
		{"F32", F32, func(k Kernels, w []byte) float32 { return k.F32(w, x) }},
	}
	for _, tc := range types {
		w := row(tc.t)
		for _, k := range benchKernelSets() {
			b.Run("type="+tc.name+"/kernels="+k.Name, func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				var s float32
				for b.Loop() {
					s += tc.dot(k, w)
				}
				benchSinkF32 = s
			})
		}
	}
}

// BenchmarkReadBaseline sums a benchWeightBytes buffer as uint64 words: the
// rate at which a plain loop can stream memory. Four independent sums keep
// the loop from being bound by one chain of dependent adds.
func BenchmarkReadBaseline(b *testing.B) {
	buf := make([]uint64, benchWeightBytes/8)
	for i := range buf {
		buf[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	b.SetBytes(benchWeightBytes)
	var s0, s1, s2, s3 uint64
	for b.Loop() {
		for i := 0; i+4 <= len(buf); i += 4 {
			v := (*[4]uint64)(buf[i:])
			s0 += v[0]
			s1 += v[1]
			s2 += v[2]
			s3 += v[3]
		}
	}
	benchSinkU64 = s0 + s1 + s2 + s3
}

// BenchmarkMemmove copies a benchWeightBytes buffer with copy; MB/s counts
// the bytes copied (each is read once and written once).
func BenchmarkMemmove(b *testing.B) {
	src := make([]byte, benchWeightBytes)
	dst := make([]byte, benchWeightBytes)
	for i := range src {
		src[i] = byte(i)
	}
	// Fault the destination's pages in before timing.
	copy(dst, src)
	b.SetBytes(benchWeightBytes)
	for b.Loop() {
		copy(dst, src)
	}
	benchSinkU64 = uint64(dst[len(dst)-1])
}

// BenchmarkQuantizeQ8K compares the per-block Go code (impl=go) with
// QuantizeQ8K (impl=best: the SIMD form where the CPU has one).
func BenchmarkQuantizeQ8K(b *testing.B) {
	x := benchVector()
	y := make([]BlockQ8K, len(x)/QK_K)
	for _, impl := range []struct {
		name string
		run  func()
	}{
		{"go", func() {
			for i := range y {
				quantizeQ8KBlock((*[QK_K]float32)(x[QK_K*i:]), &y[i])
			}
		}},
		{"best", func() { QuantizeQ8K(x, y) }},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				impl.run()
			}
			benchSinkF32 = y[0].D
		})
	}
}

// BenchmarkQuantizeQ8_0 compares the per-block Go code (impl=go) with
// QuantizeQ8_0 (impl=best: the SIMD form where the CPU has one).
func BenchmarkQuantizeQ8_0(b *testing.B) {
	x := benchVector()
	y := make([]BlockQ8_0, len(x)/32)
	for _, impl := range []struct {
		name string
		run  func()
	}{
		{"go", func() {
			for i := range y {
				quantizeQ8_0Act(x[32*i:32*i+32], &y[i])
			}
		}},
		{"best", func() { QuantizeQ8_0(x, y) }},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				impl.run()
			}
			benchSinkF32 = y[0].D
		})
	}
}
