package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

const oracleTiny = "../../vectors/testdata/oracle/tiny_w16_r16"

func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tiny.gguf")
	code, stdout, stderr := runCmd("convert", "--hf", oracleTiny, "--mode", "lossless", "-o", out)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "wrote "+out+": tiny_w16_r16, 5 layers, mode lossless, 150 tensors")
	require.Contains(t, stdout, "0 fallbacks, 0 ignored, 87 mtp.* tensors skipped")
	require.Contains(t, stdout, "layout: ok")
	require.Contains(t, stderr, "[1/150] token_embd.weight <- embed.weight (BF16) -> BF16")
	require.Contains(t, stderr, "blk.2.ffn_up_exps.weight <- layers.2.ffn.experts.*.w3.weight (FP4(I8)×E8M0[1×32]) -> BF16")

	code, stdout, stderr = runCmd("inspect", "-q", out)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ok")

	// A single file with an explicit Hugging Face config, q4, quietly.
	q4 := filepath.Join(dir, "q4.gguf")
	code, stdout, stderr = runCmd("convert", "--hf", filepath.Join(oracleTiny, "weights.safetensors"),
		"--config", filepath.Join(oracleTiny, "hf_config.json"), "--mode", "q4", "-q", "-o", q4)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	require.Contains(t, stdout, "fallback: blk.4.ffn_down_exps.weight: Q4_K -> Q8_0 (ne[0] not a multiple of 256)")
	f, err := gguf.Open(q4)
	require.NoError(t, err)
	ti, _ := f.Tensor("blk.0.ffn_gate_exps.weight")
	require.Equal(t, quant.Q4_K, ti.Type)
	require.NoError(t, f.Close())

	// The plan alone writes nothing.
	code, stdout, stderr = runCmd("convert", "--hf", oracleTiny, "--mode", "q2", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "blk.0.ffn_gate_exps.weight IQ2_XXS [256 128 8] <- layers.0.ffn.experts.*.w1.weight")
	require.Contains(t, stdout, "5 fallbacks")
}

func TestConvertCommandErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.gguf")
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"convert", "-o", out}, 2, "need --hf CHECKPOINT"},
		{[]string{"convert", "--hf", oracleTiny}, 2, "need --hf CHECKPOINT, --out FILE"},
		{[]string{"convert", "--hf", oracleTiny, "-o", out, "--mode", "q3"}, 2, `unknown mode "q3"`},
		{[]string{"convert", "--hf", oracleTiny, "-o", out, "--bogus"}, 2, "unknown flag"},
		{[]string{"convert", "--hf", oracleTiny, "-o", out, "--workers", "-1"}, 2, "must not be negative"},
		{[]string{"convert", "--hf", dir, "-o", out}, 1, "none of [config.json hf_config.json]"},
		{[]string{"convert", "--hf", dir, "--config", filepath.Join(oracleTiny, "config.json"), "-o", out}, 1, "no model.safetensors.index.json and no .safetensors files"},
	} {
		code, _, stderr := runCmd(tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.err, tc.args)
	}
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist)
}
