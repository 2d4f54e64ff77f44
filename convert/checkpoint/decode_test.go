package checkpoint

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// e4m3Ref decodes an e4m3fn byte from the format's definition in float64.
func e4m3Ref(b byte) float64 {
	if b&0x7F == 0x7F {
		return math.NaN()
	}
	s := 1.0
	if b&0x80 != 0 {
		s = -1
	}
	e, m := int(b>>3)&15, float64(b&7)
	if e == 0 {
		return s * math.Ldexp(m, -9)
	}
	return s * math.Ldexp(1+m/8, e-7)
}

func TestE4M3EveryCode(t *testing.T) {
	for c := range 256 {
		b := byte(c)
		got, want := E4M3(b), e4m3Ref(b)
		if math.IsNaN(want) {
			require.True(t, math.IsNaN(float64(got)), "code %#02x", b)
			continue
		}
		require.Equal(t, math.Float32bits(float32(want)), math.Float32bits(got), "code %#02x: got %v want %v", b, got, want)
	}
	// Hand-computed anchors.
	for _, tc := range []struct {
		b    byte
		bits uint32
	}{
		{0x00, 0x00000000}, {0x80, 0x80000000}, // ±0
		{0x01, math.Float32bits(1.0 / 512)}, // smallest subnormal 2⁻⁹
		{0x07, math.Float32bits(7.0 / 512)}, // largest subnormal
		{0x08, math.Float32bits(1.0 / 64)},  // smallest normal 2⁻⁶
		{0x38, math.Float32bits(1)}, {0xB8, math.Float32bits(-1)},
		{0x3C, math.Float32bits(1.5)}, {0x40, math.Float32bits(2)},
		{0x7E, math.Float32bits(448)}, {0xFE, math.Float32bits(-448)},
		{0x77, math.Float32bits(240)},
	} {
		require.Equal(t, tc.bits, math.Float32bits(E4M3(tc.b)), "code %#02x", tc.b)
	}
}

func TestE2M1EveryCode(t *testing.T) {
	want := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for c := range 16 {
		got := E2M1(byte(c))
		require.Equal(t, want[c], got, "code %d", c)
		require.Equal(t, c >= 8, math.Signbit(float64(got)), "sign of code %d", c)
		require.Equal(t, got, E2M1(byte(c)|0xA0), "high nibble must be ignored")
	}
}

func TestE8M0EveryCode(t *testing.T) {
	require.Equal(t, uint32(0x00400000), math.Float32bits(E8M0(0)))
	require.Equal(t, math.Ldexp(1, -127), float64(E8M0(0)))
	require.True(t, math.IsNaN(float64(E8M0(0xFF))))
	for b := 1; b < 255; b++ {
		require.Equal(t, math.Ldexp(1, b-127), float64(E8M0(byte(b))), "code %d", b)
	}
	require.Equal(t, float32(1), E8M0(127))
	require.Equal(t, float32(0.5), E8M0(126))
	require.Equal(t, float32(2), E8M0(128))
}

// exactBF16 reports whether v survives a round trip through BF16.
func exactBF16(v float32) bool {
	return math.Float32bits(quant.BF16ToF32(quant.F32ToBF16(v))) == math.Float32bits(v)
}

// TestExactTypeBound checks the claim behind ExactType by brute force:
// every finite E4M3 code times every scale from 2⁻¹²⁴ up is exact in
// BF16 (or overflows float32 altogether), 2⁻¹²⁵ is not always, and every
// FP4 product is exact.
func TestExactTypeBound(t *testing.T) {
	for s := 0; s < 255; s++ {
		scale := E8M0(byte(s))
		exact := true
		for c := range 256 {
			v := E4M3(byte(c)) * scale
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				continue
			}
			exact = exact && exactBF16(v)
		}
		require.Equal(t, s >= 3, exact, "FP8 with scale byte %d", s)
		for c := range 16 {
			if v := E2M1(byte(c)) * scale; !math.IsInf(float64(v), 0) {
				require.True(t, exactBF16(v), "FP4 code %d scale byte %d", c, s)
			}
		}
	}
	w := &Weight{enc: encFP8, scale: []byte{3, 200, 127}}
	require.Equal(t, quant.BF16, w.ExactType())
	w.scale[1] = 2
	require.Equal(t, quant.F32, w.ExactType())
	require.Equal(t, quant.BF16, (&Weight{enc: encFP4, scale: []byte{0}}).ExactType())
	require.Equal(t, quant.F16, (&Weight{DType: F16}).ExactType())
	require.Equal(t, quant.F32, (&Weight{DType: F32}).ExactType())
	require.Equal(t, quant.I32, (&Weight{DType: I64, enc: encInt}).ExactType())
}

// TestDecodePartialTiles decodes an FP8 matrix whose dims are not
// multiples of 128 and an FP4 matrix, element by element from the formula.
func TestDecodePartialTiles(t *testing.T) {
	const out, in = 130, 260
	data := make([]byte, out*in)
	for i := range data {
		data[i] = byte(i*7+3) &^ 0x80 // includes subnormal and large codes
		if data[i] == 0x7F {
			data[i] = 0x7E
		}
		if i%5 == 0 {
			data[i] |= 0x80
		}
	}
	scale := []byte{120, 127, 130, 3, 140, 90} // [2, 3] tiles
	// FP4 rows hold whole 32-blocks.
	const in4 = 288
	fp4 := make([]byte, out*in4/2)
	for i := range fp4 {
		fp4[i] = byte(i*13 + 5)
	}
	fp4Scale := make([]byte, out*in4/32)
	for i := range fp4Scale {
		fp4Scale[i] = byte(100 + i%50)
	}
	dir := t.TempDir()
	path := dir + "/w.safetensors"
	writeST(t, path, []stTensor{
		{"a.weight", F8E4M3, []int{out, in}, data},
		{"a.scale", F8E8M0, []int{2, 3}, scale},
		{"b.weight", I8, []int{out, in4 / 2}, fp4},
		{"b.scale", F8E8M0, []int{out, in4 / 32}, fp4Scale},
	})
	c, err := Open(path)
	require.NoError(t, err)
	defer c.Close()

	a, err := c.Weight("a.weight")
	require.NoError(t, err)
	require.Equal(t, "a.scale", a.Scale)
	got, err := a.Float32s()
	require.NoError(t, err)
	for r := range out {
		for col := range in {
			want := e4m3Ref(data[r*in+col]) * math.Ldexp(1, int(scale[r/128*3+col/128])-127)
			require.Equal(t, math.Float32bits(float32(want)), math.Float32bits(got[r*in+col]), "a[%d,%d]", r, col)
		}
	}
	// Decoding a row range gives the same rows.
	part := make([]float32, 3*in)
	require.NoError(t, a.DecodeRows(127, part))
	require.Equal(t, got[127*in:130*in], part)
	require.Error(t, a.DecodeRows(128, part))

	b, err := c.Weight("b.weight")
	require.NoError(t, err)
	require.Equal(t, []int{out, in4}, b.Shape)
	got, err = b.Float32s()
	require.NoError(t, err)
	table := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	for r := range out {
		for col := range in4 {
			nib := fp4[r*in4/2+col/2]
			if col%2 == 1 {
				nib >>= 4
			}
			v := table[nib&7]
			if nib&8 != 0 {
				v = -v
			}
			want := v * math.Ldexp(1, int(fp4Scale[r*in4/32+col/32])-127)
			require.Equal(t, math.Float32bits(float32(want)), math.Float32bits(got[r*in4+col]), "b[%d,%d]", r, col)
		}
	}
}

func TestDecodeRejectsNonFinite(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/w.safetensors"
	fp8 := make([]byte, 4*4)
	fp8[5] = 0x7F
	inf := make([]byte, 4)
	inf[2], inf[3] = 0x80, 0x7F // +Inf F32
	writeST(t, path, []stTensor{
		{"nan.weight", F8E4M3, []int{4, 4}, fp8},
		{"nan.scale", F8E8M0, []int{1, 1}, []byte{127}},
		{"ff.weight", F8E4M3, []int{4, 4}, make([]byte, 16)},
		{"ff.scale", F8E8M0, []int{1, 1}, []byte{0xFF}},
		{"e.weight", I8, []int{2, 16}, make([]byte, 32)},
		{"e.scale", F8E8M0, []int{2, 1}, []byte{1, 0xFF}},
		{"big.weight", I8, []int{1, 16}, append([]byte{0x07}, make([]byte, 15)...)},
		{"big.scale", F8E8M0, []int{1, 1}, []byte{254}},
		{"inf", F32, []int{1}, inf},
		{"ids", I64, []int{2}, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}},
	})
	c, err := Open(path)
	require.NoError(t, err)
	defer c.Close()
	for name, msg := range map[string]string{
		"nan.weight": `tensor "nan.weight": element [1, 1]: F8_E4M3 NaN code 0x7f`,
		"ff.weight":  `tensor "ff.weight": element [0, 0]: scale "ff.scale" holds the E8M0 NaN code 0xFF`,
		"e.weight":   `element [1, 0]: scale "e.scale" holds the E8M0 NaN code 0xFF`,
		"big.weight": `element 0 (row 0, column 0) decodes to +Inf`,
		"inf":        `element 0 (row 0, column 0) decodes to +Inf`,
	} {
		w, err := c.Weight(name)
		require.NoError(t, err, name)
		_, err = w.Float32s()
		require.ErrorContains(t, err, msg, name)
	}
	w, err := c.Weight("ids")
	require.NoError(t, err)
	_, err = w.Int32s()
	require.ErrorContains(t, err, `tensor "ids": element 1 = 4294967296 does not fit int32`)
	_, err = w.Float32s()
	require.Error(t, err)
}
