package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/quant"
	"github.com/stretchr/testify/require"
)

const goldenDir = "../../quant/testdata/golden"

// copyGolden copies golden files into dir and returns the new paths.
func copyGolden(t *testing.T, dir string, names ...string) []string {
	t.Helper()
	var paths []string
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(goldenDir, name))
		require.NoError(t, err)
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		paths = append(paths, p)
	}
	return paths
}

func TestRawQuantizeGolden(t *testing.T) {
	tests := []struct {
		name    string
		typ     string
		imatrix bool
	}{
		{"q8_0_d0_im0", "q8_0", false},
		{"q2_k_d2_im0", "Q2_K", false},
		{"q2_k_d3_im1", "q2k", true},
		{"q4_k_d1_im0", "Q4_K", false},
		{"q4_k_d4_im1", "q4-k", true},
		{"iq2_xxs_d0_im1", "IQ2_XXS", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := []string{tc.name + ".input.f32"}
			if tc.imatrix {
				files = append(files, tc.name+".imatrix.f32")
			}
			paths := copyGolden(t, dir, files...)
			out := filepath.Join(dir, "out.bin")
			args := []string{"--type", tc.typ, "--cols", "512"}
			if tc.imatrix {
				args = append(args, "--imatrix", paths[1])
			}
			var stdout, stderr bytes.Buffer
			require.NoError(t, runRaw(append(args, paths[0], out), &stdout, &stderr))
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(goldenDir, tc.name+".quant.bin"))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "output differs from %s.quant.bin", tc.name)
			require.Contains(t, stdout.String(), "4 rows x 512 cols")
			require.Contains(t, stdout.String(), strconv.Itoa(len(want))+" bytes out")
			require.Empty(t, stderr.String())
		})
	}
}

// TestRawQuantizeSyntheticImportance checks that IQ2_XXS without --imatrix
// gives the same bytes as quant.Quantize with nil importance.
func TestRawQuantizeSyntheticImportance(t *testing.T) {
	dir := t.TempDir()
	in := copyGolden(t, dir, "q2_k_d0_im0.input.f32")[0]
	out := filepath.Join(dir, "out.bin")
	require.NoError(t, runRaw([]string{"--type", "iq2_xxs", "--cols", "256", in, out}, &bytes.Buffer{}, &bytes.Buffer{}))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	want, err := quant.Quantize(quant.IQ2_XXS, readF32(t, in), 256, nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

func TestRawDequantize(t *testing.T) {
	for _, name := range []string{"q8_0_d1_im0", "q2_k_d0_im1", "q4_k_d2_im0", "iq2_xxs_d4_im1"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			in := copyGolden(t, dir, name+".quant.bin")[0]
			out := filepath.Join(dir, "out.f32")
			typ := name[:len(name)-len("_d0_im0")]
			var stdout bytes.Buffer
			require.NoError(t, runRaw([]string{"--dequant", "--type", typ, "--cols", "512", in, out}, &stdout, &bytes.Buffer{}))
			require.Contains(t, stdout.String(), "dequantized 4 rows x 512 cols")

			qt, err := quant.ParseType(typ)
			require.NoError(t, err)
			blocks, err := os.ReadFile(in)
			require.NoError(t, err)
			want := make([]float32, 4*512)
			rb, err := qt.RowBytes(512)
			require.NoError(t, err)
			for r := range 4 {
				require.NoError(t, quant.DequantizeRow(qt, blocks[r*rb:(r+1)*rb], want[r*512:(r+1)*512]))
			}
			require.Equal(t, want, readF32(t, out))
		})
	}
}

func TestRawErrors(t *testing.T) {
	dir := t.TempDir()
	in := copyGolden(t, dir, "q8_0_d0_im0.input.f32", "q8_0_d0_im0.quant.bin", "q8_0_d0_im1.imatrix.f32")
	f32, bin, imat := in[0], in[1], in[2]
	odd := filepath.Join(dir, "odd.f32")
	require.NoError(t, os.WriteFile(odd, make([]byte, 4*512+4), 0o644))
	out := filepath.Join(dir, "out")

	tests := []struct {
		name  string
		args  []string
		want  string
		usage bool // a command-line mistake (exit status 2)
	}{
		{"bad type name", []string{"--type", "q9_9", "--cols", "512", f32, out}, "unknown type name", true},
		{"type not emittable", []string{"--type", "q6_k", "--cols", "512", f32, out}, "not supported", true},
		{"missing type", []string{"--cols", "512", f32, out}, "--type is required", true},
		{"bad cols", []string{"--type", "q8_0", "--cols", "0", f32, out}, "--cols 0: must be at least 1", true},
		{"cols not a block multiple", []string{"--type", "q4_k", "--cols", "32", f32, out}, "block size", true},
		{"bad input size", []string{"--type", "q8_0", "--cols", "512", odd, out}, "not a multiple", false},
		{"missing input", []string{"--dequant", "--type", "q8_0", "--cols", "64", f32 + "x", out}, "input " + f32 + "x: no such file", true},
		{"dequant size not a row multiple", []string{"--dequant", "--type", "q4_k", "--cols", "256", bin, out}, "not a multiple", false},
		{"imatrix length", []string{"--type", "q2_k", "--cols", "256", "--imatrix", imat, f32, out}, "imatrix", false},
		{"imatrix with dequant", []string{"--dequant", "--type", "q8_0", "--cols", "512", "--imatrix", imat, bin, out}, "--imatrix", true},
		{"missing files", []string{"--type", "q8_0", "--cols", "512", f32}, "2 file arguments", true},
		{"unknown flag", []string{"--bogus", f32, out}, "unknown flag", true},
		{"output is input", []string{"--type", "q8_0", "--cols", "512", f32, f32}, "overwrite", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runRaw(tc.args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			require.ErrorContains(t, err, tc.want)
			var ue *cli.UsageError
			require.Equal(t, tc.usage, errors.As(err, &ue), "usage error")
			_, statErr := os.Stat(out)
			require.True(t, os.IsNotExist(statErr), "partial output left behind")
		})
	}
	// The input survives the refused overwrite.
	data, err := os.ReadFile(f32)
	require.NoError(t, err)
	require.Len(t, data, 4*4*512)
}

func TestRawHelp(t *testing.T) {
	code, out, errOut := runCmd("raw", "--help")
	require.Equal(t, 0, code)
	require.Empty(t, errOut)
	require.Contains(t, out, "Usage: ds4-quant raw --type T --cols N")
	require.Contains(t, out, "Types: F32, F16")
}
