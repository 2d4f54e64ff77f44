// Package vectors compares engine logits against reference vectors: the
// oracle cases computed by DeepSeek's reference implementation, and the
// official API logprob vectors.
package vectors

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/ds4-go/ds4/engine/sample"
)

// Metrics summarize how far a run's logits are from a reference, over all
// positions. KL is KL(reference ‖ run) of the softmax, natural log. The
// target token of a position is the token that follows it when known, else
// the reference's greedy choice; Δp and NLL are measured on it.
type Metrics struct {
	Positions   int
	MaxAbsDelta float64
	MeanKL      float64
	MedianKL    float64
	P90KL       float64
	P99KL       float64
	MaxKL       float64
	Top1        float64 // same-top-1 rate: fraction of positions with the same argmax
	RMSDeltaP   float64 // root mean square of p_run(target) − p_ref(target)
	NLLRef      float64 // mean −ln p_ref(target)
	NLLRun      float64 // mean −ln p_run(target)
	NLLRatio    float64 // NLLRun / NLLRef (1 when both are 0, +Inf when only NLLRef is)
}

// PositionStat is the comparison of one position.
type PositionStat struct {
	Position       int
	KL             float64
	DeltaP         float64 // p_run(target) − p_ref(target)
	RefTop, RunTop int     // argmax of each row (-1 when unknown)
	SameTop1       bool
	Target         int
	NLLRef, NLLRun float64
}

// logSoftmax returns the log-probabilities of logits in float64.
func logSoftmax(dst []float64, logits []float32) {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	for i, v := range logits {
		dst[i] = float64(v) - lse
	}
}

// KL returns KL(p ‖ q) for the softmax distributions of two logit rows.
func KL(ref, got []float32) float64 {
	lp := make([]float64, len(ref))
	lq := make([]float64, len(got))
	return klInto(lp, lq, ref, got)
}

func klInto(lp, lq []float64, ref, got []float32) float64 {
	logSoftmax(lp, ref)
	logSoftmax(lq, got)
	var kl float64
	for i, a := range lp {
		if p := math.Exp(a); p > 0 {
			kl += p * (a - lq[i])
		}
	}
	return max(kl, 0)
}

// Compare computes Metrics for two row-major logit matrices of rows of
// vocab entries, with each position's target the reference's argmax.
func Compare(ref, got []float32, vocab int) (Metrics, error) {
	m, _, err := CompareTargets(ref, got, vocab, nil)
	return m, err
}

// CompareTargets is Compare with explicit target tokens: targets[i] is
// the token following position i (a negative entry, or a nil or short
// targets, means the reference's argmax). It also returns the statistics of
// every position.
func CompareTargets(ref, got []float32, vocab int, targets []int) (Metrics, []PositionStat, error) {
	if vocab <= 0 || len(ref) != len(got) || len(ref)%vocab != 0 {
		return Metrics{}, nil, fmt.Errorf("vectors: compare %d against %d logits with vocab %d", len(got), len(ref), vocab)
	}
	n := len(ref) / vocab
	stats := make([]PositionStat, n)
	lp, lq := make([]float64, vocab), make([]float64, vocab)
	var maxAbs float64
	for i := range n {
		r, g := ref[i*vocab:(i+1)*vocab], got[i*vocab:(i+1)*vocab]
		for j := range r {
			maxAbs = max(maxAbs, math.Abs(float64(r[j])-float64(g[j])))
		}
		st := PositionStat{Position: i, KL: klInto(lp, lq, r, g), RefTop: sample.Argmax(r), RunTop: sample.Argmax(g)}
		st.SameTop1 = st.RefTop == st.RunTop
		st.Target = st.RefTop
		if i < len(targets) && targets[i] >= 0 && targets[i] < vocab {
			st.Target = targets[i]
		}
		st.NLLRef, st.NLLRun = -lp[st.Target], -lq[st.Target]
		st.DeltaP = math.Exp(lq[st.Target]) - math.Exp(lp[st.Target])
		stats[i] = st
	}
	m := Summarize(stats)
	m.MaxAbsDelta = maxAbs
	return m, stats, nil
}

// Summarize aggregates per-position statistics into Metrics (MaxAbsDelta
// is left zero: positions do not carry it).
func Summarize(stats []PositionStat) Metrics {
	n := len(stats)
	m := Metrics{Positions: n}
	if n == 0 {
		return m
	}
	kls := make([]float64, n)
	same := 0
	var sq float64
	for i, st := range stats {
		kls[i] = st.KL
		m.MeanKL += st.KL / float64(n)
		if st.SameTop1 {
			same++
		}
		sq += st.DeltaP * st.DeltaP
		m.NLLRef += st.NLLRef / float64(n)
		m.NLLRun += st.NLLRun / float64(n)
	}
	m.Top1 = float64(same) / float64(n)
	m.RMSDeltaP = math.Sqrt(sq / float64(n))
	switch {
	case m.NLLRef > 0:
		m.NLLRatio = m.NLLRun / m.NLLRef
	case m.NLLRun == 0:
		m.NLLRatio = 1
	default:
		m.NLLRatio = math.Inf(1)
	}
	slices.Sort(kls)
	m.MedianKL = quantile(kls, 0.5)
	m.P90KL = quantile(kls, 0.9)
	m.P99KL = quantile(kls, 0.99)
	m.MaxKL = kls[n-1]
	return m
}

// quantile returns the q-quantile of sorted xs, interpolated linearly
// between the order statistics around position q·(n−1) (the common
// definition: R's type 7, NumPy's default; the median of an even count is
// the mean of the middle two). gonum's LinInterp interpolates around
// position p·n−1 instead, so it is asked for p = (1+q·(n−1))/n.
func quantile(xs []float64, q float64) float64 {
	n := float64(len(xs))
	return stat.Quantile((1+q*(n-1))/n, stat.LinInterp, xs, nil)
}

// ReadLogits reads a raw little-endian float32 file of rows×vocab values.
func ReadLogits(path string, vocab int) ([]float32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	if vocab <= 0 || len(data)%(4*vocab) != 0 {
		return nil, fmt.Errorf("vectors: %s: %d bytes is not a whole number of %d-logit rows", path, len(data), vocab)
	}
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out, nil
}

// Bar is an acceptance bar on Metrics; zero fields are not checked.
type Bar struct {
	Name                           string
	MedianKL, P90KL, MeanKL, MaxKL float64 // upper bounds
	Top1                           float64 // lower bound
}

// The oracle README's bars: A binds a float32 engine to f32ref (with the
// tighter figures it sets for the three shipped cases), B is the coarse
// bar against the official bf16/FP8 logits.
var (
	BarA = Bar{Name: "A", MedianKL: 1e-5, P90KL: 1e-4, MeanKL: 5e-5, MaxKL: 5e-3, Top1: 1}
	BarB = Bar{Name: "B", MeanKL: 0.25, MaxKL: 4, Top1: 0.60}
)

// Check returns an error listing every bound m misses.
func (b Bar) Check(m Metrics) error {
	var miss []string
	up := func(name string, got, bound float64) {
		if bound > 0 && !(got <= bound) {
			miss = append(miss, fmt.Sprintf("%s %.3g > %.3g", name, got, bound))
		}
	}
	up("median KL", m.MedianKL, b.MedianKL)
	up("p90 KL", m.P90KL, b.P90KL)
	up("mean KL", m.MeanKL, b.MeanKL)
	up("max KL", m.MaxKL, b.MaxKL)
	if b.Top1 > 0 && !(m.Top1 >= b.Top1) {
		miss = append(miss, fmt.Sprintf("top-1 %.1f%% < %.1f%%", 100*m.Top1, 100*b.Top1))
	}
	if len(miss) > 0 {
		return fmt.Errorf("bar %s missed: %v", b.Name, miss)
	}
	return nil
}
