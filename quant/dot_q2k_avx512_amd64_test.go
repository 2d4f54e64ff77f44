//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The AVX-512 Q2_K kernels must return DotQ2K's result bit for bit (any
// NaN for a NaN) and the AVX2 kernel's bit for bit, NaN payloads included:
// the kernel sets share their float order, so a model decodes to the same
// tokens whichever set a CPU selects. The four-token kernel must give
// each token the single-token kernel's bits. DotQ2K itself is checked
// against an independent decoding in dot_test.go, and TestQ2KAVX512EachElement
// checks the element layout against DequantizeRow.

// q2kAVX512 skips tb unless the CPU runs the AVX-512 and the AVX2 kernels.
func q2kAVX512(tb testing.TB) {
	tb.Helper()
	if !hasKernelSet("avx512") {
		tb.Skip("CPU lacks a feature of the avx512 kernel set")
	}
}

// q2kCaseGen makes the rows and activations of one kind of Q2_K case.
type q2kCaseGen struct {
	name  string
	wbyte func(r *rand.Rand) byte                // scale and code bytes
	f16   func(r *rand.Rand, b, slot int) uint16 // d (slot 0) and dmin (slot 1) of block b
	code  func(r *rand.Rand, i int) int8         // activation code of element i of the row
	d     func(r *rand.Rand, b, tok int) float32 // activation scale of block b of token tok
	// bsums, if not nil, gives the 16-element sums as stored instead of
	// the sums of the codes: the kernels must use them as they are.
	bsums func(r *rand.Rand, b, g int) int16
}

// q2kRandF16 returns a finite f16 of random sign and magnitude in
// [2^-20, 2^-2), subnormals included.
func q2kRandF16(r *rand.Rand) uint16 {
	v := float32(1+r.Float64()) * float32(math.Ldexp(1, -r.IntN(18)-3))
	if r.IntN(2) == 0 {
		v = -v
	}
	return F32ToF16(v)
}

// q2kRandD returns an activation scale of random sign and magnitude in
// 2^-20..2^10.
func q2kRandD(r *rand.Rand) float32 {
	v := float32(1+r.Float64()) * float32(math.Ldexp(1, r.IntN(30)-20))
	if r.IntN(2) == 0 {
		v = -v
	}
	return v
}

// q2kCaseGens returns the kinds of case: random ones, extreme codes,
// scales and sums, and special f16 and activation scales in either slot.
func q2kCaseGens() []q2kCaseGen {
	randByte := func(r *rand.Rand) byte { return byte(r.Uint32()) }
	constByte := func(v byte) func(*rand.Rand) byte { return func(*rand.Rand) byte { return v } }
	randF16 := func(r *rand.Rand, _, _ int) uint16 { return q2kRandF16(r) }
	randCode := func(r *rand.Rand, _ int) int8 { return int8(r.Uint32()) }
	constCode := func(v int8) func(*rand.Rand, int) int8 { return func(*rand.Rand, int) int8 { return v } }
	randD := func(r *rand.Rand, _, _ int) float32 { return q2kRandD(r) }
	constD := func(v float32) func(*rand.Rand, int, int) float32 {
		return func(*rand.Rand, int, int) float32 { return v }
	}
	// special puts h into the given slot of every third block, the first
	// included, and random finite scales elsewhere.
	special := func(slot int, h uint16) func(*rand.Rand, int, int) uint16 {
		return func(r *rand.Rand, b, s int) uint16 {
			if s == slot && b%3 == 0 {
				return h
			}
			return q2kRandF16(r)
		}
	}
	// Quiet NaNs whose payloads and signs differ from block to block,
	// from slot to slot and from token to token: where two meet, the one
	// that survives tells the operand order of the float step.
	nanF16 := func(_ *rand.Rand, b, slot int) uint16 {
		return 0x7e00 | uint16(b&1)<<15 | uint16(2*b+slot+1)&0x1ff
	}
	nanD := func(_ *rand.Rand, b, tok int) float32 {
		return math.Float32frombits(0x7fc00000 | uint32(b&1)<<31 | uint32(4*b+tok+1)<<5)
	}
	return []q2kCaseGen{
		{name: "random", wbyte: randByte, f16: randF16, code: randCode, d: randD},
		{name: "random-raw-bsums", wbyte: randByte, f16: randF16, code: randCode, d: randD,
			bsums: func(r *rand.Rand, _, _ int) int16 { return int16(r.Uint32()) }},
		{name: "bsums-extreme", wbyte: constByte(0xff), f16: randF16, code: randCode, d: randD,
			bsums: func(_ *rand.Rand, b, g int) int16 {
				if (b+g)%2 == 0 {
					return math.MinInt16
				}
				return math.MaxInt16
			}},
		// Byte 0xff: codes 3, scales 15 and mins 15 everywhere.
		{name: "all-3-scale-15-act-min", wbyte: constByte(0xff), f16: randF16, code: constCode(-128), d: randD},
		{name: "all-3-scale-15-act-max", wbyte: constByte(0xff), f16: randF16, code: constCode(127), d: randD},
		{name: "all-3-scale-15-act-alternating", wbyte: constByte(0xff), f16: randF16,
			code: func(_ *rand.Rand, i int) int8 { return int8(-128 + 255*(i&1)) }, d: randD},
		{name: "codes-0-act-min", wbyte: constByte(0x00), f16: randF16, code: constCode(-128), d: randD},
		{name: "random-act-min", wbyte: randByte, f16: randF16, code: constCode(-128), d: randD},
		{name: "random-act-alternating", wbyte: randByte, f16: randF16,
			code: func(_ *rand.Rand, i int) int8 { return int8(127 - 255*(i&1)) }, d: randD},
		{name: "even-scales", wbyte: randByte, f16: func(*rand.Rand, int, int) uint16 { return 0x2c00 }, code: randCode, d: constD(0.25)},
		{name: "d-inf", wbyte: randByte, f16: special(0, 0x7c00), code: randCode, d: randD},
		{name: "dmin-inf", wbyte: randByte, f16: special(1, 0x7c00), code: randCode, d: randD},
		{name: "d-neg-inf", wbyte: randByte, f16: special(0, 0xfc00), code: randCode, d: randD},
		{name: "dmin-neg-inf", wbyte: randByte, f16: special(1, 0xfc00), code: randCode, d: randD},
		{name: "d-nan", wbyte: randByte, f16: special(0, 0x7e00), code: randCode, d: randD},
		{name: "dmin-nan", wbyte: randByte, f16: special(1, 0x7c01), code: randCode, d: randD},
		{name: "d-subnormal", wbyte: randByte, f16: special(0, 0x0001), code: randCode, d: randD},
		{name: "dmin-neg-zero", wbyte: randByte, f16: special(1, 0x8000), code: randCode, d: randD},
		{name: "f16-nan-payloads", wbyte: randByte, f16: nanF16, code: randCode, d: randD},
		{name: "all-nan-payloads", wbyte: randByte, f16: nanF16, code: randCode, d: nanD},
		{name: "act-d-nan-payloads", wbyte: randByte, f16: randF16, code: randCode, d: nanD},
		{name: "act-d-inf", wbyte: randByte, f16: randF16, code: randCode, d: constD(float32(math.Inf(-1)))},
		{name: "act-d-zero", wbyte: randByte, f16: randF16, code: randCode, d: constD(0)},
		{name: "act-d-subnormal", wbyte: randByte, f16: randF16, code: randCode, d: constD(1e-40)},
		{name: "overflow", wbyte: randByte, f16: func(*rand.Rand, int, int) uint16 { return 0x7bff }, code: randCode, d: constD(3e38)},
	}
}

// make returns a row of nb blocks and four activations of g's kind.
func (g *q2kCaseGen) make(r *rand.Rand, nb int) (w []byte, y [4][]BlockQ8K) {
	w = make([]byte, nb*dotQ2KBytes)
	for i := range w {
		w[i] = g.wbyte(r)
	}
	for b := range nb {
		blk := w[b*dotQ2KBytes:]
		binary.LittleEndian.PutUint16(blk[80:], g.f16(r, b, 0))
		binary.LittleEndian.PutUint16(blk[82:], g.f16(r, b, 1))
	}
	for tok := range y {
		y[tok] = make([]BlockQ8K, nb)
		for b := range y[tok] {
			yb := &y[tok][b]
			yb.D = g.d(r, b, tok)
			for i := range yb.Qs {
				yb.Qs[i] = g.code(r, QK_K*b+i)
			}
			for k := range yb.Bsums {
				if g.bsums != nil {
					yb.Bsums[k] = g.bsums(r, b, k)
					continue
				}
				var s int16
				for _, q := range yb.Qs[16*k : 16*k+16] {
					s += int16(q)
				}
				yb.Bsums[k] = s
			}
		}
	}
	return w, y
}

// q2kBlockCounts are the row lengths the cases take: every count from 1
// to 20 (every tail after the four-block steps, several steps), and long
// rows.
var q2kBlockCounts = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 33, 64}

// requireQ2KAVX512 fails t unless the AVX-512 kernels agree with DotQ2K and
// the AVX2 kernels on row w and the four activations y.
func requireQ2KAVX512(t *testing.T, name string, w []byte, y *[4][]BlockQ8K) {
	t.Helper()
	var x4 [4]float32
	dotQ2Kx4AVX512(w, y[0], y[1], y[2], y[3], &x4)
	for tok := range y {
		ref := DotQ2K(w, y[tok])
		avx2 := dotQ2KAVX2(w, y[tok])
		got := dotQ2KAVX512(w, y[tok])
		if math.Float32bits(ref) != math.Float32bits(got) && !(ref != ref && got != got) {
			t.Fatalf("%s token %d: avx512 %v (%#08x), DotQ2K %v (%#08x)", name, tok, got, math.Float32bits(got), ref, math.Float32bits(ref))
		}
		if math.Float32bits(avx2) != math.Float32bits(got) {
			t.Fatalf("%s token %d: avx512 %v (%#08x), avx2 %v (%#08x): want the same bits", name, tok, got, math.Float32bits(got), avx2, math.Float32bits(avx2))
		}
		if math.Float32bits(x4[tok]) != math.Float32bits(got) {
			t.Fatalf("%s token %d: avx512 x4 %v (%#08x), single %v (%#08x): want the same bits", name, tok, x4[tok], math.Float32bits(x4[tok]), got, math.Float32bits(got))
		}
	}
}

func TestQ2KAVX512MatchesReference(t *testing.T) {
	q2kAVX512(t)
	for _, g := range q2kCaseGens() {
		t.Run(g.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(len(g.name))))
			for _, nb := range q2kBlockCounts {
				for rep := range 2 {
					w, y := g.make(r, nb)
					requireQ2KAVX512(t, fmt.Sprintf("nb=%d rep=%d", nb, rep), w, &y)
				}
			}
		})
	}
}

// TestQ2KAVX512EveryScale runs every (scale, min) byte in every one of the
// 16 scale positions, with random codes.
func TestQ2KAVX512EveryScale(t *testing.T) {
	q2kAVX512(t)
	r := rand.New(rand.NewPCG(8, 9))
	raw := q2kCaseGens()[1]
	require.Equal(t, "random-raw-bsums", raw.name)
	const nb = 16
	for rot := range 16 {
		w := randWeightRow(r, Q2_K, nb)
		for b := range nb {
			for k := range 16 {
				// Over the 16 blocks and 16 rotations, position k sees
				// every one of the 256 bytes once.
				w[b*dotQ2KBytes+k] = byte(16*((b+k)%16) + (b+rot)%16)
			}
		}
		_, y := raw.make(r, nb)
		requireQ2KAVX512(t, fmt.Sprintf("rotation %d", rot), w, &y)
	}
}

// TestQ2KAVX512EachElement checks the element layout on its own terms: an
// activation whose only nonzero code sits at element e of block b (with
// D = 1, and d = dmin = 1) gives code·weight e as DequantizeRow decodes it,
// exactly, for every element of a three-block row.
func TestQ2KAVX512EachElement(t *testing.T) {
	q2kAVX512(t)
	r := rand.New(rand.NewPCG(10, 11))
	const nb = 3
	w := randWeightRow(r, Q2_K, nb)
	for b := range nb {
		binary.LittleEndian.PutUint16(w[b*dotQ2KBytes+80:], 0x3c00)
		binary.LittleEndian.PutUint16(w[b*dotQ2KBytes+82:], 0x3c00)
	}
	deq := make([]float32, nb*QK_K)
	require.NoError(t, DequantizeRow(Q2_K, w, deq))
	codes := [4]int8{1, -128, 127, -3}
	var y [4][]BlockQ8K
	for tok := range y {
		y[tok] = make([]BlockQ8K, nb)
		for b := range y[tok] {
			y[tok][b].D = 1
		}
	}
	for e := range nb * QK_K {
		for tok := range y {
			// Token tok probes element e+37·tok (mod the row), so the
			// four-token kernel sees four different elements.
			p := (e + 37*tok) % (nb * QK_K)
			yb := &y[tok][p/QK_K]
			yb.Qs[p%QK_K] = codes[tok]
			yb.Bsums[p%QK_K/16] = int16(codes[tok])
		}
		var x4 [4]float32
		dotQ2Kx4AVX512(w, y[0], y[1], y[2], y[3], &x4)
		for tok := range y {
			p := (e + 37*tok) % (nb * QK_K)
			want := float32(codes[tok]) * deq[p]
			require.Equal(t, want, dotQ2KAVX512(w, y[tok]), "element %d code %d", p, codes[tok])
			require.Equal(t, want, x4[tok], "x4: element %d code %d", p, codes[tok])
			yb := &y[tok][p/QK_K]
			yb.Qs[p%QK_K] = 0
			yb.Bsums[p%QK_K/16] = 0
		}
	}
}

func TestQ2KAVX512ShortAndEmpty(t *testing.T) {
	q2kAVX512(t)
	r := rand.New(rand.NewPCG(12, 13))
	w := randWeightRow(r, Q2_K, 5)
	y := make([]BlockQ8K, 5)
	QuantizeQ8K(randActivation(r, 5*QK_K), y)
	short := w[: len(w)-1 : len(w)-1] // no capacity to reslice into
	require.Panics(t, func() { dotQ2KAVX512(short, y) }, "row one byte short")
	require.Panics(t, func() { dotQ2KAVX512(w[:len(w):len(w)], append(y, y[0])) }, "row one block short")
	var out [4]float32
	require.Panics(t, func() { dotQ2Kx4AVX512(short, y, y, y, y, &out) }, "x4: row one byte short")
	require.Panics(t, func() { dotQ2Kx4AVX512(w, y, y, y[:4], y, &out) }, "x4: activations of unequal lengths")
	require.Zero(t, dotQ2KAVX512(nil, nil))
	out = [4]float32{1, 2, 3, 4}
	dotQ2Kx4AVX512(nil, nil, nil, nil, nil, &out)
	require.Equal(t, [4]float32{}, out)
	// A row longer than the activation: only len(y) blocks count.
	require.Equal(t, math.Float32bits(DotQ2K(w, y[:3])), math.Float32bits(dotQ2KAVX512(w, y[:3])))
}

func TestQ2KAVX512AllocFree(t *testing.T) {
	q2kAVX512(t)
	r := rand.New(rand.NewPCG(14, 15))
	w := randWeightRow(r, Q2_K, 8)
	y := make([]BlockQ8K, 8)
	QuantizeQ8K(randActivation(r, 8*QK_K), y)
	var out [4]float32
	var sink float32
	allocs := testing.AllocsPerRun(100, func() {
		sink += dotQ2KAVX512(w, y)
		dotQ2Kx4AVX512(w, y, y, y, y, &out)
	})
	require.Zero(t, allocs, "allocates (sink %v)", sink+out[0])
}

// FuzzQ2KAVX512 feeds arbitrary weight bytes and activation bytes (read as
// scales, codes and stored 16-element sums) to the AVX-512 kernels and
// holds them to DotQ2K and the AVX2 kernel.
func FuzzQ2KAVX512(f *testing.F) {
	f.Add(make([]byte, 84), []byte{0, 0, 128, 63})
	f.Add(append(make([]byte, 80), 0x00, 0x7c, 0x01, 0x7e), []byte{0, 0, 192, 127, 0x80, 0x7f})
	f.Add(make([]byte, 5*84), []byte{0x80})
	seed := make([]byte, 9*84)
	for i := range seed {
		seed[i] = byte(i*131 + 7)
	}
	f.Add(seed, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	f.Fuzz(func(t *testing.T, w, act []byte) {
		q2kAVX512(t)
		nb := min(len(w)/dotQ2KBytes, 24)
		w = w[:nb*dotQ2KBytes]
		at := func(j int) byte {
			if len(act) == 0 {
				return byte(j * 37)
			}
			return act[j%len(act)]
		}
		var y [4][]BlockQ8K
		for tok := range y {
			y[tok] = make([]BlockQ8K, nb)
			for b := range y[tok] {
				yb := &y[tok][b]
				o := (tok*nb + b) * 301
				yb.D = math.Float32frombits(uint32(at(o)) | uint32(at(o+1))<<8 | uint32(at(o+2))<<16 | uint32(at(o+3))<<24)
				for i := range yb.Qs {
					yb.Qs[i] = int8(at(o + 4 + i))
				}
				for k := range yb.Bsums {
					yb.Bsums[k] = int16(uint16(at(o+260+2*k)) | uint16(at(o+261+2*k))<<8)
				}
			}
		}
		requireQ2KAVX512(t, "fuzz", w, &y)
	})
}

// BenchmarkQ2KAVX512 runs the AVX2 and AVX-512 Q2_K kernels on one
// in-cache row of 2048 elements (a routed expert's down projection row)
// and of 4096, one token (way=1) and four (way=x4; MB/s counts the row
// once per token).
func BenchmarkQ2KAVX512(b *testing.B) {
	q2kAVX512(b)
	r := rand.New(rand.NewPCG(16, 17))
	for _, cols := range []int{2048, 4096} {
		nb := cols / QK_K
		w := benchRows(Q2_K, 1, nb*dotQ2KBytes)
		var y [4][]BlockQ8K
		for tok := range y {
			y[tok] = make([]BlockQ8K, nb)
			QuantizeQ8K(randActivation(r, cols), y[tok])
		}
		kernels := []struct {
			name string
			one  func([]byte, []BlockQ8K) float32
			x4   func(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32)
		}{
			{"avx2", dotQ2KAVX2, dotQ2Kx4AVX2},
			{"avx512", dotQ2KAVX512, dotQ2Kx4AVX512},
		}
		for _, k := range kernels {
			b.Run(fmt.Sprintf("cols=%d/way=1/kernels=%s", cols, k.name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				var s float32
				for b.Loop() {
					s += k.one(w, y[0])
				}
				benchSinkF32 = s
			})
			b.Run(fmt.Sprintf("cols=%d/way=x4/kernels=%s", cols, k.name), func(b *testing.B) {
				b.SetBytes(int64(4 * len(w)))
				var out [4]float32
				var s float32
				for b.Loop() {
					k.x4(w, y[0], y[1], y[2], y[3], &out)
					s += out[0] + out[1] + out[2] + out[3]
				}
				benchSinkF32 = s
			})
		}
	}
}

// BenchmarkQ2KAVX512Speedup reports how many times faster the AVX-512
// Q2_K kernels run than the AVX2 ones on one in-cache row of 8 blocks (a
// routed expert's down projection row) and of 16, timing the two in
// alternating batches of the same calls, so that both see the same load
// from the rest of the machine. Each metric is a ratio of the lower
// quartiles of the batch times, which a batch preempted by another
// process does not move; ns/op is one batch of each kind.
func BenchmarkQ2KAVX512Speedup(b *testing.B) {
	q2kAVX512(b)
	for _, nb := range []int{8, 16} {
		b.Run(fmt.Sprintf("blocks=%d", nb), func(b *testing.B) {
			r := rand.New(rand.NewPCG(18, uint64(nb)))
			w := benchRows(Q2_K, 1, nb*dotQ2KBytes)
			var y [4][]BlockQ8K
			for tok := range y {
				y[tok] = make([]BlockQ8K, nb)
				QuantizeQ8K(randActivation(r, nb*QK_K), y[tok])
			}
			const batch = 64
			var out [4]float32
			var s float32
			kernels := []func(){
				func() { s += dotQ2KAVX2(w, y[0]) },
				func() { s += dotQ2KAVX512(w, y[0]) },
				func() { dotQ2Kx4AVX2(w, y[0], y[1], y[2], y[3], &out) },
				func() { dotQ2Kx4AVX512(w, y[0], y[1], y[2], y[3], &out) },
			}
			times := make([][]time.Duration, len(kernels))
			for b.Loop() {
				for i, k := range kernels {
					start := time.Now()
					for range batch {
						k()
					}
					times[i] = append(times[i], time.Since(start))
				}
			}
			benchSinkF32 = s + out[0]
			q := make([]float64, len(times))
			for i, t := range times {
				slices.Sort(t)
				q[i] = float64(t[len(t)/4]) / batch
			}
			b.ReportMetric(q[0]/q[1], "x-avx2")
			b.ReportMetric(q[2]/q[3], "x4-x-avx2x4")
			b.ReportMetric(q[1], "avx512-ns/row")
			b.ReportMetric(q[0], "avx2-ns/row")
		})
	}
}
