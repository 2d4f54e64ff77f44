package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/cli/clitest"
)

const excerpt = "../../engine/tokenizer/testdata/promessi_sposi_excerpt.txt"

// TestBenchTiny runs a short sweep of the tiny model and checks the CSV,
// the Parquet run and the SVG it writes.
func TestBenchTiny(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "tiny_run.csv")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--prompt-file", excerpt, "--ctx-start", "16", "--ctx-max", "48", "--step-incr", "16",
		"--gen-tokens", "2", "-t", "2", "--csv", csvPath, "--parquet", dir, "--svg", filepath.Join(dir, "tiny.svg"), "--no-progress", "--warm-weights"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, errOut.String(), "context buffers")
	require.Contains(t, errOut.String(), "ds4-bench: warming the weights 100.0%")
	raw, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Equal(t, harness.CSVHeader, lines[0])
	require.Len(t, lines, 4)
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		require.Len(t, f, 6)
		require.Equal(t, []string{[]string{"16", "32", "48"}[i], "16"}, f[:2])
		require.Equal(t, "2", f[3])
		require.Regexp(t, `^\d+\.\d\d$`, f[2])
	}
	files, err := filepath.Glob(filepath.Join(dir, "bench", "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	recs, err := harness.ReadRows[harness.BenchRecord](files[0])
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, "builtin:tiny", recs[0].ModelFile)
	require.Equal(t, "raw", recs[0].PromptMode)
	require.Equal(t, int64(48), recs[2].CtxTokens)
	require.Equal(t, int64(2), recs[0].Threads)
	svg, err := os.ReadFile(filepath.Join(dir, "tiny.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "Tiny Run t/s")

	// The plot subcommand redraws it, and compares it with a bundled run.
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plot", csvPath, "../../plots/testdata/m2_ultra.csv", "-o", filepath.Join(dir, "cmp.png")}, &out, &errOut), errOut.String())
	require.FileExists(t, filepath.Join(dir, "cmp.png"))
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plot", csvPath}, &out, &errOut))
	require.Equal(t, filepath.Join(dir, "tiny_run_ts.svg")+"\n", out.String())
}

// TestBenchStreaming runs the sweep on a synthetic model file with its
// routed experts streamed through a cache of 4 slots, fewer than a token
// uses: the probe tokens must be the mapped run's, and each frontier's
// line must report the cache's work.
func TestBenchStreaming(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	_, err := synth.WriteFile(model, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: 3})
	require.NoError(t, err)
	bench := func(extra ...string) (probes []harness.BenchRecord, stderr string) {
		var out, errOut bytes.Buffer
		pq := filepath.Join(dir, strings.Join(append([]string{"run"}, extra...), "_"))
		args := append([]string{"-m", model, "--prompt-file", excerpt, "--ctx-start", "16", "--ctx-max", "32", "--step-incr", "16",
			"--gen-tokens", "4", "-t", "2", "--parquet", pq, "--no-progress", "--hash", "none"}, extra...)
		require.Equal(t, 0, run(context.Background(), args, &out, &errOut), errOut.String())
		files, err := filepath.Glob(filepath.Join(pq, "bench", "*", "*", "*.parquet"))
		require.NoError(t, err)
		require.Len(t, files, 1)
		recs, err := harness.ReadRows[harness.BenchRecord](files[0])
		require.NoError(t, err)
		return recs, errOut.String()
	}
	mapped, _ := bench()
	streamed, stderr := bench("--ssd-streaming", "--ssd-streaming-cache-experts", "4")
	require.Len(t, streamed, len(mapped))
	for i := range mapped {
		require.Equal(t, mapped[i].Probe, streamed[i].Probe)
		require.Zero(t, mapped[i].SSDBytesPerToken)
		require.Positive(t, streamed[i].SSDBytesPerToken)
		require.Less(t, streamed[i].SSDHitRate, 1.0)
	}
	require.Contains(t, stderr, "expert cache")
	require.Regexp(t, `ds4-bench: ctx 16: ssd hit rate \d+\.\d %, \d+\.\d\d MiB read/token`, stderr)
	require.Regexp(t, `ds4-bench: ctx 32: ssd hit rate`, stderr)
}

// TestBenchUsage checks that bad command lines fail with status 2 and a
// message naming the flag and its value, before the model is loaded.
func TestBenchUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "exactly one of --prompt-file or --chat-prompt-file"},
		{[]string{"--prompt-file", "a", "--chat-prompt-file", "b"}, 2, "exactly one"},
		{[]string{"--prompt-file", "/nope.txt"}, 2, "--prompt-file /nope.txt: no such file"},
		{[]string{"--chat-prompt-file", dir}, 2, "--chat-prompt-file " + dir + ": is a directory"},
		{[]string{"--prompt-file", excerpt, "-m", dir}, 2, "--model " + dir + ": is a directory"},
		{[]string{"--prompt-file", excerpt, "-m", "/nope.gguf"}, 2, "--model /nope.gguf: no such file"},
		{[]string{"--prompt-file", excerpt, "--ctx-start", "9", "--ctx-max", "8"}, 2, "--ctx-start 9: must be at most --ctx-max (8)"},
		{[]string{"--prompt-file", excerpt, "--ctx-start", "-5"}, 2, "--ctx-start -5: must be at least 1"},
		{[]string{"--prompt-file", excerpt, "--step-mul", "0.5"}, 2, "--step-mul 0.5: must be a finite number >= 1"},
		{[]string{"--prompt-file", excerpt, "--step-mul", "inf"}, 2, "--step-mul +Inf: must be a finite number"},
		{[]string{"--prompt-file", excerpt, "--step-mul", "1", "--step-incr", "0"}, 2, "--step-incr 0: must be at least 1"},
		{[]string{"--prompt-file", excerpt, "--ctx-max", "12x"}, 2, "invalid argument"},
		{[]string{"--prompt-file", excerpt, "--ctx-alloc", "0"}, 2, "--ctx-alloc 0: must be greater"},
		{[]string{"--prompt-file", excerpt, "--ctx-start", "10", "--ctx-max", "100", "--ctx-alloc", "50"}, 2, "--ctx-alloc 50: must be greater than --ctx-max + --gen-tokens (228)"},
		{[]string{"--prompt-file", excerpt, "--ctx-max", "100000000"}, 2, "--ctx-max 100000000: must be at most 1048576"},
		{[]string{"--prompt-file", excerpt, "--gen-tokens", "0"}, 2, "--gen-tokens 0: must be at least 1"},
		{[]string{"--prompt-file", excerpt, "--repeat", "0"}, 2, "--repeat 0: must be at least 1"},
		{[]string{"--prompt-file", excerpt, "-t", "-2"}, 2, "--threads -2: must be at least 0"},
		{[]string{"--prompt-file", excerpt, "--hash", "md5"}, 2, "--hash md5: must be sha256, quick or none"},
		{[]string{"--prompt-file", excerpt, "--svg", "chart.pdf"}, 2, "--svg chart.pdf: must end in .svg or .png"},
		{[]string{"--prompt-file", excerpt, "--csv", "/no/dir/x.csv"}, 2, "--csv /no/dir/x.csv: no such directory"},
		{[]string{"--prompt-file", excerpt, "--cuda"}, 2, "--cuda: the CUDA backend is not in this build"},
		{[]string{"--prompt-file", excerpt, "--metal"}, 2, "--metal: the Metal backend is not in this build"},
		{[]string{"--prompt-file", excerpt, "--backend", "vulkan"}, 2, "--backend vulkan: not in this build: the only backend is cpu"},
		{[]string{"--prompt-file", excerpt, "--bogus"}, 2, "unknown flag"},
		{[]string{"--prompt-file", excerpt, "-sys", "x", "--ctx-start", "8", "--ctx-max", "1000000"}, 2, "need at least --ctx-max=1000000"},
		{[]string{"--prompt-file", excerpt, "--dir-steering-ffn", "1"}, 2, "needs --dir-steering-file"},
		{[]string{"--prompt-file", excerpt, "--dir-steering-file", "d.f32", "--dir-steering-attn", "-101"}, 2, "outside [-100, 100]"},
		{[]string{"--prompt-file", excerpt, "--ctx-start", "8", "--ctx-max", "16", "--dir-steering-file", "testdata/none.f32"}, 2, "--dir-steering-file testdata/none.f32: no such file"},
		{[]string{"plot"}, 2, "give one or more"},
		{[]string{"plot", "testdata/none.csv"}, 1, "no such file"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errOut), "%v: %s", tc.args, errOut.String())
		require.Contains(t, errOut.String(), tc.want, tc.args)
		require.NotContains(t, errOut.String(), "tiny synthetic model", "%v loaded the model", tc.args)
		require.NotContains(t, errOut.String(), "context buffers", tc.args)
	}

	// Upstream's spellings and its flags that mean nothing here.
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-prompt-file", excerpt, "-ctx-start", "8", "-ctx-max", "16", "-gen-tokens", "1",
		"--cpu", "--backend", "cpu", "--quality", "--power", "90", "--no-progress", "--hash", "none"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, errOut.String(), "ds4-bench: --quality: ignored")
	require.Contains(t, errOut.String(), "ds4-bench: --power 90: ignored")
	require.Contains(t, out.String(), harness.CSVHeader)

	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errOut))
	require.Contains(t, out.String(), "Usage: ds4-bench --prompt-file FILE")
	require.Contains(t, out.String(), "--step-incr")
}

// TestHelpConvention checks --help, -h and bad flags of ds4-bench and each
// of its commands against the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, func(stdout, stderr io.Writer) cli.Command {
		return command(context.Background(), stdout, stderr)
	}, func(args []string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, stdout, stderr)
	})
}
