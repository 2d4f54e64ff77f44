package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"unsafe"

	"github.com/ds4-go/ds4/internal/mmap"
	"github.com/ds4-go/ds4/quant"
)

// Format constants and the reader's hardening limits.
const (
	Magic            = 0x46554747 // "GGUF" little-endian
	Version          = 3
	DefaultAlignment = 32
	MaxDims          = 4        // tensor rank limit (DS4 never exceeds 3)
	MaxStringLen     = 16 << 20 // longest accepted string
	MaxArrayLen      = 1 << 26  // longest accepted array
	MaxAlignment     = 1 << 20  // largest accepted general.alignment
	maxNesting       = 8        // deepest accepted array nesting
	headerSize       = 24
	// AlignmentKey is the metadata key that sets the data alignment.
	AlignmentKey = "general.alignment"
)

// FormatError reports malformed GGUF bytes: the field being decoded and its
// byte offset in the file.
type FormatError struct {
	Offset int64
	Field  string
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: %s at offset %d: %v", e.Field, e.Offset, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Sentinel causes carried by FormatError.
var (
	ErrTruncated = errors.New("unexpected end of file")
	ErrLimit     = errors.New("exceeds limit")
)

// TensorInfo describes one tensor: its name, ggml type, dimensions (ne,
// fastest-varying first), and where its bytes lie.
type TensorInfo struct {
	Name   string
	Type   quant.Type
	Dims   []uint64
	Offset uint64 // relative to the start of the data section
	Size   uint64 // bytes
}

// Elements returns the number of elements of the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file whose tensor bytes are served from the
// underlying buffer (a read-only memory mapping for Open, memory of its
// own for ReadFile).
type File struct {
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset uint64 // absolute offset of the data section

	data   []byte
	keys   map[string]int
	voffs  []int64 // file offset of each KV's value, by index
	names  map[string]int
	unmap  func() error
	fd     *os.File // the mapped file, kept open for CheckSize; nil if not mapped
	closed bool
	after  []func() error // AtClose's functions
}

// Open memory-maps the file at path and parses it; tensor data is never
// read until used. The file is kept open until Close, for CheckSize: a
// read of the mapping past the end of a file truncated under it raises
// SIGBUS, which only debug.SetPanicOnFault turns into a panic.
func Open(path string) (*File, error) { return open(path, mmap.File, "map") }

// ReadFile reads the file at path into memory of its own, backed by huge
// pages where the kernel allows, and parses it: faster to compute from
// than the page cache Open maps, at the price of a private copy read up
// front.
func ReadFile(path string) (*File, error) { return open(path, mmap.Read, "read") }

// open loads the file at path with load and parses it.
func open(path string, load func(*os.File, int) ([]byte, func() error, error), verb string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			fd.Close()
		}
	}()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory"
		}
		return nil, fmt.Errorf("gguf: %s is %s, not a GGUF file", path, what)
	}
	if st.Size() < headerSize {
		return nil, fmt.Errorf("gguf: %s: %w", path, &FormatError{0, "header", fmt.Errorf("file is %d bytes: %w", st.Size(), ErrTruncated)})
	}
	if uint64(st.Size()) > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s: file too large to map", path)
	}
	data, unmap, err := load(fd, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("gguf: %s %s: %w", verb, path, err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap = unmap
	if verb == "map" {
		f.fd, keep = fd, true
	}
	return f, nil
}

// Close releases the mapping or memory; tensor slices must not be used
// afterwards.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	for _, fn := range f.after {
		err = errors.Join(err, fn())
	}
	f.after = nil
	if f.unmap == nil {
		return err
	}
	err = errors.Join(err, f.unmap())
	if f.fd != nil {
		err = errors.Join(err, f.fd.Close())
	}
	return err
}

// AtClose makes Close call fn first, for what was built over the file
// (an expert cache reading it) and must end with it.
func (f *File) AtClose(fn func() error) { f.after = append(f.after, fn) }

// Holds reports whether addr is the address of a byte of the file's
// buffer, as in the error of a memory fault reading it.
func (f *File) Holds(addr uintptr) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(f.data)))
	return len(f.data) > 0 && addr >= lo && addr-lo < uintptr(len(f.data))
}

// CheckSize returns an error when the mapped file's size on disk is no
// longer the size it had when it was mapped (truncated or extended in
// place, so that reads of the mapping past its new end fault); nil for
// a file read into memory or parsed from bytes.
func (f *File) CheckSize() error {
	if f.fd == nil || f.closed {
		return nil
	}
	st, err := f.fd.Stat()
	if err != nil {
		return fmt.Errorf("gguf: model file: %w", err)
	}
	if st.Size() != int64(len(f.data)) {
		return fmt.Errorf("gguf: model file changed size: was %d, now %d", len(f.data), st.Size())
	}
	return nil
}

// Size returns the file size in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Value returns the metadata value stored under key.
func (f *File) Value(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// ValueOffset returns the byte offset in the file of the value stored
// under key, for errors that point at it.
func (f *File) ValueOffset(key string) (int64, bool) {
	i, ok := f.keys[key]
	if !ok {
		return 0, false
	}
	return f.voffs[i], true
}

// Tensor returns the info of the tensor called name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// HugePageBytes returns how many bytes of the file's buffer are mapped
// through huge pages (mmap.HugeBytes); pages not yet touched count as not.
func (f *File) HugePageBytes() (int64, error) { return mmap.HugeBytes(f.data) }

// DataBytes returns the size of the data section, where the tensors lie.
func (f *File) DataBytes() int64 { return int64(len(f.data)) - int64(f.DataOffset) }

// Warm reads every page of the data section (mmap.Touch), so that no
// later read of a tensor waits on a page fault or a disk read, and returns
// the sum of the bytes read; add, when not nil, is told the bytes done as
// the work goes.
func (f *File) Warm(add func(int64)) uint64 { return mmap.Touch(f.data[f.DataOffset:], add) }

// TensorData returns the bytes of t inside the file buffer (no copy).
func (f *File) TensorData(t TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	return f.data[start : start+t.Size : start+t.Size]
}

// decoder reads little-endian fields from a byte slice with bounds checks
// that name the field and its offset.
type decoder struct {
	b   []byte
	off uint64
}

func (d *decoder) fail(field string, err error) error {
	return &FormatError{Offset: int64(d.off), Field: field, Err: err}
}

func (d *decoder) remaining() uint64 { return uint64(len(d.b)) - d.off }

func (d *decoder) take(field string, n uint64) ([]byte, error) {
	if n > d.remaining() {
		return nil, d.fail(field, fmt.Errorf("need %d bytes, %d left: %w", n, d.remaining(), ErrTruncated))
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) u32(field string) (uint32, error) {
	p, err := d.take(field, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64(field string) (uint64, error) {
	p, err := d.take(field, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (d *decoder) str(field string) (string, error) {
	start := d.off
	n, err := d.u64(field + " length")
	if err != nil {
		return "", err
	}
	if n > MaxStringLen {
		d.off = start
		return "", d.fail(field+" length", fmt.Errorf("%d bytes: %w (%d)", n, ErrLimit, MaxStringLen))
	}
	p, err := d.take(field, n)
	if err != nil {
		return "", err
	}
	return string(p), nil
}

// Parse parses a GGUF file held in data; the returned File references data.
func Parse(data []byte) (*File, error) {
	d := &decoder{b: data}
	magic, err := d.u32("magic")
	if err != nil {
		return nil, err
	}
	if magic != Magic {
		return nil, &FormatError{0, "magic", fmt.Errorf("%#08x is not GGUF", magic)}
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	if version != Version {
		return nil, &FormatError{4, "version", fmt.Errorf("version %d, only %d is supported", version, Version)}
	}
	nTensors, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Every KV needs at least 12 bytes (key length + type) and every tensor
	// info at least 28, so a count beyond what the file can hold is
	// rejected before anything is allocated from it.
	if nKV > d.remaining()/12 {
		return nil, &FormatError{16, "metadata count", fmt.Errorf("%d entries cannot fit in the %d bytes left (truncated or corrupt): %w", nKV, d.remaining(), ErrLimit)}
	}
	if nTensors > d.remaining()/28 {
		return nil, &FormatError{8, "tensor count", fmt.Errorf("%d tensors cannot fit in the %d bytes left (truncated or corrupt): %w", nTensors, d.remaining(), ErrLimit)}
	}
	f := &File{
		Version: version,
		KV:      make([]KV, 0, nKV),
		voffs:   make([]int64, 0, nKV),
		keys:    make(map[string]int, nKV),
		data:    data,
	}
	for i := range nKV {
		keyOff := d.off
		key, err := d.str(fmt.Sprintf("metadata[%d] key", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.keys[key]; dup {
			return nil, &FormatError{int64(keyOff), fmt.Sprintf("metadata key %q", key), errors.New("duplicate key")}
		}
		field := fmt.Sprintf("metadata %q", key)
		typ, err := d.u32(field + " type")
		if err != nil {
			return nil, err
		}
		valueOff := d.off
		v, err := d.value(field, ValueType(typ), 0)
		if err != nil {
			return nil, err
		}
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{key, v})
		f.voffs = append(f.voffs, int64(valueOff))
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Value(AlignmentKey); ok {
		a, isU32 := v.data.(uint32)
		switch {
		case !isU32:
			return nil, &FormatError{0, AlignmentKey, fmt.Errorf("type %v, want UINT32", v.typ)}
		case a == 0 || a&(a-1) != 0:
			return nil, &FormatError{0, AlignmentKey, fmt.Errorf("%d is not a power of two", a)}
		case a > MaxAlignment:
			return nil, &FormatError{0, AlignmentKey, fmt.Errorf("%d: %w (%d)", a, ErrLimit, MaxAlignment)}
		}
		f.Alignment = uint64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.names = make(map[string]int, nTensors)
	for i := range nTensors {
		t, err := d.tensorInfo(i, f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.names[t.Name]; dup {
			return nil, &FormatError{int64(d.off), fmt.Sprintf("tensor %q", t.Name), errors.New("duplicate tensor name")}
		}
		f.names[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(d.off, f.Alignment)
	if err := f.checkRanges(); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *decoder) tensorInfo(i uint64, align uint64) (TensorInfo, error) {
	var t TensorInfo
	name, err := d.str(fmt.Sprintf("tensor[%d] name", i))
	if err != nil {
		return t, err
	}
	t.Name = name
	field := fmt.Sprintf("tensor %q", name)
	dimsOff := d.off
	nDims, err := d.u32(field + " dimension count")
	if err != nil {
		return t, err
	}
	if nDims == 0 || nDims > MaxDims {
		return t, &FormatError{int64(dimsOff), field + " dimension count", fmt.Errorf("%d dimensions, want 1..%d", nDims, MaxDims)}
	}
	t.Dims = make([]uint64, nDims)
	elems := uint64(1)
	for j := range t.Dims {
		off := d.off
		v, err := d.u64(fmt.Sprintf("%s ne[%d]", field, j))
		if err != nil {
			return t, err
		}
		if v == 0 {
			return t, &FormatError{int64(off), fmt.Sprintf("%s ne[%d]", field, j), errors.New("dimension is zero")}
		}
		hi, lo := bits.Mul64(elems, v)
		if hi != 0 || lo > math.MaxInt64 {
			return t, &FormatError{int64(off), fmt.Sprintf("%s ne[%d]", field, j), errors.New("element count overflows")}
		}
		t.Dims[j] = v
		elems = lo
	}
	typeOff := d.off
	typ, err := d.u32(field + " type")
	if err != nil {
		return t, err
	}
	t.Type = quant.Type(typ)
	if !t.Type.Known() {
		return t, &FormatError{int64(typeOff), field + " type", fmt.Errorf("unknown ggml type %d", typ)}
	}
	be, bb := uint64(t.Type.BlockElems()), uint64(t.Type.BlockBytes())
	if t.Dims[0]%be != 0 {
		return t, &FormatError{int64(typeOff), field + " type", fmt.Errorf("ne[0] = %d is not a multiple of the %v block size %d", t.Dims[0], t.Type, be)}
	}
	hi, size := bits.Mul64(elems/be, bb)
	if hi != 0 || size > math.MaxInt64 {
		return t, &FormatError{int64(typeOff), field + " size", errors.New("byte size overflows")}
	}
	t.Size = size
	offOff := d.off
	t.Offset, err = d.u64(field + " offset")
	if err != nil {
		return t, err
	}
	if t.Offset%align != 0 {
		return t, &FormatError{int64(offOff), field + " offset", fmt.Errorf("%d is not a multiple of the alignment %d", t.Offset, align)}
	}
	return t, nil
}

// checkRanges verifies every tensor lies inside the file and no two overlap.
func (f *File) checkRanges() error {
	size := uint64(len(f.data))
	order := make([]int, len(f.Tensors))
	for i, t := range f.Tensors {
		order[i] = i
		start, c1 := bits.Add64(f.DataOffset, t.Offset, 0)
		end, c2 := bits.Add64(start, t.Size, 0)
		if c1 != 0 || c2 != 0 || end > size {
			return &FormatError{int64(f.DataOffset), fmt.Sprintf("tensor %q data", t.Name),
				fmt.Errorf("range [%d, +%d) of the %d-byte data section lies past the end of the %d-byte file: %w",
					t.Offset, t.Size, size-min(size, f.DataOffset), size, ErrTruncated)}
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	for k := 1; k < len(order); k++ {
		a, b := f.Tensors[order[k-1]], f.Tensors[order[k]]
		if a.Offset+a.Size > b.Offset {
			return &FormatError{int64(f.DataOffset + b.Offset), fmt.Sprintf("tensor %q data", b.Name), fmt.Errorf("overlaps tensor %q", a.Name)}
		}
	}
	return nil
}

func (d *decoder) value(field string, typ ValueType, depth int) (Value, error) {
	switch typ {
	case TypeUint8, TypeInt8, TypeBool:
		p, err := d.take(field, 1)
		if err != nil {
			return Value{}, err
		}
		switch typ {
		case TypeUint8:
			return Uint8(p[0]), nil
		case TypeInt8:
			return Int8(int8(p[0])), nil
		}
		return Bool(p[0] != 0), nil
	case TypeUint16, TypeInt16:
		p, err := d.take(field, 2)
		if err != nil {
			return Value{}, err
		}
		u := binary.LittleEndian.Uint16(p)
		if typ == TypeInt16 {
			return Int16(int16(u)), nil
		}
		return Uint16(u), nil
	case TypeUint32, TypeInt32, TypeFloat32:
		u, err := d.u32(field)
		if err != nil {
			return Value{}, err
		}
		switch typ {
		case TypeInt32:
			return Int32(int32(u)), nil
		case TypeFloat32:
			return Float32(math.Float32frombits(u)), nil
		}
		return Uint32(u), nil
	case TypeUint64, TypeInt64, TypeFloat64:
		u, err := d.u64(field)
		if err != nil {
			return Value{}, err
		}
		switch typ {
		case TypeInt64:
			return Int64(int64(u)), nil
		case TypeFloat64:
			return Float64(math.Float64frombits(u)), nil
		}
		return Uint64(u), nil
	case TypeString:
		s, err := d.str(field)
		if err != nil {
			return Value{}, err
		}
		return String(s), nil
	case TypeArray:
		a, err := d.array(field, depth)
		if err != nil {
			return Value{}, err
		}
		return ArrayOf(a), nil
	}
	return Value{}, d.fail(field+" type", fmt.Errorf("unknown value type %d", uint32(typ)))
}

func (d *decoder) array(field string, depth int) (Array, error) {
	if depth >= maxNesting {
		return Array{}, d.fail(field, fmt.Errorf("array nesting deeper than %d: %w", maxNesting, ErrLimit))
	}
	elemOff := d.off
	et, err := d.u32(field + " element type")
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Array{}, &FormatError{int64(elemOff), field + " element type", fmt.Errorf("unknown value type %d", et)}
	}
	countOff := d.off
	n, err := d.u64(field + " length")
	if err != nil {
		return Array{}, err
	}
	// The smallest encoding of an element bounds how many can fit in the
	// bytes left; this check precedes the allocation sized by n.
	minSize := uint64(elem.size())
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if n > MaxArrayLen || n > d.remaining()/minSize {
		return Array{}, &FormatError{int64(countOff), field + " length",
			fmt.Errorf("%d elements of %v (%d bytes left, limit %d): %w", n, elem, d.remaining(), MaxArrayLen, ErrLimit)}
	}
	if sz := elem.size(); sz > 0 {
		p, err := d.take(field, n*uint64(sz))
		if err != nil {
			return Array{}, err
		}
		return Array{elem, decodeFixed(elem, p, int(n))}, nil
	}
	if elem == TypeString {
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str(fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return Array{}, err
			}
		}
		return Array{elem, out}, nil
	}
	out := make([]Array, n)
	for i := range out {
		f := fmt.Sprintf("%s[%d]", field, i)
		if out[i], err = d.array(f, depth+1); err != nil {
			return Array{}, err
		}
	}
	return Array{elem, out}, nil
}

func decodeFixed(t ValueType, p []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8(nil), p...)
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(p[i])
		}
		return out
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = p[i] != 0
		}
		return out
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(p[2*i:])
		}
		return out
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(p[2*i:]))
		}
		return out
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(p[4*i:])
		}
		return out
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(p[4*i:]))
		}
		return out
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(p[4*i:]))
		}
		return out
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(p[8*i:])
		}
		return out
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(p[8*i:]))
		}
		return out
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(p[8*i:]))
		}
		return out
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }
