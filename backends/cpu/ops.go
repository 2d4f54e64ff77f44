package cpu

import (
	"github.com/ds4-go/ds4/backends"
)

// This file binds the kernels to the backends.Backend methods. They run on
// the calling goroutine: at decode sizes they are cheap next to the matrix
// products, and keeping them sequential keeps their float order fixed.

// RMSNorm implements backends.Backend.
func (b *Backend) RMSNorm(dst, x, w []float32, eps float32) { RMSNorm(dst, x, w, eps) }

// RoPE implements backends.Backend.
func (b *Backend) RoPE(tail []float32, pos int, r backends.RoPE, inverse bool) {
	ApplyRoPE(r, tail, pos, inverse)
}

// FP8Sim implements backends.Backend.
func (b *Backend) FP8Sim(x []float32) { FP8Sim(x) }

// QAT implements backends.Backend.
func (b *Backend) QAT(x []float32) { QAT(x) }

// RoundF16 implements backends.Backend.
func (b *Backend) RoundF16(x []float32) { RoundF16(x) }

// HCPre implements backends.Backend (spec §5.1).
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

// HCHead implements backends.Backend (spec §10).
func (b *Backend) HCHead(out, x, mix, scale, base []float32, eps float32) {
	var wBuf [16]float32
	w := wBuf[:len(base)]
	for h := range w {
		w[h] = SigmoidStable(float32(mix[h]*scale[0])+base[h]) + eps
	}
	weightedSum(out, x, w)
}

// weightedSum sets dst[d] = Σ_h x[h·len(dst) + d]·w[h], summed in h order.
func weightedSum(dst, x, w []float32) {
	width := len(dst)
	for d := range width {
		var acc float32
		for h, wh := range w {
			acc += float32(x[h*width+d] * wh)
		}
		dst[d] = acc
	}
}

// Attend implements backends.Backend (spec §6.1): per head, scores in row
// order, the maximum taken from the sink up, then one pass accumulating the
// weights and the weighted rows, scaled by the reciprocal of the sum. The
// heads are independent, so they run in parallel once a call is large
// enough to repay waking the workers; each head's float order is the same
// either way.
func (b *Backend) Attend(out, q []float32, rows [][]float32, sinks []float32, scale float32, scratch []float32) {
	heads := len(sinks)
	d := len(q) / heads
	if b.workers == 1 || heads == 1 || heads*len(rows)*d < attendParallelMACs {
		sj := scratch[:len(rows)]
		for h := range heads {
			b.attendHead(out[h*d:(h+1)*d], q[h*d:(h+1)*d], rows, sinks[h], scale, sj)
		}
		return
	}
	j := b.attends.Get().(*attendJob)
	j.b, j.out, j.q, j.rows, j.sinks, j.scale, j.d = b, out, q, rows, sinks, scale, d
	j.sj = grow(j.sj, heads*len(rows))
	b.Parallel(heads, j)
	j.out, j.q, j.rows, j.sinks = nil, nil, nil, nil
	b.attends.Put(j)
}

// attendParallelMACs is the score multiply-adds (heads × rows × head
// dimension) from which Attend spreads its heads over the workers: 64
// heads of 512 over 32 rows, about 0.1 ms of one core with the SIMD
// loops, against some microseconds to wake a helper.
const attendParallelMACs = 1 << 20

// attendJob is one parallel Attend call; task h is head h.
type attendJob struct {
	b             *Backend
	out, q, sinks []float32
	rows          [][]float32
	scale         float32
	d             int
	sj            []float32 // each head's scores, len(rows) apiece
}

// Run attends head h.
func (j *attendJob) Run(h int) {
	n, d := len(j.rows), j.d
	j.b.attendHead(j.out[h*d:(h+1)*d], j.q[h*d:(h+1)*d], j.rows, j.sinks[h], j.scale, j.sj[h*n:(h+1)*n])
}

// attendHead sets acc to one head's attention output over rows, using sj
// (len(rows)) for its scores.
func (b *Backend) attendHead(acc, qh []float32, rows [][]float32, sink, scale float32, sj []float32) {
	mx := sink
	for j, row := range rows {
		sj[j] = b.vec.dot(qh, row) * scale
		mx = max(mx, sj[j])
	}
	den := expf(sink - mx)
	clear(acc)
	for j, row := range rows {
		wj := expf(sj[j] - mx)
		den += wj
		b.vec.axpy(acc, wj, row)
	}
	r := 1 / den
	for k := range acc {
		acc[k] *= r
	}
}

// negInf is the reference's "minus infinity" for empty compressor slots.
const negInf = -1.0e30

// CompressPool implements backends.Backend (spec §7).
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

// IndexerScores implements backends.Backend (spec §8).
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
	for j := range dst {
		gj := min(g[j], clamp)
		uj := min(max(u[j], -clamp), clamp)
		dst[j] = float32(SiLU(gj)*uj) * weight
	}
}

// Add implements backends.Backend.
func (b *Backend) Add(dst, a, x []float32) {
	for i := range dst {
		dst[i] = a[i] + x[i]
	}
}
