package main

import (
	"bytes"
	"github.com/ds4-go/ds4/internal/cli/clitest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/steering"
	"github.com/ds4-go/ds4/steering/experiment"
)

func TestUsageErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage: ds4-steer"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"build"}, 2, "--good and --bad are required"},
		{[]string{"build", "--good", "g", "--bad", "b", "--component", "x"}, 2, "--component"},
		{[]string{"sweep", "--prompts", "p"}, 2, "--direction and --prompts are required"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p", "--scales", "0,101"}, 2, "outside [-100, 100]"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p", "--scales", "0,x"}, 2, "not a number"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p", "--attn-scale", "-100.5"}, 2, "--attn-scale"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p"}, 2, "--direction d: no such file"},
		{[]string{"build", "--good", "g", "--bad", "b"}, 2, "--good g: no such file"},
		{[]string{"build", "--good", "g", "--bad", "b", "--ctx", "1"}, 2, "--ctx 1: must be at least 2"},
		{[]string{"build", "--good", "g", "--bad", "b", "-t", "-1"}, 2, "--threads -1: must be at least 0"},
		{[]string{"build", "--good", "g", "--bad", "b", "-m", "/nope.gguf"}, 2, "--model /nope.gguf: no such file"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p", "-n", "0"}, 2, "--tokens 0: must be at least 1"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p", "--ctx", "100000000"}, 2, "--ctx 100000000: must be at most 1048576"},
		{[]string{"sweep", "--direction", "d", "--prompts", "p", "--hash", "md5"}, 2, "--hash md5: must be sha256, quick or none"},
		{[]string{"build", "--help"}, 0, "--pair-normalize"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stdout %q stderr %q", c.args, code, stdout.String(), stderr.String())
		}
		if strings.Contains(stderr.String(), "tiny synthetic model") {
			t.Errorf("%v loaded the model: %q", c.args, stderr.String())
		}
	}
}

// TestBuildAndSweepTiny builds a direction on the built-in tiny model from
// two prompt pairs and sweeps it over two prompts and two scales.
func TestBuildAndSweepTiny(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no ./ds4flash.gguf here
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(name, []byte(text), 0o644))
	}
	write("good.txt", "# terse\nWhat is DNS? Be brief.\n\nName a prime. One word.\n")
	write("bad.txt", "What is DNS? Explain in detail.\nName a prime and explain why in detail.\nExtra line without a pair.\n")
	write("eval.txt", "What does DNS do?\nWhy use indexes?\n")

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"build", "--good", "good.txt", "--bad", "bad.txt", "--out", "out/dir.json", "--ctx", "128"}, &stdout, &stderr), stderr.String())
	require.Contains(t, stderr.String(), "built-in tiny")
	require.Contains(t, stderr.String(), "pair 2/2")
	require.Contains(t, stdout.String(), "wrote out/dir.json")
	p := layout.Tiny()
	d, err := steering.Read("out/dir.f32", p.Layers, p.Embd)
	require.NoError(t, err)
	for l := range p.Layers {
		var n float64
		for _, v := range d.Layer(l) {
			n += float64(v) * float64(v)
		}
		require.InDelta(t, 1, n, 1e-4, "layer %d norm²", l)
	}
	meta, err := steering.ReadMeta("out/dir.json")
	require.NoError(t, err)
	require.Equal(t, [2]int{p.Layers, p.Embd}, meta.Shape)
	require.Equal(t, "ffn_out", meta.Component)
	require.True(t, meta.OrthogonalizeControlMean)
	require.Equal(t, "builtin:tiny", meta.Model)

	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 0, run([]string{"sweep", "--direction", "out/dir.f32", "--prompts", "eval.txt", "--scales", "0,1",
		"--tokens", "3", "--ctx", "128", "--nothink", "--hash", "none", "--parquet", "results", "--svg", "sweep.svg"}, &stdout, &stderr), stderr.String())
	out := stdout.String()
	require.Equal(t, 2, strings.Count(out, "PROMPT: "))
	require.Contains(t, out, "FFN scale: 0\n")
	require.Contains(t, out, "FFN scale: 1\n")
	require.Contains(t, out, strings.Repeat("=", 80)+"\nPROMPT: What does DNS do?\n")

	files, err := filepath.Glob("results/steering/model=DS4-tiny/date=*/*.parquet")
	require.NoError(t, err)
	require.Len(t, files, 1)
	rows, err := harness.ReadRows[experiment.SweepRow](files[0])
	require.NoError(t, err)
	require.Len(t, rows, 4)
	for _, r := range rows {
		require.LessOrEqual(t, r.OutputTokens, int64(3))
		require.Equal(t, int64(3), r.MaxTokens)
		require.False(t, r.Thinking)
		if r.FFNScale == 0 {
			require.Zero(t, r.FirstKL)
		} else {
			require.Positive(t, r.FirstKL)
		}
	}
	require.Equal(t, "Why use indexes?", rows[3].Prompt)
	kv, err := harness.ReadMetadata(files[0])
	require.NoError(t, err)
	require.Contains(t, kv["ds4.run"], "ds4-steer sweep")

	svg, err := os.ReadFile("sweep.svg")
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	require.Contains(t, string(svg), "FFN steering scale")
}

// TestHelpConvention checks --help, -h and bad flags of ds4-steer and each
// of its commands against the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, command, run)
}
