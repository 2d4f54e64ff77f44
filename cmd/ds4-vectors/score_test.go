package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/harness"
)

const qualityPrompts = "../../harness/testdata/quality/prompts.jsonl"

// TestScoreCommands runs the quality test end to end on the built-in tiny
// model: a reference manifest from its own greedy continuations, the
// scorer's TSV and Parquet, and the comparison of two runs.
func TestScoreCommands(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"manifest", "--prompts", qualityPrompts, "--count", "3", "--max-tokens", "5", "--ctx", "512", "--out", filepath.Join(dir, "ref")}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, errOut.String(), "built-in tiny synthetic model")
	manifest := strings.TrimSpace(out.String())
	require.Equal(t, filepath.Join(dir, "ref", "manifest.tsv"), manifest)
	body, err := os.ReadFile(manifest)
	require.NoError(t, err)
	require.Equal(t, 4, strings.Count(string(body), "\n"))
	require.True(t, strings.HasPrefix(string(body), "# id\tprompt_file\tcontinuation_file\tresponse_file\ncase_000\tprompts/case_000.txt\t"))

	scores := filepath.Join(dir, "tiny.tsv")
	out.Reset()
	errOut.Reset()
	code = run([]string{"score", "--ctx", "100", "--parquet", filepath.Join(dir, "results"), manifest, scores}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, errOut.String(), "case_002 cases=3 prompt=")
	require.Contains(t, errOut.String(), "summary cases=3 tokens=")
	tsv, err := os.ReadFile(scores)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(tsv), "\n"), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, strings.TrimSuffix(harness.ScoreHeader, "\n"), lines[0])
	rows, err := harness.ReadScoresFile(scores)
	require.NoError(t, err)
	require.Equal(t, "case_001", rows[1].ID)
	pq, err := filepath.Glob(filepath.Join(dir, "results", "quality", "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, pq, 1)
	recs, err := harness.ReadRows[harness.QualityRecord](pq[0])
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for i, r := range recs {
		// The TSV holds 9 decimals, the Parquet file the full values.
		require.Equal(t, rows[i].ID, r.ID)
		require.Equal(t, rows[i].GreedyLCP, r.GreedyLCP)
		require.InDelta(t, rows[i].NLL, r.NLL, 1e-9)
		require.InDelta(t, rows[i].AvgNLL, r.AvgNLL, 1e-9)
	}

	// A run compared with itself: no change, every case a tie.
	out.Reset()
	errOut.Reset()
	code = run([]string{"compare-scores", "--parquet", filepath.Join(dir, "results"), scores, scores}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	text := out.String()
	require.Contains(t, text, "cases\t3\n")
	require.Contains(t, text, "delta_new_minus_old\t0.000000000\n")
	require.Contains(t, text, "relative_nll_change\t0.000%\n")
	require.Contains(t, text, "case_wins_new_old_ties\t0\t0\t3\n")
	require.Contains(t, text, "\nnew best cases:\ncase_000\tdelta_nll=0.000000\t")
	pq, err = filepath.Glob(filepath.Join(dir, "results", "quality_compare", "model=tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, pq, 1)

	// Mistakes.
	other := filepath.Join(dir, "other.tsv")
	require.NoError(t, os.WriteFile(other, []byte(harness.ScoreHeader+"x\t1\t1\t1\t1\t0\t0\n"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"score", manifest}, 2, "give MANIFEST.tsv and OUT.tsv"},
		{[]string{"score", "--ctx", "0", manifest, scores}, 2, "--ctx 0: must be at least 1"},
		{[]string{"score", filepath.Join(dir, "none.tsv"), scores}, 1, "no such file"},
		{[]string{"compare-scores", scores}, 2, "give OLD.tsv and NEW.tsv"},
		{[]string{"compare-scores", scores, other}, 1, "no common cases"},
		{[]string{"manifest", "--prompts", qualityPrompts}, 2, "give --out DIR"},
		{[]string{"manifest", "--count", "0", "--out", dir}, 2, "--count 0: must be at least 1"},
		{[]string{"manifest", "--prompts", other, "--out", dir}, 1, "other.tsv:1"},
	} {
		out.Reset()
		errOut.Reset()
		require.Equal(t, tc.code, run(tc.args, &out, &errOut), "%v: %s", tc.args, errOut.String())
		require.Contains(t, errOut.String(), tc.want, tc.args)
	}
}
