package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/quant"
)

// sampleKV exercises every value type, nested and empty arrays.
func sampleKV() []KV {
	return []KV{
		{"general.architecture", String("deepseek4")},
		{"u8", Uint8(200)},
		{"i8", Int8(-5)},
		{"u16", Uint16(65000)},
		{"i16", Int16(-30000)},
		{"u32", Uint32(4000000000)},
		{"i32", Int32(-7)},
		{"f32", Float32(1.5)},
		{"bool", Bool(true)},
		{"u64", Uint64(1 << 60)},
		{"i64", Int64(-1 << 60)},
		{"f64", Float64(math.Pi)},
		{"tokens", Strings([]string{"<｜begin▁of▁sentence｜>", "", "Ġthe", "ü"})},
		{"ratios", Uint32s([]uint32{0, 0, 4, 128})},
		{"clamp", Float32s([]float32{10, 10})},
		{"empty", Int32s([]int32{})},
		{"nested", ArrayOf(Array{TypeArray, []Array{{TypeUint8, []uint8{1, 2}}, {TypeString, []string{"x"}}}})},
		{"bools", ArrayOf(Array{TypeBool, []bool{true, false}})},
		{"f64s", ArrayOf(Array{TypeFloat64, []float64{1e-6, -2}})},
		{"i64s", ArrayOf(Array{TypeInt64, []int64{-1, 2}})},
		{"u16s", ArrayOf(Array{TypeUint16, []uint16{1, 65535}})},
	}
}

func sampleTensors() []TensorInfo {
	return []TensorInfo{
		{Name: "norm.weight", Type: quant.F32, Dims: []uint64{7}},
		{Name: "emb.weight", Type: quant.F16, Dims: []uint64{3, 5}},
		{Name: "q8.weight", Type: quant.Q8_0, Dims: []uint64{64, 2}},
		{Name: "exps.weight", Type: quant.IQ2_XXS, Dims: []uint64{256, 2, 3}},
		{Name: "tid2eid.weight", Type: quant.I32, Dims: []uint64{6, 4}},
	}
}

// writeSample writes a file with sampleKV/sampleTensors whose tensor i is
// filled with byte value i+1, and returns its bytes.
func writeSample(t testing.TB, kv []KV) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, kv, sampleTensors())
	require.NoError(t, err)
	for i, ti := range w.Tensors() {
		_, err := w.Write(bytes.Repeat([]byte{byte(i + 1)}, int(ti.Size)))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	kv := sampleKV()
	data := writeSample(t, kv)
	f, err := Parse(data)
	require.NoError(t, err)
	require.Equal(t, uint32(3), f.Version)
	require.Equal(t, uint64(DefaultAlignment), f.Alignment)
	require.Len(t, f.KV, len(kv))
	for i, e := range kv {
		require.Equal(t, e.Key, f.KV[i].Key)
		require.Equal(t, e.Value, f.KV[i].Value, "key %s", e.Key)
	}
	require.Zero(t, f.DataOffset%DefaultAlignment)
	for i, want := range sampleTensors() {
		got, ok := f.Tensor(want.Name)
		require.True(t, ok)
		require.Equal(t, want.Type, got.Type)
		require.Equal(t, want.Dims, got.Dims)
		require.Zero(t, got.Offset%f.Alignment)
		d := f.TensorData(got)
		require.Equal(t, bytes.Repeat([]byte{byte(i + 1)}, int(got.Size)), d)
	}
	ti, _ := f.Tensor("exps.weight")
	require.Equal(t, uint64(2*3*66), ti.Size)
	require.Equal(t, uint64(256*2*3), ti.Elements())
}

func TestOpenAndReadFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(string) (*File, error)
	}{{"Open", Open}, {"ReadFile", ReadFile}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			kv := append(sampleKV(), KV{AlignmentKey, Uint32(64)})
			require.NoError(t, os.WriteFile(path, writeSample(t, kv), 0o644))
			f, err := tc.open(path)
			require.NoError(t, err)
			defer f.Close()
			require.Equal(t, uint64(64), f.Alignment)
			ti, ok := f.Tensor("q8.weight")
			require.True(t, ok)
			require.Zero(t, (f.DataOffset+ti.Offset)%64)
			require.Equal(t, bytes.Repeat([]byte{3}, 2*2*34), f.TensorData(ti))
			v, ok := f.Value("tokens")
			require.True(t, ok)
			a, _ := v.Array()
			s, _ := a.Strings()
			require.Equal(t, "Ġthe", s[2])
			require.NoError(t, f.Close())
			require.NoError(t, f.Close(), "second Close is a no-op")

			_, err = tc.open(filepath.Join(t.TempDir(), "missing.gguf"))
			require.Error(t, err)
			short := filepath.Join(t.TempDir(), "short.gguf")
			require.NoError(t, os.WriteFile(short, []byte("GGUF"), 0o644))
			_, err = tc.open(short)
			require.ErrorIs(t, err, ErrTruncated)

			// A directory is named as one, not left to the mapping's
			// "no such device".
			dir := t.TempDir()
			_, err = tc.open(dir)
			require.ErrorContains(t, err, dir+" is a directory, not a GGUF file")
		})
	}
}

func TestValueAccessors(t *testing.T) {
	i, ok := Uint64(math.MaxUint64).Int()
	require.False(t, ok, "UINT64 above MaxInt64 is not an int64 (got %d)", i)
	f, ok := Int32(-3).Float()
	require.True(t, ok)
	require.Equal(t, -3.0, f)
	_, ok = String("x").Int()
	require.False(t, ok)
	ints, ok := ArrayOf(Array{TypeInt32, []int32{-1, 4}}).data.(Array).Ints()
	require.True(t, ok)
	require.Equal(t, []int64{-1, 4}, ints)
	fl, ok := Float32s([]float32{10, 0.5}).data.(Array).Floats()
	require.True(t, ok)
	require.Equal(t, []float64{10, 0.5}, fl)
	_, ok = Strings([]string{"a"}).data.(Array).Ints()
	require.False(t, ok)
	require.Equal(t, `[3 × UINT32] [1, 2, 3]`, Uint32s([]uint32{1, 2, 3}).String())
	require.Contains(t, Strings(make([]string, 20)).String(), "…")
}

// TestTruncatedEverywhere cuts a valid file at every byte of its header
// region and at the end of each tensor: each prefix is rejected with a
// FormatError that names a field, never a panic.
func TestTruncatedEverywhere(t *testing.T) {
	data := writeSample(t, sampleKV())
	f, err := Parse(data)
	require.NoError(t, err)
	fields := map[string]bool{}
	for n := 0; n < len(data); n++ {
		if n > int(f.DataOffset) && n%17 != 0 {
			continue // inside tensor data a sparse sample suffices
		}
		_, err := Parse(data[:n])
		var fe *FormatError
		require.ErrorAs(t, err, &fe, "prefix %d", n)
		// A count that no longer fits the shortened file is reported as
		// over the limit; anything else as truncation.
		require.True(t, errors.Is(err, ErrTruncated) || errors.Is(err, ErrLimit), "prefix %d: %v", n, err)
		require.NotEmpty(t, fe.Field)
		fields[strings.Fields(fe.Field)[0]] = true
	}
	for _, want := range []string{"magic", "version", "tensor", "metadata", "tensor[0]"} {
		require.True(t, fields[want], "no truncation reported in field %q (saw %v)", want, fields)
	}
}

// builder writes raw GGUF bytes field by field, independently of Writer,
// so malformed files can be made.
type builder struct{ bytes.Buffer }

func (b *builder) u32(v uint32) *builder { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *builder) u64(v uint64) *builder { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *builder) str(s string) *builder { b.u64(uint64(len(s))); b.WriteString(s); return b }
func (b *builder) head(nt, nkv uint64) *builder {
	return b.u32(Magic).u32(3).u64(nt).u64(nkv)
}
func (b *builder) tensor(name string, typ quant.Type, off uint64, dims ...uint64) *builder {
	b.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	return b.u32(uint32(typ)).u64(off)
}

// withData pads to 32 and appends n bytes of tensor data.
func (b *builder) withData(n int) []byte {
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, n))
	return b.Bytes()
}

func TestMalformed(t *testing.T) {
	nb := func() *builder { return &builder{} }
	cases := []struct {
		name  string
		data  []byte
		field string // substring of FormatError.Field
		msg   string // substring of the error
	}{
		{"empty", nil, "magic", "end of file"},
		{"bad magic", nb().u32(0x46554746).u32(3).u64(0).u64(0).Bytes(), "magic", "not GGUF"},
		{"version 2", nb().u32(Magic).u32(2).u64(0).u64(0).Bytes(), "version", "version 2"},
		{"huge kv count", nb().head(0, 1<<62).Bytes(), "metadata count", "cannot fit"},
		{"huge tensor count", nb().head(1<<40, 0).Bytes(), "tensor count", "cannot fit"},
		{"huge key length", nb().head(0, 1).u64(1 << 40).u32(0).Bytes(), "key length", "limit"},
		{"huge string value", nb().head(0, 1).str("k").u32(uint32(TypeString)).u64(MaxStringLen + 1).Bytes(), "metadata \"k\" length", "limit"},
		{"unknown value type", nb().head(0, 1).str("k").u32(13).Bytes(), "metadata \"k\" type", "unknown value type 13"},
		{"unknown array elem", nb().head(0, 1).str("k").u32(uint32(TypeArray)).u32(99).u64(0).Bytes(), "element type", "unknown value type 99"},
		{"huge array", nb().head(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(1 << 50).Bytes(), "metadata \"k\" length", "limit"},
		{"array longer than file", nb().head(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint64)).u64(1000).u64(1).Bytes(), "metadata \"k\" length", "bytes left"},
		{"deep nesting", deepNest(9), "metadata \"k\"", "nesting"},
		{"duplicate key", nb().head(0, 2).str("k").u32(uint32(TypeUint8)).withByte(1).str("k").u32(uint32(TypeUint8)).withByte(2).Bytes(), "metadata key \"k\"", "duplicate key"},
		{"alignment not power of two", nb().head(0, 1).str(AlignmentKey).u32(uint32(TypeUint32)).u32(48).Bytes(), AlignmentKey, "power of two"},
		{"alignment zero", nb().head(0, 1).str(AlignmentKey).u32(uint32(TypeUint32)).u32(0).Bytes(), AlignmentKey, "power of two"},
		{"alignment wrong type", nb().head(0, 1).str(AlignmentKey).u32(uint32(TypeUint64)).u64(32).Bytes(), AlignmentKey, "want UINT32"},
		{"zero dims", nb().head(1, 0).tensor("t", quant.F32, 0).withData(4), "dimension count", "0 dimensions"},
		{"five dims", nb().head(1, 0).tensor("t", quant.F32, 0, 1, 1, 1, 1, 1).withData(4), "dimension count", "5 dimensions"},
		{"zero dim", nb().head(1, 0).tensor("t", quant.F32, 0, 4, 0).withData(4), "ne[1]", "zero"},
		{"element overflow", nb().head(1, 0).tensor("t", quant.F32, 0, 1<<32, 1<<32).withData(4), "ne[1]", "overflows"},
		{"size overflow", nb().head(1, 0).tensor("t", quant.F32, 0, 1<<62).withData(4), "size", "overflows"},
		{"unknown ggml type", nb().head(1, 0).tensor("t", quant.Type(99), 0, 4).withData(4), "type", "unknown ggml type 99"},
		{"partial block", nb().head(1, 0).tensor("t", quant.Q8_0, 0, 33).withData(68), "type", "multiple of the Q8_0 block size"},
		{"misaligned offset", nb().head(1, 0).tensor("t", quant.F32, 4, 1).withData(64), "offset", "multiple of the alignment"},
		{"offset past end", nb().head(1, 0).tensor("t", quant.F32, 1<<20, 1).withData(4), "data", "past the end"},
		{"offset overflow", nb().head(1, 0).tensor("t", quant.F32, math.MaxUint64-31, 8).withData(4), "data", "past the end"},
		{"data truncated", nb().head(1, 0).tensor("t", quant.F32, 0, 16).withData(60), "data", "past the end"},
		{"duplicate tensor", nb().head(2, 0).tensor("t", quant.F32, 0, 8).tensor("t", quant.F32, 32, 8).withData(64), "tensor \"t\"", "duplicate tensor name"},
		{"overlap", nb().head(2, 0).tensor("a", quant.F32, 0, 16).tensor("b", quant.F32, 32, 8).withData(96), "tensor \"b\" data", "overlaps tensor \"a\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			require.Contains(t, fe.Field, c.field)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}

func (b *builder) withByte(v byte) *builder { b.WriteByte(v); return b }

// deepNest returns a file with one key holding arrays nested depth deep.
func deepNest(depth int) []byte {
	b := (&builder{}).head(0, 1).str("k").u32(uint32(TypeArray))
	for range depth - 1 {
		b.u32(uint32(TypeArray)).u64(1)
	}
	b.u32(uint32(TypeUint8)).u64(0)
	return b.Bytes()
}

func TestNestingLimitAccepted(t *testing.T) {
	_, err := Parse(deepNest(8))
	require.NoError(t, err)
}

func TestWriterErrors(t *testing.T) {
	tens := []TensorInfo{{Name: "a", Type: quant.F32, Dims: []uint64{2}}}
	cases := []struct {
		name string
		kv   []KV
		ts   []TensorInfo
		msg  string
	}{
		{"duplicate key", []KV{{"k", Uint8(1)}, {"k", Uint8(2)}}, nil, "duplicate key"},
		{"bad alignment", []KV{{AlignmentKey, Uint32(3)}}, nil, "power of two"},
		{"alignment type", []KV{{AlignmentKey, Uint64(32)}}, nil, "power of two"},
		{"invalid value", []KV{{"k", Value{}}}, nil, "holds"},
		{"mixed array", []KV{{"k", ArrayOf(Array{TypeString, []uint32{1}})}}, nil, "holds uint32"},
		{"duplicate tensor", nil, append(tens, tens...), "duplicate tensor name"},
		{"no dims", nil, []TensorInfo{{Name: "a", Type: quant.F32}}, "0 dimensions"},
		{"unknown type", nil, []TensorInfo{{Name: "a", Type: 77, Dims: []uint64{1}}}, "unknown ggml type"},
		{"partial block", nil, []TensorInfo{{Name: "a", Type: quant.Q2_K, Dims: []uint64{100}}}, "block size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewWriter(&bytes.Buffer{}, c.kv, c.ts)
			require.ErrorContains(t, err, c.msg)
		})
	}

	w, err := NewWriter(&bytes.Buffer{}, nil, tens)
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 4))
	require.NoError(t, err)
	require.ErrorContains(t, w.Close(), `tensor "a": 4 of 8 bytes written`)

	w, err = NewWriter(&bytes.Buffer{}, nil, tens)
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 9))
	require.ErrorContains(t, err, "past the last tensor")
}

func TestWriterPropagatesIOError(t *testing.T) {
	w, err := NewWriter(failWriter{}, sampleKV(), sampleTensors())
	if err == nil {
		for _, ti := range w.Tensors() {
			if _, err = w.Write(make([]byte, ti.Size)); err != nil {
				break
			}
		}
		if err == nil {
			err = w.Close()
		}
	}
	require.ErrorIs(t, err, errDiskFull)
}

var errDiskFull = errors.New("disk full")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestPastTheEndSizes checks that a tensor reaching past the end names the
// file's size and the data section's, each as what it is.
func TestPastTheEndSizes(t *testing.T) {
	data := (&builder{}).head(1, 0).tensor("t", quant.F32, 0, 16).withData(60)
	_, err := Parse(data)
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf("past the end of the %d-byte file", len(data)))
	require.Contains(t, err.Error(), "60-byte data section")
}

func TestValueOffset(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, []KV{{"a", String("xyz")}, {"b", Uint32(0xdeadbeef)}}, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	f, err := Parse(buf.Bytes())
	require.NoError(t, err)
	off, ok := f.ValueOffset("b")
	require.True(t, ok)
	require.Equal(t, uint32(0xdeadbeef), binary.LittleEndian.Uint32(buf.Bytes()[off:]))
	off, ok = f.ValueOffset("a")
	require.True(t, ok)
	require.Equal(t, uint64(3), binary.LittleEndian.Uint64(buf.Bytes()[off:]))
	_, ok = f.ValueOffset("c")
	require.False(t, ok)
}

// TestCheckSize truncates and extends files under an open File: a mapped
// one reports its size change, one read into memory does not care.
func TestCheckSize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		open   func(string) (*File, error)
		mapped bool
	}{{"Open", Open, true}, {"ReadFile", ReadFile, false}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			data := writeSample(t, sampleKV())
			require.NoError(t, os.WriteFile(path, data, 0o644))
			f, err := tc.open(path)
			require.NoError(t, err)
			require.NoError(t, f.CheckSize())
			for _, size := range []int64{int64(len(data)) / 2, int64(len(data)) + 4096} {
				require.NoError(t, os.Truncate(path, size))
				if err := f.CheckSize(); tc.mapped {
					require.EqualError(t, err, fmt.Sprintf("gguf: model file changed size: was %d, now %d", len(data), size))
				} else {
					require.NoError(t, err)
				}
			}
			require.NoError(t, os.Truncate(path, int64(len(data))))
			require.NoError(t, f.CheckSize())
			require.NoError(t, f.Close())
			require.NoError(t, f.CheckSize())
		})
	}
	f, err := Parse(writeSample(t, nil))
	require.NoError(t, err)
	require.NoError(t, f.CheckSize())
}

func TestHolds(t *testing.T) {
	data := writeSample(t, nil)
	f, err := Parse(data)
	require.NoError(t, err)
	lo := uintptr(unsafe.Pointer(&data[0]))
	for _, tc := range []struct {
		addr uintptr
		want bool
	}{{lo, true}, {lo + uintptr(len(data)) - 1, true}, {lo + uintptr(len(data)), false}, {lo - 1, false}, {0, false}} {
		require.Equal(t, tc.want, f.Holds(tc.addr), "%#x in [%#x, +%d)", tc.addr, lo, len(data))
	}
	require.False(t, (&File{}).Holds(0))
}
