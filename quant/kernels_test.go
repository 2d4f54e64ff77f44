package quant_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/internal/cpufeat"
	"github.com/ds4-go/ds4/quant"
	"github.com/stretchr/testify/require"
)

// The vector kernels are checked against the pure-Go ones field by field of
// quant.Kernels, on random and extreme inputs of many sizes:
//
//   - the K-quant fields must give the generic result bit for bit (any
//     NaN matches any NaN): their block sums are exact integers and the
//     vector kernels combine the float scales in the reference's order;
//   - Q8_0 forms each block's float term exactly as the reference does but
//     sums the terms in eight lanes, so it must be within
//     γ(nb/8+10)·Σ|terms| of the exact sum of the reference's terms; its
//     activation codes lie in -127..127, as QuantizeQ8_0 produces them
//     (the kernel's precondition, dot_q8_amd64.go);
//   - F16 must be within γ(n/16+20)·Σ|w_i·x_i| of the exact dot, the bound
//     of its 16-lane summation (dot_q8_amd64.go), and F32 within
//     u·|dot| + 3·γ64(n+1)·Σ|w_i·x_i| (one float32 rounding of a float64
//     sum); each bound also allows 2^-150 per rounding for results in the
//     float32 subnormal range.
//
// Where the generic result of a float kernel is not finite the vector one
// must be the same Inf or a NaN. When Σ|terms| reaches the float32 range
// the sum may overflow in one order and not in another, and nothing is
// compared.

// unitRoundoff32 and unitRoundoff64 are the unit roundoffs of float32 and
// float64; underflow32 is the most a float32 rounding into the subnormal
// range can move a value, which the relative bounds do not cover.
const (
	unitRoundoff32 = 0x1p-24
	unitRoundoff64 = 0x1p-53
	underflow32    = 0x1p-150
)

// gamma returns the bound k·u/(1-k·u) on the relative error of k roundings
// with unit roundoff u.
func gamma(k int, u float64) float64 { return float64(k) * u / (1 - float64(k)*u) }

// dotCase is one weight row and one activation, in the form its field
// takes.
type dotCase struct {
	name string
	w    []byte
	q80  []quant.BlockQ8_0
	q8k  []quant.BlockQ8K
	x    []float32
}

// checkKind says how a field's vector result is compared with the generic
// one.
type checkKind int

const (
	checkExact checkKind = iota // bit for bit
	checkF16                    // against the exact dot, γ(n/16+20)
	checkF32                    // against the exact dot, one float32 rounding
	checkQ8                     // against the exact sum of the block terms, γ(nb/8+10)
)

// kernelField is one field of quant.Kernels under test.
type kernelField struct {
	name  string     // the field of quant.Kernels
	typ   quant.Type // the weight type it reads
	check checkKind
	// scaleOffs are the byte offsets of a block's f16 scales (K-quants: d
	// and dmin); nil for the float kernels.
	scaleOffs []int
}

// kernelFields lists every dot field of quant.Kernels;
// TestKernelFieldsComplete keeps it in step with the struct.
var kernelFields = []kernelField{
	{name: "Q8_0", typ: quant.Q8_0, check: checkQ8, scaleOffs: []int{0}},
	{name: "Q2K", typ: quant.Q2_K, check: checkExact, scaleOffs: []int{80, 82}},
	{name: "Q4K", typ: quant.Q4_K, check: checkExact, scaleOffs: []int{0, 2}},
	{name: "IQ2XXS", typ: quant.IQ2_XXS, check: checkExact, scaleOffs: []int{0}},
	{name: "F16", typ: quant.F16, check: checkF16},
	{name: "F32", typ: quant.F32, check: checkF32},
}

// batchField is one field of quant.Kernels that applies one row to four
// activations; TestX4MatchesSingle holds it to its single-activation field
// of the same set, bit for bit.
type batchField struct {
	name   string // the field of quant.Kernels
	single int    // its single-activation field, an index in kernelFields
	// sizes and extremeSizes are the row lengths in blocks of the random
	// and the extreme cases (x4Cases).
	sizes, extremeSizes []int
	// anyNaN lets a NaN result match any NaN from the single-activation
	// field: the vector Q8_0x4 reduces its lanes in another order than
	// Q8_0, so where several NaNs meet the payload that survives differs.
	anyNaN bool
	// A row of onesBlocks blocks of the byte onesByte with f16 scales 1,
	// against activations of codes 1 and scale 1, gives onesWant.
	onesBlocks int
	onesByte   byte
	onesWant   float32
}

// batchFields lists the four-activation fields of quant.Kernels;
// TestKernelFieldsComplete keeps it in step with the struct.
var batchFields = []batchField{
	{
		name: "Q8_0x4", single: 0, anyNaN: true,
		sizes: append(slices.Clone(blockSizesQ8_0), 32, 33, 39, 40, 47, 128+7), extremeSizes: []int{1, 8, 9, 17},
		// Every weight is 1.
		onesBlocks: 9, onesByte: 1, onesWant: 9 * 32,
	},
	{
		name: "Q2Kx4", single: 1,
		sizes: blockSizesQ8K, extremeSizes: []int{1, 3, 9, 17},
		// Scale 5 and min 15 (0xf5) for every 16 elements; codes 1 in
		// slices 0, 1 and 3 in slices 2, 3 of each half (0xf5 again), so
		// a block gives 5·(128·1+128·3) - 15·256 = -1280.
		onesBlocks: 3, onesByte: 0xf5, onesWant: 3 * -1280,
	},
	{
		name: "IQ2XXSx4", single: 3,
		sizes: blockSizesQ8K, extremeSizes: []int{1, 3, 9, 17},
		// Grid row 0 (all magnitudes 8) at group scale (2·0+1)/8, so each
		// element contributes 8·1/8.
		onesBlocks: 3, onesByte: 0, onesWant: 3 * 256,
	},
}

// field returns the single-activation field of f.
func (f *batchField) field() *kernelField { return &kernelFields[f.single] }

// run sets out to the four-activation dot of row w with the activations
// of a under kernels k.
func (f *batchField) run(k quant.Kernels, w []byte, a *[4]dotCase, out *[4]float32) {
	switch f.name {
	case "Q8_0x4":
		k.Q8_0x4(w, a[0].q80, a[1].q80, a[2].q80, a[3].q80, out)
	case "Q2Kx4":
		k.Q2Kx4(w, a[0].q8k, a[1].q8k, a[2].q8k, a[3].q8k, out)
	case "IQ2XXSx4":
		k.IQ2XXSx4(w, a[0].q8k, a[1].q8k, a[2].q8k, a[3].q8k, out)
	default:
		panic("batch field " + f.name + " has no runner")
	}
}

// run returns the field's dot product of c under kernels k.
func (f *kernelField) run(k quant.Kernels, c *dotCase) float32 {
	switch f.name {
	case "Q8_0":
		return k.Q8_0(c.w, c.q80)
	case "Q2K":
		return k.Q2K(c.w, c.q8k)
	case "Q4K":
		return k.Q4K(c.w, c.q8k)
	case "IQ2XXS":
		return k.IQ2XXS(c.w, c.q8k)
	case "F16":
		return k.F16(c.w, c.x)
	case "F32":
		return k.F32(c.w, c.x)
	}
	panic("kernel field " + f.name + " has no runner")
}

// compare fails t unless vec, the vector kernel's result on c, agrees with
// gen, the generic one's, as f.check demands.
func (f *kernelField) compare(t testing.TB, c *dotCase, gen, vec float32) {
	t.Helper()
	genBits, vecBits := math.Float32bits(gen), math.Float32bits(vec)
	if f.check == checkExact {
		if genBits != vecBits && !(isNaN32(gen) && isNaN32(vec)) {
			t.Fatalf("%s %s: vector %v (%#08x), generic %v (%#08x): want the same bits", f.name, c.name, vec, vecBits, gen, genBits)
		}
		return
	}
	var exact, mag, tol float64
	n := len(c.x)
	if f.check == checkQ8 {
		exact, mag = q8Terms(c)
		n = len(c.q80)
	} else {
		exact, mag = floatDot(f.typ, c)
	}
	switch f.check {
	case checkQ8:
		tol = gamma(n/8+10, unitRoundoff32)*mag + gamma(n+1, unitRoundoff64)*mag + float64(n/8+10)*underflow32
	case checkF16:
		// The float64 reference is off by at most γ64(n)·mag.
		tol = gamma(n/16+20, unitRoundoff32)*mag + gamma(n+1, unitRoundoff64)*mag + float64(n/16+20)*underflow32
	default:
		tol = unitRoundoff32*math.Abs(exact) + 3*gamma(n+1, unitRoundoff64)*mag + underflow32
	}
	if mag >= math.MaxFloat32 && !math.IsInf(mag, 0) {
		return // finite terms whose sum may overflow in one order only
	}
	if nonFinite(gen) || nonFinite(vec) {
		if genBits != vecBits && !(isNaN32(gen) && isNaN32(vec)) {
			t.Fatalf("%s %s: vector %v, generic %v: want the same non-finite value", f.name, c.name, vec, gen)
		}
		return
	}
	if d := math.Abs(float64(vec) - exact); d > tol {
		t.Fatalf("%s %s: vector %v, generic %v, reference %v: |Δ| = %g > tolerance %g (Σ|terms| = %g)",
			f.name, c.name, vec, gen, exact, d, tol, mag)
	}
	// The generic kernel keeps its own bound, so the two stay close.
	genTol := tol + gamma(n+1, unitRoundoff32)*mag + float64(n+1)*underflow32
	if f.check == checkF32 {
		genTol = 2 * tol
	}
	if d := math.Abs(float64(vec) - float64(gen)); d > genTol {
		t.Fatalf("%s %s: vector %v, generic %v: |Δ| = %g > %g", f.name, c.name, vec, gen, d, genTol)
	}
}

// q8Terms returns the sum in float64 of the reference's float32 block terms
// (f16(d_w)·d_x)·Σw·x of c's Q8_0 row, and Σ|terms|.
func q8Terms(c *dotCase) (dot, mag float64) {
	for b, xb := range c.q80 {
		blk := c.w[b*34 : (b+1)*34]
		var isum int32
		for i, q := range blk[2:] {
			isum += int32(int8(q)) * int32(xb.Qs[i])
		}
		d := float32(quant.F16ToF32(binary.LittleEndian.Uint16(blk)) * xb.D)
		t := float64(float32(d * float32(isum)))
		dot += t
		mag += math.Abs(t)
	}
	return dot, mag
}

// q8Code maps an activation code into -127..127, the range QuantizeQ8_0
// produces (TestQuantizeTinyBlocks covers the blocks too small for a
// finite 1/d, whose codes are 0) and the Q8_0 vector kernel assumes.
func q8Code(q int8) int8 { return max(q, -127) }

// q8KCode maps an activation code into what the vector kernels of weight
// type t take: -127..127 (QuantizeQ8K's range, q8Code's) for IQ2_XXS, whose
// AVX2 kernels put the weights' signs onto the codes, and the whole int8
// range for the other K-quants.
func q8KCode(t quant.Type, q int8) int8 {
	if t == quant.IQ2_XXS {
		return q8Code(q)
	}
	return q
}

// floatDot returns the dot of c's float row with c.x in float64 and
// Σ|w_i·x_i|. Every product is exact in float64 (at most 24+24 significant
// bits), so the dot is within γ64(n)·Σ|w_i·x_i| of the exact one.
func floatDot(t quant.Type, c *dotCase) (dot, mag float64) {
	for i, x := range c.x {
		var w float32
		if t == quant.F16 {
			w = quant.F16ToF32(binary.LittleEndian.Uint16(c.w[2*i:]))
		} else {
			w = math.Float32frombits(binary.LittleEndian.Uint32(c.w[4*i:]))
		}
		p := float64(w) * float64(x)
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}

func isNaN32(v float32) bool { return v != v }

func nonFinite(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }

// eachVectorSet runs fn as a subtest for every SIMD kernel set this CPU
// can run, or skips t when there is none.
func eachVectorSet(t *testing.T, fn func(t *testing.T, vk quant.Kernels)) {
	t.Helper()
	sets := quant.VectorKernelSets()
	if len(sets) == 0 {
		t.Skip("no vector kernels on this CPU or build (another architecture, missing AVX2/FMA/F16C, or -tags purego): only the generic kernels run")
	}
	for _, vk := range sets {
		t.Run(vk.Name, func(t *testing.T) { fn(t, vk) })
	}
}

func TestKernelFieldsComplete(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range kernelFields {
		listed[f.name] = true
	}
	for _, f := range batchFields {
		listed[f.name] = true
	}
	listed["F16x2x3"] = true // TestF16x2x3MatchesF16
	listed["Q8_0xN"] = true  // TestQ8_0xNMatchesSingle
	typ := reflect.TypeFor[quant.Kernels]()
	var funcs int
	for i := range typ.NumField() {
		sf := typ.Field(i)
		if sf.Type.Kind() != reflect.Func || tileFields[sf.Name] {
			continue
		}
		funcs++
		require.True(t, listed[sf.Name], "quant.Kernels.%s has no row in kernelFields", sf.Name)
	}
	require.Equal(t, funcs, len(kernelFields)+len(batchFields)+2, "kernelFields or batchFields lists a field quant.Kernels does not have")

	gen := reflect.ValueOf(quant.GenericKernels())
	require.Equal(t, "go", quant.GenericKernels().Name)
	if vk, ok := quant.VectorKernels(); ok {
		require.NotEqual(t, "go", vk.Name)
		v := reflect.ValueOf(vk)
		for name := range listed {
			require.False(t, v.FieldByName(name).IsNil(), "vector kernel %s is nil", name)
			require.False(t, gen.FieldByName(name).IsNil(), "generic kernel %s is nil", name)
		}
	}
}

// sameKernels reports whether every dot field of a and b is the same
// function.
func sameKernels(a, b quant.Kernels) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for _, f := range kernelFields {
		if va.FieldByName(f.name).Pointer() != vb.FieldByName(f.name).Pointer() {
			return false
		}
	}
	for _, f := range batchFields {
		if va.FieldByName(f.name).Pointer() != vb.FieldByName(f.name).Pointer() {
			return false
		}
	}
	return a.Name == b.Name
}

// TestBestKernelsHost checks that BestKernels is the pure-Go set under
// DS4_PUREGO and the fastest vector set otherwise.
func TestBestKernelsHost(t *testing.T) {
	got := quant.BestKernels()
	if vk, ok := quant.VectorKernels(); ok && !cpufeat.Host().PureGo {
		require.True(t, sameKernels(vk, got), "BestKernels = %s, want the vector set %s", got.Name, vk.Name)
		return
	}
	require.True(t, sameKernels(quant.GenericKernels(), got), "BestKernels = %s, want the generic set", got.Name)
}

func TestVectorKernelsMatchGeneric(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		gen := quant.GenericKernels()
		for _, f := range kernelFields {
			t.Run(f.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(f.typ), 42))
				cases := f.cases(r)
				require.NotEmpty(t, cases)
				for i := range cases {
					c := &cases[i]
					f.compare(t, c, f.run(gen, c), f.run(vk, c))
				}
			})
		}
	})
}

// TestVectorSetsAgree holds every vector kernel set to the first one bit
// for bit: the sets share their float order by design (the AVX-512 Q8_0
// kernels keep the AVX2 kernels' 8-lane sums), so a model decodes to the
// same tokens whichever set a CPU selects. Where the reference itself is
// matched only within a tolerance (Q8_0, F16, F32), this is the check
// that the sets did not drift apart inside it.
func TestVectorSetsAgree(t *testing.T) {
	sets := quant.VectorKernelSets()
	if len(sets) < 2 {
		t.Skipf("%d vector kernel set(s) on this CPU or build: nothing to compare", len(sets))
	}
	for _, f := range kernelFields {
		t.Run(f.name, func(t *testing.T) {
			cases := f.cases(rand.New(rand.NewPCG(uint64(f.typ), 43)))
			for i := range cases {
				c := &cases[i]
				want := f.run(sets[0], c)
				for _, k := range sets[1:] {
					got := f.run(k, c)
					require.Equal(t, math.Float32bits(want), math.Float32bits(got), "%s: %s %v, %s %v", c.name, sets[0].Name, want, k.Name, got)
				}
			}
		})
	}
}

// Sizes of the random cases: every length up to a few vector widths past
// the unrolled step, so that each tail length is covered, plus long rows.
var (
	blockSizesQ8_0 = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 17, 23, 24, 31, 128, 131}
	blockSizesQ8K  = []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17}
	floatSizes     = []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 71, 72, 79, 127, 128, 129, 200, 1000, 4096, 4099}
)

// cases returns the random and extreme inputs of field f.
func (f *kernelField) cases(r *rand.Rand) []dotCase {
	if f.scaleOffs == nil {
		return f.floatCases(r)
	}
	return f.blockCases(r)
}

// randScaleF16 returns a finite f16 of random sign with magnitude in
// [2^-20, 2^-2): the range real block scales take, subnormals below 2^-14
// included.
func randScaleF16(r *rand.Rand) uint16 {
	v := float32(1+r.Float64()) * float32(math.Ldexp(1, -r.IntN(18)-3))
	if r.IntN(2) == 0 {
		v = -v
	}
	return quant.F32ToF16(v)
}

// randActScale returns a float32 activation scale of random sign with
// magnitude spread over 2^-20..2^10.
func randActScale(r *rand.Rand) float32 {
	v := float32(1+r.Float64()) * float32(math.Ldexp(1, r.IntN(30)-20))
	if r.IntN(2) == 0 {
		v = -v
	}
	return v
}

// blockCase returns a case of nb blocks of type f.typ: weight bytes from
// wbyte, f16 scales from scale (block index and scale slot), activation
// codes from code (element index) and activation scales from d.
func (f *kernelField) blockCase(name string, nb int, wbyte func() byte, scale func(b, slot int) uint16, code func(i int) int8, d func(b int) float32) dotCase {
	bb := f.typ.BlockBytes()
	c := dotCase{name: fmt.Sprintf("%s/nb=%d", name, nb), w: make([]byte, nb*bb)}
	for i := range c.w {
		c.w[i] = wbyte()
	}
	for b := range nb {
		for s, off := range f.scaleOffs {
			binary.LittleEndian.PutUint16(c.w[b*bb+off:], scale(b, s))
		}
	}
	if f.typ == quant.Q8_0 {
		c.q80 = make([]quant.BlockQ8_0, nb)
		for b := range c.q80 {
			c.q80[b].D = d(b)
			for i := range c.q80[b].Qs {
				c.q80[b].Qs[i] = q8Code(code(32*b + i))
			}
		}
		return c
	}
	c.q8k = make([]quant.BlockQ8K, nb)
	for b := range c.q8k {
		y := &c.q8k[b]
		y.D = d(b)
		for i := range y.Qs {
			y.Qs[i] = q8KCode(f.typ, code(quant.QK_K*b+i))
		}
		for g := range y.Bsums {
			var s int16
			for _, q := range y.Qs[16*g : 16*g+16] {
				s += int16(q)
			}
			y.Bsums[g] = s
		}
	}
	return c
}

// blockCases returns random rows of every size in the list for f's kind,
// rows of extreme codes and rows with special f16 and float32 scales.
func (f *kernelField) blockCases(r *rand.Rand) []dotCase {
	sizes := blockSizesQ8K
	if f.typ == quant.Q8_0 {
		sizes = blockSizesQ8_0
	}
	randByte := func() byte { return byte(r.Uint32()) }
	randScale := func(int, int) uint16 { return randScaleF16(r) }
	randCode := func(int) int8 { return int8(r.Uint32()) }
	randD := func(int) float32 { return randActScale(r) }
	constByte := func(v byte) func() byte { return func() byte { return v } }
	constCode := func(v int8) func(int) int8 { return func(int) int8 { return v } }
	constScale := func(v uint16) func(int, int) uint16 { return func(int, int) uint16 { return v } }
	constD := func(v float32) func(int) float32 { return func(int) float32 { return v } }

	var cs []dotCase
	for _, nb := range sizes {
		reps := 6
		if nb > 32 {
			reps = 2
		}
		for range reps {
			cs = append(cs, f.blockCase("random", nb, randByte, randScale, randCode, randD))
		}
		// One scale for every block, so that no block is negligible and a
		// wrong integer sum anywhere shows.
		cs = append(cs, f.blockCase("even-scales", nb, randByte, constScale(0x2c00), randCode, constD(0.25)))
	}
	for _, nb := range []int{1, 3, 9, 17} {
		cs = append(cs,
			f.blockCase("codes-0x80-act-min", nb, constByte(0x80), randScale, constCode(-128), randD),
			f.blockCase("codes-0x7f-act-max", nb, constByte(0x7f), randScale, constCode(127), randD),
			f.blockCase("codes-0xff-act-min", nb, constByte(0xff), randScale, constCode(-128), randD),
			f.blockCase("codes-0x00-act-max", nb, constByte(0x00), randScale, constCode(127), randD),
			f.blockCase("codes-0x80-act-max", nb, constByte(0x80), randScale, constCode(127), randD),
			f.blockCase("act-alternating", nb, randByte, randScale, func(i int) int8 { return int8(-128 + 255*(i&1)) }, randD),
			f.blockCase("scale-subnormal", nb, randByte, constScale(0x0001), randCode, randD),
			f.blockCase("scale-subnormal-neg", nb, randByte, constScale(0x83ff), randCode, randD),
			f.blockCase("scale-max", nb, randByte, constScale(0x7bff), randCode, constD(1e20)),
			f.blockCase("scale-zero", nb, randByte, constScale(0x0000), randCode, randD),
			f.blockCase("scale-negzero", nb, randByte, constScale(0x8000), randCode, randD),
			f.blockCase("act-d-zero", nb, randByte, randScale, randCode, constD(0)),
			f.blockCase("act-d-subnormal", nb, randByte, randScale, randCode, constD(1e-40)),
			f.blockCase("act-d-tiny", nb, randByte, constScale(0x0400), randCode, constD(0x1p-126)),
		)
		// One non-finite scale among finite ones.
		for _, h := range []uint16{0x7c00, 0xfc00, 0x7e00, 0x7c01} {
			special := func(b, s int) uint16 {
				if b == nb/2 && s == 0 {
					return h
				}
				return randScaleF16(r)
			}
			cs = append(cs, f.blockCase(fmt.Sprintf("scale-%#04x", h), nb, randByte, special, randCode, randD))
		}
		for _, v := range []float32{float32(math.Inf(1)), float32(math.NaN())} {
			special := func(b int) float32 {
				if b == nb-1 {
					return v
				}
				return randActScale(r)
			}
			cs = append(cs, f.blockCase(fmt.Sprintf("act-d-%v", v), nb, randByte, randScale, randCode, special))
		}
	}
	// Terms that overflow float32 on their own.
	cs = append(cs, f.blockCase("overflow", 5, randByte, constScale(0x7bff), randCode, constD(3e38)))
	return cs
}

// floatCases returns random rows of every length in floatSizes and rows
// with extreme and special values.
func (f *kernelField) floatCases(r *rand.Rand) []dotCase {
	eb := 2
	if f.typ == quant.F32 {
		eb = 4
	}
	put := func(w []byte, i int, v float32) {
		if eb == 2 {
			binary.LittleEndian.PutUint16(w[2*i:], quant.F32ToF16(v))
		} else {
			binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
		}
	}
	mk := func(name string, n int, wv func(i int) float32, xv func(i int) float32) dotCase {
		c := dotCase{name: fmt.Sprintf("%s/n=%d", name, n), w: make([]byte, eb*n), x: make([]float32, n)}
		for i := range n {
			put(c.w, i, wv(i))
			c.x[i] = xv(i)
		}
		return c
	}
	normal := func(int) float32 { return float32(r.NormFloat64()) }
	// Magnitudes in a narrow band, so that every product matters to the
	// sum and a lost or repeated element shows.
	narrow := func(int) float32 {
		v := float32(1 + r.Float64())
		if r.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	wide := func(int) float32 {
		return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
	}
	constant := func(v float32) func(int) float32 { return func(int) float32 { return v } }
	at := func(pos int, v float32, else_ func(int) float32) func(int) float32 {
		return func(i int) float32 {
			if i == pos {
				return v
			}
			return else_(i)
		}
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())

	var cs []dotCase
	for _, n := range floatSizes {
		for range 4 {
			cs = append(cs, mk("normal", n, normal, normal), mk("narrow", n, narrow, narrow))
		}
		cs = append(cs, mk("wide", n, wide, wide), mk("ones", n, constant(1), constant(1)))
		if n == 0 {
			continue
		}
		last := n - 1
		cs = append(cs,
			mk("w-inf-last", n, at(last, inf, narrow), narrow),
			mk("w-neg-inf-first", n, at(0, -inf, narrow), narrow),
			mk("w-nan-mid", n, at(n/2, nan, narrow), narrow),
			mk("x-inf-last", n, narrow, at(last, inf, narrow)),
			mk("x-nan-last", n, narrow, at(last, nan, narrow)),
			mk("inf-times-zero", n, at(last, inf, narrow), at(last, 0, narrow)),
			mk("inf-minus-inf", n, at(last, inf, at(0, -inf, narrow)), narrow),
		)
	}
	for _, n := range []int{1, 9, 70, 1000} {
		if f.typ == quant.F16 {
			// Subnormal halves, 2^-24·k: F16C must not flush them.
			sub := func(int) float32 { return float32(1+r.IntN(1023)) * 0x1p-24 }
			cs = append(cs,
				mk("f16-subnormal", n, sub, narrow),
				mk("f16-max", n, constant(65504), narrow),
			)
		} else {
			cs = append(cs,
				mk("f32-subnormal", n, constant(1e-40), narrow),
				mk("f32-huge-products", n, constant(1e30), constant(-1e-10)),
				// Products below the float32 range are exact in float64.
				mk("f32-tiny-products", n, constant(1e-30), constant(1e-30)),
			)
		}
		// Pairs that cancel exactly, leaving one small term.
		cancel := func(i int) float32 {
			if i == n-1 {
				return 0.5
			}
			v := float32(1 + i/2)
			if i%2 == 1 {
				v = -v
			}
			return v
		}
		cs = append(cs, mk("cancel", n, cancel, constant(1)))
	}
	return cs
}

func TestVectorKernelsShortRowPanics(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		for _, f := range kernelFields {
			t.Run(f.name, func(t *testing.T) {
				nb := 3
				if f.scaleOffs == nil {
					nb = 67 // float kernels: past the unrolled step
				}
				c := f.blockCase("short", nb, func() byte { return 0 }, func(int, int) uint16 { return 0x3c00 }, func(int) int8 { return 1 }, func(int) float32 { return 1 })
				if f.scaleOffs == nil {
					c = dotCase{w: make([]byte, nb*f.typ.BlockBytes()), x: make([]float32, nb)}
				}
				c.w = c.w[: len(c.w)-1 : len(c.w)-1] // no capacity to reslice into
				for _, k := range []quant.Kernels{quant.GenericKernels(), vk} {
					require.Panics(t, func() { f.run(k, &c) }, "%s kernel %s on a row one byte short", k.Name, f.name)
				}
			})
		}
	})
}

func TestBackendMatMulVectorVsGeneric(t *testing.T) {
	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		genB := cpu.NewWithKernels(1, quant.GenericKernels())
		defer genB.Close()
		vecB := cpu.NewWithKernels(2, vk)
		defer vecB.Close()
		require.Equal(t, "go", genB.Kernels().Name)
		require.Equal(t, vk.Name, vecB.Kernels().Name)

		gen := quant.GenericKernels()
		r := rand.New(rand.NewPCG(5, 6))
		// Seven tokens: the backend applies Q8_0, Q2_K and IQ2_XXS rows to
		// four tokens a call (the x4 fields), and the remaining three to
		// Q2_K and IQ2_XXS rows with one more such call, to Q8_0 rows one
		// by one.
		const cols, rows, n = 512, 37, 7
		for _, f := range kernelFields {
			t.Run(f.name, func(t *testing.T) {
				rb, err := f.typ.RowBytes(cols)
				require.NoError(t, err)
				data := make([]byte, rows*rb)
				for i := range data {
					data[i] = byte(r.Uint32())
				}
				bb, be := f.typ.BlockBytes(), f.typ.BlockElems()
				for off := 0; off < len(data); off += bb {
					switch f.typ {
					case quant.F16:
						binary.LittleEndian.PutUint16(data[off:], quant.F32ToF16(float32(r.NormFloat64())))
					case quant.F32:
						binary.LittleEndian.PutUint32(data[off:], math.Float32bits(float32(r.NormFloat64())))
					default:
						for _, so := range f.scaleOffs {
							binary.LittleEndian.PutUint16(data[off+so:], randScaleF16(r))
						}
					}
				}
				m, err := backends.NewMatrix("w", f.typ, []uint64{cols, rows}, data)
				require.NoError(t, err)
				x := make([]float32, n*cols)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/32%5-2)))
				}
				outGen := make([]float32, n*rows)
				outVec := make([]float32, n*rows)
				genB.MatMul(outGen, m, x, n)
				vecB.MatMul(outVec, m, x, n)

				for tok := range n {
					xt := x[tok*cols : (tok+1)*cols]
					c := dotCase{x: xt}
					switch {
					case f.typ == quant.Q8_0:
						c.q80 = make([]quant.BlockQ8_0, cols/be)
						quant.QuantizeQ8_0(xt, c.q80)
					case f.scaleOffs != nil:
						c.q8k = make([]quant.BlockQ8K, cols/be)
						quant.QuantizeQ8K(xt, c.q8k)
					}
					for row := range rows {
						c.name = fmt.Sprintf("token %d row %d", tok, row)
						c.w = data[row*rb : (row+1)*rb]
						// Each backend is exactly its kernel set's single-token
						// kernel on the row, so the generic output checks the
						// pure-Go path end to end, and the vector output is
						// held to the field's tolerance against it.
						want := f.run(gen, &c)
						require.Equal(t, math.Float32bits(want), math.Float32bits(outGen[tok*rows+row]), "%s generic backend", c.name)
						require.Equal(t, math.Float32bits(f.run(vk, &c)), math.Float32bits(outVec[tok*rows+row]), "%s vector backend", c.name)
						f.compare(t, &c, outGen[tok*rows+row], outVec[tok*rows+row])
					}
				}
			})
		}
	})
}

// FuzzVectorKernels feeds arbitrary weight bytes and activations to every
// field and holds the vector result to the field's check. The activation
// bytes are read as float32 scales and int8 codes, or as float32 values.
func FuzzVectorKernels(f *testing.F) {
	f.Add(uint8(0), []byte{0x00, 0x3c, 0x80, 0x7f, 0x01}, []byte{0, 0, 128, 63, 0x80, 0x7f})
	f.Add(uint8(1), make([]byte, 84), make([]byte, 260))
	f.Add(uint8(3), append([]byte{0x00, 0x7c}, make([]byte, 64)...), []byte{0, 0, 128, 127, 1, 2, 3})
	f.Add(uint8(4), []byte{0x01, 0x00, 0xff, 0x7b, 0x00, 0x7e, 0x00, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, []byte{0, 0, 128, 63, 0, 0, 0, 0x80})
	f.Add(uint8(5), []byte{0, 0, 128, 127, 0, 0, 128, 255, 0, 0, 192, 127}, []byte{0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 128, 63})
	f.Fuzz(func(t *testing.T, field uint8, w, act []byte) {
		sets := quant.VectorKernelSets()
		if len(sets) == 0 {
			t.Skip("no vector kernels")
		}
		kf := &kernelFields[int(field)%len(kernelFields)]
		c := dotCase{name: "fuzz"}
		switch {
		case kf.typ == quant.Q8_0 || kf.scaleOffs != nil:
			elems := 32
			if kf.typ != quant.Q8_0 {
				elems = quant.QK_K
			}
			nb := min(len(w)/kf.typ.BlockBytes(), 64)
			codes := func(b, i int) int8 {
				j := 4*nb + b*elems + i
				if j < len(act) {
					return int8(act[j])
				}
				return int8(j * 37)
			}
			d := func(b int) float32 {
				if 4*b+4 <= len(act) {
					return math.Float32frombits(binary.LittleEndian.Uint32(act[4*b:]))
				}
				return 1
			}
			c.w = w[:nb*kf.typ.BlockBytes()]
			if kf.typ == quant.Q8_0 {
				c.q80 = make([]quant.BlockQ8_0, nb)
				for b := range c.q80 {
					c.q80[b].D = d(b)
					for i := range c.q80[b].Qs {
						c.q80[b].Qs[i] = q8Code(codes(b, i))
					}
				}
			} else {
				c.q8k = make([]quant.BlockQ8K, nb)
				for b := range c.q8k {
					y := &c.q8k[b]
					y.D = d(b)
					for i := range y.Qs {
						y.Qs[i] = q8KCode(kf.typ, codes(b, i))
						y.Bsums[i/16] += int16(y.Qs[i])
					}
				}
			}
		default:
			eb := kf.typ.BlockBytes()
			n := min(len(w)/eb, 4096)
			c.w = w[:n*eb]
			c.x = make([]float32, n)
			for i := range c.x {
				if 4*i+4 <= len(act) {
					c.x[i] = math.Float32frombits(binary.LittleEndian.Uint32(act[4*i:]))
				} else {
					c.x[i] = float32(i%7) - 3
				}
			}
		}
		want := kf.run(quant.GenericKernels(), &c)
		for _, vk := range sets {
			kf.compare(t, &c, want, kf.run(vk, &c))
		}
	})
}

// kernelSets returns the generic kernels and every vector kernel set this
// CPU can run.
func kernelSets() []quant.Kernels {
	return append([]quant.Kernels{quant.GenericKernels()}, quant.VectorKernelSets()...)
}

// x4Case is one weight row and four activations of its length, in the
// form of the row's field.
type x4Case struct {
	name string
	w    []byte
	act  [4]dotCase
}

// x4Cases returns, for the block field f, rows of every size in sizes with
// random codes and scales, and rows of extreme codes (activation codes of
// -128 included; Q8_0 and IQ2_XXS activations map them to -127, their
// kernels' precondition) and special scales for each size in
// extremeSizes, each with four activations that differ from one another.
func x4Cases(r *rand.Rand, f *kernelField, sizes, extremeSizes []int) []x4Case {
	randByte := func() byte { return byte(r.Uint32()) }
	randScale := func(int, int) uint16 { return randScaleF16(r) }
	randCode := func(int) int8 { return int8(r.Uint32()) }
	randD := func(int) float32 { return randActScale(r) }
	constByte := func(v byte) func() byte { return func() byte { return v } }
	constCode := func(v int8) func(int) int8 { return func(int) int8 { return v } }
	constScale := func(v uint16) func(int, int) uint16 { return func(int, int) uint16 { return v } }
	constD := func(v float32) func(int) float32 { return func(int) float32 { return v } }
	// Quiet NaNs whose payloads and signs differ from block to block and
	// from slot to slot, and from the activations' ones.
	nanScale := func(b, slot int) uint16 { return 0x7e00 | uint16(b&1)<<15 | uint16(2*b+slot+1)&0x1ff }
	nanD := func(b int) float32 { return math.Float32frombits(0x7fc00000 | uint32(b&1)<<31 | uint32(b+1)<<5) }
	type gen struct {
		name  string
		wbyte func() byte
		scale func(int, int) uint16
		code  func(int) int8
		d     func(int) float32
	}
	mk := func(nb int, g gen) x4Case {
		c := x4Case{name: fmt.Sprintf("%s/nb=%d", g.name, nb)}
		for t := range c.act {
			// Each activation draws its own codes and scales; the
			// weight row is the first one's.
			c.act[t] = f.blockCase(g.name, nb, g.wbyte, g.scale, g.code, g.d)
			if t == 0 {
				c.w = c.act[t].w
			}
		}
		return c
	}
	var cs []x4Case
	for _, nb := range sizes {
		for range 4 {
			cs = append(cs, mk(nb, gen{"random", randByte, randScale, randCode, randD}))
		}
		cs = append(cs, mk(nb, gen{"even-scales", randByte, constScale(0x2c00), randCode, constD(0.25)}))
	}
	for _, nb := range extremeSizes {
		for _, g := range []gen{
			{"codes-0x80-act-min", constByte(0x80), randScale, constCode(-128), randD},
			{"codes-0x80-act-max", constByte(0x80), randScale, constCode(127), randD},
			{"codes-0x7f-act-max", constByte(0x7f), randScale, constCode(127), randD},
			{"codes-0xff-act-min", constByte(0xff), randScale, constCode(-128), randD},
			{"codes-0x00-act-max", constByte(0x00), randScale, constCode(127), randD},
			{"random-act-min", randByte, randScale, constCode(-128), randD},
			{"act-alternating", randByte, randScale, func(i int) int8 { return int8(-128 + 255*(i&1)) }, randD},
			{"scale-subnormal", randByte, constScale(0x0001), randCode, randD},
			{"scale-max", randByte, constScale(0x7bff), randCode, constD(1e20)},
			{"scale-inf", randByte, constScale(0x7c00), randCode, randD},
			{"scale-nan", randByte, constScale(0x7e00), randCode, randD},
			{"scale-negzero", randByte, constScale(0x8000), randCode, randD},
			{"act-d-subnormal", randByte, randScale, randCode, constD(1e-40)},
			{"act-d-inf", randByte, randScale, randCode, constD(float32(math.Inf(-1)))},
			// NaNs of distinct payloads meeting in one operation tell
			// the operand order of every float step: x86 keeps the
			// first operand's payload.
			{"scale-nan-payloads", randByte, nanScale, randCode, randD},
			{"nan-payloads", randByte, nanScale, randCode, nanD},
		} {
			cs = append(cs, mk(nb, g))
		}
	}
	return cs
}

// TestX4MatchesSingle holds each kernel set's four-activation fields to
// four calls of the same set's single-activation field, bit for bit, and,
// for the K-quants, to the pure-Go kernel too: the engine's prefill uses
// the first and its decode the second, and the two must agree exactly.
func TestX4MatchesSingle(t *testing.T) {
	gen := quant.GenericKernels()
	for i := range batchFields {
		bf := &batchFields[i]
		f := bf.field()
		t.Run(bf.name, func(t *testing.T) {
			cases := x4Cases(rand.New(rand.NewPCG(uint64(f.typ), 4)), f, bf.sizes, bf.extremeSizes)
			require.NotEmpty(t, cases)
			for _, k := range kernelSets() {
				for _, c := range cases {
					var got [4]float32
					bf.run(k, c.w, &c.act, &got)
					for tok := range c.act {
						a := c.act[tok]
						a.w = c.w
						want := f.run(k, &a)
						if !(bf.anyNaN && isNaN32(want) && isNaN32(got[tok])) {
							require.Equal(t, math.Float32bits(want), math.Float32bits(got[tok]),
								"%s %s token %d: %s %v, %s %v", k.Name, c.name, tok, bf.name, got[tok], f.name, want)
						}
						if f.check != checkExact {
							continue
						}
						if ref := f.run(gen, &a); !(isNaN32(ref) && isNaN32(got[tok])) {
							require.Equal(t, math.Float32bits(ref), math.Float32bits(got[tok]),
								"%s %s token %d: %s %v, generic %s %v", k.Name, c.name, tok, bf.name, got[tok], f.name, ref)
						}
					}
				}
			}
		})
	}
}

// TestX4BadInputPanics checks that every four-activation field panics on a
// short row and on activations of unequal lengths, and gives the known
// result of a constant row and zeros for empty rows.
func TestX4BadInputPanics(t *testing.T) {
	scale := func(int, int) uint16 { return 0x3c00 }
	code := func(int) int8 { return 1 }
	d := func(int) float32 { return 1 }
	for i := range batchFields {
		bf := &batchFields[i]
		f := bf.field()
		t.Run(bf.name, func(t *testing.T) {
			c := f.blockCase("bad", bf.onesBlocks, func() byte { return bf.onesByte }, scale, code, d)
			short := c
			short.q80, short.q8k = shorter(c.q80), shorter(c.q8k)
			row := c.w[: len(c.w)-1 : len(c.w)-1] // no capacity to reslice into
			all := [4]dotCase{c, c, c, c}
			for _, k := range kernelSets() {
				var out [4]float32
				require.Panics(t, func() { bf.run(k, row, &all, &out) }, "%s kernel %s on a row one byte short", k.Name, bf.name)
				for tok := range 4 {
					a := all
					a[tok] = short
					require.Panics(t, func() { bf.run(k, c.w, &a, &out) }, "%s kernel %s with activation %d shorter", k.Name, bf.name, tok)
				}
				bf.run(k, c.w, &all, &out)
				w := bf.onesWant
				require.Equal(t, [4]float32{w, w, w, w}, out, "%s kernel %s on a constant row", k.Name, bf.name)
				out = [4]float32{1, 2, 3, 4}
				bf.run(k, nil, &[4]dotCase{}, &out)
				require.Equal(t, [4]float32{}, out, "%s kernel %s on empty rows", k.Name, bf.name)
			}
		})
	}
}

// shorter returns s without its last element, or nil for an empty s.
func shorter[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s[:len(s)-1]
}

// tinyActivationFloats returns nb blocks of size floats (32 or 256) whose
// blocks have, by b mod 3, the largest |x| 2^-126 (the least normal),
// 3e-37 with the first maximum negative, and the subnormal 2^-130: all too
// small for a finite inverse scale (QuantizeQ8_0's 1/d, QuantizeQ8K's
// -127/max). Each holds both signs, zeros of both signs and smaller
// values. Where normal(b), block b holds random normal values instead.
func tinyActivationFloats(r *rand.Rand, nb, size int, normal func(b int) bool) []float32 {
	x := make([]float32, nb*size)
	pattern := []float32{1, -1, 0, float32(math.Copysign(0, -1)), 0.5, -0.25, 0x1p-20, -0.7}
	for b := range nb {
		xb := x[b*size : (b+1)*size]
		if normal(b) {
			for i := range xb {
				xb[i] = float32(r.NormFloat64())
			}
			continue
		}
		amax := []float32{0x1p-126, -3e-37, 0x1p-130}[b%3]
		for i := range xb {
			xb[i] = amax * pattern[(i+b)%len(pattern)]
		}
		xb[0] = amax
	}
	return x
}

// TestVectorKernelsTinyActivations holds the vector kernels to the pure-Go
// ones on activations that QuantizeQ8_0 and QuantizeQ8K make of blocks too
// small for a finite inverse scale, alone and between ordinary blocks, against
// weight rows with negative codes and scales that keep the tiny blocks'
// terms nonzero: the codes lie in -127..127 (the Q8_0 and IQ2_XXS vector
// kernels' domain), each Q8_0 row kernel gives dotQ8_0Lanes (DotQ8_0's
// terms in its own order) bit for bit and stays within its bound of
// DotQ8_0, the four-token and tile kernels give the row kernel's bits, and
// the K-quant kernels give the generic bits.
func TestVectorKernelsTinyActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	const nb, nbK, tokens = 17, 5, 4
	gen := quant.GenericKernels()

	x := make([]quant.BlockQ8_0, tokens*nb)
	// Token 1 mixes ordinary blocks in; the others are tiny throughout, so
	// that no ordinary term absorbs the tiny ones.
	quant.QuantizeQ8_0(tinyActivationFloats(r, tokens*nb, 32, func(b int) bool { return b/nb == 1 && b%2 == 0 }), x)
	for b := range x {
		require.GreaterOrEqual(t, slices.Min(x[b].Qs[:]), int8(-127), "Q8_0 block %d (d = %v)", b, x[b].D)
	}
	w, rowBytes := tileRows(r, nb)
	for i := range quant.Q8_0TileRows { // scales that keep d_w·d_x nonzero for the tiny blocks
		for b := range nb {
			binary.LittleEndian.PutUint16(w[i*rowBytes+b*34:], quant.F32ToF16([]float32{1, -2, 0.5, 1000, -300}[(i+b)%5]))
		}
	}
	y := make([]quant.BlockQ8K, tokens*nbK)
	quant.QuantizeQ8K(tinyActivationFloats(r, tokens*nbK, quant.QK_K, func(b int) bool { return b/nbK == 1 && b%2 == 0 }), y)
	for b := range y {
		require.GreaterOrEqual(t, slices.Min(y[b].Qs[:]), int8(-127), "Q8_K block %d (d = %v)", b, y[b].D)
	}

	eachVectorSet(t, func(t *testing.T, vk quant.Kernels) {
		for i := range quant.Q8_0TileRows {
			row := w[i*rowBytes : (i+1)*rowBytes]
			var got4 [4]float32
			vk.Q8_0x4(row, x[:nb], x[nb:2*nb], x[2*nb:3*nb], x[3*nb:], &got4)
			for tok := range tokens {
				xt := x[tok*nb : (tok+1)*nb]
				c := dotCase{name: fmt.Sprintf("row %d token %d", i, tok), w: row, q80: xt}
				got := vk.Q8_0(row, xt)
				require.Equal(t, math.Float32bits(dotQ8_0Lanes(row, xt)), math.Float32bits(got), "%s: Q8_0 %v, dotQ8_0Lanes %v", c.name, got, dotQ8_0Lanes(row, xt))
				kernelFields[0].compare(t, &c, gen.Q8_0(row, xt), got)
				require.Equal(t, math.Float32bits(got), math.Float32bits(got4[tok]), "%s: Q8_0x4 %v, Q8_0 %v", c.name, got4[tok], got)
			}
		}
		if vk.PackQ8_0Tile != nil {
			require.Empty(t, tileMismatch(runTile(vk, w, rowBytes, x, tokens), tileWant(w, rowBytes, x, tokens)), "Q8_0Tile")
		}
		for _, f := range kernelFields[1:4] { // Q2K, Q4K, IQ2XXS
			bb := f.typ.BlockBytes()
			wk := make([]byte, nbK*bb)
			for i := range wk {
				wk[i] = byte(r.IntN(256))
			}
			for b := range nbK {
				for _, off := range f.scaleOffs {
					binary.LittleEndian.PutUint16(wk[b*bb+off:], quant.F32ToF16([]float32{1, -2, 0.5, 1000}[(b+off)%4]))
				}
			}
			for tok := range tokens {
				c := dotCase{name: fmt.Sprintf("token %d", tok), w: wk, q8k: y[tok*nbK : (tok+1)*nbK]}
				f.compare(t, &c, f.run(gen, &c), f.run(vk, &c))
			}
		}
	})
}
