package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// qtRows returns rows×cols Gaussian values whose 32-element runs have scales
// spread over 1e-3..1e3, plus a few outliers, so that quantizer blocks see
// very different magnitudes.
func qtRows(r *rand.Rand, rows, cols int) []float32 {
	x := make([]float32, rows*cols)
	for i := range x {
		scale := math.Pow(10, float64(i/32%7)-3)
		v := r.NormFloat64() * scale
		if r.IntN(200) == 0 {
			v *= 30
		}
		x[i] = float32(v)
	}
	return x
}

// qtImportance returns n positive importances spanning two decades.
func qtImportance(r *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(math.Pow(10, 2*r.Float64()-1))
	}
	return w
}

func qtDequant(t *testing.T, typ Type, q []byte, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	require.NoError(t, DequantizeRow(typ, q, out))
	return out
}

// TestQuantizeQ8_0Bound checks the error bound Q8_0 implies: with the block
// scale d = amax/127 (float32) and its stored f16 value dh, each code is x/d
// rounded (off by at most 1/2 plus the float32 rounding of 1/d and x·(1/d),
// under 127·2⁻²² in code units), and dh·q is exact, so
//
//	|x − dh·q| ≤ d·(1/2 + 127·2⁻²²) + 127·|d − dh|.
func TestQuantizeQ8_0Bound(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	x := qtRows(r, 1, 32*64)
	x = append(x, make([]float32, 32)...) // an all-zero block
	q := make([]byte, len(x)/32*34)
	require.NoError(t, QuantizeRow(Q8_0, x, nil, q))
	got := qtDequant(t, Q8_0, q, len(x))
	for b := 0; b < len(x)/32; b++ {
		var amax float32
		for _, v := range x[32*b : 32*b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := float64(amax / 127)
		dh := float64(F16ToF32(binary.LittleEndian.Uint16(q[34*b:])))
		bound := d*(0.5+127*0x1p-22) + 127*math.Abs(d-dh)
		for i := 32 * b; i < 32*b+32; i++ {
			require.LessOrEqual(t, math.Abs(float64(x[i])-float64(got[i])), bound, "block %d element %d", b, i)
		}
	}
	require.Equal(t, make([]float32, 32), got[len(x)-32:])
}

// TestQuantizeQ8_0RoundsHalfAway pins the weight quantizer's ties-away
// rounding (the activation quantizer rounds ties to even).
func TestQuantizeQ8_0RoundsHalfAway(t *testing.T) {
	x := make([]float32, 32)
	x[0] = 127 // d = 1, so every x is its own scaled value
	x[1], x[2], x[3], x[4] = 2.5, -2.5, 0.5, -126.5
	q := make([]byte, 34)
	require.NoError(t, QuantizeRow(Q8_0, x, nil, q))
	require.Equal(t, uint16(0x3c00), binary.LittleEndian.Uint16(q)) // f16(1)
	require.Equal(t, []int8{127, 3, -3, 1, -127}, []int8{int8(q[2]), int8(q[3]), int8(q[4]), int8(q[5]), int8(q[6])})
}

// kBlockFields returns, for element e of a Q2_K or Q4_K block, the
// effective scale dd and offset dm with value = dd·L − dm.
func kBlockFields(typ Type, blk []byte, e int) (dd, dm float64) {
	switch typ {
	case Q2_K:
		d := float64(F16ToF32(binary.LittleEndian.Uint16(blk[80:])))
		dmin := float64(F16ToF32(binary.LittleEndian.Uint16(blk[82:])))
		g := blk[e/16]
		return d * float64(g&15), dmin * float64(g>>4)
	default:
		d := float64(F16ToF32(binary.LittleEndian.Uint16(blk[0:])))
		dmin := float64(F16ToF32(binary.LittleEndian.Uint16(blk[2:])))
		sc, m := q4KScaleMin(blk[4:16], e/32)
		return d * float64(sc), dmin * float64(m)
	}
}

// TestQuantizeKBound checks what the K-quant formats imply once their scales
// are fixed: the final pass picks each level as the nearest of dd·L − dm,
// L = 0..nmax, so an element is off by at most dd/2 plus its distance outside
// the representable range [−dm, dd·nmax − dm] (and a float32 rounding slack).
// Sub-blocks with dd = 0 keep their search levels and decode to −dm. The
// relative RMS error over all data must also stay below a format-typical
// ceiling, which catches a wrong search even where the bound is loose.
func TestQuantizeKBound(t *testing.T) {
	tests := []struct {
		typ        Type
		nmax       float64
		importance bool
		maxRelRMS  float64
	}{
		{Q4_K, 15, false, 0.12},
		{Q4_K, 15, true, 0.12},
		{Q2_K, 3, false, 0.5},
		{Q2_K, 3, true, 0.5},
	}
	for _, tc := range tests {
		name := tc.typ.String() + "/plain"
		if tc.importance {
			name = tc.typ.String() + "/importance"
		}
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(61, uint64(tc.typ)))
			const cols = 1024
			var imp []float32
			if tc.importance {
				imp = qtImportance(r, cols)
			}
			x := make([]float32, 8*cols)
			for i := range x { // per-block scales, as qtRows does per 32
				x[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/256%5)-2))
			}
			q, err := Quantize(tc.typ, x, cols, imp)
			require.NoError(t, err)
			got := qtDequant(t, tc.typ, q, len(x))
			bb := tc.typ.BlockBytes()
			var errSq, sigSq float64
			for e, v := range x {
				blk := q[e/256*bb : (e/256+1)*bb]
				dd, dm := kBlockFields(tc.typ, blk, e%256)
				xv, g := float64(v), float64(got[e])
				errSq += (xv - g) * (xv - g)
				sigSq += xv * xv
				if dd == 0 {
					require.Equal(t, float32(-dm), got[e], "element %d", e)
					continue
				}
				outside := max(0, -dm-xv, xv-(dd*tc.nmax-dm))
				bound := dd/2 + outside + 1e-6*(math.Abs(xv)+dm+dd*tc.nmax)
				require.LessOrEqual(t, math.Abs(xv-g), bound, "element %d", e)
			}
			rel := math.Sqrt(errSq / sigSq)
			t.Logf("relative RMS error %.4f", rel)
			require.Less(t, rel, tc.maxRelRMS)
		})
	}
}

// TestQuantizeIQ2_XXSRoundTrip checks IQ2_XXS output on Gaussian data: every
// 8-value sub-group decodes with at most one sign differing from the input
// (only the least important value may be flipped to make the count of
// negatives even), and the relative RMS error stays below a ceiling typical
// for 2.06 bits per weight.
func TestQuantizeIQ2_XXSRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	const cols = 1024
	x := make([]float32, 4*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	imp := qtImportance(r, cols)
	q, err := Quantize(IQ2_XXS, x, cols, imp)
	require.NoError(t, err)
	got := qtDequant(t, IQ2_XXS, q, len(x))
	var errSq, sigSq float64
	for g := 0; g < len(x); g += 8 {
		flips := 0
		for i := g; i < g+8; i++ {
			if got[i] != 0 && (got[i] < 0) != (x[i] < 0) {
				flips++
			}
			d := float64(x[i] - got[i])
			errSq += d * d
			sigSq += float64(x[i]) * float64(x[i])
		}
		require.LessOrEqual(t, flips, 1, "sub-group at %d", g)
	}
	rel := math.Sqrt(errSq / sigSq)
	t.Logf("relative RMS error %.4f", rel)
	require.Less(t, rel, 0.6)
}

// TestQuantizeMatchesQuantizeRow checks that Quantize is QuantizeRow row by
// row, and that for IQ2_XXS without importance it uses the column sums of
// squares, accumulated in float32 in row order.
func TestQuantizeMatchesQuantizeRow(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	const rows, cols = 3, 512
	x := qtRows(r, rows, cols)
	imp := qtImportance(r, cols)
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q2_K, Q4_K, IQ2_XXS} {
		for _, withImp := range []bool{false, true} {
			var im []float32
			if withImp {
				im = imp
			}
			got, err := Quantize(typ, x, cols, im)
			require.NoError(t, err)
			rowImp := im
			if rowImp == nil && typ == IQ2_XXS {
				rowImp = make([]float32, cols)
				for c := range cols {
					var s float32
					for r := range rows {
						v := x[r*cols+c]
						s += float32(v * v)
					}
					rowImp[c] = s
				}
			}
			rb, err := typ.RowBytes(cols)
			require.NoError(t, err)
			require.Len(t, got, rows*rb)
			row := make([]byte, rb)
			for r := range rows {
				require.NoError(t, QuantizeRow(typ, x[r*cols:(r+1)*cols], rowImp, row))
				require.Equal(t, row, got[r*rb:(r+1)*rb], "%v importance=%v row %d", typ, withImp, r)
			}
		}
	}
}

// TestQuantizeSpecialBlocks covers all-zero blocks (which must encode to all
// zero bytes), constant blocks, and non-finite input, which must not panic.
func TestQuantizeSpecialBlocks(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, typ := range []Type{Q8_0, Q2_K, Q4_K, IQ2_XXS} {
		for _, withImp := range []bool{false, true} {
			imp := slices.Repeat([]float32{1}, 256)
			if !withImp {
				if typ == IQ2_XXS {
					continue
				}
				imp = nil
			}
			rb, err := typ.RowBytes(256)
			require.NoError(t, err)
			out := make([]byte, rb)

			require.NoError(t, QuantizeRow(typ, make([]float32, 256), imp, out))
			require.Equal(t, make([]byte, rb), out, "%v zero block", typ)

			c := slices.Repeat([]float32{0.75}, 256)
			require.NoError(t, QuantizeRow(typ, c, imp, out))
			// IQ2_XXS cannot repeat one level over 8 values (the all-equal
			// words are off its grid), so only its mean is close.
			var sum float64
			for i, v := range qtDequant(t, typ, out, 256) {
				sum += float64(v)
				if typ != IQ2_XXS {
					require.InDelta(t, 0.75, v, 0.75*0.01, "%v constant block element %d", typ, i)
				}
			}
			require.InDelta(t, 0.75, sum/256, 0.75*0.1, "%v constant block mean", typ)

			for _, bad := range []float32{nan, inf, -inf, 3e38} {
				x := qtRows(rand.New(rand.NewPCG(1, 1)), 1, 256)
				x[17] = bad
				require.NotPanics(t, func() {
					require.NoError(t, QuantizeRow(typ, x, imp, out))
					_ = DequantizeRow(typ, out, make([]float32, 256))
				}, "%v with %v", typ, bad)
			}
		}
	}
}

func TestQuantizeRowErrors(t *testing.T) {
	imp := make([]float32, 256)
	tests := []struct {
		name       string
		typ        Type
		src        int
		importance []float32
		dst        int
	}{
		{"partial block", Q8_0, 40, nil, 34},
		{"dst too short", Q4_K, 256, nil, 143},
		{"dst too long", Q2_K, 256, nil, 85},
		{"importance length", Q4_K, 256, imp[:255], 144},
		{"IQ2_XXS without importance", IQ2_XXS, 256, nil, 66},
		{"Q8_K not emittable", Q8_K, 256, nil, 292},
		{"I32 not emittable", I32, 4, nil, 16},
		{"unknown type", Type(77), 4, nil, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, QuantizeRow(tc.typ, make([]float32, tc.src), tc.importance, make([]byte, tc.dst)))
		})
	}
	err := QuantizeRow(IQ2_XXS, make([]float32, 256), nil, make([]byte, 66))
	require.ErrorIs(t, err, errNeedImportance)
	require.ErrorContains(t, err, "IQ2_XXS")
}

func TestQuantizeErrors(t *testing.T) {
	tests := []struct {
		name       string
		typ        Type
		n, cols    int
		importance []float32
	}{
		{"zero cols", Q8_0, 64, 0, nil},
		{"negative cols", Q8_0, 64, -32, nil},
		{"ragged rows", Q8_0, 96, 64, nil},
		{"cols not a block multiple", Q4_K, 512, 128, nil},
		{"importance length", Q2_K, 512, 256, make([]float32, 512)},
		{"not emittable", Q8_K, 256, 256, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Quantize(tc.typ, make([]float32, tc.n), tc.cols, tc.importance)
			require.Error(t, err)
		})
	}
	out, err := Quantize(Q8_0, nil, 32, nil)
	require.NoError(t, err)
	require.Empty(t, out)
}

func TestTypeEmittable(t *testing.T) {
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q2_K, Q4_K, IQ2_XXS} {
		require.True(t, typ.Emittable(), "%v", typ)
	}
	for _, typ := range []Type{Q8_K, I32, Type(14), Type(99)} {
		require.False(t, typ.Emittable(), "%v", typ)
	}
	require.True(t, IQ2_XXS.RequiresImportance())
	require.False(t, Q2_K.RequiresImportance())
}

// TestIQ2NeighbourMap checks the neighbour map against a direct transcription
// of docs/formats/quant.md#iq2_xxs-quantizer: squared distances from the coordinates 2f+1 to all 256 grid
// points, sorted by (distance, index), cut after the second distinct
// distance. It samples the off-grid words to stay fast.
func TestIQ2NeighbourMap(t *testing.T) {
	m := iq2xxsNeighbours()
	for k, kg := range iq2xxsKGrid {
		require.Equal(t, int16(k), m.grid[kg])
		for i := range 8 {
			// The grid bytes are {8, 25, 43}[level].
			require.Equal(t, [3]uint8{8, 25, 43}[m.levels[k][i]], uint8(iq2xxsGrid[k]>>(8*i)))
		}
	}
	type cand struct{ d, k int }
	for u := 0; u < iq2MapSize; u++ {
		list := m.nb[m.start[u]:m.start[u+1]]
		if m.grid[u] >= 0 {
			require.Empty(t, list)
			continue
		}
		require.NotEmpty(t, list, "u=%d", u)
		if u%13 != 0 {
			continue
		}
		cands := make([]cand, 256)
		for k, kg := range iq2xxsKGrid {
			d := 0
			for i := range 8 {
				a := 2*(u>>(2*i)&3) + 1
				b := 2*int(kg>>(2*i)&3) + 1
				d += (a - b) * (a - b)
			}
			cands[k] = cand{d, k}
		}
		slices.SortFunc(cands, func(a, b cand) int {
			if a.d != b.d {
				return a.d - b.d
			}
			return a.k - b.k
		})
		var want []uint8
		shells := 0
		for i, c := range cands {
			if i == 0 || c.d != cands[i-1].d {
				shells++
			}
			if shells > 2 {
				break
			}
			want = append(want, uint8(c.k))
		}
		require.Equal(t, want, list, "u=%d", u)
	}
}

func BenchmarkIQ2NeighbourBuild(b *testing.B) {
	for b.Loop() {
		buildIQ2Neighbourhood()
	}
}

func BenchmarkQuantizeRow(b *testing.B) {
	r := rand.New(rand.NewPCG(91, 92))
	x := qtRows(r, 1, 4096)
	imp := qtImportance(r, 4096)
	for _, typ := range []Type{Q8_0, Q2_K, Q4_K, IQ2_XXS} {
		rb, _ := typ.RowBytes(len(x))
		out := make([]byte, rb)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if err := QuantizeRow(typ, x, imp, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
