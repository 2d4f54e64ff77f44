package vectors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeDumps writes a dump of each named case, steps whose selected
// tokens are toks with probability p, under dir and returns dir.
func writeDumps(t *testing.T, dir string, p float64, cases map[string][]string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for id, toks := range cases {
		var steps []Step
		for _, s := range toks {
			tok := TopToken{ID: -1, Bytes: []byte(s), Logprob: math.Log(p)}
			steps = append(steps, Step{Selected: tok, Top: []TopToken{tok, {ID: -1, Bytes: []byte("?"), Logprob: math.Log((1 - p) / 2)}}})
		}
		require.NoError(t, WriteDump(filepath.Join(dir, id+".json"), NewDump("test", VecCase{ID: id}, steps, 2)))
	}
	return dir
}

// TestCompareDumps compares saved runs: a run with itself, two files of
// different ids, directories sharing some cases, runs of different
// lengths and runs with no case in common.
func TestCompareDumps(t *testing.T) {
	dir := t.TempDir()
	ref := writeDumps(t, filepath.Join(dir, "ref"), 0.5, map[string][]string{"a": {"x", "y", "z"}, "b": {"u", "v"}, "only_ref": {"w"}})
	run := writeDumps(t, filepath.Join(dir, "run"), 0.8, map[string][]string{"b": {"u", "v"}, "a": {"x", "y"}, "only_run": {"w"}})
	other := writeDumps(t, filepath.Join(dir, "other"), 0.8, map[string][]string{"c": {"x"}})
	for _, tc := range []struct {
		name      string
		ref, run  string
		ids       []string
		positions []int
		same      bool // each position's distributions equal
		err       string
	}{
		{"itself", ref, ref, []string{"a", "b", "only_ref"}, []int{3, 2, 1}, true, ""},
		{"directories: the shared cases, the shared steps", ref, run, []string{"a", "b"}, []int{2, 2}, false, ""},
		{"two files pair whatever their ids", filepath.Join(ref, "a.json"), filepath.Join(other, "c.json"), []string{"a"}, []int{1}, false, ""},
		{"no case in common", ref, other, nil, nil, false, "have no case in common"},
		{"missing", ref, filepath.Join(dir, "nope"), nil, nil, false, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmps, err := CompareDumps(tc.ref, tc.run)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, cmps, len(tc.ids))
			for i, c := range cmps {
				require.Equal(t, tc.ids[i], c.ID)
				require.Equal(t, tc.positions[i], c.Metrics.Positions)
				require.Len(t, c.Stats, tc.positions[i])
				require.Equal(t, 1.0, c.Metrics.Top1)
				if tc.same {
					require.Zero(t, c.Metrics.MaxKL)
				} else {
					require.Positive(t, c.Metrics.MeanKL)
				}
			}
		})
	}
}

// writeLogits writes rows of float32 logits to a raw file and returns its
// path.
func writeLogits(t *testing.T, path string, rows ...[]float32) string {
	t.Helper()
	var b []byte
	for _, r := range rows {
		for _, v := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func TestCompareLogitFiles(t *testing.T) {
	dir := t.TempDir()
	ref := writeLogits(t, filepath.Join(dir, "ref.f32"), []float32{1, 2, 3}, []float32{3, 2, 1})
	run := writeLogits(t, filepath.Join(dir, "run.f32"), []float32{1, 2, 3}, []float32{1, 2, 3})
	for _, tc := range []struct {
		name     string
		ref, run string
		vocab    int
		top1     float64
		err      bool
	}{
		{"itself", ref, ref, 3, 1, false},
		{"one position differs", ref, run, 3, 0.5, false},
		{"vocab does not divide the file", ref, run, 4, 0, true},
		{"missing", ref, filepath.Join(dir, "nope.f32"), 3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmps, err := CompareLogitFiles(tc.ref, tc.run, tc.vocab, "case")
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, cmps, 1)
			require.Equal(t, "case", cmps[0].ID)
			require.Equal(t, 2, cmps[0].Metrics.Positions)
			require.Equal(t, tc.top1, cmps[0].Metrics.Top1)
		})
	}
}

func TestIsDumps(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		want bool
	}{
		{dir, true},
		{filepath.Join(dir, "run.json"), true},
		{filepath.Join(dir, "RUN.JSON"), true},
		{filepath.Join(dir, "run.f32"), false},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			require.Equal(t, tc.want, IsDumps(tc.path))
		})
	}
}

// TestSummarizeAll checks that the summary over several cases is that of
// their positions together.
func TestSummarizeAll(t *testing.T) {
	a := []PositionStat{{Position: 0, KL: 0.1, SameTop1: true}, {Position: 1, KL: 0.3}}
	b := []PositionStat{{Position: 0, KL: 0.2, SameTop1: true}}
	for _, tc := range []struct {
		name string
		cmps []CaseComparison
		want Metrics
	}{
		{"none", nil, Summarize(nil)},
		{"one", []CaseComparison{{ID: "a", Stats: a}}, Summarize(a)},
		{"two", []CaseComparison{{ID: "a", Stats: a}, {ID: "b", Stats: b}}, Summarize(append(append([]PositionStat(nil), a...), b...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SummarizeAll(tc.cmps))
		})
	}
}
