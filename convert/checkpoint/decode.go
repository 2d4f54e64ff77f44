package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ds4-go/ds4/quant"
)

// FP8Block is the side of the square weight tiles that share one FP8 scale.
const FP8Block = 128

// FP4Block is the number of consecutive FP4 weights of a row that share one
// scale.
const FP4Block = 32

// ErrMissing is wrapped by the errors for tensors the checkpoint lacks.
var ErrMissing = errors.New("not in checkpoint")

// E4M3 decodes a float8 e4m3fn byte: sign bit 7, exponent bits 6..3 with
// bias 7, mantissa bits 2..0, subnormals m·2⁻⁹, no infinities; the two NaN
// codes 0x7F and 0xFF decode to NaN.
func E4M3(b byte) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	e, m := int(b>>3&15), int(b&7)
	switch {
	case b&0x7F == 0x7F:
		return float32(math.NaN())
	case e == 0:
		return sign * float32(m) / (1 << 9)
	}
	return sign * math.Float32frombits(uint32(e+120)<<23|uint32(m)<<20)
}

// e2m1 holds the magnitudes of the FP4 (E2M1) codes 0..7.
var e2m1 = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// E2M1 decodes a 4-bit FP4 code (the low nibble of c): bit 3 is the sign,
// bits 0..2 index 0, 0.5, 1, 1.5, 2, 3, 4, 6.
func E2M1(c byte) float32 {
	v := e2m1[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// E8M0 decodes an unsigned power-of-two scale byte, 2^(b−127): b = 0 gives
// 2⁻¹²⁷ (float32 bits 0x00400000) and 0xFF, the NaN code, gives NaN.
func E8M0(b byte) float32 {
	switch b {
	case 0:
		return math.Float32frombits(0x00400000)
	case 0xFF:
		return float32(math.NaN())
	}
	return math.Float32frombits(uint32(b) << 23)
}

// encoding is how a weight's values are stored.
type encoding int

const (
	encPlain encoding = iota // BF16, F16 or F32 values
	encFP8                   // F8_E4M3 with an F8_E8M0 scale per 128×128 tile
	encFP4                   // I8 packed E2M1 pairs with an F8_E8M0 scale per 1×32
	encInt                   // I64 or I32 integers
)

// Weight is a checkpoint tensor resolved with its scale companion, ready to
// decode row by row.
type Weight struct {
	Name  string // the tensor's checkpoint name
	Scale string // its .scale companion, or ""
	Shape []int  // logical shape: an FP4 tensor's unpacked shape
	DType DType  // storage type of the values

	enc        encoding
	data       []byte
	scale      []byte
	scaleShape []int
}

// ScaleName returns the name of the block-scale companion of a weight:
// name with ".weight" replaced by ".scale".
func ScaleName(name string) string {
	return strings.TrimSuffix(name, ".weight") + ".scale"
}

// Weight resolves the tensor called name: plain BF16/F16/F32 values, FP8
// (F8_E4M3) or packed FP4 (I8) weights with their F8_E8M0 .scale companion,
// or an I64/I32 integer table. It checks the dtypes and that the scale's
// shape matches the weight's.
func (c *Checkpoint) Weight(name string) (*Weight, error) {
	w, err := c.weight(name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tensor %q: %w", name, err)
	}
	return w, nil
}

func (c *Checkpoint) weight(name string) (*Weight, error) {
	t, ok := c.tensors[name]
	if !ok {
		return nil, ErrMissing
	}
	w := &Weight{Name: name, Shape: t.Shape, DType: t.DType, data: t.data}
	switch t.DType {
	case BF16, F16, F32:
		return w, nil
	case I64, I32:
		w.enc = encInt
		return w, nil
	case F8E4M3:
		w.enc = encFP8
	case I8:
		w.enc = encFP4
	default:
		return nil, fmt.Errorf("dtype %s is not a weight encoding (want BF16, F16, F32, F8_E4M3, I8 or I64)", t.DType)
	}
	w.Scale = ScaleName(name)
	s, ok := c.tensors[w.Scale]
	if !ok || w.Scale == name {
		return nil, fmt.Errorf("%s weight without its .scale companion %q", t.DType, w.Scale)
	}
	if s.DType != F8E8M0 {
		return nil, fmt.Errorf("scale %q has dtype %s, want F8_E8M0", w.Scale, s.DType)
	}
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("%s weight of rank %d, want a [out, in] matrix", t.DType, len(t.Shape))
	}
	w.scale, w.scaleShape = s.data, s.Shape
	out, in := t.Shape[0], t.Shape[1]
	var want []int
	if w.enc == encFP8 {
		want = []int{ceilDiv(out, FP8Block), ceilDiv(in, FP8Block)}
	} else {
		in *= 2 // two FP4 codes per byte
		if in%FP4Block != 0 {
			return nil, fmt.Errorf("packed FP4 weight of %d columns, want a multiple of %d", in, FP4Block)
		}
		w.Shape = []int{out, in}
		want = []int{out, in / FP4Block}
	}
	if !slices.Equal(s.Shape, want) {
		return nil, fmt.Errorf("scale %q has shape %v, want %v for a %v weight", w.Scale, s.Shape, want, w.Shape)
	}
	return w, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Cols returns the length of a row: the last dimension (1 for a scalar).
func (w *Weight) Cols() int {
	if len(w.Shape) == 0 {
		return 1
	}
	return w.Shape[len(w.Shape)-1]
}

// Rows returns the number of rows: the product of all but the last
// dimension.
func (w *Weight) Rows() int {
	n := 1
	for _, d := range w.Shape[:max(len(w.Shape)-1, 0)] {
		n *= d
	}
	return n
}

// IsInt reports whether the tensor holds integers (I64 or I32).
func (w *Weight) IsInt() bool { return w.enc == encInt }

// Format describes the storage encoding, e.g. "F8_E4M3×E8M0[128×128]".
func (w *Weight) Format() string {
	switch w.enc {
	case encFP8:
		return "F8_E4M3×E8M0[128×128]"
	case encFP4:
		return "FP4(I8)×E8M0[1×32]"
	}
	return string(w.DType)
}

// ExactType returns the narrowest GGUF float type that holds every decoded
// value exactly: F32, F16 or BF16 for plain values, BF16 for FP8 and FP4
// weights (an E8M0 scale is a power of two, so code × scale has at most 4
// significant bits), except F32 for FP8 weights with a scale below 2⁻¹²⁴,
// whose smallest subnormal products fall below BF16's range; I32 for
// integers.
func (w *Weight) ExactType() quant.Type {
	switch w.enc {
	case encInt:
		return quant.I32
	case encFP8:
		// e4m3 values are multiples of 2⁻⁹; times 2^(b−127) they are
		// multiples of 2^(b−136), exact in BF16 when that is ≥ 2⁻¹³³.
		for _, b := range w.scale {
			if b < 3 {
				return quant.F32
			}
		}
		return quant.BF16
	case encFP4:
		return quant.BF16 // multiples of 2^(b−128) ≥ 2⁻¹²⁸
	}
	switch w.DType {
	case BF16:
		return quant.BF16
	case F16:
		return quant.F16
	}
	return quant.F32
}

// DecodeRows decodes len(dst)/Cols() rows starting at row0 into dst as
// float32. FP8 and FP4 values are code × scale, exact in float32. A
// non-finite result (a NaN code, an E8M0 NaN scale, an overflowing product,
// an Inf or NaN stored value) is an error naming the element.
func (w *Weight) DecodeRows(row0 int, dst []float32) error {
	if err := w.decodeRows(row0, dst); err != nil {
		return fmt.Errorf("checkpoint: tensor %q: %w", w.Name, err)
	}
	return nil
}

func (w *Weight) decodeRows(row0 int, dst []float32) error {
	cols := w.Cols()
	if w.enc == encInt {
		return errors.New("integer tensor decoded as floats")
	}
	if cols == 0 || len(dst)%cols != 0 || row0 < 0 || row0+len(dst)/cols > w.Rows() {
		return fmt.Errorf("rows [%d, %d+%d/%d) out of range for shape %v", row0, row0, len(dst), cols, w.Shape)
	}
	le := binary.LittleEndian
	first := row0 * cols // first element
	switch w.enc {
	case encPlain:
		for i := range dst {
			k := first + i
			switch w.DType {
			case BF16:
				dst[i] = quant.BF16ToF32(le.Uint16(w.data[2*k:]))
			case F16:
				dst[i] = quant.F16ToF32(le.Uint16(w.data[2*k:]))
			default:
				dst[i] = math.Float32frombits(le.Uint32(w.data[4*k:]))
			}
		}
	case encFP8:
		scaleCols := w.scaleShape[1]
		for r := range len(dst) / cols {
			row := row0 + r
			srow := w.scale[row/FP8Block*scaleCols:]
			src, out := w.data[row*cols:(row+1)*cols], dst[r*cols:(r+1)*cols]
			for c, b := range src {
				out[c] = E4M3(b) * E8M0(srow[c/FP8Block])
			}
		}
	case encFP4:
		scaleCols := cols / FP4Block
		for r := range len(dst) / cols {
			row := row0 + r
			srow := w.scale[row*scaleCols : (row+1)*scaleCols]
			src, out := w.data[row*cols/2:(row+1)*cols/2], dst[r*cols:(r+1)*cols]
			for j, b := range src {
				s := E8M0(srow[2*j/FP4Block])
				out[2*j] = E2M1(b) * s
				out[2*j+1] = E2M1(b>>4) * s
			}
		}
	}
	for i, v := range dst {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return w.nonFinite(first+i, v)
		}
	}
	return nil
}

// nonFinite explains a non-finite decoded element k.
func (w *Weight) nonFinite(k int, v float32) error {
	cols := w.Cols()
	row, col := k/cols, k%cols
	switch w.enc {
	case encFP8:
		if b := w.data[k]; b&0x7F == 0x7F {
			return fmt.Errorf("element [%d, %d]: F8_E4M3 NaN code %#02x", row, col, b)
		}
		if b := w.scale[row/FP8Block*w.scaleShape[1]+col/FP8Block]; b == 0xFF {
			return fmt.Errorf("element [%d, %d]: scale %q holds the E8M0 NaN code 0xFF", row, col, w.Scale)
		}
	case encFP4:
		if w.scale[row*(cols/FP4Block)+col/FP4Block] == 0xFF {
			return fmt.Errorf("element [%d, %d]: scale %q holds the E8M0 NaN code 0xFF", row, col, w.Scale)
		}
	}
	return fmt.Errorf("element %d (row %d, column %d) decodes to %v", k, row, col, v)
}

// Int32s decodes an integer tensor to int32, checking every value's range.
func (w *Weight) Int32s() ([]int32, error) {
	v, err := w.int32s()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tensor %q: %w", w.Name, err)
	}
	return v, nil
}

func (w *Weight) int32s() ([]int32, error) {
	if w.enc != encInt {
		return nil, fmt.Errorf("%s is not an integer dtype", w.DType)
	}
	out := make([]int32, w.Rows()*w.Cols())
	le := binary.LittleEndian
	for i := range out {
		if w.DType == I32 {
			out[i] = int32(le.Uint32(w.data[4*i:]))
			continue
		}
		v := int64(le.Uint64(w.data[8*i:]))
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("element %d = %d does not fit int32", i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// Float32s decodes the whole tensor (see DecodeRows).
func (w *Weight) Float32s() ([]float32, error) {
	dst := make([]float32, w.Rows()*w.Cols())
	if len(dst) == 0 {
		return dst, nil
	}
	return dst, w.DecodeRows(0, dst)
}
