package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/quant"
)

func TestImatrixUsage(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.txt")
	require.NoError(t, os.WriteFile(data, []byte("hello"), 0o644))
	out := filepath.Join(dir, "out.dat")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"dataset alone", []string{"--imatrix-dataset", data}, 2, "--imatrix-dataset and --imatrix-out must be given together"},
		{"out alone", []string{"--imatrix-out", out}, 2, "must be given together"},
		{"with a prompt", []string{"--imatrix-dataset", data, "--imatrix-out", out, "-p", "hi"}, 2, "takes no prompt"},
		{"negative limit", []string{"--imatrix-dataset", data, "--imatrix-out", out, "--imatrix-max-tokens", "-1"}, 2, "--imatrix-max-tokens -1: must be at least 0"},
		{"missing dataset", []string{"--imatrix-dataset", filepath.Join(dir, "none.txt"), "--imatrix-out", out}, 2, "--imatrix-dataset " + filepath.Join(dir, "none.txt") + ": no such file"},
		{"missing out dir", []string{"--imatrix-dataset", data, "--imatrix-out", filepath.Join(dir, "no", "out.dat")}, 2, "no such directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd("", tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.NoFileExists(t, out)
		})
	}
	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, []byte("\n===== DS4_IMATRIX_PROMPT a =====\n \n"), 0o644))
	code, _, stderr := runCmd("", "--imatrix-dataset", empty, "--imatrix-out", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "has no prompts")
	assert.NoFileExists(t, out)
}

func TestImatrixEndToEnd(t *testing.T) {
	prompts := []string{
		"<｜begin▁of▁sentence｜><｜User｜>Why is the sky blue?<｜Assistant｜></think>Rayleigh scattering.<｜end▁of▁sentence｜>",
		"<｜begin▁of▁sentence｜>You are terse.<｜User｜>2+2?<｜Assistant｜><think>",
		"<｜begin▁of▁sentence｜><｜User｜>third<｜Assistant｜></think>",
	}
	var text strings.Builder
	for i, p := range prompts {
		fmt.Fprintf(&text, "\n\n===== DS4_IMATRIX_PROMPT case-%d general nothink test =====\n%s\n", i, p)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "rendered_prompts.txt")
	require.NoError(t, os.WriteFile(data, []byte(text.String()), 0o644))

	// The prompts are tokenized with special tokens recognized.
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	n0, n1 := len(tok.EncodeSpecial(prompts[0])), len(tok.EncodeSpecial(prompts[1]))
	require.Less(t, n0, len(tok.Encode(prompts[0])))
	p := layout.Tiny()

	for _, tc := range []struct {
		name    string
		args    []string
		prompts int
		tokens  int
	}{
		{"max prompts", []string{"--imatrix-max-prompts", "2"}, 2, n0 + n1},
		{"max tokens and ctx", []string{"--imatrix-max-tokens", "9", "--ctx", "6", "-t", "2"}, 2, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "imatrix.dat")
			args := append([]string{"--imatrix-dataset", data, "--imatrix-out", out}, tc.args...)
			code, stdout, stderr := runCmd("", args...)
			require.Equal(t, 0, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, "using the built-in tiny synthetic model")
			assert.Contains(t, stderr, fmt.Sprintf("ds4: wrote imatrix %s from %d prompts, %d tokens, %d routed expert observations\n",
				out, tc.prompts, tc.tokens, tc.tokens*p.Layers*p.ExpertsUsed))

			m, err := quant.ReadImatrixFile(out)
			require.NoError(t, err)
			assert.Equal(t, data, m.Dataset)
			assert.Equal(t, tc.prompts*p.Layers, m.Chunks, "one prefill chunk per prompt")
			require.Len(t, m.Entries, 3*p.Layers)
			for i, e := range m.Entries {
				assert.Len(t, e.Values, p.Experts*p.Embd, e.Name)
				if i%3 == 1 {
					assert.Equal(t, m.Entries[i-1].Values, e.Values, "gate and up of %s", e.Name)
				}
			}
			assert.Equal(t, "blk.5.ffn_down_exps.weight", m.Entries[len(m.Entries)-1].Name)
		})
	}
}
