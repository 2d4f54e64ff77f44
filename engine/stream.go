package engine

import (
	"errors"
	"fmt"
	"os"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine/expertcache"
)

// StreamOptions configure SSD streaming of a model's routed experts.
type StreamOptions struct {
	Slots  int                // experts the cache holds, at least 1; more than the model has counts as all
	Direct bool               // read with O_DIRECT where the file system allows it
	Policy expertcache.Policy // eviction policy; the zero value is expertcache.Layered
	// Readers is how many reads of prefetched experts run at once, and of
	// one Request's misses; 0 means the cache's default.
	Readers int
	// NoPrefetch turns off reading experts ahead of their turn: the hash
	// layers', which the token ids name, at the start of each pass, and
	// the routed layers', which each layer's router guesses from the
	// layer's input before its attention runs.
	NoPrefetch bool
}

// ErrExpertRead reports that a step could not read a routed expert from
// the model file while streaming (the file was truncated or changed, or
// its disk failed); the session is reset and the model stays usable.
var ErrExpertRead = errors.New("engine: reading a routed expert from the model file")

// Stream switches the model, opened from the GGUF at path, to SSD
// streaming: from then on the forward pass reads the routed experts
// (every layer's GateExps, UpExps and DownExps) through an expert cache
// of opt.Slots slots filled from the file, never from the model's
// buffer. Call it before any session steps; closing the model's File
// closes the cache.
func (m *Model) Stream(path string, opt StreamOptions) error {
	if m.experts != nil {
		return errors.New("engine: the model already streams its experts")
	}
	if m.File == nil {
		return errors.New("engine: streaming needs the model's GGUF")
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if st.Size() != m.File.Size() {
		return fmt.Errorf("engine: %s is %d bytes, the model's file %d: not the file it was opened from", path, st.Size(), m.File.Size())
	}
	layers, total, err := m.ExpertLayers()
	if err != nil {
		return err
	}
	slots := min(opt.Slots, total)
	c, err := expertcache.Open(path, layers, expertcache.Options{Slots: slots, Direct: opt.Direct, Policy: opt.Policy, Readers: opt.Readers})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	m.experts, m.expertSlots, m.prefetch = c, slots, !opt.NoPrefetch
	m.File.AtClose(m.closeExperts)
	return nil
}

// ExpertCache returns the cache the model streams its routed experts
// through, nil when it does not stream.
func (m *Model) ExpertCache() *expertcache.Cache { return m.experts }

// closeExperts closes the expert cache when the model's file closes.
func (m *Model) closeExperts() error {
	if m.experts == nil {
		return nil
	}
	err := m.experts.Close()
	m.experts = nil
	return err
}

// ExpertLayers returns where each layer's routed experts lie in the
// model's file, as the expert cache takes them (expertcache.SlotBytes of
// it is the size of one slot), and the number of experts of all layers.
func (m *Model) ExpertLayers() ([]expertcache.Layer, int, error) {
	layers := make([]expertcache.Layer, len(m.Layers))
	total := 0
	for il := range m.Layers {
		l := &m.Layers[il]
		var spans [3]expertcache.Span
		for i, w := range []backends.Matrix{l.GateExps, l.UpExps, l.DownExps} {
			t, ok := m.File.Tensor(w.Name)
			if !ok {
				return nil, 0, fmt.Errorf("engine: tensor %s: missing", w.Name)
			}
			if w.Experts != l.GateExps.Experts {
				return nil, 0, fmt.Errorf("engine: tensor %s: %d experts, gate has %d", w.Name, w.Experts, l.GateExps.Experts)
			}
			spans[i] = expertcache.Span{Offset: int64(m.File.DataOffset + t.Offset), Bytes: int64(w.Rows * w.RowBytes)}
		}
		layers[il] = expertcache.Layer{Gate: spans[0], Up: spans[1], Down: spans[2], Experts: l.GateExps.Experts}
		total += l.GateExps.Experts
	}
	return layers, total, nil
}

// prefetchHash asks the expert cache to read ahead the experts the hash
// layers will route the pass's tokens to: they depend on the token ids
// alone.
func (f *pass) prefetchHash() {
	p, sc := f.m.Params, f.sc
	k := p.ExpertsUsed
	for il := range f.m.Layers {
		l := &f.m.Layers[il]
		if l.Tid2Eid == nil {
			continue
		}
		// count marks the experts needed (groupSlots clears it later);
		// they are listed in expert order, the order of the layer's groups,
		// so that a cache smaller than the chunk's experts prefetches the
		// first group.
		clear(sc.count)
		for _, t := range f.toks {
			for _, e := range l.Tid2Eid[t*k : (t+1)*k] {
				sc.count[e] = 1
			}
		}
		f.m.experts.Prefetch(il, usedExperts(sc.ids[:0], sc.count))
	}
}

// expertView is w's one-expert matrix over the bytes b of a cache slot.
func expertView(w backends.Matrix, b []byte) backends.Matrix {
	w.Experts = 1
	w.Data = b
	return w
}

// routedStreaming runs the routed experts of layer il for the pass's
// n·k slots grouped by expert (sc.count, sc.first, sc.order) on the
// expert cache, in groups of at most the cache's slots. Each group's
// experts are requested at once and run as they arrive, the resident
// ones first: the gate and up products of those that arrived together
// (the first job also carries ps, the shared expert's down), their
// SwiGLU and down products, on the slots' bytes; the group is released
// after its last. Every product and every slot's SwiGLU is the mapped
// path's over the same bytes, and each token sums its experts' outputs
// later in routing order, so the results are the same bits.
func (f *pass) routedStreaming(il int, l *Layer, in []float32, ps []backends.Product, clamp float32) error {
	p, sc, be, c := f.m.Params, f.sc, f.be, f.m.experts
	ff, d := p.ExpertFF, p.Embd
	ids := usedExperts(sc.ids[:0], sc.count)
	for g0 := 0; g0 < len(ids); g0 += f.m.expertSlots {
		grp := ids[g0:min(len(ids), g0+f.m.expertSlots)]
		views, got := sc.views[:len(grp)], sc.got[:len(grp)]
		clear(got)
		if err := c.Request(il, grp); err != nil {
			return fmt.Errorf("%w: %w", ErrExpertRead, err)
		}
		for left := len(grp); left > 0; {
			fresh, err := c.Arrived(il, grp, views, got, sc.fresh[:0])
			if err != nil {
				return fmt.Errorf("%w: %w", ErrExpertRead, err)
			}
			left -= len(fresh)
			for _, gi := range fresh {
				e := grp[gi]
				j, n, x := sc.first[e], sc.count[e], f.expertInput(in, e)
				ps = append(ps,
					backends.Product{Dst: sc.g[j*ff : (j+n)*ff], W: expertView(l.GateExps, views[gi].Gate), X: x, N: n},
					backends.Product{Dst: sc.u[j*ff : (j+n)*ff], W: expertView(l.UpExps, views[gi].Up), X: x, N: n})
			}
			be.MatMulBatch(ps)
			// Experts next to each other in the group have their slots
			// next to each other: one SwiGLU job for each run of them.
			for k := 0; k < len(fresh); {
				lo := sc.first[grp[fresh[k]]]
				hi := lo + sc.count[grp[fresh[k]]]
				for k++; k < len(fresh) && fresh[k] == fresh[k-1]+1; k++ {
					hi += sc.count[grp[fresh[k]]]
				}
				f.eachTokenFrom(stepSwiGLU, l, lo, hi-lo, clamp)
			}
			ps = ps[:0]
			for _, gi := range fresh {
				e := grp[gi]
				j, n := sc.first[e], sc.count[e]
				ps = append(ps, backends.Product{Dst: sc.down[j*d : (j+n)*d], W: expertView(l.DownExps, views[gi].Down), X: sc.mid[j*ff : (j+n)*ff], N: n})
			}
			be.MatMulBatch(ps)
			ps = ps[:0]
		}
		c.Release(il, grp)
	}
	return nil
}

// prefetchRouted asks the expert cache to read ahead the experts layer
// il's router would choose for the pass's rows if its FFN ran on their
// present state: the layer's input, before its attention has added to it.
// The guess costs two small products (the FFN's HC mix and the router)
// and is only a hint: the layer's Request still asks for what the router
// chooses after the attention.
func (f *pass) prefetchRouted(il int) {
	m, p, sc, n := f.m, f.m.Params, f.sc, f.n
	l := &m.Layers[il]
	if l.Tid2Eid != nil {
		return
	}
	f.hcMixes(l.HCFFNFn)
	f.eachToken(stepFFNPre, l, n, 0)
	f.be.MatMul(sc.logit[:n*p.Experts], l.GateInp, sc.a[:n*p.Embd], n)
	k := p.ExpertsUsed
	clear(sc.count)
	for i, t := range f.toks {
		// The FFN routes again, over these buffers, with its own input.
		f.route(l, sc.logit[i*p.Experts:(i+1)*p.Experts], t, sc.sel[i*k:(i+1)*k], sc.wt[i*k:(i+1)*k])
		for _, e := range sc.sel[i*k : (i+1)*k] {
			sc.count[e] = 1
		}
	}
	m.experts.Prefetch(il, usedExperts(sc.ids[:0], sc.count))
}
