package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/atomicfile"
	"github.com/ds4-go/ds4/quant"
)

// Mode selects the tensor types of a conversion.
type Mode string

// The conversion modes.
const (
	// ModeLossless stores every value exactly: norms as F32, integer
	// tables as I32, every other tensor in the narrowest float type that
	// holds its values (F32 for F32 sources, F16 for F16, BF16 for BF16,
	// FP8 and FP4 sources; see Weight.ExactType). A GGUF input keeps its
	// types.
	ModeLossless Mode = "lossless"
	// ModeF32 stores every float tensor as F32.
	ModeF32 Mode = "f32"
	// ModeQ2 is the published 2-bit mix (IQ2_XXS gate/up, Q2_K down).
	ModeQ2 Mode = "q2"
	// ModeQ4 is the published 4-bit mix (Q4_K routed experts).
	ModeQ4 Mode = "q4"
)

// ParseMode returns the mode called s.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeLossless, ModeF32, ModeQ2, ModeQ4:
		return m, nil
	}
	return "", fmt.Errorf("checkpoint: unknown mode %q (want lossless, f32, q2 or q4)", s)
}

// recipe returns the routed-expert recipe of the catalog for m; the
// lossless and f32 modes replace every type anyway.
func (m Mode) recipe() layout.Recipe {
	if m == ModeQ4 {
		return layout.RecipeQ4
	}
	return layout.RecipeQ2
}

// Override sets the type of every tensor whose name starts with Prefix
// (an exact name is a prefix of itself).
type Override struct {
	Prefix string
	Type   quant.Type
}

// ParseOverride parses a --tensor-type argument, "NAME=TYPE".
func ParseOverride(s string) (Override, error) {
	name, typ, ok := strings.Cut(s, "=")
	if !ok || name == "" || typ == "" {
		return Override{}, fmt.Errorf("checkpoint: tensor type %q: want NAME=TYPE", s)
	}
	t, err := quant.ParseType(typ)
	if err != nil {
		return Override{}, fmt.Errorf("checkpoint: tensor type %q: %w", s, err)
	}
	if !t.Emittable() && t != quant.I32 {
		return Override{}, fmt.Errorf("checkpoint: tensor type %q: %v cannot be written (want F32, F16, BF16, Q8_0, Q4_K, Q2_K or IQ2_XXS)", s, t)
	}
	return Override{Prefix: name, Type: t}, nil
}

// Options control a conversion.
type Options struct {
	Mode Mode
	// Overrides are checked in order before the mode's choice; the first
	// whose Prefix starts a tensor's name sets its type.
	Overrides []Override
	// Imatrix, if set, gives column importances (docs/formats/harness.md#how-the-quantizer-uses-it):
	// every tensor quantized to Q2_K, Q4_K or IQ2_XXS that has an entry
	// is quantized with it, routed experts with their own slice.
	Imatrix       *quant.Imatrix
	ImatrixPath   string // the imatrix file as given, stored as quantize.imatrix.file
	ImatrixStrict bool   // a tensor whose type uses importance but has no entry is an error

	Workers int               // goroutines decoding and quantizing; 0 means GOMAXPROCS
	Tables  *tokenizer.Tables // nil means the embedded DeepSeek V4 tables (checkpoint input only)
	Source  string            // ds4go.convert.source; "" means the checkpoint's path, or a GGUF input's own value
	Log     io.Writer         // if set, receives one line per tensor written
	// Progress, if set, is called with the number of tensor bytes written.
	Progress func(n int64)
}

// Report describes a conversion (or its plan).
type Report struct {
	Mode      Mode
	Tensors   []Planned  // the tensors of the file, in order
	Fallbacks []Fallback // tensors stored in another type than the mode's
	Ignored   []string   // input tensors the DS4 file does not use, mtp.* aside
	MTP       int        // mtp.* tensors skipped (the MTP block is not part of the file)
	Warnings  []string
	Bytes     int64 // tensor data bytes, without alignment padding

	DataOffset int64 // bytes of header, metadata and tensor infos, padded: where tensor data starts
	FileBytes  int64 // the size of the file
}

// Planned is one tensor of the converted file.
type Planned struct {
	Name   string
	Type   quant.Type
	Base   quant.Type // the input GGUF's type, or for a checkpoint the published mix's
	Dims   []uint64
	Source string // input name; checkpoint experts as layers.L.ffn.experts.*.wN.weight
	Format string // the source encoding (Weight.Format, or the GGUF type)
	Bytes  int64
	Copy   bool // the input's bytes are copied unchanged (a GGUF tensor already in Type)
	// Imatrix counts the slices (experts, or 1 for other tensors)
	// quantized with importance from the imatrix.
	Imatrix int
}

// Fallback records a tensor whose row length is not a whole number of
// blocks of the mode's type, stored in the next type that fits.
type Fallback struct {
	Tensor    string
	Want, Got quant.Type
}

// String describes the fallback for logs.
func (f Fallback) String() string {
	return fmt.Sprintf("%s: %v -> %v (ne[0] not a multiple of %d)", f.Tensor, f.Want, f.Got, f.Want.BlockElems())
}

// rowSource is a matrix whose rows decode to float32: a checkpoint weight,
// or a GGUF tensor or one expert's slice of it.
type rowSource interface {
	Rows() int
	Cols() int
	IsInt() bool
	Format() string
	ExactType() quant.Type
	decodeRows(row0 int, dst []float32) error
	int32s() ([]int32, error)
	label() string
	// stored returns the source's encoded bytes when they are already in
	// typ, else nil.
	stored(typ quant.Type) []byte
}

func (w *Weight) label() string            { return w.Name }
func (w *Weight) stored(quant.Type) []byte { return nil }

// item is one output tensor with its resolved sources.
type item struct {
	Planned
	t    layout.Tensor
	src  []rowSource // one, or one per routed expert
	hf   []string    // the source's checkpoint name, one per src, for imatrix lookups
	imp  [][]float32 // importance per src; nil entries: none from the imatrix
	info gguf.TensorInfo
}

// resolver finds the sources of one catalog tensor; ErrMissing means
// the input lacks it.
type resolver func(t layout.Tensor) (*item, error)

// Plan resolves every tensor of p's catalog in src and chooses its type
// for opt without decoding any values: missing, misshapen or wrongly
// typed tensors, missing .scale companions, unusable overrides and
// imatrix size mismatches are errors.
func Plan(src *Checkpoint, p layout.Params, opt Options) (*Report, error) {
	r, items, err := plan(p, opt, func(t layout.Tensor) (*item, error) { return resolve(src, t, p) })
	if err != nil {
		return nil, err
	}
	r.Ignored, r.MTP = unused(src, items)
	kv, err := checkpointKV(src, p, opt)
	if err != nil {
		return nil, err
	}
	if err := r.measure(kv, items); err != nil {
		return nil, err
	}
	return r, nil
}

func plan(p layout.Params, opt Options, find resolver) (*Report, []*item, error) {
	if _, err := ParseMode(string(opt.Mode)); err != nil {
		return nil, nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	r := &Report{Mode: opt.Mode}
	var items []*item
	var errs []error
	for _, t := range p.Tensors(opt.Mode.recipe()) {
		it, err := find(t)
		if errors.Is(err, ErrMissing) && t.Optional {
			msg := fmt.Sprintf("tensor %s: optional, %q not in checkpoint, omitted", t.Name, t.HF)
			if _, ok := err.(missing); ok {
				msg = fmt.Sprintf("tensor %s: optional, not in the input file, omitted", t.Name)
			}
			r.Warnings = append(r.Warnings, msg)
			continue
		}
		if err == nil {
			err = r.choose(it, opt, p.Experts)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Bytes += it.Bytes
		r.Tensors = append(r.Tensors, it.Planned)
		items = append(items, it)
	}
	errs = append(errs, gateUpMatch(items)...)
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("checkpoint: cannot convert: %w", errors.Join(errs...))
	}
	return r, items, nil
}

// choose sets an item's type, size and importance.
func (r *Report) choose(it *item, opt Options, experts int) error {
	t := it.t
	typ, err := tensorType(opt, t, it.src)
	if err != nil {
		return err
	}
	if fb, ok := fallback(t, typ); ok {
		r.Fallbacks = append(r.Fallbacks, fb)
		typ = fb.Got
	}
	it.Type = typ
	it.Dims = t.Dims
	it.info = gguf.TensorInfo{Name: t.Name, Type: typ, Dims: t.Dims}
	elems := int64(1)
	for _, d := range t.Dims {
		elems *= int64(d)
	}
	it.Bytes = elems / int64(typ.BlockElems()) * int64(typ.BlockBytes())
	it.Copy = it.src[0].stored(typ) != nil
	if it.Copy || !usesImportance(typ) || opt.Imatrix == nil {
		if it.Copy && opt.Imatrix != nil && usesImportance(typ) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("tensor %s: copied as stored in %v, so the imatrix was not applied (requantize a lossless file to apply it)", t.Name, typ))
		}
		return nil
	}
	it.imp = make([][]float32, len(it.src))
	for i := range it.src {
		expert, n := -1, 0
		if t.Class == layout.ClassRouted {
			expert, n = i, experts
		}
		names := []string{t.Name, it.hf[i]}
		imp, err := opt.Imatrix.Importance(names, expert, n, int(t.Dims[0]))
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if imp == nil && opt.ImatrixStrict {
			what := ""
			if expert >= 0 {
				what = fmt.Sprintf(" expert %d", expert)
			}
			return fmt.Errorf("tensor %s%s: no imatrix entry for %q or %q (--imatrix-strict)", t.Name, what, names[0], names[1])
		}
		if imp != nil {
			it.imp[i] = imp
			it.Imatrix++
		}
	}
	return nil
}

// usesImportance reports whether the quantizer of t consumes an
// importance vector: the K-quants weight their scale search with it and
// IQ2_XXS requires it.
func usesImportance(t quant.Type) bool {
	return t == quant.Q2_K || t == quant.Q4_K || t == quant.IQ2_XXS
}

// tensorType returns the type opt gives tensor t with sources src,
// before any block-size fallback (docs/formats/harness.md#type-per-tensor, adapted): an
// override first, then the class's fixed type, then the mode's choice.
func tensorType(opt Options, t layout.Tensor, src []rowSource) (quant.Type, error) {
	for _, o := range opt.Overrides {
		if !strings.HasPrefix(t.Name, o.Prefix) {
			continue
		}
		if !slices.Contains(t.Allowed(), o.Type) {
			return 0, fmt.Errorf("tensor %s: --tensor-type %s=%v: the engine accepts only %v for this tensor", t.Name, o.Prefix, o.Type, t.Allowed())
		}
		if _, err := o.Type.RowBytes(int(t.Dims[0])); err != nil {
			return 0, fmt.Errorf("tensor %s: --tensor-type %s=%v: %w", t.Name, o.Prefix, o.Type, err)
		}
		return o.Type, nil
	}
	switch {
	case t.Class == layout.ClassHashTable:
		return quant.I32, nil
	case t.Class == layout.ClassNorm || opt.Mode == ModeF32:
		return quant.F32, nil
	case opt.Mode == ModeLossless:
		typ := src[0].ExactType()
		for _, w := range src[1:] {
			if w.ExactType() != typ {
				return quant.F32, nil // F32 holds F16 and BF16 alike
			}
		}
		return typ, nil
	}
	return t.Type, nil
}

// fallback returns the type that replaces typ when t's rows are not a
// whole number of typ's blocks: Q8_0 when they are of its 32-wide blocks,
// else F16.
func fallback(t layout.Tensor, typ quant.Type) (Fallback, bool) {
	if t.Dims[0]%uint64(typ.BlockElems()) == 0 {
		return Fallback{}, false
	}
	got := quant.F16
	if t.Dims[0]%uint64(quant.Q8_0.BlockElems()) == 0 {
		got = quant.Q8_0
	}
	return Fallback{Tensor: t.Name, Want: typ, Got: got}, true
}

// gateUpMatch checks that each layer's routed gate and up share a type,
// which the engine requires.
func gateUpMatch(items []*item) []error {
	gate := map[string]quant.Type{}
	var errs []error
	for _, it := range items {
		if l, ok := strings.CutSuffix(it.Name, ".ffn_gate_exps.weight"); ok {
			gate[l] = it.Type
		}
	}
	for _, it := range items {
		if l, ok := strings.CutSuffix(it.Name, ".ffn_up_exps.weight"); ok && gate[l] != it.Type {
			errs = append(errs, fmt.Errorf("%s: routed gate is %v but up is %v; the engine needs them equal", l, gate[l], it.Type))
		}
	}
	return errs
}

// unused lists the checkpoint tensors no item reads.
func unused(src *Checkpoint, items []*item) (ignored []string, mtp int) {
	used := make(map[string]bool)
	for _, it := range items {
		for _, s := range it.src {
			if w, ok := s.(*Weight); ok {
				used[w.Name] = true
				if w.Scale != "" {
					used[w.Scale] = true
				}
			}
		}
	}
	for _, name := range src.Names() {
		switch {
		case used[name]:
		case strings.HasPrefix(name, "mtp."):
			mtp++
		default:
			ignored = append(ignored, name)
		}
	}
	return ignored, mtp
}

// routedPart maps a stacked expert tensor to its checkpoint projection.
func routedPart(suffix string) string {
	switch suffix {
	case "ffn_gate_exps.weight":
		return "w1"
	case "ffn_up_exps.weight":
		return "w3"
	case "ffn_down_exps.weight":
		return "w2"
	}
	return ""
}

// routedLayer splits a stacked expert tensor name into its layer and
// checkpoint projection.
func routedLayer(name string) (il int, part string, err error) {
	layer, suffix, ok := strings.Cut(strings.TrimPrefix(name, "blk."), ".")
	il, err = strconv.Atoi(layer)
	part = routedPart(suffix)
	if !ok || err != nil || part == "" {
		return 0, "", fmt.Errorf("tensor %s: not a routed expert tensor name", name)
	}
	return il, part, nil
}

// resolve finds the checkpoint sources of one catalog tensor and checks
// their shapes and encodings.
func resolve(src *Checkpoint, t layout.Tensor, p layout.Params) (*item, error) {
	it := &item{t: t, Planned: Planned{Name: t.Name, Source: t.HF, Base: t.Type}}
	want := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		want[len(want)-1-i] = int(d)
	}
	if t.Class == layout.ClassRouted {
		il, part, err := routedLayer(t.Name)
		if err != nil {
			return nil, err
		}
		it.Source = fmt.Sprintf("layers.%d.ffn.experts.*.%s.weight", il, part)
		want = want[1:] // one expert's [rows, cols]
		for e := range p.Experts {
			w, err := source(src, layout.ExpertHF(il, e, part), t, want)
			if err != nil {
				return nil, err
			}
			it.src = append(it.src, w)
			it.hf = append(it.hf, w.Name)
		}
	} else {
		w, err := source(src, t.HF, t, want)
		if err != nil {
			return nil, err
		}
		it.src = []rowSource{w}
		it.hf = []string{t.HF}
	}
	it.Format = it.src[0].Format()
	return it, nil
}

// source resolves the checkpoint tensor name feeding t and checks its
// logical shape and that its encoding suits t's class.
func source(src *Checkpoint, name string, t layout.Tensor, shape []int) (*Weight, error) {
	w, err := src.weight(name)
	if err == nil && !slices.Equal(w.Shape, shape) {
		err = fmt.Errorf("shape %v, want %v (the reverse of ne %v)", w.Shape, shape, t.Dims)
	}
	if err == nil {
		err = classEncoding(t, w)
	}
	if err != nil {
		return nil, fmt.Errorf("tensor %q (for %s): %w", name, t.Name, err)
	}
	return w, nil
}

// classEncoding checks that integer sources feed exactly the hash table.
func classEncoding(t layout.Tensor, w rowSource) error {
	if table := t.Class == layout.ClassHashTable; table != w.IsInt() {
		want := "a float encoding"
		if table {
			want = "I64 or I32"
		}
		return fmt.Errorf("dtype %s, want %s", w.Format(), want)
	}
	return nil
}

// imatrixKV returns the imatrix provenance keys of docs/formats/harness.md#output-metadata.
func imatrixKV(opt Options) []gguf.KV {
	if opt.Imatrix == nil {
		return nil
	}
	kv := []gguf.KV{
		{Key: "quantize.imatrix.file", Value: gguf.String(opt.ImatrixPath)},
		{Key: "quantize.imatrix.entries_count", Value: gguf.Uint64(uint64(len(opt.Imatrix.Entries)))},
	}
	if opt.Imatrix.Dataset != "" {
		kv = append(kv, gguf.KV{Key: "quantize.imatrix.dataset", Value: gguf.String(opt.Imatrix.Dataset)})
	}
	if opt.Imatrix.Chunks > 0 {
		kv = append(kv, gguf.KV{Key: "quantize.imatrix.chunks_count", Value: gguf.Uint64(uint64(opt.Imatrix.Chunks))})
	}
	return kv
}

// checkpointKV returns the metadata of a file converted from a checkpoint:
// p's hyperparameters, the tokenizer, provenance and the imatrix keys.
func checkpointKV(src *Checkpoint, p layout.Params, opt Options) ([]gguf.KV, error) {
	tables := opt.Tables
	if tables == nil {
		var err error
		if tables, err = tokenizer.DeepSeekV4(); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	source := opt.Source
	if source == "" {
		source = src.Path()
	}
	kv := append(p.KV(), layout.TokenizerKV(tables)...)
	kv = append(kv,
		gguf.KV{Key: "ds4go.convert.source", Value: gguf.String(source)},
		gguf.KV{Key: "ds4go.convert.mode", Value: gguf.String(string(opt.Mode))},
	)
	return append(kv, imatrixKV(opt)...), nil
}

// measure fills in the report's data offset and file size for metadata kv
// and the planned items. The header's length depends only on the metadata
// and on the names and ranks of the tensors (dims, types and offsets are
// fixed-width), so a stand-in file whose tensors are single F32 values
// has exactly the real header: its length less the stand-ins' padded
// bytes is the data offset.
func (r *Report) measure(kv []gguf.KV, items []*item) error {
	align := alignment(kv)
	pad := func(n int64) int64 { return (n + align - 1) / align * align }
	stand := make([]gguf.TensorInfo, len(items))
	for i, it := range items {
		stand[i] = gguf.TensorInfo{Name: it.Name, Type: quant.F32, Dims: slices.Repeat([]uint64{1}, len(it.Dims))}
	}
	n := &countWriter{w: io.Discard}
	gw, err := gguf.NewWriter(n, kv, stand)
	if err == nil {
		_, err = gw.Write(make([]byte, 4*len(stand)))
	}
	if err == nil {
		err = gw.Close()
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	r.sizes(n.n-int64(len(stand))*pad(4), align, items)
	return nil
}

// sizes sets the data offset and the file size from the data offset.
func (r *Report) sizes(dataOffset, align int64, items []*item) {
	r.DataOffset, r.FileBytes = dataOffset, dataOffset
	for _, it := range items {
		r.FileBytes += (it.Bytes + align - 1) / align * align
	}
}

// alignment returns the data alignment metadata kv sets.
func alignment(kv []gguf.KV) int64 {
	for _, e := range kv {
		if a, ok := e.Value.Data().(uint32); ok && e.Key == gguf.AlignmentKey {
			return int64(a)
		}
	}
	return gguf.DefaultAlignment
}

// countWriter counts the bytes written through it to w.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Convert writes src as a DS4 GGUF with hyperparameters p to w: the
// metadata of p, the tokenizer tables, provenance (ds4go.convert.*) and,
// with an imatrix, its quantize.imatrix.* keys, then every tensor of p's
// catalog in order, in the types opt chooses. Tensors are decoded,
// quantized and streamed a chunk of rows (or one routed expert) at a
// time, so memory stays bounded whatever the model size. Tensors with an
// imatrix entry are quantized with its importance; IQ2_XXS tensors without
// one use the importance derived from their own weights (for experts,
// that expert's), Q2_K and Q4_K ones the unweighted quantizers.
func Convert(w io.Writer, src *Checkpoint, p layout.Params, opt Options) (*Report, error) {
	r, items, err := plan(p, opt, func(t layout.Tensor) (*item, error) { return resolve(src, t, p) })
	if err != nil {
		return nil, err
	}
	r.Ignored, r.MTP = unused(src, items)
	kv, err := checkpointKV(src, p, opt)
	if err != nil {
		return nil, err
	}
	if err := write(w, r, items, kv, opt, p.Experts); err != nil {
		return nil, err
	}
	return r, nil
}

// ConvertFile converts to the file at path atomically: into a temporary
// file in the same directory, synced, then renamed over path.
func ConvertFile(path string, src *Checkpoint, p layout.Params, opt Options) (*Report, error) {
	return writeFile(path, func(w io.Writer) (*Report, error) { return Convert(w, src, p, opt) })
}

// writeFile runs a conversion into the file at path atomically.
func writeFile(path string, convert func(io.Writer) (*Report, error)) (*Report, error) {
	var r *Report
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		var err error
		r, err = convert(w)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return r, nil
}

// write streams the file of a plan to w.
func write(w io.Writer, r *Report, items []*item, kv []gguf.KV, opt Options, experts int) error {
	infos := make([]gguf.TensorInfo, len(items))
	for i, it := range items {
		infos[i] = it.info
	}
	cw := &countWriter{w: w}
	gw, err := gguf.NewWriter(cw, kv, infos)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for i, info := range gw.Tensors() {
		if int64(info.Size) != items[i].Bytes {
			return fmt.Errorf("checkpoint: tensor %s: planned %d bytes, writer expects %d", info.Name, items[i].Bytes, info.Size)
		}
	}
	if opt.Log != nil {
		for _, fb := range r.Fallbacks {
			fmt.Fprintf(opt.Log, "fallback %s\n", fb)
		}
	}
	cv := &converter{opt: opt, experts: experts, report: r}
	if err := cv.stream(gw, items); err != nil {
		return err
	}
	if err := gw.Close(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// Everything written but the padded tensors is the header.
	align := alignment(kv)
	var data int64
	for _, it := range items {
		data += (it.Bytes + align - 1) / align * align
	}
	r.sizes(cw.n-data, align, items)
	return nil
}

// chunkElems is the target number of weights decoded per unit of work.
const chunkElems = 1 << 20

// converter streams the tensor data.
type converter struct {
	opt     Options
	experts int
	report  *Report
}

// chunk is one unit of work: some rows of a tensor, or one expert.
type chunk struct {
	it   *item
	last bool // the item's last chunk
	run  func() ([]byte, string, error)
	out  []byte
	warn string
	err  error
	done chan struct{}
}

// chunks splits an item into units of work.
func (cv *converter) chunks(it *item) []*chunk {
	var cs []*chunk
	add := func(run func() ([]byte, string, error)) {
		cs = append(cs, &chunk{it: it, run: run, done: make(chan struct{})})
	}
	imp := func(i int) []float32 {
		if it.imp == nil {
			return nil
		}
		return it.imp[i]
	}
	switch {
	case it.t.Class == layout.ClassHashTable: // re-encoded even from I32, to check the ids
		add(func() ([]byte, string, error) { return hashTable(it.src[0], cv.experts) })
	case it.Copy:
		for _, w := range it.src {
			add(func() ([]byte, string, error) { return w.stored(it.Type), "", nil })
		}
	case it.t.Class == layout.ClassRouted:
		for i, w := range it.src {
			add(func() ([]byte, string, error) { return cv.encode(w, it.Type, 0, w.Rows(), imp(i)) })
		}
	default:
		w := it.src[0]
		rows, step := w.Rows(), max(1, chunkElems/w.Cols())
		if it.Type.RequiresImportance() && imp(0) == nil {
			step = rows // the weight-derived importance covers every row
		}
		for r0 := 0; r0 < rows; r0 += step {
			add(func() ([]byte, string, error) { return cv.encode(w, it.Type, r0, min(step, rows-r0), imp(0)) })
		}
	}
	cs[len(cs)-1].last = true
	return cs
}

// encode decodes rows [r0, r0+n) of w and quantizes them to typ with the
// column importance imp (nil: none).
func (cv *converter) encode(w rowSource, typ quant.Type, r0, n int, imp []float32) ([]byte, string, error) {
	cols := w.Cols()
	x := make([]float32, n*cols)
	if err := w.decodeRows(r0, x); err != nil {
		return nil, "", fmt.Errorf("tensor %q: %w", w.label(), err)
	}
	out, err := quant.Quantize(typ, x, cols, imp)
	if err != nil {
		return nil, "", fmt.Errorf("tensor %q: %w", w.label(), err)
	}
	le := binary.LittleEndian
	overflow := 0
	for i, v := range x {
		var back float32
		switch typ {
		case quant.BF16:
			back = quant.BF16ToF32(le.Uint16(out[2*i:]))
		case quant.F16:
			back = quant.F16ToF32(le.Uint16(out[2*i:]))
		default:
			continue
		}
		if math.IsInf(float64(back), 0) {
			overflow++
		}
		if cv.opt.Mode == ModeLossless && math.Float32bits(back) != math.Float32bits(v) {
			return nil, "", fmt.Errorf("tensor %q: element %d = %v is not exact in %v", w.label(), r0*cols+i, v, typ)
		}
	}
	if overflow > 0 {
		return out, fmt.Sprintf("%s: %d values overflow %v and became ±Inf", w.label(), overflow, typ), nil
	}
	return out, "", nil
}

// hashTable converts a token → expert table to I32, checking every id
// names one of the model's experts.
func hashTable(w rowSource, experts int) ([]byte, string, error) {
	ids, err := w.int32s()
	if err != nil {
		return nil, "", fmt.Errorf("tensor %q: %w", w.label(), err)
	}
	out := make([]byte, 4*len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= experts {
			return nil, "", fmt.Errorf("tensor %q: element %d (token %d) = expert %d, outside 0..%d", w.label(), i, i/w.Cols(), id, experts-1)
		}
		binary.LittleEndian.PutUint32(out[4*i:], uint32(id))
	}
	return out, "", nil
}

// stream runs the chunks on worker goroutines and writes their results
// in order. It returns only after every worker has stopped, so the
// input's mappings may be closed as soon as it returns.
func (cv *converter) stream(w io.Writer, items []*item) error {
	workers := cv.opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make(chan *chunk)
	ordered := make(chan *chunk, 2*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for range workers {
		wg.Go(func() {
			for c := range jobs {
				c.out, c.warn, c.err = c.run()
				close(c.done)
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		defer close(ordered)
		for _, it := range items {
			for _, c := range cv.chunks(it) {
				select {
				case ordered <- c:
				case <-stop:
					return
				}
				select {
				case jobs <- c:
				case <-stop:
					return
				}
			}
		}
	})
	var written int64
	n := 0
	for c := range ordered {
		<-c.done
		if c.err != nil {
			return fmt.Errorf("checkpoint: %s: %w", c.it.Name, c.err)
		}
		if c.warn != "" {
			cv.report.Warnings = append(cv.report.Warnings, c.warn)
		}
		if _, err := w.Write(c.out); err != nil {
			return fmt.Errorf("checkpoint: tensor %s: %w", c.it.Name, err)
		}
		written += int64(len(c.out))
		if cv.opt.Progress != nil {
			cv.opt.Progress(int64(len(c.out)))
		}
		if !c.last {
			continue
		}
		if written != c.it.Bytes {
			return fmt.Errorf("checkpoint: tensor %s: produced %d bytes, want %d", c.it.Name, written, c.it.Bytes)
		}
		written = 0
		n++
		if cv.opt.Log != nil {
			fmt.Fprintf(cv.opt.Log, "[%d/%d] %s <- %s (%s) -> %v, %d bytes%s\n", n, len(items), c.it.Name, c.it.Source, c.it.Format, c.it.Type, c.it.Bytes, c.it.Note())
		}
	}
	return nil
}

// Note describes how the tensor is produced beyond its type, for logs:
// ", copied", ", imatrix N" or "".
func (p Planned) Note() string {
	switch {
	case p.Copy:
		return ", copied"
	case p.Imatrix > 0:
		return fmt.Sprintf(", imatrix %d", p.Imatrix)
	}
	return ""
}
