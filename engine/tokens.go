package engine

// A prefill chunk's per-token steps between the matrix products (the
// hyper-connection mixes, norms and the SwiGLU of each routed slot) are
// independent across tokens. Run on the caller alone they were about a
// fifth of a 256-token chunk's time with the other cores idle, so they
// go through the backend's workers, one task per token. Each task writes
// only its own token's rows, so the results are the same bits in any
// order, and a decode step (one token) runs them inline without
// touching the workers.

// tokenStep names one per-token step.
type tokenStep int

const (
	stepHCNorm  tokenStep = iota // RMS-normalize a token's HC state into flat (hcMixes)
	stepAttnPre                  // HC_PRE and the attention norm
	stepFFNPre                   // HC_PRE and the FFN norm
	stepHCPost                   // HC_POST, X = y·post + comb·X
	stepSwiGLU                   // SwiGLU of one routed slot, in grouped order
)

// tokenWork is a pass's one reusable parallel job over its rows (or
// routed slots); a pointer to it is the backends.Task, so running it
// allocates nothing.
type tokenWork struct {
	f     *pass
	l     *Layer
	step  tokenStep
	clamp float32 // stepSwiGLU's clamp
	lo    int     // the first token (or slot) of the job
}

// Run runs the step for token (or slot) lo+i.
func (w *tokenWork) Run(i int) { w.f.runStep(w, w.lo+i) }

// eachToken runs step for i in [0, n): in order here for a single token,
// else on the backend's workers.
func (f *pass) eachToken(step tokenStep, l *Layer, n int, clamp float32) {
	f.eachTokenFrom(step, l, 0, n, clamp)
}

// eachTokenFrom is eachToken for i in [lo, lo+n).
func (f *pass) eachTokenFrom(step tokenStep, l *Layer, lo, n int, clamp float32) {
	w := &f.tw
	w.f, w.l, w.step, w.clamp, w.lo = f, l, step, clamp, lo
	if n == 1 {
		f.runStep(w, lo)
		return
	}
	f.be.Parallel(n, w)
}

// runStep runs w's step for token (or slot) i.
func (f *pass) runStep(w *tokenWork, i int) {
	p, sc, be, l := f.m.Params, f.sc, f.be, w.l
	hcd, mix := p.HC*p.Embd, p.HCMix()
	switch w.step {
	case stepHCNorm:
		be.RMSNorm(sc.flat[i*hcd:(i+1)*hcd], sc.X[i*hcd:(i+1)*hcd], nil, p.RMSEps)
	case stepAttnPre, stepFFNPre:
		scale, base, norm := l.HCAttnScale, l.HCAttnBase, l.AttnNorm
		if w.step == stepFFNPre {
			scale, base, norm = l.HCFFNScale, l.HCFFNBase, l.FFNNorm
		}
		be.HCPre(sc.in[i*p.Embd:(i+1)*p.Embd], sc.post[i*p.HC:(i+1)*p.HC], sc.comb[i*p.HC*p.HC:(i+1)*p.HC*p.HC],
			sc.X[i*hcd:(i+1)*hcd], sc.mixes[i*mix:(i+1)*mix], f.hc(scale, base))
		be.RMSNorm(sc.a[i*p.Embd:(i+1)*p.Embd], sc.in[i*p.Embd:(i+1)*p.Embd], norm, p.RMSEps)
	case stepHCPost:
		// flat is free once the mixes are computed: token i's rows of it
		// hold its new state until it replaces the old.
		x, tmp := sc.X[i*hcd:(i+1)*hcd], sc.flat[i*hcd:(i+1)*hcd]
		be.HCPost(tmp, x, sc.y[i*p.Embd:(i+1)*p.Embd], sc.post[i*p.HC:(i+1)*p.HC], sc.comb[i*p.HC*p.HC:(i+1)*p.HC*p.HC], p.HC)
		copy(x, tmp)
	case stepSwiGLU:
		ff := p.ExpertFF
		be.SwiGLU(sc.mid[i*ff:(i+1)*ff], sc.g[i*ff:(i+1)*ff], sc.u[i*ff:(i+1)*ff], w.clamp, sc.wt[sc.order[i]])
	}
}
