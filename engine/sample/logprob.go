package sample

import (
	"math"
	"slices"
)

// TokenLogprob is a token id with its log-probability.
type TokenLogprob struct {
	ID      int
	Logprob float32
}

// TopLogprobs appends to dst[:0] the k most probable tokens in decreasing
// order of probability (ties to the lower id) and returns it; log-softmax is
// computed stably in float64 over the finite logits, and fewer than k
// tokens are returned when fewer logits are finite.
func TopLogprobs(logits []float32, k int, dst []TokenLogprob) []TokenLogprob {
	dst = dst[:0]
	k = min(k, len(logits))
	if k <= 0 {
		return dst
	}
	lse := LogSumExp(logits)
	if math.IsInf(lse, -1) {
		return dst
	}
	// Select with a min-heap holding the logit in Logprob.
	for i, v := range logits {
		if !(v >= -math.MaxFloat32 && v <= math.MaxFloat32) {
			continue
		}
		x := TokenLogprob{ID: i, Logprob: v}
		if len(dst) < k {
			dst = append(dst, x)
			siftUp(dst, len(dst)-1, worseLogprob)
		} else if v > dst[0].Logprob {
			dst[0] = x
			siftDown(dst, 0, worseLogprob)
		}
	}
	slices.SortFunc(dst, func(a, b TokenLogprob) int {
		switch {
		case a.Logprob > b.Logprob:
			return -1
		case a.Logprob < b.Logprob:
			return 1
		}
		return a.ID - b.ID
	})
	for i := range dst {
		dst[i].Logprob = float32(float64(dst[i].Logprob) - lse)
	}
	return dst
}

// Logprob returns the log-probability of token id under the softmax of the
// finite logits, or -Inf when its logit is not finite; it panics if id is
// out of range.
func Logprob(logits []float32, id int) float32 {
	v := logits[id]
	if !(v >= -math.MaxFloat32 && v <= math.MaxFloat32) {
		return float32(math.Inf(-1))
	}
	return float32(float64(v) - LogSumExp(logits))
}

// LogSumExp returns log Σ exp(logit) over the finite logits, computed in
// float64 relative to the largest, or -Inf when none is finite.
func LogSumExp(logits []float32) float64 {
	m, ok := finiteMax(logits)
	if !ok {
		return math.Inf(-1)
	}
	mf := float64(m)
	var sum float64
	for _, v := range logits {
		if v >= -math.MaxFloat32 && v <= math.MaxFloat32 {
			sum += math.Exp(float64(v) - mf)
		}
	}
	return mf + math.Log(sum)
}

// worseLogprob orders the top-k heap: a lower logit, or an equal one and a
// higher id, ranks below.
func worseLogprob(a, b TokenLogprob) bool {
	return a.Logprob < b.Logprob || a.Logprob == b.Logprob && a.ID > b.ID
}
