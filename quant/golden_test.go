package quant

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const goldenDir = "testdata/golden"

// goldenCase is one entry of testdata/golden/manifest.json.
type goldenCase struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Rows    int    `json:"rows"`
	Cols    int    `json:"cols"`
	Input   string `json:"input"`
	Quant   string `json:"quant"`
	Imatrix string `json:"imatrix"`
}

func loadGoldenManifest(t *testing.T) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	require.NoError(t, err)
	var m struct {
		Cases []goldenCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &m))
	require.Len(t, m.Cases, 35)
	return m.Cases
}

// readF32File reads a little-endian float32 file.
func readF32File(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Zero(t, len(raw)%4, "%s: size not a multiple of 4", path)
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// firstDiff describes the first byte where got and want differ, naming its
// row, block and offset in the block; it returns "" when they are equal.
func firstDiff(typ Type, cols int, got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	rowBytes, _ := typ.RowBytes(cols)
	bb := typ.BlockBytes()
	for i := range got {
		if got[i] != want[i] {
			row, off := i/rowBytes, i%rowBytes
			return fmt.Sprintf("first difference at byte %d: row %d block %d byte %d: got %#02x, want %#02x",
				i, row, off/bb, off%bb, got[i], want[i])
		}
	}
	return ""
}

// TestGoldenQuantize checks every reference case byte for byte, both through
// Quantize and row by row through QuantizeRow.
func TestGoldenQuantize(t *testing.T) {
	for _, c := range loadGoldenManifest(t) {
		t.Run(c.Name, func(t *testing.T) {
			typ, err := ParseType(c.Type)
			require.NoError(t, err)
			input := readF32File(t, filepath.Join(goldenDir, c.Input))
			require.Len(t, input, c.Rows*c.Cols)
			var imatrix []float32
			if c.Imatrix != "" {
				imatrix = readF32File(t, filepath.Join(goldenDir, c.Imatrix))
				require.Len(t, imatrix, c.Cols)
			}
			want, err := os.ReadFile(filepath.Join(goldenDir, c.Quant))
			require.NoError(t, err)

			got, err := Quantize(typ, input, c.Cols, imatrix)
			require.NoError(t, err)
			if d := firstDiff(typ, c.Cols, got, want); d != "" {
				t.Fatalf("Quantize %s: %s", c.Name, d)
			}

			rowBytes, err := typ.RowBytes(c.Cols)
			require.NoError(t, err)
			row := make([]byte, rowBytes)
			for r := range c.Rows {
				require.NoError(t, QuantizeRow(typ, input[r*c.Cols:(r+1)*c.Cols], imatrix, row))
				if d := firstDiff(typ, c.Cols, row, want[r*rowBytes:(r+1)*rowBytes]); d != "" {
					t.Fatalf("QuantizeRow %s row %d: %s", c.Name, r, d)
				}
			}
		})
	}
}
