package harness

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
)

// meanSD returns the mean and the sample standard deviation (0 for one
// value; both 0 for none).
func meanSD(xs []float64) (mean, sd float64) {
	switch len(xs) {
	case 0:
		return 0, 0
	case 1:
		return xs[0], 0
	}
	return stat.MeanStdDev(xs, nil)
}

// median returns the median of sorted xs, the mean of the middle two of
// an even count (the type-7 quantile at 1/2: gonum's LinInterp
// interpolates around position p·n−1, so it is asked for p = (1+(n−1)/2)/n).
func median(xs []float64) float64 {
	n := float64(len(xs))
	return stat.Quantile((1+0.5*(n-1))/n, stat.LinInterp, xs, nil)
}

// medianRange returns the median (the mean of the middle two of an even
// count), least and greatest of f, which it sorts; zeros when f is empty.
func medianRange(f []float64) (med, lo, hi float64) {
	if len(f) == 0 {
		return 0, 0, 0
	}
	slices.Sort(f)
	return median(f), f[0], f[len(f)-1]
}

// percentile returns the q-quantile of ds by nearest rank (the least
// value with at least a fraction q of ds at or below it; gonum's
// Empirical), sorting ds; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(math.Round(stat.Quantile(q, stat.Empirical, xs, nil)))
}
