package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Writer streams a GGUF file: NewWriter emits the header, metadata and
// tensor infos; the tensors' bytes then follow through Write, in the order
// the tensors were declared, with alignment padding inserted between them.
type Writer struct {
	w       *bufio.Writer
	tensors []TensorInfo
	align   uint64
	cur     int    // tensor receiving bytes
	filled  uint64 // bytes of tensors[cur] written so far
	err     error
}

// NewWriter validates the metadata and tensor list, computes every tensor's
// size and aligned offset, and writes everything up to the data section.
// The alignment comes from a UINT32 general.alignment entry, else 32.
func NewWriter(w io.Writer, kv []KV, tensors []TensorInfo) (*Writer, error) {
	align := uint64(DefaultAlignment)
	keys := make(map[string]bool, len(kv))
	for _, e := range kv {
		if keys[e.Key] {
			return nil, fmt.Errorf("gguf: metadata key %q: duplicate key", e.Key)
		}
		keys[e.Key] = true
		if len(e.Key) > MaxStringLen {
			return nil, fmt.Errorf("gguf: metadata key of %d bytes exceeds %d", len(e.Key), MaxStringLen)
		}
		if err := e.Value.check(0); err != nil {
			return nil, fmt.Errorf("gguf: metadata %q: %w", e.Key, err)
		}
		if e.Key == AlignmentKey {
			a, ok := e.Value.data.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 || a > MaxAlignment {
				return nil, fmt.Errorf("gguf: %s must be a UINT32 power of two ≤ %d, got %v", AlignmentKey, MaxAlignment, e.Value)
			}
			align = uint64(a)
		}
	}
	infos := make([]TensorInfo, len(tensors))
	names := make(map[string]bool, len(tensors))
	var offset uint64
	for i, t := range tensors {
		if names[t.Name] {
			return nil, fmt.Errorf("gguf: tensor %q: duplicate tensor name", t.Name)
		}
		names[t.Name] = true
		size, err := tensorSize(t)
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		infos[i] = TensorInfo{Name: t.Name, Type: t.Type, Dims: append([]uint64(nil), t.Dims...), Offset: offset, Size: size}
		offset = alignUp(offset+size, align)
	}
	gw := &Writer{w: bufio.NewWriterSize(w, 1<<20), tensors: infos, align: align}
	gw.header(kv)
	if gw.err != nil {
		return nil, gw.err
	}
	return gw, nil
}

// tensorSize validates a tensor's shape and type and returns its byte size.
func tensorSize(t TensorInfo) (uint64, error) {
	if len(t.Dims) == 0 || len(t.Dims) > MaxDims {
		return 0, fmt.Errorf("%d dimensions, want 1..%d", len(t.Dims), MaxDims)
	}
	if !t.Type.Known() {
		return 0, fmt.Errorf("unknown ggml type %v", t.Type)
	}
	elems := uint64(1)
	for _, d := range t.Dims {
		if d == 0 {
			return 0, errors.New("dimension is zero")
		}
		if elems > math.MaxInt64/d {
			return 0, errors.New("element count overflows")
		}
		elems *= d
	}
	be := uint64(t.Type.BlockElems())
	if t.Dims[0]%be != 0 {
		return 0, fmt.Errorf("ne[0] = %d is not a multiple of the %v block size %d", t.Dims[0], t.Type, be)
	}
	return elems / be * uint64(t.Type.BlockBytes()), nil
}

// Tensors returns the tensor infos with their computed offsets and sizes.
func (w *Writer) Tensors() []TensorInfo { return w.tensors }

// dataStart returns the data-section offset that follows a header of
// headerLen bytes.
func (w *Writer) dataStart(headerLen uint64) uint64 { return alignUp(headerLen, w.align) }

func (w *Writer) put(p []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(p)
	}
}

func (w *Writer) u32(v uint32) { w.put(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *Writer) u64(v uint64) { w.put(binary.LittleEndian.AppendUint64(nil, v)) }
func (w *Writer) str(s string) {
	w.u64(uint64(len(s)))
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}

func (w *Writer) header(kv []KV) {
	cw := &countWriter{}
	body := func() {
		w.u32(Magic)
		w.u32(Version)
		w.u64(uint64(len(w.tensors)))
		w.u64(uint64(len(kv)))
		for _, e := range kv {
			w.str(e.Key)
			w.u32(uint32(e.Value.typ))
			w.value(e.Value)
		}
		for _, t := range w.tensors {
			w.str(t.Name)
			w.u32(uint32(len(t.Dims)))
			for _, d := range t.Dims {
				w.u64(d)
			}
			w.u32(uint32(t.Type))
			w.u64(t.Offset)
		}
	}
	// Measure the header first so the padding before the data section is
	// known, then write it for real.
	real := w.w
	w.w = bufio.NewWriter(cw)
	body()
	w.w.Flush()
	w.w = real
	if w.err != nil {
		return
	}
	body()
	w.pad(w.dataStart(cw.n) - cw.n)
}

type countWriter struct{ n uint64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += uint64(len(p)); return len(p), nil }

var zeros [4096]byte

func (w *Writer) pad(n uint64) {
	for n > 0 && w.err == nil {
		k := min(n, uint64(len(zeros)))
		w.put(zeros[:k])
		n -= k
	}
}

func (w *Writer) value(v Value) {
	le := binary.LittleEndian
	switch d := v.data.(type) {
	case uint8:
		w.put([]byte{d})
	case int8:
		w.put([]byte{byte(d)})
	case bool:
		b := byte(0)
		if d {
			b = 1
		}
		w.put([]byte{b})
	case uint16:
		w.put(le.AppendUint16(nil, d))
	case int16:
		w.put(le.AppendUint16(nil, uint16(d)))
	case uint32:
		w.u32(d)
	case int32:
		w.u32(uint32(d))
	case float32:
		w.u32(math.Float32bits(d))
	case uint64:
		w.u64(d)
	case int64:
		w.u64(uint64(d))
	case float64:
		w.u64(math.Float64bits(d))
	case string:
		w.str(d)
	case Array:
		w.u32(uint32(d.Elem))
		n := d.Len()
		w.u64(uint64(n))
		for i := range n {
			w.value(d.elem(i))
		}
	}
}

// Write appends tensor data: the concatenation of all tensors' bytes in
// declaration order. Padding between tensors is inserted automatically;
// writing past the last tensor is an error.
func (w *Writer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 && w.err == nil {
		if w.cur >= len(w.tensors) {
			w.err = fmt.Errorf("gguf: %d bytes written past the last tensor", len(p))
			break
		}
		t := w.tensors[w.cur]
		k := min(uint64(len(p)), t.Size-w.filled)
		w.put(p[:k])
		w.filled += k
		n += int(k)
		p = p[k:]
		if w.filled == t.Size {
			w.pad(alignUp(t.Size, w.align) - t.Size)
			w.cur++
			w.filled = 0
		}
	}
	return n, w.err
}

// Flush writes out the bytes buffered so far, such as the header before
// any tensor bytes, without checking that every tensor was written.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Close checks that every tensor's bytes were written and flushes; it does
// not close the underlying writer.
func (w *Writer) Close() error {
	if w.err == nil && w.cur < len(w.tensors) {
		t := w.tensors[w.cur]
		w.err = fmt.Errorf("gguf: tensor %q: %d of %d bytes written", t.Name, w.filled, t.Size)
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}
