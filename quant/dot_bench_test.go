package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

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
// benchRowElems elements and about benchWeightBytes in all, with every f16
// field a finite normal number (subnormals would slow float code).
func benchMatrix(b *testing.B, t Type) (w []byte, rowBytes, rows int) {
	b.Helper()
	rowBytes, err := t.RowBytes(benchRowElems)
	if err != nil {
		b.Fatal(err)
	}
	rows = benchWeightBytes / rowBytes
	w = make([]byte, rows*rowBytes)
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
	return w, rowBytes, rows
}

// benchVector returns a random activation of benchRowElems elements.
func benchVector() []float32 {
	return randActivation(rand.New(rand.NewPCG(2, 3)), benchRowElems)
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

func BenchmarkDotQ8_0(b *testing.B) {
	w, rowBytes, rows := benchMatrix(b, Q8_0)
	y := make([]BlockQ8_0, benchRowElems/32)
	QuantizeQ8_0(benchVector(), y)
	b.SetBytes(int64(len(w)))
	var s float32
	for b.Loop() {
		for r := range rows {
			s += DotQ8_0(w[r*rowBytes:(r+1)*rowBytes], y)
		}
	}
	benchSinkF32 = s
}

func BenchmarkDotQ2K(b *testing.B)    { benchDotQ8K(b, Q2_K, DotQ2K) }
func BenchmarkDotIQ2XXS(b *testing.B) { benchDotQ8K(b, IQ2_XXS, DotIQ2XXS) }
func BenchmarkDotQ4K(b *testing.B)    { benchDotQ8K(b, Q4_K, DotQ4K) }
func BenchmarkDotF16(b *testing.B)    { benchDotFloat(b, F16, DotF16) }
func BenchmarkDotF32(b *testing.B)    { benchDotFloat(b, F32, DotF32) }

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

func BenchmarkQuantizeQ8K(b *testing.B) {
	x := benchVector()
	y := make([]BlockQ8K, len(x)/QK_K)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		QuantizeQ8K(x, y)
	}
	benchSinkF32 = y[0].D
}

func BenchmarkQuantizeQ8_0(b *testing.B) {
	x := benchVector()
	y := make([]BlockQ8_0, len(x)/32)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		QuantizeQ8_0(x, y)
	}
	benchSinkF32 = y[0].D
}
