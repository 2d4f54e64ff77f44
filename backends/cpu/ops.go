package cpu

import (
	"github.com/ds4-go/ds4/backends"
)

// This file binds the kernels to the backends.Backend methods. They run on
// the calling goroutine: at decode sizes they are cheap next to the matrix
// products, and keeping them sequential keeps their float order fixed.

// RMSNorm implements backends.Backend.
func (b *Backend) RMSNorm(dst, x, w []float32, eps float32) { RMSNorm(dst, x, w, eps) }

// RMSNormHeads implements backends.Backend.
func (b *Backend) RMSNormHeads(x []float32, dim int, eps float32) { RMSNormHeads(x, dim, eps) }

// RoPE implements backends.Backend.
func (b *Backend) RoPE(tail []float32, pos int, r backends.RoPE, inverse bool) {
	ApplyRoPE(r, tail, pos, inverse)
}

// RoPEHeads implements backends.Backend.
func (b *Backend) RoPEHeads(x []float32, stride, off, pos int, r backends.RoPE, inverse bool) {
	ApplyRoPEHeads(r, x, stride, off, pos, inverse)
}

// FP8Sim implements backends.Backend.
func (b *Backend) FP8Sim(x []float32) { FP8Sim(x) }

// QAT implements backends.Backend.
func (b *Backend) QAT(x []float32) { QAT(x) }

// RoundF16 implements backends.Backend.
func (b *Backend) RoundF16(x []float32) { RoundF16(x) }

// HCPre implements backends.Backend (docs/formats/model.md#hc-pre).
func (b *Backend) HCPre(in, post, comb, x, mix []float32, hc backends.HC) {
	n := hc.N
	var preBuf [16]float32
	pre := preBuf[:n]
	for i := range n {
		pre[i] = SigmoidPlain(float32(mix[i]*hc.Scale[0])+hc.Base[i]) + hc.Eps
		post[i] = 2 / (1 + expf(-(float32(mix[n+i]*hc.Scale[1]) + hc.Base[n+i])))
	}
	for k := range n * n {
		comb[k] = float32(mix[2*n+k]*hc.Scale[2]) + hc.Base[2*n+k]
	}
	Sinkhorn(comb, n, hc.Iters, hc.Eps)
	weightedSum(in, x, pre)
}

// HCPost implements backends.Backend.
func (b *Backend) HCPost(dst, x, y, post, comb []float32, n int) { HCPost(dst, x, y, post, comb, n) }

// HCHead implements backends.Backend (docs/formats/model.md#output-head).
func (b *Backend) HCHead(out, x, mix, scale, base []float32, eps float32) {
	var wBuf [16]float32
	w := wBuf[:len(base)]
	for h := range w {
		w[h] = SigmoidStable(float32(mix[h]*scale[0])+base[h]) + eps
	}
	weightedSum(out, x, w)
}

// weightedSum sets dst[d] = Σ_h x[h·len(dst) + d]·w[h], summed in h order
// from 0; dst must not overlap x.
func weightedSum(dst, x, w []float32) {
	width := len(dst)
	clear(dst)
	for h, wh := range w {
		mulAdd(dst, wh, x[h*width:(h+1)*width])
	}
}

// Attend implements backends.Backend (docs/formats/model.md#attend): per head, scores in row
// order, the maximum taken from the sink up, the weights summed in row
// order after the sink's, and the weighted rows accumulated in row order,
// scaled by the reciprocal of the sum. The heads go in groups of
// attendGroup that share each pass over the rows; the groups are
// independent, so they run in parallel once a call is large enough to
// repay waking the workers. Each head's float order is the same either
// way. The scores go to a pooled buffer of the backend's.
func (b *Backend) Attend(out, q []float32, rows [][]float32, sinks []float32, scale float32) {
	heads := len(sinks)
	d := len(q) / heads
	groups := (heads + attendGroup - 1) / attendGroup
	j := b.attends.Get().(*attendJob)
	j.b, j.out, j.q, j.rows, j.sinks, j.scale, j.d = b, out, q, rows, sinks, scale, d
	j.sj = grow(j.sj, heads*(len(rows)+1))
	if b.workers == 1 || groups == 1 || heads*len(rows)*d < attendParallelMACs {
		for g := range groups {
			j.Run(g)
		}
	} else {
		b.Parallel(groups, j)
	}
	j.out, j.q, j.rows, j.sinks = nil, nil, nil, nil
	b.attends.Put(j)
}

// attendGroup is how many heads share a pass over the rows: each row
// loaded serves four heads (vecOps.dots4, weigh4).
const attendGroup = 4

// attendParallelMACs is the score multiply-adds (heads × rows × head
// dimension) from which Attend spreads its head groups over the workers:
// 64 heads of 512 over 32 rows, some tens of microseconds of one core with
// the SIMD loops, against some microseconds to wake a helper.
const attendParallelMACs = 1 << 20

// attendJob is one Attend call; task g is head group g.
type attendJob struct {
	b             *Backend
	out, q, sinks []float32
	rows          [][]float32
	scale         float32
	d             int
	sj            []float32 // each head's scores and weights (len(rows)), then the heads' reciprocal sums
}

// Run attends the heads of group g.
func (j *attendJob) Run(g int) {
	n, d := len(j.rows), j.d
	lo := g * attendGroup
	hi := min(lo+attendGroup, len(j.sinks))
	heads := len(j.sinks)
	j.b.attendHeads(j.out[lo*d:hi*d], j.q[lo*d:hi*d], j.rows, j.sinks[lo:hi], j.scale, j.sj[lo*n:hi*n], j.sj[heads*n+lo:heads*n+hi])
}

// attendHeads sets out to the attention output over rows of the heads of
// q, one per sink (at most attendGroup, len(q)/len(sinks) floats apiece),
// using s (len(sinks)·len(rows)) for their scores and then their weights,
// those of head h and row j at s[len(sinks)·j+h], and r (len(sinks)) for
// the reciprocals of their sums.
func (b *Backend) attendHeads(out, q []float32, rows [][]float32, sinks []float32, scale float32, s, r []float32) {
	g := len(sinks)
	b.vec.dots(s, q, g, rows)
	// A maximum does not depend on the order it is taken in, so the
	// heads' maxima run side by side, g independent chains.
	var mx [attendGroup]float32
	copy(mx[:], sinks)
	for k := 0; k < len(s); k += g {
		for h, v := range s[k : k+g] {
			v *= scale
			s[k+h] = v
			mx[h] = max(mx[h], v)
		}
	}
	// The weights exp(s − max) of every head come from one expfs call,
	// which gives expf's bits; each head's sum then runs in row order
	// after its sink's weight, as before.
	for k := 0; k < len(s); k += g {
		for h := range g {
			s[k+h] -= mx[h]
		}
	}
	expfs(s, s)
	for h, sink := range sinks {
		den := expf(sink - mx[h])
		for k := h; k < len(s); k += g {
			den += s[k]
		}
		r[h] = 1 / den
	}
	b.vec.weigh(out, s, g, rows, r)
}

// negInf is the reference's "minus infinity" for empty compressor slots.
const negInf = -1.0e30

// CompressPool implements backends.Backend (docs/formats/model.md#compressor).
func (b *Backend) CompressPool(out, kv, score []float32, ratio, w int) {
	d := len(out)
	for j := range d {
		mx := float32(negInf)
		if ratio == 4 {
			for t := range 4 {
				mx = max(mx, score[t*w+j], score[(4+t)*w+d+j])
			}
		} else {
			for t := range ratio {
				mx = max(mx, score[t*w+j])
			}
		}
		if mx <= negInf/2 {
			out[j] = 0
			continue
		}
		var den, num float32
		if ratio == 4 {
			for t := range 4 {
				wa := expf(score[t*w+j] - mx)
				wb := expf(score[(4+t)*w+d+j] - mx)
				den += wa + wb
				num += float32(wa * kv[t*w+j])
				num += float32(wb * kv[(4+t)*w+d+j])
			}
		} else {
			for t := range ratio {
				e := expf(score[t*w+j] - mx)
				den += e
				num += float32(e * kv[t*w+j])
			}
		}
		out[j] = num / den
	}
}

// IndexerScores implements backends.Backend (docs/formats/model.md#indexer).
func (b *Backend) IndexerScores(scores, rows, q, weights []float32, dim int) {
	for c := range scores {
		row := rows[c*dim : (c+1)*dim]
		var acc float32
		for h, wh := range weights {
			acc += float32(max(0, b.vec.dot(row, q[h*dim:(h+1)*dim])) * wh)
		}
		scores[c] = acc
	}
}

// TopK implements backends.Backend: k rounds of picking the largest
// unpicked score (strict >, so the lowest index wins ties).
func (b *Backend) TopK(mask []bool, scores []float32, k int) {
	clear(mask)
	for range min(k, len(scores)) {
		best := -1
		for c, v := range scores {
			if !mask[c] && (best < 0 || v > scores[best]) {
				best = c
			}
		}
		mask[best] = true
	}
}

// RouterProbs implements backends.Backend.
func (b *Backend) RouterProbs(prob, logits []float32) {
	for e, v := range logits {
		prob[e] = sqrtf(Softplus(v))
	}
}

// SelectExperts implements backends.Backend: insertion into a descending
// list where an expert goes before an entry only when strictly greater.
func (b *Backend) SelectExperts(sel []int, prob, bias []float32) {
	k := len(sel)
	score := func(e int) float32 {
		if bias != nil {
			return prob[e] + bias[e]
		}
		return prob[e]
	}
	filled := 0
	for e := range prob {
		v := score(e)
		pos := filled
		for pos > 0 && v > score(sel[pos-1]) {
			pos--
		}
		if pos >= k {
			continue
		}
		end := min(filled, k-1)
		copy(sel[pos+1:end+1], sel[pos:end])
		sel[pos] = e
		filled = min(filled+1, k)
	}
}

// SwiGLU implements backends.Backend.
func (b *Backend) SwiGLU(dst, g, u []float32, clamp, weight float32) {
	swiglu(dst, g, u, clamp, weight)
}

// Add implements backends.Backend.
func (b *Backend) Add(dst, a, x []float32) {
	for i := range dst {
		dst[i] = a[i] + x[i]
	}
}
