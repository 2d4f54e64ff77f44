package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSource converts an oracle checkpoint through Source, with the config
// found beside it, then requantizes the result through Source: each plan
// names the tensors the file holds, and both files pass Verify.
func TestSource(t *testing.T) {
	dir := t.TempDir()
	lossless := filepath.Join(dir, "lossless.gguf")
	q2 := filepath.Join(dir, "q2.gguf")
	for _, c := range []struct {
		name, hf, config, in, out string
		opt                       Options
	}{
		{"checkpoint", oracle("tiny_w16_r16"), "", "", lossless, Options{Mode: ModeLossless, Tables: tables(t)}},
		{"checkpoint with config", oracle("tiny_w16_r16"), filepath.Join(oracle("tiny_w16_r16"), "config.json"), "", filepath.Join(dir, "cfg.gguf"), Options{Mode: ModeLossless, Tables: tables(t)}},
		{"gguf", "", "", lossless, q2, Options{Mode: ModeQ2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := OpenSource(c.hf, c.config, c.in)
			require.NoError(t, err)
			defer src.Close()
			require.Equal(t, 5, src.Params.Layers)
			plan, err := src.Plan(c.opt)
			require.NoError(t, err)
			var out bytes.Buffer
			plan.WritePlan(&out)
			require.Contains(t, out.String(), "n_tensors: 150\n")
			require.Contains(t, out.String(), "token_embd.weight ")
			r, err := src.WriteFile(c.out, c.opt)
			require.NoError(t, err)
			require.Len(t, r.Tensors, len(plan.Tensors))
			require.NoError(t, Verify(c.out))
			out.Reset()
			r.WriteSummary(&out)
			require.True(t, strings.HasSuffix(out.String(), "mtp.* tensors skipped\n"), out.String())
		})
	}
}

// TestSourceErrors checks the inputs OpenSource and Verify refuse.
func TestSourceErrors(t *testing.T) {
	notGGUF := filepath.Join(t.TempDir(), "x.gguf")
	require.NoError(t, os.WriteFile(notGGUF, []byte("not a gguf"), 0o644))
	for _, c := range []struct{ name, hf, config, in, want string }{
		{"neither", "", "", "", "not both or neither"},
		{"both", oracle("tiny_w16_r16"), "", notGGUF, "not both or neither"},
		{"config with gguf", "", "config.json", notGGUF, "a config applies to a checkpoint only"},
		{"bad gguf", "", "", notGGUF, "gguf"},
	} {
		_, err := OpenSource(c.hf, c.config, c.in)
		require.ErrorContains(t, err, c.want, c.name)
	}
	require.Error(t, Verify(notGGUF))
}
