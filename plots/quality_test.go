package plots

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQualityStudyGolden(t *testing.T) {
	var pts []QualityPoint
	for i, g := range []string{"tiny q2", "tiny q4", "flash q2", "flash q4"} {
		kl := 0.4 / float64(1+3*(i%2)) * (1 + 0.2*float64(i/2))
		pts = append(pts,
			QualityPoint{Group: g, Series: "no imatrix", MeanKL: kl, Top1: 0.6 + 0.1*float64(i%2)},
			QualityPoint{Group: g, Series: "imatrix", MeanKL: 0.8 * kl, Top1: 0.65 + 0.1*float64(i%2)})
	}
	ch, err := QualityStudy(pts, QualityOptions{Title: "Imatrix effect", Reference: "f32ref"})
	require.NoError(t, err)
	svg := string(golden(t, ch, "quality_study.svg"))
	for _, s := range []string{"Imatrix effect", "mean KL vs f32ref (nats)", "same top-1 vs f32ref (%)", ">1e-2<", ">1e0<", "flash q4", "no imatrix", "#2563EB", "#DC2626"} {
		require.Contains(t, svg, s)
	}
	// Four bars per panel and series, plus the legend swatch: one filled
	// path each.
	require.Equal(t, 9, strings.Count(svg, "fill:#2563EB\""))
	require.Equal(t, 9, strings.Count(svg, "fill:#DC2626\""))

	for _, tc := range []struct {
		pts  []QualityPoint
		want string
	}{
		{nil, "no quality points"},
		{[]QualityPoint{{Group: "a", Series: "x", MeanKL: math.NaN()}}, "out of range"},
		{[]QualityPoint{{Group: "a", Series: "x", Top1: 1.5}}, "out of range"},
		{[]QualityPoint{{Group: "a", Series: "x"}, {Group: "a", Series: "x"}}, "given twice"},
		{[]QualityPoint{{Group: "a", Series: "x"}, {Group: "b", Series: "y"}}, "every group in every series"},
	} {
		_, err := QualityStudy(tc.pts, QualityOptions{})
		require.ErrorContains(t, err, tc.want)
	}
}
