package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// planValue returns the integer printed on the plan line "key: N".
func planValue(t *testing.T, stdout, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + key + `: (\d+)$`).FindStringSubmatch(stdout)
	require.NotNil(t, m, "%s in %s", key, stdout)
	n, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return n
}

// writeImatrix writes an importance matrix for the routed gate and up
// tensors of layers 0 and 1 of the tiny oracle (8 experts, 256 columns).
func writeImatrix(t *testing.T, path string) {
	t.Helper()
	m := &quant.Imatrix{Chunks: 3, Dataset: "prompts.txt"}
	for _, name := range []string{"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight"} {
		v := make([]float32, 8*256)
		for i := range v {
			v[i] = float32(1 + (i*31)%17)
		}
		m.Entries = append(m.Entries, quant.ImatrixEntry{Name: name, NCall: 1, Values: v})
	}
	require.NoError(t, m.WriteFile(path))
}

// TestQuantizeCommand converts the tiny oracle losslessly, then
// requantizes the GGUF to q2 with an imatrix and an override: the plan
// (printed by --dry-run and by the run) matches the written file.
func TestQuantizeCommand(t *testing.T) {
	dir := t.TempDir()
	lossless := filepath.Join(dir, "lossless.gguf")
	code, _, stderr := runCmd("quantize", "--hf", oracleTiny, "-q", "-o", lossless)
	require.Equal(t, 0, code, stderr)
	im := filepath.Join(dir, "im.dat")
	writeImatrix(t, im)

	args := []string{"quantize", "--in", lossless, "--recipe", "q2", "--imatrix", im, "--tensor-type", "blk.4.ffn_gate_exps.weight=Q8_0", "--tensor-type", "blk.4.ffn_up_exps=q8_0"}
	code, plan, stderr := runCmd(append(args, "--dry-run")...)
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"imatrix: " + im + ": 4 entries, 3 chunks, dataset \"prompts.txt\"\n",
		"blk.0.ffn_gate_exps.weight IQ2_XXS [256 128 8] <- blk.0.ffn_gate_exps.weight (BF16), 67584 bytes, imatrix 8\n",
		"blk.2.ffn_gate_exps.weight IQ2_XXS [256 128 8] <- blk.2.ffn_gate_exps.weight (BF16), 67584 bytes\n",
		"blk.0.attn_q_a_norm.weight F32 [128] <- blk.0.attn_q_a_norm.weight (F32), 512 bytes, copied\n",
		"type_change: blk.0.ffn_gate_exps.weight BF16 -> IQ2_XXS\n",
		"type_change: blk.4.ffn_gate_exps.weight BF16 -> Q8_0\n",
		"type_change: blk.0.attn_q_a.weight BF16 -> Q8_0\n",
		"n_tensors: 150\n",
		"fallback: blk.0.ffn_down_exps.weight: Q2_K -> Q8_0 (ne[0] not a multiple of 256)\n",
	} {
		require.Contains(t, plan, want)
	}
	require.NotContains(t, plan, "type_change: blk.0.attn_norm.weight")
	_, err := os.Stat(filepath.Join(dir, "q2.gguf"))
	require.ErrorIs(t, err, os.ErrNotExist)

	out := filepath.Join(dir, "q2.gguf")
	code, stdout, stderr := runCmd(append(args, "-o", out)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "layout: ok")
	require.Contains(t, stderr, "[1/150] token_embd.weight <- token_embd.weight (BF16) -> F16, 262144 bytes\n")
	require.Contains(t, stderr, "] blk.1.ffn_up_exps.weight <- blk.1.ffn_up_exps.weight (BF16) -> IQ2_XXS, 67584 bytes, imatrix 8\n")
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, int64(f.DataOffset), planValue(t, plan, "meta_bytes"))
	require.Equal(t, f.Size(), planValue(t, plan, "approx_file_bytes"))
	var unpadded int64
	changes := 0
	in, err := gguf.Open(lossless)
	require.NoError(t, err)
	defer in.Close()
	for i, ti := range f.Tensors {
		unpadded += int64(ti.Size)
		if ti.Type != in.Tensors[i].Type {
			changes++
		}
	}
	require.Equal(t, unpadded, planValue(t, plan, "tensor_bytes_unpadded"))
	require.Equal(t, int64(changes), planValue(t, plan, "type_changes"))
	v, ok := f.Value("quantize.imatrix.file")
	require.True(t, ok)
	s, _ := v.Str()
	require.Equal(t, im, s)
	ti, _ := f.Tensor("blk.4.ffn_up_exps.weight")
	require.Equal(t, quant.Q8_0, ti.Type)

	// The output is not replaced without --overwrite.
	code, _, stderr = runCmd(append(args, "-o", out)...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "q2.gguf exists (use --overwrite to replace it)")
	code, _, stderr = runCmd(append(args, "-o", out, "--overwrite", "-q")...)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)

	// Strict: layers 2..4 have no entries for their IQ2_XXS experts.
	code, _, stderr = runCmd("quantize", "--hf", oracleTiny, "--recipe", "q2", "--imatrix", im, "--imatrix-strict", "--dry-run")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `tensor blk.2.ffn_gate_exps.weight expert 0: no imatrix entry`)
}

func TestQuantizeCommandErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.gguf")
	bad := filepath.Join(dir, "bad.dat")
	require.NoError(t, os.WriteFile(bad, []byte{1, 0, 0, 0, 0, 0, 0, 0}, 0o644))
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"quantize", "--hf", oracleTiny, "--in", out, "-o", out}, 2, "need --hf CHECKPOINT"},
		{[]string{"quantize", "--in", out}, 2, "need --hf CHECKPOINT, --out FILE"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--recipe", "q8"}, 2, `unknown mode "q8"`},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--imatrix-strict"}, 2, "--imatrix-strict needs --imatrix FILE"},
		{[]string{"quantize", "--in", out, "-o", out, "--config", "c.json"}, 2, "--config applies to --hf only"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--tensor-type", "token_embd.weight"}, 2, "want NAME=TYPE"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--tensor-type", "token_embd.weight=Q6_K"}, 2, "Q6_K cannot be written"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--tensor-type", "output_norm=Q8_0"}, 1, "output_norm.weight: --tensor-type output_norm=Q8_0: the engine accepts only [F32]"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--imatrix", filepath.Join(dir, "none.dat")}, 2, "--imatrix " + filepath.Join(dir, "none.dat") + ": no such file"},
		{[]string{"quantize", "--hf", filepath.Join(dir, "none"), "-o", out}, 2, "--hf " + filepath.Join(dir, "none") + ": no such file or directory"},
		{[]string{"quantize", "--in", dir, "-o", out}, 2, "--in " + dir + ": is a directory"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", filepath.Join(dir, "no", "x.gguf")}, 2, "no such directory"},
		{[]string{"quantize", "--hf", oracleTiny, "-o", out, "--imatrix", bad}, 1, "entry 0: name length 0 outside 1..4096"},
		{[]string{"quantize", "--in", filepath.Join(oracleTiny, "config.json"), "-o", out}, 1, "is not GGUF"},
	} {
		code, _, stderr := runCmd(tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.err, tc.args)
	}
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist)
}
