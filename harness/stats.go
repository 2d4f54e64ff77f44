package harness

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// ciLevel is the coverage of the confidence intervals the harness reports.
const ciLevel = 0.95

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

// meanCI returns the mean of the repeated measurements xs and the bounds
// of its 95% confidence interval, mean ± t·s/√n with t the 0.975 quantile
// of Student's t distribution of n−1 degrees of freedom; the bounds are 0
// for fewer than two values, which bound nothing.
//
// The interval is Student's t rather than a bootstrap: the harness
// repeats a measurement 3 to 10 times, and from so few values a
// bootstrap's percentile interval cannot reach past the sample's range
// (from three values its "95%" interval is at best the range, which holds
// the mean about three times in four), while the t interval accounts for
// the standard deviation's being estimated from the same few values. It
// assumes the runs independent with roughly normal noise, which
// interleaving the probes with the runs aims at.
func meanCI(xs []float64) (mean, lo, hi float64) {
	mean, sd := meanSD(xs)
	if len(xs) < 2 {
		return mean, 0, 0
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(xs) - 1)}.Quantile(1 - (1-ciLevel)/2)
	half := t * stat.StdErr(sd, float64(len(xs)))
	return mean, mean - half, mean + half
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
