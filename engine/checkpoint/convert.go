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

	"github.com/ds4-go/ds4/engine/gguf"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/quant"
)

// Mode selects the tensor types of a conversion.
type Mode string

// The conversion modes.
const (
	// ModeLossless stores every value exactly: norms as F32, integer
	// tables as I32, every other tensor in the narrowest float type that
	// holds its values (F32 for F32 sources, F16 for F16, BF16 for BF16,
	// FP8 and FP4 sources; see Weight.ExactType).
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

// Options control a conversion.
type Options struct {
	Mode    Mode
	Workers int               // goroutines decoding and quantizing; 0 means GOMAXPROCS
	Tables  *tokenizer.Tables // nil means the embedded DeepSeek V4 tables
	Source  string            // provenance stored in the file; "" means the checkpoint path
	Log     io.Writer         // if set, receives one line per tensor written
	// Progress, if set, is called with the number of tensor bytes written.
	Progress func(n int64)
}

// Report describes a conversion (or its plan).
type Report struct {
	Mode      Mode
	Tensors   []Planned  // the tensors of the file, in order
	Fallbacks []Fallback // tensors stored in another type than the mode's
	Ignored   []string   // checkpoint tensors the DS4 file does not use, mtp.* aside
	MTP       int        // mtp.* tensors skipped (the MTP block is not part of the file)
	Warnings  []string
	Bytes     int64 // tensor data bytes, without alignment padding
}

// Planned is one tensor of the converted file.
type Planned struct {
	Name   string
	Type   quant.Type
	Dims   []uint64
	Source string // checkpoint name; experts as layers.L.ffn.experts.*.wN.weight
	Format string // the source encoding (Weight.Format)
	Bytes  int64
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

// item is one output tensor with its resolved sources.
type item struct {
	Planned
	t    layout.Tensor
	src  []*Weight // one, or one per routed expert
	info gguf.TensorInfo
}

// Plan resolves every tensor of p's catalog in src and chooses its type
// for mode without decoding any values: missing, misshapen or wrongly
// typed tensors and missing .scale companions are errors.
func Plan(src *Checkpoint, p layout.Params, mode Mode) (*Report, error) {
	r, _, err := plan(src, p, mode)
	return r, err
}

func plan(src *Checkpoint, p layout.Params, mode Mode) (*Report, []*item, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	r := &Report{Mode: mode}
	used := make(map[string]bool)
	var items []*item
	var errs []error
	for _, t := range p.Tensors(mode.recipe()) {
		it, err := resolve(src, t, p)
		if errors.Is(err, ErrMissing) && t.Optional {
			r.Warnings = append(r.Warnings, fmt.Sprintf("tensor %s: optional, %q not in checkpoint, omitted", t.Name, t.HF))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range it.src {
			used[w.Name] = true
			if w.Scale != "" {
				used[w.Scale] = true
			}
		}
		it.Type = chooseType(mode, t, it.src)
		if be := uint64(it.Type.BlockElems()); t.Dims[0]%be != 0 {
			got := quant.F16
			if t.Dims[0]%uint64(quant.Q8_0.BlockElems()) == 0 {
				got = quant.Q8_0
			}
			r.Fallbacks = append(r.Fallbacks, Fallback{Tensor: t.Name, Want: it.Type, Got: got})
			it.Type = got
		}
		it.info = gguf.TensorInfo{Name: t.Name, Type: it.Type, Dims: t.Dims}
		elems := int64(1)
		for _, d := range t.Dims {
			elems *= int64(d)
		}
		it.Dims = t.Dims
		it.Bytes = elems / int64(it.Type.BlockElems()) * int64(it.Type.BlockBytes())
		r.Bytes += it.Bytes
		r.Tensors = append(r.Tensors, it.Planned)
		items = append(items, it)
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("checkpoint: cannot convert: %w", errors.Join(errs...))
	}
	for _, name := range src.Names() {
		switch {
		case used[name]:
		case strings.HasPrefix(name, "mtp."):
			r.MTP++
		default:
			r.Ignored = append(r.Ignored, name)
		}
	}
	return r, items, nil
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

// resolve finds the sources of one catalog tensor and checks their
// shapes and encodings.
func resolve(src *Checkpoint, t layout.Tensor, p layout.Params) (*item, error) {
	it := &item{t: t, Planned: Planned{Name: t.Name, Source: t.HF}}
	want := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		want[len(want)-1-i] = int(d)
	}
	if t.Class == layout.ClassRouted {
		layer, part, ok := strings.Cut(strings.TrimPrefix(t.Name, "blk."), ".")
		il, err := strconv.Atoi(layer)
		part = routedPart(part)
		if !ok || err != nil || part == "" {
			return nil, fmt.Errorf("tensor %s: not a routed expert tensor name", t.Name)
		}
		it.Source = fmt.Sprintf("layers.%d.ffn.experts.*.%s.weight", il, part)
		want = want[1:] // one expert's [rows, cols]
		for e := range p.Experts {
			w, err := source(src, layout.ExpertHF(il, e, part), t, want)
			if err != nil {
				return nil, err
			}
			it.src = append(it.src, w)
		}
	} else {
		w, err := source(src, t.HF, t, want)
		if err != nil {
			return nil, err
		}
		it.src = []*Weight{w}
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
	if table := t.Class == layout.ClassHashTable; err == nil && table != w.IsInt() {
		want := "a float encoding"
		if table {
			want = "I64 or I32"
		}
		err = fmt.Errorf("dtype %s, want %s", w.DType, want)
	}
	if err != nil {
		return nil, fmt.Errorf("tensor %q (for %s): %w", name, t.Name, err)
	}
	return w, nil
}

// chooseType returns the type mode gives tensor t with sources src,
// before any block-size fallback.
func chooseType(mode Mode, t layout.Tensor, src []*Weight) quant.Type {
	switch {
	case t.Class == layout.ClassHashTable:
		return quant.I32
	case t.Class == layout.ClassNorm || mode == ModeF32:
		return quant.F32
	case mode == ModeLossless:
		typ := src[0].ExactType()
		for _, w := range src[1:] {
			if w.ExactType() != typ {
				return quant.F32 // F32 holds F16 and BF16 alike
			}
		}
		return typ
	}
	return t.Type
}

// Convert writes src as a DS4 GGUF with hyperparameters p to w: the
// metadata of p, the tokenizer tables and provenance (ds4go.convert.*),
// then every tensor of p's catalog in order, in the types opt.Mode
// chooses. Tensors are decoded, quantized and streamed a chunk of rows
// (or one routed expert) at a time, so memory stays bounded whatever the
// model size. IQ2_XXS experts are quantized with the importance derived
// from that expert's own weights.
func Convert(w io.Writer, src *Checkpoint, p layout.Params, opt Options) (*Report, error) {
	r, items, err := plan(src, p, opt.Mode)
	if err != nil {
		return nil, err
	}
	if opt.Tables == nil {
		if opt.Tables, err = tokenizer.DeepSeekV4(); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	if opt.Source == "" {
		opt.Source = src.Path()
	}
	kv := append(p.KV(), layout.TokenizerKV(opt.Tables)...)
	kv = append(kv,
		gguf.KV{Key: "ds4go.convert.source", Value: gguf.String(opt.Source)},
		gguf.KV{Key: "ds4go.convert.mode", Value: gguf.String(string(opt.Mode))},
	)
	infos := make([]gguf.TensorInfo, len(items))
	for i, it := range items {
		infos[i] = it.info
	}
	gw, err := gguf.NewWriter(w, kv, infos)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for i, info := range gw.Tensors() {
		if int64(info.Size) != items[i].Bytes {
			return nil, fmt.Errorf("checkpoint: tensor %s: planned %d bytes, writer expects %d", info.Name, items[i].Bytes, info.Size)
		}
	}
	if opt.Log != nil {
		for _, fb := range r.Fallbacks {
			fmt.Fprintf(opt.Log, "fallback %s\n", fb)
		}
	}
	cv := &converter{opt: opt, experts: p.Experts, report: r}
	if err := cv.stream(gw, items); err != nil {
		return nil, err
	}
	if err := gw.Close(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return r, nil
}

// ConvertFile converts to the file at path atomically: into a temporary
// file in the same directory, synced, then renamed over path.
func ConvertFile(path string, src *Checkpoint, p layout.Params, opt Options) (*Report, error) {
	var r *Report
	err := gguf.WriteFileAtomic(path, func(w io.Writer) error {
		var err error
		r, err = Convert(w, src, p, opt)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return r, nil
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
	switch {
	case it.t.Class == layout.ClassHashTable:
		add(func() ([]byte, string, error) { return hashTable(it.src[0], cv.experts) })
	case it.t.Class == layout.ClassRouted:
		for _, w := range it.src {
			add(func() ([]byte, string, error) { return cv.encode(w, it.Type, 0, w.Rows()) })
		}
	default:
		w := it.src[0]
		rows, step := w.Rows(), max(1, chunkElems/w.Cols())
		if it.Type.RequiresImportance() {
			step = rows // the importance covers every row
		}
		for r0 := 0; r0 < rows; r0 += step {
			add(func() ([]byte, string, error) { return cv.encode(w, it.Type, r0, min(step, rows-r0)) })
		}
	}
	cs[len(cs)-1].last = true
	return cs
}

// encode decodes rows [r0, r0+n) of w and quantizes them to typ.
func (cv *converter) encode(w *Weight, typ quant.Type, r0, n int) ([]byte, string, error) {
	cols := w.Cols()
	x := make([]float32, n*cols)
	if err := w.decodeRows(r0, x); err != nil {
		return nil, "", fmt.Errorf("tensor %q: %w", w.Name, err)
	}
	out, err := quant.Quantize(typ, x, cols, nil)
	if err != nil {
		return nil, "", fmt.Errorf("tensor %q: %w", w.Name, err)
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
			return nil, "", fmt.Errorf("tensor %q: element %d = %v is not exact in %v", w.Name, r0*cols+i, v, typ)
		}
	}
	if overflow > 0 {
		return out, fmt.Sprintf("%s: %d values overflow %v and became ±Inf", w.Name, overflow, typ), nil
	}
	return out, "", nil
}

// hashTable converts a token → expert table to I32, checking every id
// names one of the model's experts.
func hashTable(w *Weight, experts int) ([]byte, string, error) {
	ids, err := w.int32s()
	if err != nil {
		return nil, "", fmt.Errorf("tensor %q: %w", w.Name, err)
	}
	out := make([]byte, 4*len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= experts {
			return nil, "", fmt.Errorf("tensor %q: element %d (token %d) = expert %d, outside 0..%d", w.Name, i, i/w.Cols(), id, experts-1)
		}
		binary.LittleEndian.PutUint32(out[4*i:], uint32(id))
	}
	return out, "", nil
}

// stream runs the chunks on worker goroutines and writes their results
// in order. It returns only after every worker has stopped, so the
// checkpoint's mappings may be closed as soon as it returns.
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
			fmt.Fprintf(cv.opt.Log, "[%d/%d] %s <- %s (%s) -> %v, %d bytes\n", n, len(items), c.it.Name, c.it.Source, c.it.Format, c.it.Type, c.it.Bytes)
		}
	}
	return nil
}
