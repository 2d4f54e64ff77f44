package engine

import (
	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/mmap"
)

// scratch holds the buffers of a forward pass over up to n rows; it is
// allocated once per session (and regrown for longer chunks or batches).
type scratch struct {
	n      int
	own    []*Session // n: each row's session (pass.own)
	pos    []int      // n: each row's position (pass.pos)
	logits []float32  // sessions × Vocab batched logits, grown by EvalBatch alone
	ident  []int      // n: 0, 1, ..., n−1, the rows head takes for a range
	toks   []int      // n: the tokens of an EvalBatch pass, session after session
	last   []int      // n: an EvalBatch pass's last row of each session
	X      []float32  // n × HC·Embd hyper-connection states
	flat   []float32  // n × HC·Embd normalized states
	mixes  []float32  // n × HCMix
	pre    []float32
	post   []float32 // n × HC
	comb   []float32 // n × HC²
	in     []float32 // n × Embd sublayer inputs
	a      []float32 // n × Embd normed inputs
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
	got    []bool               // which of them have arrived
	fresh  []int                // the indices of those that just arrived
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
	ident := make([]int, n)
	for i := range ident {
		ident[i] = i
	}
	return &scratch{
		n: n, own: make([]*Session, n), pos: make([]int, n), ident: ident, toks: make([]int, n), last: make([]int, n),
		X: f(n * hcd), flat: f(n * hcd), mixes: f(n * p.HCMix()),
		post: f(n * p.HC), comb: f(n * p.HC * p.HC),
		in: f(n * p.Embd), a: f(n * p.Embd), qa: f(n * p.QLoraRank),
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
		got: make([]bool, p.Experts), fresh: make([]int, 0, p.Experts),
	}
}

// pass is one forward pass over the n rows of its scratch: row i is token
// toks[i] of session own[i] at position pos[i]. The rows of a prefill
// chunk belong to one session at consecutive positions, those of a
// batched decode step (DecodeBatch) to n distinct sessions; a session's
// rows are contiguous and in position order. Every matrix product runs
// once over all n rows; the steps that touch a session's caches run row
// by row on that row's session. A session keeps its pass, whose scratch
// and workers' job are reused from step to step.
type pass struct {
	m    *Model
	be   backends.Backend
	sc   *scratch
	n    int
	toks []int
	own  []*Session
	pos  []int
	tw   tokenWork // the per-row steps' parallel job (tokens.go)
}

// begin readies f for the rows of toks on scratch sc (at least len(toks)
// rows); the caller fills f.own and f.pos.
func (f *pass) begin(m *Model, be backends.Backend, sc *scratch, toks []int) {
	f.m, f.be, f.sc, f.n, f.toks = m, be, sc, len(toks), toks
	f.own, f.pos = sc.own[:len(toks)], sc.pos[:len(toks)]
}

// end drops the pass's references to its sessions.
func (f *pass) end() { clear(f.own) }

// resetOwners resets every session of the pass, whose state a failed step
// left half-updated.
func (f *pass) resetOwners() {
	for i, s := range f.own {
		if i == 0 || s != f.own[i-1] {
			s.Reset()
		}
	}
}

// run embeds the rows' tokens and runs every layer over them, calling
// each session's layer hook (SetLayerHook) once after each layer; it
// fails only reading a streamed expert, the sessions then reset.
func (f *pass) run() error {
	p, sc := f.m.Params, f.sc
	hcd := p.HC * p.Embd
	for i, t := range f.toks {
		x := sc.X[i*hcd : (i+1)*hcd]
		if err := f.m.embed(x[:p.Embd], t); err != nil {
			return err
		}
		for h := 1; h < p.HC; h++ {
			copy(x[h*p.Embd:(h+1)*p.Embd], x[:p.Embd])
		}
	}
	if f.m.experts != nil && f.m.prefetch {
		f.prefetchHash()
	}
	for il := range f.m.Layers {
		if f.m.experts != nil && f.m.prefetch {
			f.prefetchRouted(il)
		}
		f.attention(il)
		if err := f.ffn(il); err != nil {
			// The pass's earlier layers are half-updated.
			f.resetOwners()
			return err
		}
		for i, s := range f.own {
			if s.layer != nil && (i == 0 || s != f.own[i-1]) {
				s.layer()
			}
		}
	}
	return nil
}

// head computes the logits of the pass's rows listed in rows into dst
// (len(rows)·Vocab floats, in the order of rows): the output head of
// docs/formats/model.md#output-head, its two projections one product over
// the rows.
func (f *pass) head(dst []float32, rows []int) {
	m, p, sc, be := f.m, f.m.Params, f.sc, f.be
	hcd := p.HC * p.Embd
	n := len(rows)
	for j, i := range rows {
		be.RMSNorm(sc.flat[j*hcd:(j+1)*hcd], sc.X[i*hcd:(i+1)*hcd], nil, p.RMSEps)
	}
	be.MatMul(sc.mixes[:n*p.HC], m.OutHCFn, sc.flat[:n*hcd], n)
	for j, i := range rows {
		e := sc.in[j*p.Embd : (j+1)*p.Embd]
		be.HCHead(e, sc.X[i*hcd:(i+1)*hcd], sc.mixes[j*p.HC:(j+1)*p.HC], m.OutHCScale, m.OutHCBase, p.HCEps)
		be.RMSNorm(e, e, m.OutNorm, p.RMSEps)
	}
	be.MatMul(dst[:n*p.Vocab], m.Output, sc.in[:n*p.Embd], n)
}

// hcMixes normalizes each row's HC state and projects it with fn,
// writing HCMix values per row into sc.mixes.
func (f *pass) hcMixes(fn backends.Matrix) {
	p, sc, n := f.m.Params, f.sc, f.n
	hcd := p.HC * p.Embd
	f.eachToken(stepHCNorm, nil, n, 0)
	f.be.MatMul(sc.mixes[:n*p.HCMix()], fn, sc.flat[:n*hcd], n)
}

// hcPostAll applies HC_POST to every row: X = y·post + comb·X.
func (f *pass) hcPostAll() {
	f.eachToken(stepHCPost, nil, f.n, 0)
}

// attention runs the attention sublayer (docs/formats/model.md#attention)
// over the pass's rows: batched projections, then the cache-touching part
// row by row (in position order within a session) on the row's session,
// then batched output projections.
func (f *pass) attention(il int) {
	m, p, sc, be, n := f.m, f.m.Params, f.sc, f.be, f.n
	l := &m.Layers[il]
	f.hcMixes(l.HCAttnFn)
	f.eachToken(stepAttnPre, l, n, 0)
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
	// The indexer projections are needed only once some row's session
	// has more rows than the indexer keeps; computing them for every row
	// changes no result.
	indexer := false
	for _, pos := range f.pos {
		indexer = indexer || (l.Ratio == 4 && (pos+1)/4 > p.IndexerTopK)
	}
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
	nope := p.HeadDim - p.RopeDim
	for i := range n {
		s, pos := f.own[i], f.pos[i]
		st := &s.layers[il]
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
			if c := f.compress(l, st.skv, st.ssc, l.CompAPE, l.CompNorm, sc.ckv[i*w:(i+1)*w], sc.cgate[i*w:(i+1)*w], p.HeadDim, pos, false); c != nil {
				s.pushRow(st.comp, &st.compLen, p.HeadDim, c)
			}
			if l.Ratio == 4 {
				if c := f.compress(l, st.iskv, st.issc, l.IdxCompAPE, l.IdxCompNorm, sc.ikv[i*iw:(i+1)*iw], sc.igate[i*iw:(i+1)*iw], p.IndexerDim, pos, true); c != nil {
					s.pushRow(st.icomp, &st.icompLen, p.IndexerDim, c)
				}
				mask = f.indexer(l, st, i, pos)
			}
		}
		f.attend(l, s, st, sc.o[i*qd:(i+1)*qd], q, mask)
		be.RoPEHeads(sc.o[i*qd:(i+1)*qd], p.HeadDim, nope, pos, l.Rope, true)
	}
	// Grouped low-rank output: group g's heads go through rows
	// [g·OLora, (g+1)·OLora) of OutA only.
	// The groups are strided products over the rows in one job, so OutA
	// is read once per pass.
	gw := qd / p.OGroups
	low := p.OGroups * p.OLoraRank
	ps = ps[:0]
	for gi := range p.OGroups {
		ps = append(ps, backends.Product{Dst: sc.low[gi*p.OLoraRank : n*low], W: l.OutA.RowRange(gi*p.OLoraRank, (gi+1)*p.OLoraRank),
			X: sc.o[gi*gw : n*qd], N: n, XStride: qd, DstStride: low})
	}
	be.MatMulBatch(ps)
	be.MatMul(sc.y[:n*p.Embd], l.OutB, sc.low[:n*low], n)
	f.capture(il, true)
	f.steer(il, true)
	f.hcPostAll()
}

// hc returns the hyper-connection constants of a sublayer.
func (f *pass) hc(scale, base []float32) backends.HC {
	p := f.m.Params
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

// compress is COMPRESS of docs/formats/model.md#compressor: it records the projections of
// the token at pos in the compressor state and, when pos closes a window,
// returns the pooled, normalized, rotated and FP8/FP4-simulated row (in
// sc.pooled), else nil.
func (f *pass) compress(l *Layer, skv, ssc, ape, norm, kvc, scc []float32, d, pos int, indexer bool) []float32 {
	p := f.m.Params
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
	out := f.sc.pooled[:d]
	f.be.CompressPool(out, skv, ssc, r, w)
	f.be.RMSNorm(out, out, norm, p.RMSEps)
	f.be.RoPE(out[d-p.RopeDim:], pos+1-r, l.Rope, false)
	if indexer {
		f.be.QAT(out)
	} else {
		f.be.FP8Sim(out[:d-p.RopeDim])
	}
	if r == 4 {
		copy(skv[:4*w], skv[4*w:8*w])
		copy(ssc[:4*w], ssc[4*w:8*w])
	}
	return out
}

// indexer is INDEXER of docs/formats/model.md#indexer for row i of the pass, whose session's
// layer state is st: it returns the mask of compressed rows attention may
// visit, or nil for all of them.
func (f *pass) indexer(l *Layer, st *layerState, i, pos int) []bool {
	p, sc := f.m.Params, f.sc
	nrows := st.icompLen
	if nrows <= p.IndexerTopK {
		return nil
	}
	iqd := p.IndexerHeads * p.IndexerDim
	qi := sc.qi[i*iqd : (i+1)*iqd]
	f.be.RoPEHeads(qi, p.IndexerDim, p.IndexerDim-p.RopeDim, pos, l.Rope, false)
	for h := range p.IndexerHeads {
		f.be.QAT(qi[h*p.IndexerDim : (h+1)*p.IndexerDim])
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
	f.be.IndexerScores(scores, st.icomp[:nrows*p.IndexerDim], qi, w, p.IndexerDim)
	f.be.TopK(mask, scores, p.IndexerTopK)
	return mask
}

// attend is ATTEND of docs/formats/model.md#attend for one row of session s: a softmax with a
// sink over the raw window (oldest first) and the visible compressed rows.
func (f *pass) attend(l *Layer, s *Session, st *layerState, out, q []float32, mask []bool) {
	p, sc := f.m.Params, f.sc
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
	f.be.Attend(out, q, rows, l.Sinks, f.m.kqScale())
}

// ffn runs the FFN sublayer (docs/formats/model.md#ffn) over the pass's
// rows, the routed experts grouped across all of them; it fails only
// reading a streamed expert.
func (f *pass) ffn(il int) error {
	m, p, sc, be, n := f.m, f.m.Params, f.sc, f.be, f.n
	l := &m.Layers[il]
	f.hcMixes(l.HCFFNFn)
	f.eachToken(stepFFNPre, l, n, 0)
	in := sc.a[:n*p.Embd]
	shared := p.ExpertFF * p.SharedExperts
	// The router and the shared expert's gate and up read the same
	// inputs: one parallel job and one quantization.
	be.MatMulBatch(append(sc.ps[:0],
		backends.Product{Dst: sc.logit[:n*p.Experts], W: l.GateInp, X: in, N: n},
		backends.Product{Dst: sc.sh[:n*shared], W: l.ShGate, X: in, N: n},
		backends.Product{Dst: sc.shu[:n*shared], W: l.ShUp, X: in, N: n}))
	clamp := p.SwigluClamp[il]
	be.SwiGLU(sc.sh[:n*shared], sc.sh[:n*shared], sc.shu[:n*shared], clamp, 1)
	k := p.ExpertsUsed
	for i, t := range f.toks {
		f.route(l, sc.logit[i*p.Experts:(i+1)*p.Experts], t, sc.sel[i*k:(i+1)*k], sc.wt[i*k:(i+1)*k])
	}
	f.groupSlots(n * k)
	// The shared expert's down projection lands in y (routed outputs are
	// added per row below); it runs in the same job as the routed
	// experts' gate and up products (the first group's, streaming).
	ps := append(sc.ps[:0], backends.Product{Dst: sc.y[:n*p.Embd], W: l.ShDown, X: sc.sh[:n*shared], N: n})
	d := p.Embd
	if f.m.experts != nil {
		if err := f.routedStreaming(il, l, in, ps, clamp); err != nil {
			return err
		}
		f.observeExperts(il, in)
	} else {
		f.routedMapped(l, in, ps, clamp)
		f.observeExperts(il, in)
		f.downMapped(l)
	}
	// Each row sums its experts in routing order, whatever the grouping,
	// so a pass gives the same bits as decoding its tokens one by one.
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
	f.capture(il, false)
	f.steer(il, false)
	f.hcPostAll()
	return nil
}

// expertInput returns the rows of in, the pass's FFN inputs, routed to
// expert e, in its grouped slot order: a lone row in place (so that the
// experts of a decode step share one quantized input), else the rows
// gathered into the scratch at e's first slot.
func (f *pass) expertInput(in []float32, e int) []float32 {
	sc, k, d := f.sc, f.m.Params.ExpertsUsed, f.m.Params.Embd
	j, c := sc.first[e], sc.count[e]
	if c == 1 {
		i := sc.order[j] / k
		return in[i*d : (i+1)*d]
	}
	x := sc.xg[j*d : (j+c)*d]
	for q := range c {
		i := sc.order[j+q] / k
		copy(x[q*d:(q+1)*d], in[i*d:(i+1)*d])
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
// pass's rows on the mapped weights, in one job with ps (the shared
// expert's down), then each slot's SwiGLU. Each expert multiplies all the
// rows routed to it, so its weights are read once per pass; an expert
// with one row reads that row of in in place, which lets all the experts
// of a decode step share one quantized input.
func (f *pass) routedMapped(l *Layer, in []float32, ps []backends.Product, clamp float32) {
	p, sc, be := f.m.Params, f.sc, f.be
	k, ff := p.ExpertsUsed, p.ExpertFF
	for e, c := range sc.count {
		if c == 0 {
			continue
		}
		j, x := sc.first[e], f.expertInput(in, e)
		ps = append(ps,
			backends.Product{Dst: sc.g[j*ff : (j+c)*ff], W: l.GateExps.Expert(e), X: x, N: c},
			backends.Product{Dst: sc.u[j*ff : (j+c)*ff], W: l.UpExps.Expert(e), X: x, N: c})
	}
	be.MatMulBatch(ps)
	f.eachToken(stepSwiGLU, l, f.n*k, clamp)
}

// downMapped runs the routed experts' down products on the mapped
// weights.
func (f *pass) downMapped(l *Layer) {
	p, sc := f.m.Params, f.sc
	ff, d := p.ExpertFF, p.Embd
	ps := sc.ps[:0]
	for e, c := range sc.count {
		if c != 0 {
			j := sc.first[e]
			ps = append(ps, backends.Product{Dst: sc.down[j*d : (j+c)*d], W: l.DownExps.Expert(e), X: sc.mid[j*ff : (j+c)*ff], N: c})
		}
	}
	f.be.MatMulBatch(ps)
}

// observeExperts shows each row's session's expert observer, if any, the
// row's routed-expert evaluations in routing order.
func (f *pass) observeExperts(il int, in []float32) {
	p, sc := f.m.Params, f.sc
	k, ff, d := p.ExpertsUsed, p.ExpertFF, p.Embd
	for i, s := range f.own {
		if s.opt.Experts == nil {
			continue
		}
		for slot := i * k; slot < (i+1)*k; slot++ {
			j := sc.posOf[slot]
			s.opt.Experts.ObserveExpert(il, sc.sel[slot], in[i*d:(i+1)*d], sc.mid[j*ff:(j+1)*ff])
		}
	}
}

// groupSlots sorts the routing slots [0, slots) (row i's k-th expert is
// slot i·ExpertsUsed+k) by expert, keeping slot order within an expert: a
// counting sort into sc.order, with sc.posOf its inverse and sc.count and
// sc.first each expert's run.
func (f *pass) groupSlots(slots int) {
	sc := f.sc
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
func (f *pass) route(l *Layer, lg []float32, t int, sel []int, wt []float32) {
	p, sc := f.m.Params, f.sc
	k := p.ExpertsUsed
	prob := sc.prob[:p.Experts]
	f.be.RouterProbs(prob, lg)
	if l.Tid2Eid != nil {
		for i := range k {
			sel[i] = int(l.Tid2Eid[t*k+i])
		}
	} else {
		f.be.SelectExperts(sel, prob, l.ExpBias)
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
