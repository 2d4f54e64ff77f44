package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// TestSpliceCommand splices the q4 experts of layer 3 into a q2 model
// made by synth, checks the plan, the written tensors, and the refusals.
func TestSpliceCommand(t *testing.T) {
	dir := t.TempDir()
	base, donor := filepath.Join(dir, "q2.gguf"), filepath.Join(dir, "q4.gguf")
	for _, f := range []struct{ path, recipe string }{{base, "q2"}, {donor, "q4"}} {
		code, _, stderr := runCmd("synth", "--layers", "4", "--vocab", "1024", "--recipe", f.recipe, "-o", f.path)
		require.Equal(t, 0, code, stderr)
	}
	out := filepath.Join(dir, "mixed.gguf")
	args := []string{"splice", "--base", base, "--donor", donor, "--q4-layers", "3", "-o", out}
	code, plan, stderr := runCmd(append(args, "--dry-run")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, plan, "layers from the donor: [3]\n")
	require.Contains(t, plan, "donor tensors: 3, 3 Q4_K\n")
	// Layer 3's experts: gate and up 256×256×8 in IQ2_XXS (66 bytes per
	// 256) become Q4_K (144 bytes), down in Q2_K (84) too: 2·2048·78 + 2048·60.
	require.Contains(t, plan, "delta: +442368 bytes (+0.000 GiB)\n")
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist)

	code, stdout, stderr := runCmd(args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "layout: ok")
	require.Contains(t, stderr, "splice 100.0%")
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	d, err := gguf.Open(donor)
	require.NoError(t, err)
	defer d.Close()
	for _, name := range []string{"blk.3.ffn_gate_exps.weight", "blk.3.ffn_down_exps.weight"} {
		ti, _ := f.Tensor(name)
		require.Equal(t, quant.Q4_K, ti.Type)
		di, _ := d.Tensor(name)
		require.True(t, bytes.Equal(d.TensorData(di), f.TensorData(ti)), name)
	}
	ti, _ := f.Tensor("blk.2.ffn_gate_exps.weight")
	require.Equal(t, quant.IQ2_XXS, ti.Type)

	code, _, stderr = runCmd(args...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "mixed.gguf exists (use --force to replace it)")
	code, _, stderr = runCmd(append(args, "--force", "-q")...)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)

	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"splice", "--base", base, "--donor", donor, "-o", out}, 2, "need --base FILE, --donor FILE, --q4-layers SPEC"},
		{[]string{"splice", "--base", base, "--donor", donor, "--q4-layers", "3-1", "--dry-run"}, 2, `range "3-1" is descending`},
		{[]string{"splice", "--base", base, "--donor", donor, "--q4-layers", ",", "--dry-run"}, 2, "empty layer id"},
		{[]string{"splice", "--base", base, "--donor", donor, "--q4-layers", "7", "--dry-run"}, 1, "layer 7: no routed expert tensors in the base"},
		{[]string{"splice", "--base", base, "--donor", filepath.Join(dir, "none"), "--q4-layers", "1", "--dry-run"}, 2, "--donor " + filepath.Join(dir, "none") + ": no such file"},
		{[]string{"splice", "--base", dir, "--donor", donor, "--q4-layers", "1", "--dry-run"}, 2, "--base " + dir + ": is a directory"},
		{[]string{"splice", "--base", base, "--donor", donor, "--q4-layers", "1", "-o", filepath.Join(dir, "no", "out.gguf")}, 2, "no such directory"},
	} {
		code, _, stderr := runCmd(tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.err, tc.args)
	}
}
