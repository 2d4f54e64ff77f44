package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/cli/clitest"
	"github.com/ds4-go/ds4/quant"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestDispatch(t *testing.T) {
	code, _, errOut := runCmd()
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "Usage: ds4-quant COMMAND")
	code, _, errOut = runCmd("frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "frobnicate"`)
	code, out, _ := runCmd("help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "synth")
	code, _, _ = runCmd("synth", "--help")
	require.Equal(t, 0, code)
}

// TestHelpConvention checks --help, -h and bad flags of ds4-quant and each
// of its commands against the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, command, run)
}

// TestSynthThenInspect writes the tiny preset (with a short vocabulary and
// a 4-layer override so it stays quick) and reads it back with inspect.
func TestSynthThenInspect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	code, out, errOut := runCmd("synth", "--preset", "tiny", "--layers", "4", "--vocab", "1024", "--recipe", "q4", "--seed", "9", "-o", path)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "4 layers, recipe q4")
	require.Contains(t, errOut, "synth 100.0%")

	f, err := gguf.Open(path)
	require.NoError(t, err)
	p, err := layout.FromGGUF(f)
	require.NoError(t, err)
	require.Equal(t, 4, p.Layers)
	require.Equal(t, 1024, p.Vocab)
	ti, _ := f.Tensor("blk.3.ffn_down_exps.weight")
	require.Equal(t, quant.Q4_K, ti.Type)
	require.NoError(t, f.Close())

	code, out, errOut = runCmd("inspect", path)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"GGUF v3", "deepseek4.block_count", "UINT32", "blk.2.indexer.proj.weight", "F16", "[256, 256, 8]", "routed experts: q4", "ok"} {
		require.Contains(t, out, want)
	}

	// A file that is not DS4-shaped is reported and fails.
	bad := filepath.Join(dir, "bad.gguf")
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, []gguf.KV{{Key: "general.architecture", Value: gguf.String("llama")}}, []gguf.TensorInfo{{Name: "x", Type: quant.F32, Dims: []uint64{4}}})
	require.NoError(t, err)
	_, err = w.Write(make([]byte, 16))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(bad, buf.Bytes(), 0o644))
	code, out, errOut = runCmd("inspect", "-q", bad)
	require.Equal(t, 1, code)
	require.Contains(t, out, `problem: metadata general.architecture: "llama", want "deepseek4"`)
	require.Contains(t, out, "problem: metadata deepseek4.block_count: missing")
	require.Contains(t, out, "problem: metadata tokenizer.ggml.tokens: missing")
	require.Contains(t, errOut, "not a valid DS4 file")

	// A malformed file is a clear error.
	require.NoError(t, os.WriteFile(bad, buf.Bytes()[:40], 0o644))
	code, _, errOut = runCmd("inspect", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "truncated or corrupt")
}

func TestSynthFlagErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.gguf")
	cases := [][]string{
		{"synth"},
		{"synth", "-o", out, "--preset", "huge"},
		{"synth", "-o", out, "--recipe", "q3"},
		{"synth", "-o", out, "--embd", "100"},
		{"synth", "-o", out, "--layers", "4", "--ratios", "0,4"},
		{"synth", "-o", out, "--no-such-flag"},
	}
	for _, args := range cases {
		code, _, errOut := runCmd(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.NotEmpty(t, errOut)
	}
	_, err := os.Stat(out)
	require.True(t, os.IsNotExist(err), "no file is left behind")
}

// TestUsageNamesValues checks that bad command lines fail with status 2
// and a message naming the flag or argument and its value, before any
// file is read or written.
func TestUsageNamesValues(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"synth", "--preset", "huge", "-o", filepath.Join(dir, "x.gguf")}, "--preset huge: must be tiny, flash or pro"},
		{[]string{"synth", "--workers", "-1", "-o", filepath.Join(dir, "x.gguf")}, "--workers -1: must be at least 0"},
		{[]string{"synth", "--layers", "-2", "-o", filepath.Join(dir, "x.gguf")}, "--layers -2: must be at least 0"},
		{[]string{"synth", "-o", filepath.Join(dir, "no", "x.gguf")}, "--out " + filepath.Join(dir, "no", "x.gguf") + ": no such directory"},
		{[]string{"synth", "-o", dir}, "--out " + dir + ": is a directory"},
		{[]string{"inspect", filepath.Join(dir, "none.gguf")}, filepath.Join(dir, "none.gguf") + ": no such file"},
		{[]string{"inspect", dir}, dir + ": is a directory, not a GGUF file"},
	} {
		code, _, stderr := runCmd(tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, tc.args)
	}
	require.NoFileExists(t, filepath.Join(dir, "x.gguf"))
}

// TestInspectOutOfRangeMetadata writes files whose metadata has one count
// out of its range and checks that inspect names the key and fails.
func TestInspectOutOfRangeMetadata(t *testing.T) {
	cases := []struct {
		key string
		val gguf.Value
	}{
		{"deepseek4.hyper_connection.sinkhorn_iterations", gguf.Uint32(1 << 31)},
		{"deepseek4.attention.sliding_window", gguf.Uint32(0)},
		{"deepseek4.vocab_size", gguf.Uint32(1<<32 - 1)},
		{"deepseek4.block_count", gguf.Uint32(1 << 20)},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			kv := layout.Tiny().KV()
			for i := range kv {
				if kv[i].Key == c.key {
					kv[i].Value = c.val
				}
			}
			var buf bytes.Buffer
			w, err := gguf.NewWriter(&buf, kv, nil)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			path := filepath.Join(t.TempDir(), "bad.gguf")
			require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			code, out, errOut := runCmd("inspect", "-q", path)
			require.Equal(t, 1, code, errOut)
			require.Contains(t, out, fmt.Sprintf("problem: gguf: metadata %q at offset", c.key))
			require.Contains(t, out, fmt.Sprintf("%v outside", c.val))
		})
	}
}

// TestInspectReleasedSlices inspects 2-layer slices of the released
// models at their real shape (sparse files of the synth preset, all
// weights zero) and checks that inspect names the model and shows the
// published mix of each recipe: IQ2_XXS/Q2_K or Q4_K routed experts, Q8_0
// projections, F16 embedding, router, compressors and hyper-connections.
func TestInspectReleasedSlices(t *testing.T) {
	for _, tc := range []struct {
		preset, recipe string
		want           []string
	}{
		{"pro", "q2", []string{
			"shape: pro slice (2 of 61 layers)",
			"layers 2, embd 7168, vocab 129280, heads 128×512, experts 384 (top 6), window 128, ratios [128 128]",
			"routed experts: q2 (gate/up IQ2_XXS, down Q2_K); published types: true",
			`general.name STRING "DeepSeek-V4-Pro-2L-slice"`,
			"deepseek4.attention.output_group_count          UINT32          16",
			"deepseek4.attention.indexer.top_k               UINT32          1024",
			"deepseek4.expert_weights_scale                  FLOAT32         2.5",
			"blk.0.ffn_gate_exps.weight  IQ2_XXS  [7168, 3072, 384]  2179989504",
			"blk.0.ffn_down_exps.weight     Q2_K  [3072, 7168, 384]  2774532096",
			"blk.0.attn_q_b.weight     Q8_0      [1536, 65536]   106954752",
			"blk.0.attn_output_a.weight     Q8_0      [4096, 16384]    71303168",
			"blk.0.attn_compressor_kv.weight      F16        [7168, 512]     7340032",
			"blk.1.hc_ffn_fn.weight      F16        [28672, 24]     1376256",
			"token_embd.weight      F16     [7168, 129280]  1853358080",
			"output.weight     Q8_0     [7168, 129280]   984596480",
			"tensor bytes: 17937364420 (16.71 GiB)",
		}},
		{"pro", "q4", []string{
			"shape: pro slice (2 of 61 layers)",
			"routed experts: q4 (gate/up Q4_K, down Q4_K); published types: true",
			"blk.1.ffn_up_exps.weight     Q4_K  [7168, 3072, 384]  4756340736",
			"blk.1.ffn_down_shexp.weight     Q8_0        [3072, 7168]    23396352",
		}},
		{"flash", "q2", []string{
			"shape: flash slice (2 of 43 layers)",
			"ratios [0 0]",
			"routed experts: q2 (gate/up IQ2_XXS, down Q2_K); published types: true",
		}},
	} {
		t.Run(tc.preset+"/"+tc.recipe, func(t *testing.T) {
			p, err := synth.Preset(tc.preset, 2)
			require.NoError(t, err)
			r, err := layout.ParseRecipe(tc.recipe)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "slice.gguf")
			_, err = synth.WriteSparse(path, synth.Options{Params: p, Recipe: r})
			require.NoError(t, err)
			code, out, errOut := runCmd("inspect", path)
			require.Equal(t, 0, code, errOut)
			// Compare with the table's column padding collapsed.
			squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
			for _, want := range tc.want {
				require.Contains(t, squash(out), squash(want))
			}
		})
	}
}
