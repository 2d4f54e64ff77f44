package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ds4-go/ds4/internal/cli/clitest"
	"github.com/stretchr/testify/require"
)

const caseDir = "../../vectors/testdata/oracle/tiny_w16_r16"

func TestOracleCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"oracle", caseDir}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "tiny_w16_r16")
	require.Contains(t, out.String(), "decode")
	require.Contains(t, out.String(), "ok")

	// A reference the engine cannot match (rows shifted by one position)
	// misses the bar and fails the command.
	bad := t.TempDir()
	entries, err := os.ReadDir(caseDir)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(caseDir, e.Name()))
		require.NoError(t, err)
		if e.Name() == "f32ref_prefill_logits.bin" {
			row := 4 * 512
			data = append(data[row:], data[:row]...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(bad, e.Name()), data, 0o644))
	}
	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run([]string{"oracle", bad}, &out, &errOut))
	require.Contains(t, out.String(), "MISSED")
	require.Contains(t, errOut.String(), "bar A missed")

	require.Equal(t, 1, run([]string{"oracle", t.TempDir()}, &out, &errOut))
	require.Equal(t, 2, run([]string{"oracle", "--mode", "q3", caseDir}, &out, &errOut))
	require.Equal(t, 2, run(nil, &out, &errOut))
}

// TestUsage checks that bad command lines fail with status 2 and a
// message naming the flag or argument and its value, before anything is
// loaded or printed.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "/nope1", "/nope2"}, "compare: /nope1: no such file or directory"},
		{[]string{"compare", "--vocab", "-1", file, file}, "compare: --vocab -1: must be at least 1"},
		{[]string{"compare", "--hist", "/no/dir/h.svg", file, file}, "compare: --hist /no/dir/h.svg: no such directory"},
		{[]string{"oracle", "/nope/"}, "oracle: CASE_DIR /nope/: no such directory"},
		{[]string{"oracle", caseDir, file}, "oracle: CASE_DIR " + file + ": not a directory"},
		{[]string{"oracle", "--mode", "q3", caseDir}, "oracle: --mode q3"},
		{[]string{"oracle", "--threads", "-1", caseDir}, "oracle: --threads -1: must be at least 0"},
		{[]string{"score", "--ctx", "0", file, "out.tsv"}, "score: --ctx 0: must be at least 1"},
		{[]string{"score", "-t", "-2", file, "out.tsv"}, "score: --threads -2: must be at least 0"},
		{[]string{"score", "-m", dir, file, "out.tsv"}, "score: --model " + dir + ": is a directory"},
		{[]string{"score", file, "/no/dir/out.tsv"}, "score: OUT.tsv /no/dir/out.tsv: no such directory /no/dir"},
		{[]string{"manifest", "--out", dir, "--count", "0"}, "manifest: --count 0: must be at least 1"},
		{[]string{"manifest", "--out", dir, "--max-tokens", "-4"}, "manifest: --max-tokens -4: must be at least 1"},
		{[]string{"manifest", "--out", file}, "manifest: --out " + file + ": is a file"},
		{[]string{"manifest", "--out", dir, "--ctx", "100000000"}, "manifest: --ctx 100000000: must be at most 1048576"},
		{[]string{"manifest", "--out", dir, "--prompts", "/nope.jsonl"}, "--prompts /nope.jsonl: no such file"},
		{[]string{"study", "--holdout", "1", caseDir}, "study: --holdout 1: must be 0 or at least 2"},
		{[]string{"study", "--reference", "x", caseDir}, "study: --reference x: must be f32ref or official"},
		{[]string{"study", "/nope/"}, "study: CASE_DIR /nope/: no such directory"},
		{[]string{"official", "--tolerance", "0"}, "official: --tolerance 0: must be positive"},
		{[]string{"official", "-t", "-1"}, "official: --threads -1: must be at least 0"},
		{[]string{"official", "--vec", "/nope.vec"}, "official: --vec /nope.vec: no such file"},
		{[]string{"official", "-m", "/nope.gguf"}, "official: --model /nope.gguf: no such file"},
		{[]string{"official", "--tiny", "-m", file}, "official: --tiny excludes -m"},
		{[]string{"compare-scores", "/nope1.tsv", file}, "compare-scores: /nope1.tsv: no such file or directory"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 2, run(c.args, &out, &errOut), "%q: %s", c.args, errOut.String())
		require.Contains(t, errOut.String(), c.want, "%q", c.args)
		require.NotContains(t, errOut.String(), "tiny synthetic model", "%q", c.args)
		require.Empty(t, out.String(), "%q printed after its error", c.args)
	}

	// A case directory that does not load fails before the table starts.
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run([]string{"oracle", caseDir, dir}, &out, &errOut))
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "ds4-vectors oracle: ")
}

// TestHelpConvention checks --help, -h and bad flags of ds4-vectors and
// each of its commands against the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, command, run)
}
