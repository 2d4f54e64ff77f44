package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/vectors"
)

// TestStudyCommand runs the study on one oracle case with the q2 recipe
// and a small calibration set, and checks its table, Parquet rows and
// chart. The numbers are held to independent facts: the lossless
// conversion meets the oracle's bar A, q2 is far from the reference, and
// the imatrix reaches exactly the routed gate and up tensors (the down
// projections, 128 columns wide here, fall back to Q8_0, which takes no
// importance).
func TestStudyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("the study converts and runs an oracle case three times (about 15 s); run without -short")
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "study.svg")
	var out, errOut bytes.Buffer
	code := run([]string{"study", "--recipes", "q2", "--prompts", qualityPrompts, "--max-prompts", "12", "--holdout", "10", "--svg", svg, "--parquet", dir, caseDir}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	text := out.String()
	require.Contains(t, text, "f32ref mean KL")
	require.Contains(t, text, "imatrix effect tiny_w16_r16 q2: gate/up output error ")
	require.Contains(t, errOut.String(), "imatrix from 12 prompts")

	pq, err := filepath.Glob(filepath.Join(dir, "quality_study", "model=oracle", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, pq, 1)
	recs, err := harness.ReadRows[harness.StudyRecord](pq[0])
	require.NoError(t, err)
	require.Len(t, recs, 9) // lossless, q2, q2 + imatrix; three paths each
	c, err := vectors.LoadOracle(caseDir)
	require.NoError(t, err)
	moeLayers := int64(c.Params.Layers)
	for _, r := range recs {
		require.Equal(t, "tiny_w16_r16", r.Case)
		require.Equal(t, int64(96), r.Positions)
		require.Positive(t, r.HeldoutPositions) // prompts 9, 19, …, 99
		switch {
		case r.Recipe == "lossless":
			require.NoError(t, vectors.BarA.Check(vectors.Metrics{MeanKL: r.F32RefMeanKL, MaxKL: r.F32RefMaxKL, MedianKL: r.F32RefMedianKL, Top1: r.F32RefTop1}))
			require.Zero(t, r.ImatrixTensors)
			require.Zero(t, r.GateUpRelErr) // lossless: the same weights
			require.Zero(t, r.HeldoutMeanKL)
			require.Equal(t, 1.0, r.HeldoutTop1)
		case r.Imatrix == harness.StudyNoImatrix:
			require.Greater(t, r.F32RefMeanKL, 0.1)
			require.Greater(t, r.HeldoutMeanKL, 0.1)
			// IQ2_XXS gate and up keep about 88% of the output energy.
			require.InDelta(t, 0.12, r.GateUpRelErr, 0.03)
			require.Zero(t, r.ImatrixTensors)
			require.Zero(t, r.CalibTokens)
		default:
			require.Greater(t, r.F32RefMeanKL, 0.1)
			require.Equal(t, 2*moeLayers, r.ImatrixTensors, "gate and up of every layer")
			require.Equal(t, 2*moeLayers*int64(c.Params.Experts), r.ImatrixSlices)
			require.Equal(t, int64(12), r.CalibPrompts)
			require.Positive(t, r.CalibRoutes)
			require.Positive(t, r.KLDeltaSE)
			require.Positive(t, r.HeldoutKLDeltaSE)
		}
	}
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	require.Contains(t, string(b), "tiny_w16_r16 q2")
	require.Contains(t, string(b), "imatrix collected")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"study"}, "give oracle CASE_DIR"},
		{[]string{"study", "--recipes", "lossless", caseDir}, "always measured"},
		{[]string{"study", "--recipes", "q3", caseDir}, "q3"},
		{[]string{"study", "--reference", "x", caseDir}, "--reference x: must be f32ref or official"},
		{[]string{"study", "--holdout", "1", caseDir}, "--holdout 1: must be 0 or at least 2"},
	} {
		errOut.Reset()
		require.Equal(t, 2, run(tc.args, &out, &errOut), tc.args)
		require.Contains(t, errOut.String(), tc.want, tc.args)
	}
	require.Equal(t, 1, run([]string{"study", "--prompts", qualityPrompts, dir}, &out, &errOut))
	require.True(t, strings.Contains(errOut.String(), "config.json"), errOut.String())
}
