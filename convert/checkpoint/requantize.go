package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// The metadata keys a conversion owns in its output.
const (
	keySource        = "ds4go.convert.source"
	keyMode          = "ds4go.convert.mode"
	keyImatrixPrefix = "quantize.imatrix."
)

// ggufRows is a tensor of a GGUF file, or one expert's slice of a stacked
// routed tensor, read row by row.
type ggufRows struct {
	name       string // the tensor's name, with the expert for a slice
	typ        quant.Type
	data       []byte
	rows, cols int
}

func (g *ggufRows) Rows() int      { return g.rows }
func (g *ggufRows) Cols() int      { return g.cols }
func (g *ggufRows) IsInt() bool    { return g.typ == quant.I32 }
func (g *ggufRows) Format() string { return g.typ.String() }
func (g *ggufRows) label() string  { return g.name }

// ExactType returns the stored type: a GGUF input keeps its types in
// lossless mode, its bytes copied.
func (g *ggufRows) ExactType() quant.Type { return g.typ }

func (g *ggufRows) stored(typ quant.Type) []byte {
	if typ == g.typ {
		return g.data
	}
	return nil
}

func (g *ggufRows) decodeRows(row0 int, dst []float32) error {
	rb, err := g.typ.RowBytes(g.cols)
	if err != nil {
		return err
	}
	n := len(dst) / g.cols
	if len(dst)%g.cols != 0 || row0 < 0 || row0+n > g.rows {
		return fmt.Errorf("rows [%d, %d+%d/%d) out of range for %d rows", row0, row0, len(dst), g.cols, g.rows)
	}
	for r := range n {
		row := row0 + r
		if err := quant.DequantizeRow(g.typ, g.data[row*rb:(row+1)*rb], dst[r*g.cols:(r+1)*g.cols]); err != nil {
			return err
		}
	}
	for i, v := range dst {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			k := row0*g.cols + i
			return fmt.Errorf("element %d (row %d, column %d) decodes to %v", k, k/g.cols, k%g.cols, v)
		}
	}
	return nil
}

func (g *ggufRows) int32s() ([]int32, error) {
	if g.typ != quant.I32 {
		return nil, fmt.Errorf("%v is not an integer type", g.typ)
	}
	out := make([]int32, g.rows*g.cols)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(g.data[4*i:]))
	}
	return out, nil
}

// missing is the error for a catalog tensor the input GGUF lacks.
type missing string

func (m missing) Error() string        { return fmt.Sprintf("tensor %s: not in the input file", string(m)) }
func (m missing) Is(target error) bool { return target == ErrMissing }

// resolveGGUF finds the tensor of f feeding catalog tensor t and checks
// its dims and that its type can be decoded.
func resolveGGUF(f *gguf.File, t layout.Tensor, p layout.Params) (*item, error) {
	ti, ok := f.Tensor(t.Name)
	if !ok {
		return nil, missing(t.Name)
	}
	if !slices.Equal(ti.Dims, t.Dims) {
		return nil, fmt.Errorf("tensor %s: dims %v, want %v", t.Name, ti.Dims, t.Dims)
	}
	cols := int(t.Dims[0])
	// Dequantizing an empty row fails exactly for the types quant cannot decode.
	if ti.Type != quant.I32 && quant.DequantizeRow(ti.Type, nil, nil) != nil {
		return nil, fmt.Errorf("tensor %s: type %v cannot be decoded (want F32, F16, BF16, Q8_0, Q2_K, Q4_K or IQ2_XXS)", t.Name, ti.Type)
	}
	it := &item{t: t, Planned: Planned{Name: t.Name, Source: t.Name, Base: ti.Type, Format: ti.Type.String()}}
	data := f.TensorData(ti)
	if t.Class == layout.ClassRouted {
		il, part, err := routedLayer(t.Name)
		if err != nil {
			return nil, err
		}
		n := int(t.Dims[2])
		size := len(data) / n
		for e := range n {
			it.src = append(it.src, &ggufRows{
				name: fmt.Sprintf("%s[expert %d]", t.Name, e),
				typ:  ti.Type, data: data[e*size : (e+1)*size],
				rows: int(t.Dims[1]), cols: cols,
			})
			it.hf = append(it.hf, layout.ExpertHF(il, e, part))
		}
	} else {
		g := &ggufRows{name: t.Name, typ: ti.Type, data: data, rows: int(ti.Elements()) / cols, cols: cols}
		it.src = []rowSource{g}
		it.hf = []string{t.HF}
	}
	if err := classEncoding(t, it.src[0]); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return it, nil
}

// requantizePlan checks that src is a DS4 file and plans its conversion.
func requantizePlan(src *gguf.File, opt Options) (*Report, []*item, layout.Params, error) {
	check := layout.Check(src)
	if err := check.Err(); err != nil {
		return nil, nil, check.Params, fmt.Errorf("checkpoint: input is not a valid DS4 file: %w", err)
	}
	p := check.Params
	r, items, err := plan(p, opt, func(t layout.Tensor) (*item, error) { return resolveGGUF(src, t, p) })
	if err != nil {
		return nil, nil, p, err
	}
	used := make(map[string]bool, len(items))
	for _, it := range items {
		used[it.Name] = true
	}
	for _, ti := range src.Tensors {
		if !used[ti.Name] {
			r.Ignored = append(r.Ignored, ti.Name)
		}
	}
	return r, items, p, nil
}

// requantizeKV returns the metadata of a file converted from src: src's
// own, in order, without its quantize.imatrix.* keys, with
// ds4go.convert.mode (and ds4go.convert.source when opt.Source is set)
// replaced or added, then the imatrix keys of opt.
func requantizeKV(src *gguf.File, opt Options) []gguf.KV {
	set := map[string]gguf.Value{keyMode: gguf.String(string(opt.Mode))}
	if opt.Source != "" {
		set[keySource] = gguf.String(opt.Source)
	}
	var kv []gguf.KV
	for _, e := range src.KV {
		if strings.HasPrefix(e.Key, keyImatrixPrefix) {
			continue
		}
		if v, ok := set[e.Key]; ok {
			e.Value = v
			delete(set, e.Key)
		}
		kv = append(kv, e)
	}
	for _, k := range []string{keySource, keyMode} {
		if v, ok := set[k]; ok {
			kv = append(kv, gguf.KV{Key: k, Value: v})
		}
	}
	return append(kv, imatrixKV(opt)...)
}

// PlanRequantize is Plan for a DS4 GGUF input (see Requantize).
func PlanRequantize(src *gguf.File, opt Options) (*Report, error) {
	r, items, _, err := requantizePlan(src, opt)
	if err != nil {
		return nil, err
	}
	if err := r.measure(requantizeKV(src, opt), items); err != nil {
		return nil, err
	}
	return r, nil
}

// Requantize writes the DS4 GGUF src to w with the types opt chooses, as
// Convert does for a checkpoint: each tensor is decoded row by row from
// its stored type and quantized again, except that a tensor already
// stored in its new type is copied byte for byte (requantizing it could
// only lose precision; so an imatrix applies only to tensors whose type
// changes, e.g. from a lossless file). Lossless mode keeps every type.
// The metadata is src's (see requantizeKV); opt.Tables is unused. The
// input must pass layout.Check; tensors outside the catalog are dropped
// and listed in Report.Ignored.
func Requantize(w io.Writer, src *gguf.File, opt Options) (*Report, error) {
	r, items, p, err := requantizePlan(src, opt)
	if err != nil {
		return nil, err
	}
	if err := write(w, r, items, requantizeKV(src, opt), opt, p.Experts); err != nil {
		return nil, err
	}
	return r, nil
}

// RequantizeFile requantizes to the file at path atomically, as
// ConvertFile does.
func RequantizeFile(path string, src *gguf.File, opt Options) (*Report, error) {
	return writeFile(path, func(w io.Writer) (*Report, error) { return Requantize(w, src, opt) })
}
