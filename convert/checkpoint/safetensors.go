// Package checkpoint reads official DeepSeek V4 checkpoints (safetensors
// files and their config.json) and converts them to DS4 GGUF files, and
// requantizes DS4 GGUF files, optionally weighted by an imatrix.
package checkpoint

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/ds4-go/ds4/internal/mmap"
)

// Hardening limits of the safetensors reader.
const (
	MaxHeaderBytes = 100 << 20 // largest accepted JSON header
	MaxRank        = 8         // most dimensions of one tensor
	// IndexFile is the name of the shard index of a sharded checkpoint.
	IndexFile = "model.safetensors.index.json"
)

// DType is a safetensors element type name ("BF16", "F8_E4M3", …).
type DType string

// The safetensors element types this package knows.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	F8E8M0 DType = "F8_E8M0"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	I64    DType = "I64"
	U64    DType = "U64"
	F64    DType = "F64"
)

// Size returns the byte size of one element of d, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E4M3, F8E5M2, F8E8M0:
		return 1
	case I16, U16, F16, BF16:
		return 2
	case I32, U32, F32:
		return 4
	case I64, U64, F64:
		return 8
	}
	return 0
}

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	File  string // the shard holding it
	data  []byte // its bytes inside the shard's mapping
	off   uint64 // offset of data in the shard's data section
}

// Elements returns the number of elements (the product of the shape).
func (t TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Data returns the tensor's raw little-endian bytes; they live in the
// checkpoint's memory mapping and must not be used after Close.
func (t TensorInfo) Data() []byte { return t.data }

// header is the parsed JSON header of one safetensors file.
type header struct {
	tensors  []TensorInfo // in data order
	metadata map[string]string
}

// headerEntry is one tensor's record in the JSON header.
type headerEntry struct {
	DType   *string   `json:"dtype"`
	Shape   *[]uint64 `json:"shape"`
	Offsets *[]uint64 `json:"data_offsets"`
}

// parseHeader parses and checks a whole safetensors file image: the u64
// header length, the JSON header, and every tensor's byte range against the
// data section, which must be covered exactly, without gaps or overlaps.
// The returned tensors reference file.
func parseHeader(file []byte) (*header, error) {
	if len(file) < 8 {
		return nil, fmt.Errorf("file is %d bytes, shorter than the 8-byte header length", len(file))
	}
	n := binary.LittleEndian.Uint64(file)
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderBytes)
	}
	if n > uint64(len(file)-8) {
		return nil, fmt.Errorf("header length %d exceeds the %d bytes after it (truncated file?)", n, len(file)-8)
	}
	hdr, data := file[8:8+n], file[8+n:]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, errors.New("header does not start with '{'")
	}
	if !utf8.Valid(hdr) {
		return nil, errors.New("header is not valid UTF-8")
	}
	h := &header{}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // the opening '{', checked above
		return nil, fmt.Errorf("header: %w", err)
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		name, _ := tok.(string) // object keys are always strings
		if seen[name] {
			return nil, fmt.Errorf("header: tensor %q: duplicate name", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("header: entry %q: %w", name, err)
		}
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &h.metadata); err != nil {
				return nil, fmt.Errorf("header: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		t, err := parseEntry(name, raw, data)
		if err != nil {
			return nil, fmt.Errorf("header: tensor %q: %w", name, err)
		}
		h.tensors = append(h.tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("header: data after the JSON object")
	}
	// Tensors must tile the data section: sorted by offset, each starts
	// where the previous one ended and the last ends at the file's end.
	type span struct {
		b, e uint64
		i    int
	}
	spans := make([]span, len(h.tensors))
	for i, t := range h.tensors {
		spans[i] = span{t.off, t.off + uint64(len(t.data)), i}
	}
	slices.SortFunc(spans, func(x, y span) int {
		return cmp.Or(cmp.Compare(x.b, y.b), cmp.Compare(x.e, y.e))
	})
	var end uint64
	for _, s := range spans {
		name := h.tensors[s.i].Name
		switch {
		case s.b < end:
			return nil, fmt.Errorf("tensor %q: data [%d, %d) overlaps the previous tensor, which ends at %d", name, s.b, s.e, end)
		case s.b > end:
			return nil, fmt.Errorf("tensor %q: %d unindexed bytes before its data at %d", name, s.b-end, s.b)
		}
		end = s.e
	}
	if end != uint64(len(data)) {
		return nil, fmt.Errorf("%d unindexed bytes after the last tensor (data section is %d bytes)", uint64(len(data))-end, len(data))
	}
	slices.SortFunc(h.tensors, func(a, b TensorInfo) int { return cmp.Compare(a.Name, b.Name) })
	return h, nil
}

// parseEntry checks one header record against the data section and
// returns the tensor with its data slice.
func parseEntry(name string, raw json.RawMessage, data []byte) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	var e headerEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return t, err
	}
	switch {
	case name == "":
		return t, errors.New("empty tensor name")
	case e.DType == nil:
		return t, errors.New("no dtype")
	case e.Shape == nil:
		return t, errors.New("no shape")
	case e.Offsets == nil:
		return t, errors.New("no data_offsets")
	case len(*e.Offsets) != 2:
		return t, fmt.Errorf("data_offsets has %d entries, want 2", len(*e.Offsets))
	case len(*e.Shape) > MaxRank:
		return t, fmt.Errorf("rank %d exceeds %d", len(*e.Shape), MaxRank)
	}
	t.DType = DType(*e.DType)
	nbytes := uint64(t.DType.Size())
	if nbytes == 0 {
		return t, fmt.Errorf("unknown dtype %q", *e.DType)
	}
	for i, d := range *e.Shape {
		if d > math.MaxInt32 {
			return t, fmt.Errorf("dimension %d = %d is out of range", i, d)
		}
		hi, lo := bits.Mul64(nbytes, d)
		if hi != 0 {
			return t, fmt.Errorf("shape %v: byte size overflows", *e.Shape)
		}
		nbytes = lo
		t.Shape = append(t.Shape, int(d))
	}
	b, end := (*e.Offsets)[0], (*e.Offsets)[1]
	switch {
	case b > end:
		return t, fmt.Errorf("data_offsets [%d, %d] are reversed", b, end)
	case end > uint64(len(data)):
		return t, fmt.Errorf("data_offsets [%d, %d] extend past the %d-byte data section (truncated file?)", b, end, len(data))
	case end-b != nbytes:
		return t, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but %s %v needs %d", b, end, end-b, t.DType, *e.Shape, nbytes)
	}
	t.data, t.off = data[b:end:end], b
	return t, nil
}

// Checkpoint is an opened safetensors checkpoint: one file or the shards of
// a directory, memory-mapped, with every tensor's bounds checked.
type Checkpoint struct {
	path     string
	tensors  map[string]TensorInfo
	names    []string
	metadata map[string]string
	unmaps   []func() error
}

// Open opens a checkpoint: a .safetensors file, or a directory holding
// model.safetensors.index.json and its shards, or else every .safetensors
// file in it. Tensor names must be unique across shards.
func Open(path string) (*Checkpoint, error) {
	c, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return c, nil
}

func open(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{path: path, tensors: make(map[string]TensorInfo), metadata: make(map[string]string)}
	if !st.IsDir() {
		if err := c.addShard(path); err != nil {
			c.Close()
			return nil, err
		}
		c.finish()
		return c, nil
	}
	index := filepath.Join(path, IndexFile)
	var shards []string
	var weightMap map[string]string
	if b, err := os.ReadFile(index); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("%s: %w", index, err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("%s: empty weight_map", index)
		}
		weightMap = idx.WeightMap
		for name, shard := range weightMap {
			if !filepath.IsLocal(shard) {
				return nil, fmt.Errorf("%s: tensor %q: shard %q is not a file inside the checkpoint directory", index, name, shard)
			}
			shards = append(shards, filepath.Join(path, shard))
		}
		slices.Sort(shards)
		shards = slices.Compact(shards)
	} else if errors.Is(err, os.ErrNotExist) {
		shards, err = filepath.Glob(filepath.Join(path, "*.safetensors"))
		if err != nil {
			return nil, err
		}
		if len(shards) == 0 {
			return nil, fmt.Errorf("%s: no %s and no .safetensors files", path, IndexFile)
		}
	} else {
		return nil, err
	}
	for _, s := range shards {
		if err := c.addShard(s); err != nil {
			c.Close()
			return nil, err
		}
	}
	for name, shard := range weightMap {
		t, ok := c.tensors[name]
		if !ok || t.File != filepath.Join(path, shard) {
			c.Close()
			return nil, fmt.Errorf("%s: tensor %q: not in its shard %s", index, name, shard)
		}
	}
	c.finish()
	return c, nil
}

// addShard maps one safetensors file and adds its tensors.
func (c *Checkpoint) addShard(path string) error {
	fd, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() < 8 {
		return fmt.Errorf("%s: file is %d bytes, shorter than the 8-byte header length", path, st.Size())
	}
	if uint64(st.Size()) > math.MaxInt {
		return fmt.Errorf("%s: file too large to map", path)
	}
	data, unmap, err := mmap.File(fd, int(st.Size()))
	if err != nil {
		return fmt.Errorf("map %s: %w", path, err)
	}
	c.unmaps = append(c.unmaps, unmap)
	h, err := parseHeader(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range h.tensors {
		if prev, dup := c.tensors[t.Name]; dup {
			return fmt.Errorf("tensor %q: in both %s and %s", t.Name, prev.File, path)
		}
		t.File = path
		c.tensors[t.Name] = t
	}
	for k, v := range h.metadata {
		c.metadata[k] = v
	}
	return nil
}

func (c *Checkpoint) finish() {
	for name := range c.tensors {
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
}

// Close unmaps the files; tensor data must not be used afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, unmap := range c.unmaps {
		errs = append(errs, unmap())
	}
	c.unmaps = nil
	return errors.Join(errs...)
}

// Path returns the file or directory the checkpoint was opened from.
func (c *Checkpoint) Path() string { return c.path }

// Names returns every tensor name, sorted.
func (c *Checkpoint) Names() []string { return slices.Clone(c.names) }

// Tensor returns the tensor called name.
func (c *Checkpoint) Tensor(name string) (TensorInfo, bool) {
	t, ok := c.tensors[name]
	return t, ok
}

// Metadata returns the __metadata__ entries of the files, merged.
func (c *Checkpoint) Metadata() map[string]string { return c.metadata }
