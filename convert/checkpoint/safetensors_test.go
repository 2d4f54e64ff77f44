package checkpoint

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sample is a small valid checkpoint image.
func sample() []byte {
	return encodeST([]stTensor{
		{"a", F32, []int{2, 3}, make([]byte, 24)},
		{"b", BF16, []int{4}, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"c", I64, []int{1, 1}, make([]byte, 8)},
		{"empty", F16, []int{0, 5}, nil},
		{"scalar", U8, nil, []byte{9}},
	}, map[string]string{"format": "pt"})
}

// image frames a literal header with data bytes.
func image(hdr string, data int) []byte {
	return rawST([]byte(hdr), []stTensor{{Data: make([]byte, data)}})
}

// badImages are malformed files with the error each must produce; they
// also seed FuzzParseHeader.
var badImages = []struct {
	name string
	file []byte
	err  string
}{
	{"short", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
	{"huge header", binary.LittleEndian.AppendUint64(nil, MaxHeaderBytes+1), "exceeds the 104857600-byte limit"},
	{"header past end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "header length 100 exceeds the 2 bytes after it"},
	{"not an object", image(`["a"]`, 0), "does not start with '{'"},
	{"bad json", image(`{"a": {"dtype": "F32",}`, 0), "invalid character"},
	{"not utf8", image("{\"\xff\": 1}", 0), "not valid UTF-8"},
	{"trailing", image(`{} {}`, 0), "data after the JSON object"},
	{"duplicate", image(`{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}`, 2), `tensor "a": duplicate name`},
	{"unknown dtype", image(`{"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}`, 1), `unknown dtype "F4"`},
	{"no dtype", image(`{"a": {"shape": [1], "data_offsets": [0, 1]}}`, 1), "no dtype"},
	{"no shape", image(`{"a": {"dtype": "U8", "data_offsets": [0, 1]}}`, 1), "no shape"},
	{"no offsets", image(`{"a": {"dtype": "U8", "shape": [1]}}`, 1), "no data_offsets"},
	{"three offsets", image(`{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}}`, 1), "data_offsets has 3 entries"},
	{"negative dim", image(`{"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}`, 1), `tensor "a"`},
	{"huge dim", image(`{"a": {"dtype": "U8", "shape": [4294967296], "data_offsets": [0, 1]}}`, 1), "dimension 0 = 4294967296 is out of range"},
	{"overflow", image(`{"a": {"dtype": "F64", "shape": [2147483647, 2147483647, 2147483647], "data_offsets": [0, 8]}}`, 8), "byte size overflows"},
	{"rank", image(`{"a": {"dtype": "U8", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 1]}}`, 1), "rank 9 exceeds 8"},
	{"reversed", image(`{"a": {"dtype": "U8", "shape": [0], "data_offsets": [1, 0]}}`, 1), "are reversed"},
	{"past end", image(`{"a": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}}`, 8), "extend past the 8-byte data section (truncated file?)"},
	{"size mismatch", image(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}`, 4), "hold 4 bytes, but F32 [2] needs 8"},
	{"overlap", image(`{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}`, 6), `tensor "b": data [2, 6) overlaps`},
	{"gap", image(`{"a": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}`, 6), `tensor "a": 2 unindexed bytes before its data`},
	{"tail", image(`{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}`, 8), "4 unindexed bytes after the last tensor"},
	{"metadata", image(`{"__metadata__": {"format": 1}}`, 0), "__metadata__ must map strings to strings"},
	{"empty name", image(`{"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}`, 1), "empty tensor name"},
}

func TestParseHeader(t *testing.T) {
	h, err := parseHeader(sample())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"format": "pt"}, h.metadata)
	var names []string
	for _, ti := range h.tensors {
		names = append(names, ti.Name)
	}
	require.Equal(t, []string{"a", "b", "c", "empty", "scalar"}, names)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, h.tensors[1].Data())
	require.Equal(t, []int{0, 5}, h.tensors[3].Shape)
	require.Equal(t, 0, h.tensors[3].Elements())
	require.Equal(t, []byte{9}, h.tensors[4].Data())
	require.Equal(t, 1, h.tensors[4].Elements())

	// Zero-byte tensors may share an offset.
	_, err = parseHeader(image(`{"x": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, "y": {"dtype": "F32", "shape": [3, 0], "data_offsets": [0, 0]}}`, 0))
	require.NoError(t, err)
}

func TestParseHeaderErrors(t *testing.T) {
	for _, tc := range badImages {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseHeader(tc.file)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, os.WriteFile(path, sample(), 0o644))
	c, err := Open(path)
	require.NoError(t, err)
	require.Equal(t, path, c.Path())
	require.Equal(t, []string{"a", "b", "c", "empty", "scalar"}, c.Names())
	require.Equal(t, "pt", c.Metadata()["format"])
	b, ok := c.Tensor("b")
	require.True(t, ok)
	require.Equal(t, BF16, b.DType)
	require.Equal(t, path, b.File)
	_, err = c.Weight("nope")
	require.ErrorIs(t, err, ErrMissing)
	_, err = c.Weight("scalar")
	require.ErrorContains(t, err, `checkpoint: tensor "scalar": dtype U8 is not a weight encoding`)
	require.NoError(t, c.Close())

	// A truncated copy names the tensor that runs past the end.
	full := sample()
	require.NoError(t, os.WriteFile(path, full[:len(full)-1], 0o644))
	_, err = Open(path)
	require.ErrorContains(t, err, `tensor "scalar": data_offsets [40, 41] extend past the 40-byte data section (truncated file?)`)
	require.ErrorContains(t, err, path)

	_, err = Open(filepath.Join(t.TempDir(), "missing.safetensors"))
	require.Error(t, err)
	_, err = Open(t.TempDir())
	require.ErrorContains(t, err, "no model.safetensors.index.json and no .safetensors files")
}

func TestOpenSharded(t *testing.T) {
	dir := t.TempDir()
	writeST(t, filepath.Join(dir, "s1.safetensors"), []stTensor{{"x", F32, []int{1}, make([]byte, 4)}, {"y", U8, []int{2}, []byte{1, 2}}})
	writeST(t, filepath.Join(dir, "s2.safetensors"), []stTensor{{"z", BF16, []int{1}, []byte{0, 0x3f}}})
	index := func(s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), []byte(s), 0o644))
	}
	index(`{"metadata": {"total_size": 8}, "weight_map": {"x": "s1.safetensors", "y": "s1.safetensors", "z": "s2.safetensors"}}`)
	c, err := Open(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y", "z"}, c.Names())
	z, err := c.Weight("z")
	require.NoError(t, err)
	v, err := z.Float32s()
	require.NoError(t, err)
	require.Equal(t, []float32{0.5}, v)
	require.NoError(t, c.Close())

	for _, tc := range []struct{ index, err string }{
		{`{"weight_map": {"x": "s2.safetensors"}}`, `tensor "x": not in its shard s2.safetensors`},
		{`{"weight_map": {"x": "../s1.safetensors"}}`, `shard "../s1.safetensors" is not a file inside the checkpoint directory`},
		{`{"weight_map": {"x": "/etc/passwd"}}`, "is not a file inside"},
		{`{"weight_map": {}}`, "empty weight_map"},
		{`{"weight_map": {"x": "gone.safetensors"}}`, "gone.safetensors"},
		{`[`, IndexFile},
	} {
		index(tc.index)
		_, err := Open(dir)
		require.ErrorContains(t, err, tc.err, tc.index)
	}

	// Without an index every .safetensors file is read; names must not
	// repeat across them.
	require.NoError(t, os.Remove(filepath.Join(dir, IndexFile)))
	c, err = Open(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y", "z"}, c.Names())
	require.NoError(t, c.Close())
	writeST(t, filepath.Join(dir, "s3.safetensors"), []stTensor{{"y", U8, []int{1}, []byte{1}}})
	_, err = Open(dir)
	require.ErrorContains(t, err, `tensor "y": in both`)
}

// TestOracleFiles opens the three oracle checkpoints and checks a few
// tensors against the oracle README's table.
func TestOracleFiles(t *testing.T) {
	for _, name := range oracleCases {
		c, err := Open(filepath.Join(oracle(name), "weights.safetensors"))
		require.NoError(t, err, name)
		for _, n := range c.Names() {
			ti, _ := c.Tensor(n)
			switch {
			case strings.HasSuffix(n, ".scale"):
				require.Equal(t, F8E8M0, ti.DType, n)
			case strings.Contains(n, ".experts."):
				require.Equal(t, I8, ti.DType, n)
			case strings.HasSuffix(n, "tid2eid"):
				require.Equal(t, I64, ti.DType, n)
			}
		}
		require.NoError(t, c.Close())
	}
}
