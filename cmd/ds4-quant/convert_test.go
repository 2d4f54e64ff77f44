package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
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

// TestQuantizeProCheckpoint converts the Pro-shaped oracle checkpoint
// with each of its configs (the reference key names and the released
// Hugging Face ones) and checks that the file carries Pro's distinctive
// hyperparameters and passes the layout check.
func TestQuantizeProCheckpoint(t *testing.T) {
	const pro = "../../vectors/testdata/oracle/pro_tiny_s320"
	for _, config := range []string{"config.json", "hf_config.json"} {
		t.Run(config, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "pro.gguf")
			code, stdout, stderr := runCmd("quantize", "--hf", filepath.Join(pro, "weights.safetensors"),
				"--config", filepath.Join(pro, config), "--mode", "lossless", "-q", "-o", out)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stdout, "layout: ok")
			f, err := gguf.Open(out)
			require.NoError(t, err)
			defer f.Close()
			p, err := layout.FromGGUF(f)
			require.NoError(t, err)
			require.Equal(t, []int{128, 128, 4, 128, 4, 128}, p.CompressRatios)
			require.Equal(t, float32(2.5), p.ExpertWeightsScale)
			require.Equal(t, 2, p.OGroups)
			require.Equal(t, 256, p.OLoraRank)
			require.Equal(t, 384, p.QLoraRank)
			require.Equal(t, 16, p.Heads)
			require.Equal(t, 8, p.IndexerHeads)
			require.Equal(t, 32, p.IndexerTopK)
			require.Equal(t, 12, p.Experts)
			require.Equal(t, 6, p.ExpertsUsed)
			require.Equal(t, 3, p.HashLayers)
			ti, _ := f.Tensor("blk.0.attn_output_a.weight")
			require.Equal(t, []uint64{1024, 512}, ti.Dims) // 8 heads × 128 per group, 2 groups × 256
			_, ok := f.Tensor("blk.0.attn_compressor_ape.weight")
			require.True(t, ok, "layer 0 is compressed")
		})
	}
}
