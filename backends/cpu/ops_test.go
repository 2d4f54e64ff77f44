package cpu

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// Tests of the Backend methods in ops.go against the spec
// (docs/formats/model.md#hyper-connections, docs/formats/model.md#attend, docs/formats/model.md#compressor, docs/formats/model.md#indexer, docs/formats/model.md#router, docs/formats/model.md#output-head): float64 evaluations, plus the spec's float32
// recipe written out where the spec fixes the rounding order.

func TestBackendWrappers(t *testing.T) {
	be := New(2)
	defer be.Close()
	r := newRand(40)

	x := randVec(r, 512, 1)
	w := randVec(r, 512, 1)
	a, b := make([]float32, 512), make([]float32, 512)
	be.RMSNorm(a, x, w, 1e-6)
	RMSNorm(b, x, w, 1e-6)
	require.Equal(t, b, a)

	rope := yarnRoPE()
	a, b = append([]float32(nil), x[:64]...), append([]float32(nil), x[:64]...)
	be.RoPE(a, 77, rope, true)
	ApplyRoPE(rope, b, 77, true)
	require.Equal(t, b, a)

	for _, f := range []struct {
		name   string
		method func([]float32)
		fn     func([]float32)
	}{{"FP8Sim", be.FP8Sim, FP8Sim}, {"QAT", be.QAT, QAT}, {"RoundF16", be.RoundF16, RoundF16}} {
		a, b = append([]float32(nil), x[:128]...), append([]float32(nil), x[:128]...)
		f.method(a)
		f.fn(b)
		require.Equal(t, b, a, f.name)
	}

	const n, d = 4, 32
	xs, y, post, comb := randVec(r, n*d, 1), randVec(r, d, 1), randVec(r, n, 1), randVec(r, n*n, 1)
	a, b = make([]float32, n*d), make([]float32, n*d)
	be.HCPost(a, xs, y, post, comb, n)
	HCPost(b, xs, y, post, comb, n)
	require.Equal(t, b, a)
}

func TestHCPre(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(41)
	const n, d = 4, 96
	for trial := range 20 {
		x := randVec(r, n*d, 1)
		mix := randVec(r, 2*n+n*n, 1)
		hc := backends.HC{Scale: randVec(r, 3, 1), Base: randVec(r, 2*n+n*n, 1), N: n, Iters: 20, Eps: 1e-6}
		in, post, comb := make([]float32, d), make([]float32, n), make([]float32, n*n)
		be.HCPre(in, post, comb, x, mix, hc)

		// float64 evaluation of docs/formats/model.md#hc-pre.
		pre := make([]float64, n)
		for i := range n {
			pre[i] = sigmoid64(float64(mix[i])*float64(hc.Scale[0])+float64(hc.Base[i])) + 1e-6
			wantPost := 2 / (1 + math.Exp(-(float64(mix[n+i])*float64(hc.Scale[1]) + float64(hc.Base[n+i]))))
			require.InDelta(t, wantPost, float64(post[i]), 1e-6, "trial %d post %d", trial, i)
		}
		for dd := range d {
			var want, mag float64
			for h := range n {
				want += float64(x[h*d+dd]) * pre[h]
				mag += math.Abs(float64(x[h*d+dd]) * pre[h])
			}
			require.InDelta(t, want, float64(in[dd]), 1e-6*mag+1e-7, "trial %d in[%d]", trial, dd)
		}

		// The spec's float32 recipe: z = f32(m·s2) + base, then SINKHORN.
		z := make([]float32, n*n)
		for k := range z {
			z[k] = float32(mix[2*n+k]*hc.Scale[2]) + hc.Base[2*n+k]
		}
		require.Equal(t, bitsOf(sinkhornSpecF32(z, n, 20, 1e-6)), bitsOf(comb), "trial %d comb", trial)

		// And the spec's pre/post/in roundings exactly.
		for i := range n {
			want := 2 / (1 + float32(math.Exp(float64(-(float32(mix[n+i]*hc.Scale[1]) + hc.Base[n+i])))))
			require.Equal(t, want, post[i], "trial %d post %d exact", trial, i)
		}
		pre32 := make([]float32, n)
		for i := range n {
			zz := float32(mix[i]*hc.Scale[0]) + hc.Base[i]
			pre32[i] = 1/(1+float32(math.Exp(float64(-zz)))) + 1e-6
		}
		for dd := range d {
			var acc float32
			for h := range n {
				acc += float32(x[h*d+dd] * pre32[h])
			}
			require.Equal(t, acc, in[dd], "trial %d in[%d] exact", trial, dd)
		}
	}
}

func TestHCHead(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(42)
	const n, d = 4, 80
	for trial := range 20 {
		x := randVec(r, n*d, 1)
		mix, scale, base := randVec(r, n, 3), randVec(r, 1, 1), randVec(r, n, 1)
		out := make([]float32, d)
		be.HCHead(out, x, mix, scale, base, 1e-6)
		w64 := make([]float64, n)
		w32 := make([]float32, n)
		for h := range n {
			w64[h] = sigmoid64(float64(mix[h])*float64(scale[0])+float64(base[h])) + 1e-6
			z := float32(mix[h]*scale[0]) + base[h]
			var s float32
			if z >= 0 {
				s = 1 / (1 + float32(math.Exp(float64(-z))))
			} else {
				e := float32(math.Exp(float64(z)))
				s = e / (1 + e)
			}
			w32[h] = s + 1e-6
		}
		for dd := range d {
			var want, mag float64
			var acc float32
			for h := range n {
				want += float64(x[h*d+dd]) * w64[h]
				mag += math.Abs(float64(x[h*d+dd]) * w64[h])
				acc += float32(x[h*d+dd] * w32[h])
			}
			require.InDelta(t, want, float64(out[dd]), 1e-6*mag+1e-7, "trial %d d=%d", trial, dd)
			require.Equal(t, acc, out[dd], "trial %d d=%d exact", trial, dd)
		}
	}
}

// TestAttend checks every backend against a float64 softmax, the generic
// one against the spec's float32 order bit for bit, and the parallel
// vector backend against the single-worker one bit for bit (the heads'
// split over workers changes nothing). The last cases are large enough to
// run in parallel (attendParallelMACs).
func TestAttend(t *testing.T) {
	gen := NewWithKernels(1, quant.GenericKernels())
	defer gen.Close()
	vec1 := New(1)
	defer vec1.Close()
	vec2 := New(2)
	defer vec2.Close()
	r := newRand(43)
	for _, c := range []struct{ heads, d, rows int }{{1, 8, 1}, {4, 64, 9}, {8, 128, 40}, {2, 512, 3}, {3, 20, 5}, {16, 512, 130}, {64, 512, 33}} {
		t.Run(fmt.Sprintf("h%d_d%d_rows%d", c.heads, c.d, c.rows), func(t *testing.T) {
			require.Equal(t, c.heads >= 16, c.heads*c.d*c.rows >= attendParallelMACs, "the cases of 16 heads or more, and only they, take the parallel path")
			q := randVec(r, c.heads*c.d, 1)
			rows := make([][]float32, c.rows)
			for j := range rows {
				rows[j] = randVec(r, c.d, 1)
			}
			sinks := randVec(r, c.heads, 2)
			scale := float32(1 / math.Sqrt(float64(c.d)))
			out := make([]float32, c.heads*c.d)
			for i := range out {
				out[i] = 99 // overwritten
			}
			gen.Attend(out, q, rows, sinks, scale)
			out1 := make([]float32, len(out))
			vec1.Attend(out1, q, rows, sinks, scale)
			out2 := make([]float32, len(out))
			vec2.Attend(out2, q, rows, sinks, scale)
			require.Equal(t, bitsOf(out1), bitsOf(out2), "parallel heads differ from sequential ones")
			for h := range c.heads {
				qh := q[h*c.d : (h+1)*c.d]
				// float64: softmax over {sink} ∪ rows, sink only in the denominator.
				s := make([]float64, c.rows)
				m := float64(sinks[h])
				for j, row := range rows {
					for k := range c.d {
						s[j] += float64(qh[k]) * float64(row[k])
					}
					s[j] *= float64(scale)
					m = math.Max(m, s[j])
				}
				den := math.Exp(float64(sinks[h]) - m)
				for j := range s {
					den += math.Exp(s[j] - m)
				}
				for k := range c.d {
					var want, mag float64
					for j, row := range rows {
						p := math.Exp(s[j]-m) / den
						want += p * float64(row[k])
						mag += p * math.Abs(float64(row[k]))
					}
					require.InDelta(t, want, float64(out[h*c.d+k]), 1e-5*mag+1e-6, "generic head %d k %d", h, k)
					require.InDelta(t, want, float64(out1[h*c.d+k]), 1e-5*mag+1e-6, "%s head %d k %d", vec1.Kernels().Name, h, k)
				}
			}
			// The spec's float32 order (docs/formats/model.md#attend) exactly.
			want := make([]float32, c.heads*c.d)
			sj := make([]float32, c.rows)
			for h := range c.heads {
				qh := q[h*c.d : (h+1)*c.d]
				m := sinks[h]
				for j, row := range rows {
					var dot float32
					for k := range c.d {
						dot += float32(qh[k] * row[k])
					}
					sj[j] = dot * scale
					if sj[j] > m {
						m = sj[j]
					}
				}
				den := float32(math.Exp(float64(sinks[h] - m)))
				acc := want[h*c.d : (h+1)*c.d]
				for j, row := range rows {
					wj := float32(math.Exp(float64(sj[j] - m)))
					den += wj
					for k := range acc {
						acc[k] += float32(wj * row[k])
					}
				}
				rd := 1 / den
				for k := range acc {
					acc[k] *= rd
				}
			}
			require.Equal(t, bitsOf(want), bitsOf(out))
		})
	}
}

func TestAttendNoRowsAndDominantSink(t *testing.T) {
	be := New(1)
	defer be.Close()
	// No rows: only the sink, the output is zero.
	out := []float32{1, 2, 3, 4}
	be.Attend(out, []float32{1, 1, 1, 1}, nil, []float32{0.5, -3}, 0.5)
	require.Equal(t, []float32{0, 0, 0, 0}, out)
	// A huge sink absorbs all the weight.
	out = make([]float32, 2)
	be.Attend(out, []float32{1, 1}, [][]float32{{1, 1}}, []float32{100}, 1)
	require.InDelta(t, 0, float64(out[0]), 1e-30)
	// A very negative sink leaves a plain softmax: one row → the row itself.
	be.Attend(out, []float32{1, 1}, [][]float32{{3, -4}}, []float32{-1000}, 1)
	require.Equal(t, []float32{3, -4}, out)
}

// poolRef is docs/formats/model.md#compressor's pooling in float64 for one dimension j: candidates (s, v).
func poolRef(s, v []float64) float64 {
	m := -1.0e30
	for _, x := range s {
		m = math.Max(m, x)
	}
	if m <= -0.5e30 {
		return 0
	}
	var den, num float64
	for i := range s {
		e := math.Exp(s[i] - m)
		den += e
		num += e * v[i]
	}
	return num / den
}

func TestCompressPool(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(44)
	for _, c := range []struct{ ratio, d int }{{4, 512}, {4, 128}, {128, 512}, {8, 64}, {16, 32}} {
		t.Run(fmt.Sprintf("ratio%d_d%d", c.ratio, c.d), func(t *testing.T) {
			coff, slots := 1, c.ratio
			if c.ratio == 4 {
				coff, slots = 2, 8
			}
			w := coff * c.d
			kv := randVec(r, slots*w, 1)
			score := randVec(r, slots*w, 2)
			// Some empty slots (score −1e30) and one dimension with every
			// candidate empty.
			for j := 0; j < w; j += 7 {
				score[j] = -1e30
			}
			for t := range slots {
				score[t*w+3] = -1e30
				if c.ratio == 4 {
					score[t*w+c.d+3] = -1e30
				}
			}
			out := make([]float32, c.d)
			be.CompressPool(out, kv, score, c.ratio, w)
			for j := range c.d {
				var s, v []float64
				if c.ratio == 4 {
					for t := range 4 {
						s = append(s, float64(score[t*w+j]), float64(score[(4+t)*w+c.d+j]))
						v = append(v, float64(kv[t*w+j]), float64(kv[(4+t)*w+c.d+j]))
					}
				} else {
					for t := range c.ratio {
						s = append(s, float64(score[t*w+j]))
						v = append(v, float64(kv[t*w+j]))
					}
				}
				want := poolRef(s, v)
				require.InDelta(t, want, float64(out[j]), 1e-5, "j=%d", j)
			}
			require.Zero(t, out[3], "all-empty dimension pools to 0")

			// The spec's float32 accumulation order exactly.
			e := func(x float32) float32 { return float32(math.Exp(float64(x))) }
			for j := range c.d {
				m := float32(-1e30)
				if c.ratio == 4 {
					for t := range 4 {
						m = max(m, score[t*w+j], score[(4+t)*w+c.d+j])
					}
				} else {
					for t := range c.ratio {
						m = max(m, score[t*w+j])
					}
				}
				want := float32(0)
				if m > -0.5e30 {
					var den, num float32
					if c.ratio == 4 {
						for t := range 4 {
							wa, wb := e(score[t*w+j]-m), e(score[(4+t)*w+c.d+j]-m)
							den += wa + wb
							num += float32(wa * kv[t*w+j])
							num += float32(wb * kv[(4+t)*w+c.d+j])
						}
					} else {
						for t := range c.ratio {
							wt := e(score[t*w+j] - m)
							den += wt
							num += float32(wt * kv[t*w+j])
						}
					}
					want = num / den
				}
				require.Equal(t, want, out[j], "j=%d exact", j)
			}
		})
	}
}

func TestCompressPoolRatio4Lanes(t *testing.T) {
	// Ratio 4, D = 2, W = 4: lane A is slots 0..3 at [j], lane B slots
	// 4..7 at [D+j]; the other halves must be ignored. With the previous
	// window empty (first window), only lane B counts.
	be := New(1)
	defer be.Close()
	const d, w = 2, 4
	kv := make([]float32, 8*w)
	score := make([]float32, 8*w)
	for i := range score {
		score[i] = -1e30
	}
	for t := range 4 {
		// Lane B, dimension 0: equal scores, values 1, 2, 3, 4 → mean 2.5.
		score[(4+t)*w+d+0], kv[(4+t)*w+d+0] = 0.5, float32(t+1)
		// Decoys in the unused halves with large scores.
		score[(4+t)*w+0], kv[(4+t)*w+0] = 50, 1000
		score[t*w+d+0], kv[t*w+d+0] = 50, -1000
	}
	// Dimension 1: lane A slot 2 and lane B slot 5 with equal scores.
	score[2*w+1], kv[2*w+1] = 1, 10
	score[5*w+d+1], kv[5*w+d+1] = 1, 20
	out := make([]float32, d)
	be.CompressPool(out, kv, score, 4, w)
	require.InDelta(t, 2.5, float64(out[0]), 1e-6)
	require.InDelta(t, 15, float64(out[1]), 1e-5)
}

func TestIndexerScores(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(45)
	const dim, heads, n = 128, 8, 30
	rows := randVec(r, n*dim, 1)
	q := randVec(r, heads*dim, 1)
	weights := randVec(r, heads, 0.1)
	scores := make([]float32, n)
	be.IndexerScores(scores, rows, q, weights, dim)
	positive := 0
	for c := range n {
		var want, mag float64
		for h := range heads {
			var dot, dmag float64
			for k := range dim {
				p := float64(rows[c*dim+k]) * float64(q[h*dim+k])
				dot += p
				dmag += math.Abs(p)
			}
			if dot > 0 {
				positive++
				want += dot * float64(weights[h])
			}
			mag += dmag * math.Abs(float64(weights[h]))
		}
		require.InDelta(t, want, float64(scores[c]), 2e-6*mag, "row %d", c)
	}
	require.Greater(t, positive, 0)
	require.Less(t, positive, n*heads) // the ReLU is exercised
}

// topKRef returns the indices of the k largest values, ties to the lower
// index, ordered by value descending.
func topKRef(v []float32, k int) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] > v[idx[b]] })
	return idx[:min(k, len(v))]
}

func TestTopK(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(46)
	for _, c := range []struct{ n, k int }{{0, 3}, {1, 1}, {10, 0}, {10, 3}, {10, 10}, {10, 20}, {600, 512}, {1000, 512}} {
		for _, ties := range []bool{false, true} {
			scores := randVec(r, c.n, 1)
			if ties {
				for i := range scores {
					scores[i] = float32(r.IntN(5)) // many equal scores
				}
			}
			mask := make([]bool, c.n)
			for i := range mask {
				mask[i] = i%3 == 0 // stale contents must be cleared
			}
			be.TopK(mask, scores, c.k)
			want := make([]bool, c.n)
			for _, i := range topKRef(scores, c.k) {
				want[i] = true
			}
			require.Equal(t, want, mask, "n=%d k=%d ties=%v", c.n, c.k, ties)
		}
	}
}

func TestRouterProbs(t *testing.T) {
	be := New(1)
	defer be.Close()
	logits := append([]float32{-30, -20.5, -20, -1, 0, 1, 20, 20.5, 30}, randVec(newRand(47), 256, 3)...)
	prob := make([]float32, len(logits))
	be.RouterProbs(prob, logits)
	for i, v := range logits {
		want := math.Sqrt(math.Log1p(math.Exp(float64(v))))
		require.InDelta(t, want, float64(prob[i]), 4*ulp32(want)+1e-30, "logit %v", v)
	}
}

func TestSelectExperts(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(48)
	for _, c := range []struct {
		n, k    int
		bias    bool
		quantum bool // coarse values: many ties
	}{{256, 6, false, false}, {256, 6, true, false}, {256, 6, false, true}, {256, 6, true, true}, {8, 8, false, true}, {16, 1, true, false}, {5, 6, false, false}} {
		t.Run(fmt.Sprintf("n%d_k%d_bias%v_ties%v", c.n, c.k, c.bias, c.quantum), func(t *testing.T) {
			for range 20 {
				prob := randVec(r, c.n, 1)
				var bias []float32
				if c.bias {
					bias = randVec(r, c.n, 0.5)
				}
				if c.quantum {
					for i := range prob {
						prob[i] = float32(r.IntN(4)) * 0.25
						if bias != nil {
							bias[i] = float32(r.IntN(2)) * 0.25
						}
					}
				}
				v := make([]float32, c.n)
				for e := range v {
					v[e] = prob[e]
					if bias != nil {
						v[e] = prob[e] + bias[e]
					}
				}
				sel := make([]int, c.k)
				for i := range sel {
					sel[i] = -1
				}
				be.SelectExperts(sel, prob, bias)
				want := topKRef(v, c.k)
				require.Equal(t, want, sel[:len(want)])
			}
		})
	}
}

func TestSwiGLU(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(49)
	g := append([]float32{-30, -10, 0, 9.9, 10, 10.1, 50}, randVec(r, 200, 6)...)
	u := append([]float32{-50, -10.1, -10, 0, 10, 10.1, 50}, randVec(r, 200, 6)...)
	const clamp, weight = float32(10), float32(0.37)
	dst := make([]float32, len(g))
	be.SwiGLU(dst, g, u, clamp, weight)
	for j := range g {
		gj := math.Min(float64(g[j]), 10)
		uj := math.Max(-10, math.Min(float64(u[j]), 10))
		want := gj * sigmoid64(gj) * uj * float64(weight)
		require.InDelta(t, want, float64(dst[j]), 6*ulp32(want)+1e-37, "j=%d g=%v u=%v", j, g[j], u[j])
		// Spec rounding: (silu(g)·u)·w, silu = g·sigmoid_stable(g).
		g32 := min(g[j], clamp)
		u32 := min(max(u[j], -clamp), clamp)
		var s float32
		if g32 >= 0 {
			s = 1 / (1 + float32(math.Exp(float64(-g32))))
		} else {
			e := float32(math.Exp(float64(g32)))
			s = e / (1 + e)
		}
		require.Equal(t, float32(float32(float32(g32*s)*u32)*weight), dst[j], "j=%d exact", j)
	}
}

func TestAdd(t *testing.T) {
	be := New(1)
	defer be.Close()
	r := newRand(50)
	a, b := randVec(r, 100, 1), randVec(r, 100, 1)
	want := make([]float32, 100)
	for i := range want {
		want[i] = float32(float64(a[i]) + float64(b[i])) // exact sum, rounded once
	}
	dst := make([]float32, 100)
	be.Add(dst, a, b)
	require.Equal(t, want, dst)
	// Aliasing: dst = a, dst = b.
	a2 := append([]float32(nil), a...)
	be.Add(a2, a2, b)
	require.Equal(t, want, a2)
	b2 := append([]float32(nil), b...)
	be.Add(b2, a, b2)
	require.Equal(t, want, b2)
}
