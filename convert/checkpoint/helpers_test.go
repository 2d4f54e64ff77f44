package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

// oracleDir is where the oracle cases live, relative to this package.
const oracleDir = "../../vectors/testdata/oracle"

var oracleCases = []string{"tiny_w16_r16", "flash_ratios_s300", "hd192_w8_r32", "pro_tiny_s320"}

func oracle(name string) string { return filepath.Join(oracleDir, name) }

// loadTables decodes the embedded tokenizer once for all tests.
var loadTables = sync.OnceValues(tokenizer.DeepSeekV4)

func tables(t testing.TB) *tokenizer.Tables {
	t.Helper()
	tb, err := loadTables()
	require.NoError(t, err)
	return tb
}

// stTensor is a tensor to write into a test safetensors file.
type stTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// encodeST builds a safetensors image: tensors sorted by name, packed in
// that order, with the given metadata.
func encodeST(ts []stTensor, meta map[string]string) []byte {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b stTensor) int { return strings.Compare(a.Name, b.Name) })
	hdr := map[string]any{}
	if meta != nil {
		hdr["__metadata__"] = meta
	}
	var off int
	for _, t := range ts {
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int{off, off + len(t.Data)}}
		off += len(t.Data)
	}
	j, err := json.Marshal(hdr)
	if err != nil {
		panic(err)
	}
	return rawST(j, ts)
}

// rawST frames a header (padded to 8 bytes as the reference writer does)
// and the tensors' data.
func rawST(hdr []byte, ts []stTensor) []byte {
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	out = append(out, hdr...)
	for _, t := range ts {
		out = append(out, t.Data...)
	}
	return out
}

func writeST(t testing.TB, path string, ts []stTensor) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, encodeST(ts, map[string]string{"format": "pt"}), 0o644))
}

// stSet is a mutable copy of a checkpoint's tensors.
type stSet map[string]*stTensor

// loadST copies every tensor of a safetensors file.
func loadST(t testing.TB, path string) stSet {
	t.Helper()
	c, err := Open(path)
	require.NoError(t, err)
	defer c.Close()
	s := stSet{}
	for _, name := range c.Names() {
		ti, _ := c.Tensor(name)
		s[name] = &stTensor{Name: name, DType: ti.DType, Shape: slices.Clone(ti.Shape), Data: slices.Clone(ti.Data())}
	}
	return s
}

func (s stSet) list() []stTensor {
	var ts []stTensor
	for _, t := range s {
		ts = append(ts, *t)
	}
	return ts
}

// rawTensor finds a tensor in a safetensors file image with encoding/json
// alone, independently of the package's parser.
func rawTensor(t testing.TB, b []byte, name string) (dtype string, shape []int, data []byte) {
	t.Helper()
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &hdr))
	var e struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	raw, ok := hdr[name]
	require.True(t, ok, name)
	require.NoError(t, json.Unmarshal(raw, &e))
	base := 8 + int(n)
	return e.DType, e.Shape, b[base+e.Offsets[0] : base+e.Offsets[1]]
}
