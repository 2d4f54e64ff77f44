package harness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/vectors"
)

func TestMapVocab(t *testing.T) {
	in := [][]int{{0, 1, 383, 384, 385, 129279}, {}}
	got := MapVocab(in, 384)
	// 129279 = 336·384 + 255.
	require.Equal(t, [][]int{{0, 1, 383, 0, 1, 255}, {}}, got)
	require.Equal(t, 384, in[0][3], "the input is not modified")
}

func TestStudySummary(t *testing.T) {
	row := func(c, recipe, im, path string, kl, top1 float64) StudyRow {
		return StudyRow{Case: c, Recipe: recipe, Imatrix: im, Path: path, F32RefMeanKL: kl, F32RefTop1: top1}
	}
	rows := []StudyRow{
		row("a", "lossless", StudyNoImatrix, "prefill", 1e-8, 1),
		row("a", "lossless", StudyNoImatrix, "decode", 1e-8, 1),
		{Case: "a", Recipe: "q2", Imatrix: StudyNoImatrix, Path: "prefill", F32RefMeanKL: 1, F32RefTop1: 0.3, GateUpRelErr: 0.12},
		row("a", "q2", StudyNoImatrix, "decode", 9, 0),
		{Case: "a", Recipe: "q2", Imatrix: StudyImatrixCollected, Path: "prefill", F32RefMeanKL: 0.8, F32RefTop1: 0.4, GateUpRelErr: 0.09},
		row("a", "q4", StudyNoImatrix, "prefill", 0.05, 0.7),
		row("a", "q4", StudyImatrixCollected, "prefill", 0.06, 0.7),
		row("b", "q2", StudyImatrixCollected, "prefill", 0.5, 0.4), // no row without the imatrix
	}
	cells := SummarizeStudy(rows)
	require.Len(t, cells, 6)
	require.Equal(t, rows[4], cells[2])
	effects := ImatrixEffects(rows)
	require.Len(t, effects, 2)
	require.Equal(t, "q2", effects[0].Recipe)
	require.InDelta(t, -0.2, effects[0].KLChange, 1e-12)
	require.InDelta(t, -0.25, effects[0].GateUpChange, 1e-12)
	require.InDelta(t, 0.2, effects[1].KLChange, 1e-12)
	require.Zero(t, effects[1].GateUpChange, "no error measured: no change reported")

	meta := testMeta(t)
	path, err := WriteStudyRun(t.TempDir(), meta, rows)
	require.NoError(t, err)
	back, err := ReadRows[StudyRecord](path)
	require.NoError(t, err)
	require.Len(t, back, len(rows))
	require.Equal(t, rows[4], back[4].StudyRow)
}

func TestRunStudyErrors(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	_, err := RunStudy([]string{"nowhere"}, be, StudyOptions{})
	require.ErrorContains(t, err, "no calibration prompts")
	_, err = RunStudy([]string{t.TempDir()}, be, StudyOptions{Prompts: [][]int{{1, 2}}, Recipes: []checkpoint.Mode{checkpoint.ModeQ2}})
	require.ErrorContains(t, err, "config.json")
}

// TestPairedKL checks the paired comparison on hand-made KLs: differences
// −0.1, −0.3, +0.1, 0 have mean −0.075, sample variance
// (0.025² + 0.225² + 0.175² + 0.075²)/3 = 0.029167, so a standard error
// of sqrt(0.029167/4) = 0.085391; two of four positions improve.
func TestPairedKL(t *testing.T) {
	stats := func(kl ...float64) []vectors.PositionStat {
		out := make([]vectors.PositionStat, len(kl))
		for i, v := range kl {
			out[i].KL = v
		}
		return out
	}
	mean, se, improved := pairedKL(stats(0.5, 0.6, 0.2, 0.3), stats(0.4, 0.3, 0.3, 0.3))
	require.InDelta(t, -0.075, mean, 1e-12)
	require.InDelta(t, 0.0853913, se, 1e-6)
	require.Equal(t, 0.5, improved)
	mean, se, improved = pairedKL(stats(1), stats(1, 2))
	require.Zero(t, mean+se+improved)
}
