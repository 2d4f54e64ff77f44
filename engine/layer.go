package engine

import (
	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/mmap"
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
	logit  []float32 // n × Experts router logits
	prob   []float32
	sel    []int     // n × ExpertsUsed routed experts, slot i·ExpertsUsed+k
	wt     []float32 // their weights
	count  []int     // Experts: slots routed to each expert
	first  []int     // Experts: first position of each expert's slots
	order  []int     // positions → slots, grouped by expert in slot order
	posOf  []int     // slots → positions
	xg     []float32 // n·ExpertsUsed × Embd gathered expert inputs, by position
	g, u   []float32 // n·ExpertsUsed × ExpertFF, by position
	mid    []float32
	down   []float32 // n·ExpertsUsed × Embd, by position
	sh     []float32 // n × ExpertFF·Shared
	shu    []float32
	moe    []float32
	ps     []backends.Product
	ids    []int                // Experts: the distinct experts of a chunk, streaming
	views  []expertcache.Expert // their cache slots' bytes
}

// hugeScratch is the size in bytes from which a scratch buffer asks for
// huge pages (mmap.HugeFloats). Flash's largest buffers take tens to
// hundreds of MB a chunk, and huge pages spare their TLB misses and page
// faults (docs/performance.md#huge-pages).
const hugeScratch = 4 << 20

func newScratch(p layout.Params, n int) *scratch {
	f := func(k int) []float32 {
		if 4*k >= hugeScratch {
			return mmap.HugeFloats(k)
		}
		return make([]float32, k)
	}
	hcd := p.HC * p.Embd
	w := 2 * p.HeadDim
	shared := p.ExpertFF * p.SharedExperts
	slots := n * p.ExpertsUsed
	return &scratch{
		n: n, X: f(n * hcd), flat: f(n * hcd), mixes: f(n * p.HCMix()), mix: f(p.HCMix()),
		post: f(n * p.HC), comb: f(n * p.HC * p.HC),
		in: f(n * p.Embd), a: f(n * p.Embd), e: f(p.Embd), qa: f(n * p.QLoraRank),
		q: f(n * p.Heads * p.HeadDim), kv: f(n * p.HeadDim),
		ckv: f(n * w), cgate: f(n * w), ikv: f(n * 2 * p.IndexerDim), igate: f(n * 2 * p.IndexerDim),
		qi: f(n * p.IndexerHeads * p.IndexerDim), iw: f(n * p.IndexerHeads),
		o: f(n * p.Heads * p.HeadDim), low: f(n * p.OGroups * p.OLoraRank), y: f(n * p.Embd),
		pooled: f(w), logit: f(n * p.Experts), prob: f(p.Experts),
		sel: make([]int, slots), wt: f(slots),
		count: make([]int, p.Experts), first: make([]int, p.Experts), order: make([]int, slots), posOf: make([]int, slots),
		xg: f(slots * p.Embd), g: f(slots * p.ExpertFF), u: f(slots * p.ExpertFF), mid: f(slots * p.ExpertFF), down: f(slots * p.Embd),
		sh: f(n * shared), shu: f(n * shared), moe: f(p.Embd),
		ps:  make([]backends.Product, 0, 2*slots+p.OGroups+8),
		ids: make([]int, 0, p.Experts), views: make([]expertcache.Expert, p.Experts),
	}
}

// attention runs the attention sublayer (docs/formats/model.md#attention) for a chunk of tokens at
// positions pos0.. : batched projections, then the cache-touching part
// token by token in position order, then batched output projections.
func (s *Session) attention(il int, toks []int, pos0 int) {
	m, p, sc, be := s.m, s.m.Params, s.s, s.be
	l := &m.Layers[il]
	n := len(toks)
	s.hcMixes(l.HCAttnFn, n)
	s.eachToken(stepAttnPre, l, n, 0)
	a := sc.a[:n*p.Embd]
	// Every projection of a is one parallel job sharing one quantization
	// of a; those of the normalized qa are a second one.
	qd := p.Heads * p.HeadDim
	iw := 2 * p.IndexerDim
	iqd := p.IndexerHeads * p.IndexerDim
	var w int
	ps := append(sc.ps[:0],
		backends.Product{Dst: sc.qa[:n*p.QLoraRank], W: l.QA, X: a, N: n},
		backends.Product{Dst: sc.kv[:n*p.HeadDim], W: l.KV, X: a, N: n})
	if l.Ratio != 0 {
		w = l.CompKV.Rows
		ps = append(ps,
			backends.Product{Dst: sc.ckv[:n*w], W: l.CompKV, X: a, N: n},
			backends.Product{Dst: sc.cgate[:n*w], W: l.CompGate, X: a, N: n})
	}
	// The indexer projections are needed only once more rows exist than
	// it keeps; computing them per chunk changes no result.
	indexer := l.Ratio == 4 && (pos0+n)/4 > p.IndexerTopK
	if l.Ratio == 4 {
		ps = append(ps,
			backends.Product{Dst: sc.ikv[:n*iw], W: l.IdxCompKV, X: a, N: n},
			backends.Product{Dst: sc.igate[:n*iw], W: l.IdxCompGate, X: a, N: n})
		if indexer {
			ps = append(ps, backends.Product{Dst: sc.iw[:n*p.IndexerHeads], W: l.IdxProj, X: a, N: n})
		}
	}
	be.MatMulBatch(ps)
	for i := range n {
		q := sc.qa[i*p.QLoraRank : (i+1)*p.QLoraRank]
		be.RMSNorm(q, q, l.QANorm, p.RMSEps)
	}
	ps = append(ps[:0], backends.Product{Dst: sc.q[:n*qd], W: l.QB, X: sc.qa[:n*p.QLoraRank], N: n})
	if indexer {
		ps = append(ps, backends.Product{Dst: sc.qi[:n*iqd], W: l.IdxQB, X: sc.qa[:n*p.QLoraRank], N: n})
	}
	be.MatMulBatch(ps)
	st := &s.layers[il]
	nope := p.HeadDim - p.RopeDim
	for i := range n {
		pos := pos0 + i
		q := sc.q[i*qd : (i+1)*qd]
		be.RMSNormHeads(q, p.HeadDim, p.RMSEps)
		be.RoPEHeads(q, p.HeadDim, nope, pos, l.Rope, false)
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
		be.RoPEHeads(sc.o[i*qd:(i+1)*qd], p.HeadDim, nope, pos, l.Rope, true)
	}
	// Grouped low-rank output: group g's heads go through rows
	// [g·OLora, (g+1)·OLora) of OutA only.
	// The groups are strided products over the chunk in one job, so OutA
	// is read once per chunk.
	gw := qd / p.OGroups
	low := p.OGroups * p.OLoraRank
	ps = ps[:0]
	for gi := range p.OGroups {
		ps = append(ps, backends.Product{Dst: sc.low[gi*p.OLoraRank : n*low], W: l.OutA.RowRange(gi*p.OLoraRank, (gi+1)*p.OLoraRank),
			X: sc.o[gi*gw : n*qd], N: n, XStride: qd, DstStride: low})
	}
	be.MatMulBatch(ps)
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

// compress is COMPRESS of docs/formats/model.md#compressor: it records token pos's projections in
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

// indexer is INDEXER of docs/formats/model.md#indexer for token i of the chunk: it returns the
// mask of compressed rows attention may visit, or nil for all of them.
func (s *Session) indexer(l *Layer, st *layerState, i, pos int) []bool {
	p, sc := s.m.Params, s.s
	nrows := st.icompLen
	if nrows <= p.IndexerTopK {
		return nil
	}
	iqd := p.IndexerHeads * p.IndexerDim
	qi := sc.qi[i*iqd : (i+1)*iqd]
	s.be.RoPEHeads(qi, p.IndexerDim, p.IndexerDim-p.RopeDim, pos, l.Rope, false)
	for h := range p.IndexerHeads {
		s.be.QAT(qi[h*p.IndexerDim : (h+1)*p.IndexerDim])
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

// attend is ATTEND of docs/formats/model.md#attend for one token: a softmax with a sink over
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
	s.be.Attend(out, q, rows, l.Sinks, s.m.kqScale())
}

// ffn runs the FFN sublayer (docs/formats/model.md#ffn) for a chunk of
// tokens; it fails only reading a streamed expert.
func (s *Session) ffn(il int, toks []int) error {
	m, p, sc, be := s.m, s.m.Params, s.s, s.be
	l := &m.Layers[il]
	n := len(toks)
	s.hcMixes(l.HCFFNFn, n)
	s.eachToken(stepFFNPre, l, n, 0)
	f := sc.a[:n*p.Embd]
	shared := p.ExpertFF * p.SharedExperts
	// The router and the shared expert's gate and up read the same
	// inputs: one parallel job and one quantization.
	be.MatMulBatch(append(sc.ps[:0],
		backends.Product{Dst: sc.logit[:n*p.Experts], W: l.GateInp, X: f, N: n},
		backends.Product{Dst: sc.sh[:n*shared], W: l.ShGate, X: f, N: n},
		backends.Product{Dst: sc.shu[:n*shared], W: l.ShUp, X: f, N: n}))
	clamp := p.SwigluClamp[il]
	be.SwiGLU(sc.sh[:n*shared], sc.sh[:n*shared], sc.shu[:n*shared], clamp, 1)
	k := p.ExpertsUsed
	for i, t := range toks {
		s.route(l, sc.logit[i*p.Experts:(i+1)*p.Experts], t, sc.sel[i*k:(i+1)*k], sc.wt[i*k:(i+1)*k])
	}
	s.groupSlots(n * k)
	// The shared expert's down projection lands in y (routed outputs are
	// added per token below); it runs in the same job as the routed
	// experts' gate and up products (the first group's, streaming).
	ps := append(sc.ps[:0], backends.Product{Dst: sc.y[:n*p.Embd], W: l.ShDown, X: sc.sh[:n*shared], N: n})
	d := p.Embd
	if s.m.experts != nil {
		if err := s.routedStreaming(il, l, f, ps, clamp); err != nil {
			return err
		}
		s.observeExperts(il, n, f)
	} else {
		s.routedMapped(l, f, n, ps, clamp)
		s.observeExperts(il, n, f)
		s.downMapped(l)
	}
	// Each token sums its experts in routing order, whatever the grouping,
	// so a chunk gives the same bits as decoding its tokens one by one.
	for i := range n {
		moe := sc.moe[:d]
		clear(moe)
		for slot := i * k; slot < (i+1)*k; slot++ {
			j := sc.posOf[slot]
			be.Add(moe, moe, sc.down[j*d:(j+1)*d])
		}
		y := sc.y[i*d : (i+1)*d]
		be.Add(y, moe, y)
	}
	s.capture(il, n, false)
	s.steer(il, n, false)
	s.hcPostAll(n)
	return nil
}

// expertInput returns the rows of f, the chunk's FFN inputs, of the
// tokens routed to expert e, in its grouped slot order: a lone token's row
// in place (so that the experts of a decode step share one quantized
// input), else the rows gathered into the scratch at e's first slot.
func (s *Session) expertInput(f []float32, e int) []float32 {
	sc, k, d := s.s, s.m.Params.ExpertsUsed, s.m.Params.Embd
	j, c := sc.first[e], sc.count[e]
	if c == 1 {
		i := sc.order[j] / k
		return f[i*d : (i+1)*d]
	}
	x := sc.xg[j*d : (j+c)*d]
	for q := range c {
		i := sc.order[j+q] / k
		copy(x[q*d:(q+1)*d], f[i*d:(i+1)*d])
	}
	return x
}

// usedExperts appends to ids, in expert order, the experts with a nonzero
// count, and returns it.
func usedExperts(ids []int, count []int) []int {
	for e, c := range count {
		if c != 0 {
			ids = append(ids, e)
		}
	}
	return ids
}

// routedMapped runs the gate and up products of the routed experts of the
// chunk's n tokens on the mapped weights, in one job with ps (the shared
// expert's down), then each slot's SwiGLU. Each expert multiplies all the
// chunk's tokens routed to it, so its weights are read once per chunk; an
// expert with one token reads that token's row of f in place, which lets
// all the experts of a decode step share one quantized input.
func (s *Session) routedMapped(l *Layer, f []float32, n int, ps []backends.Product, clamp float32) {
	p, sc, be := s.m.Params, s.s, s.be
	k, ff := p.ExpertsUsed, p.ExpertFF
	for e, c := range sc.count {
		if c == 0 {
			continue
		}
		j, x := sc.first[e], s.expertInput(f, e)
		ps = append(ps,
			backends.Product{Dst: sc.g[j*ff : (j+c)*ff], W: l.GateExps.Expert(e), X: x, N: c},
			backends.Product{Dst: sc.u[j*ff : (j+c)*ff], W: l.UpExps.Expert(e), X: x, N: c})
	}
	be.MatMulBatch(ps)
	s.eachToken(stepSwiGLU, l, n*k, clamp)
}

// downMapped runs the routed experts' down products on the mapped
// weights.
func (s *Session) downMapped(l *Layer) {
	p, sc := s.m.Params, s.s
	ff, d := p.ExpertFF, p.Embd
	ps := sc.ps[:0]
	for e, c := range sc.count {
		if c != 0 {
			j := sc.first[e]
			ps = append(ps, backends.Product{Dst: sc.down[j*d : (j+c)*d], W: l.DownExps.Expert(e), X: sc.mid[j*ff : (j+c)*ff], N: c})
		}
	}
	s.be.MatMulBatch(ps)
}

// observeExperts shows the expert observer, if any, each routed-expert
// evaluation of the chunk's n tokens, token by token in routing order.
func (s *Session) observeExperts(il, n int, f []float32) {
	if s.opt.Experts == nil {
		return
	}
	p, sc := s.m.Params, s.s
	k, ff, d := p.ExpertsUsed, p.ExpertFF, p.Embd
	for slot, e := range sc.sel[:n*k] {
		j := sc.posOf[slot]
		i := slot / k
		s.opt.Experts.ObserveExpert(il, e, f[i*d:(i+1)*d], sc.mid[j*ff:(j+1)*ff])
	}
}

// groupSlots sorts the routing slots [0, slots) (token i's k-th expert is
// slot i·ExpertsUsed+k) by expert, keeping slot order within an expert: a
// counting sort into sc.order, with sc.posOf its inverse and sc.count and
// sc.first each expert's run.
func (s *Session) groupSlots(slots int) {
	sc := s.s
	clear(sc.count)
	for _, e := range sc.sel[:slots] {
		sc.count[e]++
	}
	pos := 0
	for e, c := range sc.count {
		sc.first[e] = pos
		pos += c
	}
	// first is advanced while placing and restored after.
	for slot, e := range sc.sel[:slots] {
		j := sc.first[e]
		sc.order[j], sc.posOf[slot] = slot, j
		sc.first[e]++
	}
	for e, c := range sc.count {
		sc.first[e] -= c
	}
}

// route fills sel and wt with token t's experts and their weights
// (docs/formats/model.md#router) from the router logits lg.
func (s *Session) route(l *Layer, lg []float32, t int, sel []int, wt []float32) {
	p, sc := s.m.Params, s.s
	k := p.ExpertsUsed
	prob := sc.prob[:p.Experts]
	s.be.RouterProbs(prob, lg)
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
		wt[i] = (prob[e] / sum) * p.ExpertWeightsScale
	}
}
