package engine

import (
	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine/layout"
)

// scratch holds the per-chunk buffers of the forward pass, sized for n
// tokens; it is allocated once per session (and regrown for longer chunks).
type scratch struct {
	n      int
	X      []float32 // n × HC·Embd hyper-connection states
	flat   []float32 // n × HC·Embd normalized states
	mixes  []float32 // n × HCMix
	mix    []float32
	pre    []float32
	post   []float32 // n × HC
	comb   []float32 // n × HC²
	in     []float32 // n × Embd sublayer inputs
	a      []float32 // n × Embd normed inputs
	e      []float32
	qa     []float32 // n × QLora
	q      []float32 // n × Heads·HeadDim
	kv     []float32 // n × HeadDim
	ckv    []float32 // n × W compressor projections
	cgate  []float32
	ikv    []float32 // n × 2·IndexerDim
	igate  []float32
	qi     []float32 // n × IndexerHeads·IndexerDim
	iw     []float32 // n × IndexerHeads
	o      []float32 // n × Heads·HeadDim attention outputs
	low    []float32 // n × OGroups·OLora
	y      []float32 // n × Embd sublayer outputs
	pooled []float32
	scores []float32
	mask   []bool
	rows   [][]float32
	acc    []float32
	att    []float32 // attention scores of one head
	logit  []float32 // n × Experts router logits
	prob   []float32
	sel    []int
	wt     []float32
	g, u   []float32 // ExpertFF
	mid    []float32
	down   []float32 // Embd
	sh     []float32 // n × ExpertFF·Shared
	shu    []float32
	moe    []float32
}

func newScratch(p layout.Params, n int) *scratch {
	f := func(k int) []float32 { return make([]float32, k) }
	hcd := p.HC * p.Embd
	w := 2 * p.HeadDim
	shared := p.ExpertFF * p.SharedExperts
	return &scratch{
		n: n, X: f(n * hcd), flat: f(n * hcd), mixes: f(n * p.HCMix()), mix: f(p.HCMix()),
		post: f(n * p.HC), comb: f(n * p.HC * p.HC),
		in: f(n * p.Embd), a: f(n * p.Embd), e: f(p.Embd), qa: f(n * p.QLoraRank),
		q: f(n * p.Heads * p.HeadDim), kv: f(n * p.HeadDim),
		ckv: f(n * w), cgate: f(n * w), ikv: f(n * 2 * p.IndexerDim), igate: f(n * 2 * p.IndexerDim),
		qi: f(n * p.IndexerHeads * p.IndexerDim), iw: f(n * p.IndexerHeads),
		o: f(n * p.Heads * p.HeadDim), low: f(n * p.OGroups * p.OLoraRank), y: f(n * p.Embd),
		pooled: f(w), logit: f(n * p.Experts), prob: f(p.Experts),
		sel: make([]int, p.ExpertsUsed), wt: f(p.ExpertsUsed),
		g: f(p.ExpertFF), u: f(p.ExpertFF), mid: f(p.ExpertFF), down: f(p.Embd),
		sh: f(n * shared), shu: f(n * shared), moe: f(p.Embd),
	}
}

// attention runs the attention sublayer (spec §6) for a chunk of tokens at
// positions pos0.. : batched projections, then the cache-touching part
// token by token in position order, then batched output projections.
func (s *Session) attention(il int, toks []int, pos0 int) {
	m, p, sc, be := s.m, s.m.Params, s.s, s.be
	l := &m.Layers[il]
	n := len(toks)
	hcd, mix := p.HC*p.Embd, p.HCMix()
	s.hcMixes(l.HCAttnFn, n)
	for i := range n {
		be.HCPre(sc.in[i*p.Embd:(i+1)*p.Embd], sc.post[i*p.HC:(i+1)*p.HC], sc.comb[i*p.HC*p.HC:(i+1)*p.HC*p.HC],
			sc.X[i*hcd:(i+1)*hcd], sc.mixes[i*mix:(i+1)*mix], s.hc(l.HCAttnScale, l.HCAttnBase))
		be.RMSNorm(sc.a[i*p.Embd:(i+1)*p.Embd], sc.in[i*p.Embd:(i+1)*p.Embd], l.AttnNorm, p.RMSEps)
	}
	a := sc.a[:n*p.Embd]
	be.MatMul(sc.qa[:n*p.QLoraRank], l.QA, a, n)
	for i := range n {
		q := sc.qa[i*p.QLoraRank : (i+1)*p.QLoraRank]
		be.RMSNorm(q, q, l.QANorm, p.RMSEps)
	}
	qd := p.Heads * p.HeadDim
	be.MatMul(sc.q[:n*qd], l.QB, sc.qa[:n*p.QLoraRank], n)
	be.MatMul(sc.kv[:n*p.HeadDim], l.KV, a, n)
	var w int
	if l.Ratio != 0 {
		w = l.CompKV.Rows
		be.MatMul(sc.ckv[:n*w], l.CompKV, a, n)
		be.MatMul(sc.cgate[:n*w], l.CompGate, a, n)
	}
	iw := 2 * p.IndexerDim
	if l.Ratio == 4 {
		be.MatMul(sc.ikv[:n*iw], l.IdxCompKV, a, n)
		be.MatMul(sc.igate[:n*iw], l.IdxCompGate, a, n)
		// The indexer projections are needed only once more rows exist
		// than it keeps; computing them per chunk changes no result.
		if (pos0+n)/4 > p.IndexerTopK {
			iqd := p.IndexerHeads * p.IndexerDim
			be.MatMul(sc.qi[:n*iqd], l.IdxQB, sc.qa[:n*p.QLoraRank], n)
			be.MatMul(sc.iw[:n*p.IndexerHeads], l.IdxProj, a, n)
		}
	}
	st := &s.layers[il]
	nope := p.HeadDim - p.RopeDim
	for i := range n {
		pos := pos0 + i
		q := sc.q[i*qd : (i+1)*qd]
		for h := range p.Heads {
			qh := q[h*p.HeadDim : (h+1)*p.HeadDim]
			be.RMSNorm(qh, qh, nil, p.RMSEps)
			be.RoPE(qh[nope:], pos, l.Rope, false)
		}
		kv := sc.kv[i*p.HeadDim : (i+1)*p.HeadDim]
		be.RMSNorm(kv, kv, l.KVNorm, p.RMSEps)
		be.RoPE(kv[nope:], pos, l.Rope, false)
		be.FP8Sim(kv[:nope])
		s.pushRaw(st, kv)
		var mask []bool
		if l.Ratio != 0 {
			if c := s.compress(l, st.skv, st.ssc, l.CompAPE, l.CompNorm, sc.ckv[i*w:(i+1)*w], sc.cgate[i*w:(i+1)*w], p.HeadDim, pos, false); c != nil {
				s.pushRow(st.comp, &st.compLen, p.HeadDim, c)
			}
			if l.Ratio == 4 {
				if c := s.compress(l, st.iskv, st.issc, l.IdxCompAPE, l.IdxCompNorm, sc.ikv[i*iw:(i+1)*iw], sc.igate[i*iw:(i+1)*iw], p.IndexerDim, pos, true); c != nil {
					s.pushRow(st.icomp, &st.icompLen, p.IndexerDim, c)
				}
				mask = s.indexer(l, st, i, pos)
			}
		}
		s.attend(l, st, sc.o[i*qd:(i+1)*qd], q, mask)
		for h := range p.Heads {
			be.RoPE(sc.o[i*qd+h*p.HeadDim+nope:i*qd+(h+1)*p.HeadDim], pos, l.Rope, true)
		}
	}
	// Grouped low-rank output: group g's heads go through rows
	// [g·OLora, (g+1)·OLora) of OutA only.
	g, gw := p.OGroups, qd/p.OGroups
	low := p.OGroups * p.OLoraRank
	for i := range n {
		for gi := range g {
			rows := l.OutA.RowRange(gi*p.OLoraRank, (gi+1)*p.OLoraRank)
			be.MatVec(sc.low[i*low+gi*p.OLoraRank:i*low+(gi+1)*p.OLoraRank], rows, sc.o[i*qd+gi*gw:i*qd+(gi+1)*gw])
		}
	}
	be.MatMul(sc.y[:n*p.Embd], l.OutB, sc.low[:n*low], n)
	s.capture(il, n, true)
	s.steer(il, n, true)
	s.hcPostAll(n)
}

// hc returns the hyper-connection constants of a sublayer.
func (s *Session) hc(scale, base []float32) backends.HC {
	p := s.m.Params
	return backends.HC{Scale: scale, Base: base, N: p.HC, Iters: p.SinkhornIters, Eps: p.HCEps}
}

// pushRaw appends a KV row to the sliding window, dropping the oldest row
// when it is full.
func (s *Session) pushRaw(st *layerState, kv []float32) {
	d := s.m.Params.HeadDim
	var slot int
	if st.rawLen < s.rawCap {
		slot = (st.rawStart + st.rawLen) % s.rawCap
		st.rawLen++
	} else {
		slot = st.rawStart
		st.rawStart = (st.rawStart + 1) % s.rawCap
	}
	row := st.raw[slot*d : (slot+1)*d]
	copy(row, kv)
	if s.opt.Numerics == NumericsDS4 {
		s.be.RoundF16(row)
	}
}

// pushRow appends a compressed row.
func (s *Session) pushRow(rows []float32, count *int, d int, c []float32) {
	row := rows[*count*d : (*count+1)*d]
	copy(row, c)
	if s.opt.Numerics == NumericsDS4 {
		s.be.RoundF16(row)
	}
	*count++
}

// compress is COMPRESS of spec §7: it records token pos's projections in
// the compressor state and, when pos closes a window, returns the pooled,
// normalized, rotated and FP8/FP4-simulated row (in sc.pooled), else nil.
func (s *Session) compress(l *Layer, skv, ssc, ape, norm, kvc, scc []float32, d, pos int, indexer bool) []float32 {
	p := s.m.Params
	r := l.Ratio
	if indexer {
		r = 4
	}
	w := len(kvc)
	slot := pos % r
	if r == 4 {
		slot = 4 + pos%4
	}
	copy(skv[slot*w:(slot+1)*w], kvc)
	dst := ssc[slot*w : (slot+1)*w]
	a := ape[(pos%r)*w : (pos%r+1)*w]
	for j := range dst {
		dst[j] = scc[j] + a[j]
	}
	if (pos+1)%r != 0 {
		return nil
	}
	out := s.s.pooled[:d]
	s.be.CompressPool(out, skv, ssc, r, w)
	s.be.RMSNorm(out, out, norm, p.RMSEps)
	s.be.RoPE(out[d-p.RopeDim:], pos+1-r, l.Rope, false)
	if indexer {
		s.be.QAT(out)
	} else {
		s.be.FP8Sim(out[:d-p.RopeDim])
	}
	if r == 4 {
		copy(skv[:4*w], skv[4*w:8*w])
		copy(ssc[:4*w], ssc[4*w:8*w])
	}
	return out
}

// indexer is INDEXER of spec §8 for token i of the chunk: it returns the
// mask of compressed rows attention may visit, or nil for all of them.
func (s *Session) indexer(l *Layer, st *layerState, i, pos int) []bool {
	p, sc := s.m.Params, s.s
	nrows := st.icompLen
	if nrows <= p.IndexerTopK {
		return nil
	}
	iqd := p.IndexerHeads * p.IndexerDim
	qi := sc.qi[i*iqd : (i+1)*iqd]
	for h := range p.IndexerHeads {
		qh := qi[h*p.IndexerDim : (h+1)*p.IndexerDim]
		s.be.RoPE(qh[p.IndexerDim-p.RopeDim:], pos, l.Rope, false)
		s.be.QAT(qh)
	}
	// The weights absorb the score scale 1/sqrt(dim·heads); the product
	// is the one the reference forms per head.
	scale := float32(1 / sqrt64(float64(p.IndexerDim*p.IndexerHeads)))
	w := sc.iw[i*p.IndexerHeads : (i+1)*p.IndexerHeads]
	for h := range w {
		w[h] *= scale
	}
	if cap(sc.scores) < nrows {
		sc.scores = make([]float32, nrows, 2*nrows)
		sc.mask = make([]bool, 2*nrows)
	}
	scores, mask := sc.scores[:nrows], sc.mask[:nrows]
	s.be.IndexerScores(scores, st.icomp[:nrows*p.IndexerDim], qi, w, p.IndexerDim)
	s.be.TopK(mask, scores, p.IndexerTopK)
	return mask
}

// attend is ATTEND of spec §6.1 for one token: a softmax with a sink over
// the raw window (oldest first) and the visible compressed rows.
func (s *Session) attend(l *Layer, st *layerState, out, q []float32, mask []bool) {
	p, sc := s.m.Params, s.s
	d := p.HeadDim
	rows := sc.rows[:0]
	for k := range st.rawLen {
		slot := (st.rawStart + k) % s.rawCap
		rows = append(rows, st.raw[slot*d:(slot+1)*d])
	}
	for c := range st.compLen {
		if mask == nil || mask[c] {
			rows = append(rows, st.comp[c*d:(c+1)*d])
		}
	}
	sc.rows = rows
	if cap(sc.att) < len(rows) {
		sc.att = make([]float32, len(rows), 2*len(rows))
	}
	s.be.Attend(out, q, rows, l.Sinks, s.m.kqScale(), sc.att[:len(rows)])
}

// ffn runs the FFN sublayer (spec §9) for a chunk of tokens.
func (s *Session) ffn(il int, toks []int) {
	m, p, sc, be := s.m, s.m.Params, s.s, s.be
	l := &m.Layers[il]
	n := len(toks)
	hcd, mix := p.HC*p.Embd, p.HCMix()
	s.hcMixes(l.HCFFNFn, n)
	for i := range n {
		be.HCPre(sc.in[i*p.Embd:(i+1)*p.Embd], sc.post[i*p.HC:(i+1)*p.HC], sc.comb[i*p.HC*p.HC:(i+1)*p.HC*p.HC],
			sc.X[i*hcd:(i+1)*hcd], sc.mixes[i*mix:(i+1)*mix], s.hc(l.HCFFNScale, l.HCFFNBase))
		be.RMSNorm(sc.a[i*p.Embd:(i+1)*p.Embd], sc.in[i*p.Embd:(i+1)*p.Embd], l.FFNNorm, p.RMSEps)
	}
	f := sc.a[:n*p.Embd]
	be.MatMul(sc.logit[:n*p.Experts], l.GateInp, f, n)
	shared := p.ExpertFF * p.SharedExperts
	be.MatMul(sc.sh[:n*shared], l.ShGate, f, n)
	be.MatMul(sc.shu[:n*shared], l.ShUp, f, n)
	clamp := p.SwigluClamp[il]
	be.SwiGLU(sc.sh[:n*shared], sc.sh[:n*shared], sc.shu[:n*shared], clamp, 1)
	// The shared output lands in y; routed outputs are added per token.
	be.MatMul(sc.y[:n*p.Embd], l.ShDown, sc.sh[:n*shared], n)
	for i, t := range toks {
		s.route(l, sc.logit[i*p.Experts:(i+1)*p.Experts], t)
		moe := sc.moe[:p.Embd]
		clear(moe)
		fi := f[i*p.Embd : (i+1)*p.Embd]
		for k, e := range sc.sel {
			be.MatVec(sc.g, l.GateExps.Expert(e), fi)
			be.MatVec(sc.u, l.UpExps.Expert(e), fi)
			be.SwiGLU(sc.mid, sc.g, sc.u, clamp, sc.wt[k])
			if s.opt.Experts != nil {
				s.opt.Experts.ObserveExpert(il, e, fi, sc.mid)
			}
			be.MatVec(sc.down, l.DownExps.Expert(e), sc.mid)
			be.Add(moe, moe, sc.down)
		}
		y := sc.y[i*p.Embd : (i+1)*p.Embd]
		be.Add(y, moe, y)
	}
	s.capture(il, n, false)
	s.steer(il, n, false)
	s.hcPostAll(n)
}

// route fills sc.sel and sc.wt with token t's experts and their weights
// (spec §9.1) from the router logits lg.
func (s *Session) route(l *Layer, lg []float32, t int) {
	p, sc := s.m.Params, s.s
	k := p.ExpertsUsed
	prob := sc.prob[:p.Experts]
	s.be.RouterProbs(prob, lg)
	sel := sc.sel[:k]
	if l.Tid2Eid != nil {
		for i := range k {
			sel[i] = int(l.Tid2Eid[t*k+i])
		}
	} else {
		s.be.SelectExperts(sel, prob, l.ExpBias)
	}
	var sum float32
	for _, e := range sel {
		sum += prob[e]
	}
	sum = max(sum, 1.0/(1<<14))
	for i, e := range sel {
		sc.wt[i] = (prob[e] / sum) * p.ExpertWeightsScale
	}
}
