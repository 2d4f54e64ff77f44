package engine

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine/layout"
)

// Numerics selects the rounding points that differ between upstream ds4
// and DeepSeek's reference implementation.
type Numerics int

const (
	// NumericsDS4 matches upstream ds4's CPU path: cached KV rows are
	// rounded to f16 (its cache stores f16).
	NumericsDS4 Numerics = iota
	// NumericsOfficial matches DeepSeek's reference: cached rows keep
	// float32 after the FP8/FP4 simulations.
	NumericsOfficial
)

// Options configure a session.
type Options struct {
	Context  int // context size in tokens; 0 means 4096
	Numerics Numerics
	Steering *Steering      // directional steering; nil means none
	Capture  *Capture       // sublayer output capture; nil means none
	Experts  ExpertObserver // sees each routed-expert evaluation; nil means none
	// Workspace, when set, holds the session's scratch buffers, shared
	// with the other sessions made with it; nil means buffers of its own.
	Workspace *Workspace
}

// Workspace holds the scratch buffers evaluations run in. Sessions made
// with one Workspace (Options.Workspace) share them, so that sessions
// which take turns, a server's slots, hold one set between them instead
// of one each (ScratchMemory: about 0.9 GB for a Flash prefill chunk);
// such sessions must never evaluate at the same time, DecodeBatch over
// several of them being one evaluation.
type Workspace struct {
	m *Model
	s *scratch
	f pass // the forward pass over s, reused from step to step
}

// NewWorkspace returns a workspace for sessions of m; its buffers grow to
// the largest evaluation run in it.
func NewWorkspace(m *Model) *Workspace {
	return &Workspace{m: m, s: newScratch(m.Params, 1)}
}

// ErrContextFull is returned when a token would not fit in the context.
var ErrContextFull = errors.New("engine: context is full")

// layerState is the per-layer inference state of docs/formats/model.md#inference-state.
type layerState struct {
	raw      []float32 // ring of rawCap rows × HeadDim
	rawStart int       // index of the oldest row
	rawLen   int
	comp     []float32 // compressed rows × HeadDim
	compLen  int
	skv, ssc []float32 // attention compressor slots × W
	icomp    []float32 // indexer compressed rows × IndexerDim
	icompLen int
	iskv     []float32 // indexer compressor slots × 2·IndexerDim
	issc     []float32
}

// Session is one inference timeline over a model: the token history, the
// per-layer caches and the logits of the last token. It is not safe for
// concurrent use. A step that faults reading the model's mapping (the file
// truncated under the process) returns an error wrapping ErrModelFault,
// and one that cannot read a streamed expert (Model.Stream) an error
// wrapping ErrExpertRead; either leaves the session reset.
type Session struct {
	m      *Model
	be     backends.Backend
	opt    Options
	rawCap int
	tokens []int
	layers []layerState
	logits []float32
	ws     *Workspace
	one    [1]int // Decode's token, so decoding allocates nothing
	chunk  int    // tokens per prefill chunk (PrefillChunk; benchmarks vary it)
	layer  func() // SetLayerHook's function, or nil
	// epoch counts the times the state was replaced rather than extended
	// (Reset, Restore, Rewind, a payload read), which voids earlier
	// checkpoints.
	epoch int

	// observeSteer, when set (by tests), sees each sublayer output row
	// before and after a steering edit.
	observeSteer func(il int, attn, after bool, y []float32)
}

// stateSize is the number of float32 values in each buffer of one layer's
// state: slots is the size of skv and of ssc, islots of iskv and of issc.
type stateSize struct {
	rawRows, compRows int
	raw, comp, slots  int
	icomp, islots     int
}

// layerStateSize returns the buffer sizes of layer il's state in a
// context of ctx tokens: a ring of window rows; with compression, the
// compressed rows and the compressor's slots (a ratio-4 layer overlaps two
// windows of 4 slots of twice the head width, and adds the indexer's).
func layerStateSize(p layout.Params, il, ctx int) stateSize {
	z := stateSize{rawRows: min(p.Window, ctx)}
	z.raw = z.rawRows * p.HeadDim
	switch r := p.Ratio(il); r {
	case 0:
	case 4:
		z.compRows = ctx/4 + 2
		z.comp, z.slots = z.compRows*p.HeadDim, 8*2*p.HeadDim
		z.icomp, z.islots = z.compRows*p.IndexerDim, 8*2*p.IndexerDim
	default:
		z.compRows = ctx/r + 2
		z.comp, z.slots = z.compRows*p.HeadDim, r*p.HeadDim
	}
	return z
}

// ContextMemory returns the bytes of the caches and compressor state that
// NewSession allocates for a context of ctx tokens, the raw (window) rows
// of each layer and the compressed rows of a ratio-4 layer (0 if none).
func ContextMemory(p layout.Params, ctx int) (bytes int64, rawRows, compRows int) {
	rawRows = min(p.Window, ctx)
	for il := range p.Layers {
		z := layerStateSize(p, il, ctx)
		bytes += 4 * int64(z.raw+z.comp+2*z.slots+z.icomp+2*z.islots)
		if p.Ratio(il) == 4 {
			compRows = z.compRows
		}
	}
	return bytes, rawRows, compRows
}

// NewSession allocates a session's state and scratch buffers for the
// given context size.
func NewSession(m *Model, be backends.Backend, opt Options) (*Session, error) {
	p := m.Params
	if opt.Context <= 0 {
		opt.Context = 4096
	}
	if opt.Context > p.ContextLength && p.ContextLength > 0 {
		return nil, fmt.Errorf("engine: context %d exceeds the model's %d", opt.Context, p.ContextLength)
	}
	if opt.Steering != nil {
		if err := opt.Steering.Validate(p); err != nil {
			return nil, err
		}
	}
	if opt.Workspace != nil && opt.Workspace.m != m {
		return nil, errors.New("engine: the workspace is another model's")
	}
	if opt.Capture != nil {
		if err := opt.Capture.prepare(p.Layers, p.Embd); err != nil {
			return nil, err
		}
	}
	s := &Session{m: m, be: be, opt: opt, rawCap: min(p.Window, opt.Context), tokens: make([]int, 0, opt.Context), chunk: PrefillChunk}
	s.layers = make([]layerState, p.Layers)
	for il := range s.layers {
		st, z := &s.layers[il], layerStateSize(p, il, opt.Context)
		st.raw = make([]float32, z.raw)
		if z.comp > 0 {
			st.comp = make([]float32, z.comp)
			st.skv = make([]float32, z.slots)
			st.ssc = make([]float32, z.slots)
		}
		if z.icomp > 0 {
			st.icomp = make([]float32, z.icomp)
			st.iskv = make([]float32, z.islots)
			st.issc = make([]float32, z.islots)
		}
	}
	s.resetStates()
	s.logits = make([]float32, p.Vocab)
	s.ws = opt.Workspace
	if s.ws == nil {
		s.ws = NewWorkspace(m)
	}
	return s, nil
}

// resetStates clears every cache and compressor state.
func (s *Session) resetStates() {
	for il := range s.layers {
		st := &s.layers[il]
		st.rawStart, st.rawLen, st.compLen, st.icompLen = 0, 0, 0, 0
		clear(st.skv)
		clear(st.iskv)
		fill(st.ssc, negInf)
		fill(st.issc, negInf)
	}
	s.tokens = s.tokens[:0]
	s.epoch++
}

// Reset empties the session.
func (s *Session) Reset() { s.resetStates(); clear(s.logits) }

// Pos returns the number of tokens evaluated so far.
func (s *Session) Pos() int { return len(s.tokens) }

// Tokens returns the evaluated tokens (owned by the session).
func (s *Session) Tokens() []int { return s.tokens }

// Context returns the context size.
func (s *Session) Context() int { return s.opt.Context }

// Logits returns the logits after the last evaluated token (owned by the
// session, overwritten by the next step).
func (s *Session) Logits() []float32 { return s.logits }

// Decode evaluates one token at the next position.
func (s *Session) Decode(token int) error {
	s.one[0] = token
	return s.forward(s.one[:], nil)
}

// SetLayerHook makes the session call f after each layer of each chunk it
// evaluates, f == nil to stop. A chunk of PrefillChunk tokens takes long
// on a large model; the server sends its keep-alives from f. f must not
// use the session.
func (s *Session) SetLayerHook(f func()) { s.layer = f }

// Prefill evaluates tokens at the next positions, layer by layer, and
// leaves the logits of the last one. The result is bit-identical to
// decoding the tokens one at a time.
func (s *Session) Prefill(tokens []int) error {
	return s.forward(tokens, nil)
}

// PrefillAll is Prefill that also stores the logits of every token into
// all (len(tokens)·vocab floats).
func (s *Session) PrefillAll(tokens []int, all []float32) error {
	if len(all) != len(tokens)*s.m.Params.Vocab {
		return fmt.Errorf("engine: logits buffer of %d floats for %d tokens", len(all), len(tokens))
	}
	return s.forward(tokens, all)
}

// negInf is the reference's "minus infinity" sentinel for empty slots.
const negInf = -1.0e30

func fill(x []float32, v float32) {
	for i := range x {
		x[i] = v
	}
}

// PrefillChunk is the number of tokens Prefill processes together. Each
// chunk packs the rows of every expert some token of it is routed to for
// the tile kernels, once, so a larger chunk spreads each pack over more
// tokens; past about 1024 tokens the packs' savings are outweighed by
// buffers that leave the caches (the tile scatter, the activations'
// quantization). Upstream prefills 2048 at a time. The scratch buffers
// take about 0.9 MB per token on Flash, 920 MB a chunk, which a session's
// first long prompt faults in. The measurements behind the choice are in
// docs/performance.md#prefill-chunk.
const PrefillChunk = 1024

func (s *Session) forward(tokens []int, all []float32) (err error) {
	if len(tokens) == 0 {
		return nil
	}
	// A fault reading the weights (a mapped file truncated under the
	// process) becomes an error; see guard.
	defer s.guard(&err, debug.SetPanicOnFault(true))
	if len(s.tokens)+len(tokens) > s.opt.Context {
		return fmt.Errorf("%w: %d + %d tokens exceed %d", ErrContextFull, len(s.tokens), len(tokens), s.opt.Context)
	}
	for _, t := range tokens {
		if err := s.m.checkToken(t); err != nil {
			return err
		}
	}
	p := s.m.Params
	for start := 0; start < len(tokens); start += s.chunk {
		toks := tokens[start:min(len(tokens), start+s.chunk)]
		n := len(toks)
		ws := s.ws
		if ws.s.n < n {
			ws.s = newScratch(p, n)
		}
		f := &ws.f
		f.begin(s.m, s.be, ws.s, toks)
		for i := range f.own {
			f.own[i], f.pos[i] = s, len(s.tokens)+i
		}
		if err := f.run(); err != nil {
			return err
		}
		s.tokens = append(s.tokens, toks...)
		if all != nil {
			f.head(all[start*p.Vocab:(start+n)*p.Vocab], ws.s.ident[:n])
		} else if start+n == len(tokens) {
			f.head(s.logits, ws.s.ident[n-1:n])
		}
	}
	if all != nil {
		copy(s.logits, all[(len(tokens)-1)*p.Vocab:])
	}
	return nil
}

// checkToken reports whether t is outside the vocabulary.
func (m *Model) checkToken(t int) error {
	if t < 0 || t >= m.Params.Vocab {
		return fmt.Errorf("engine: token %d outside the vocabulary (%d)", t, m.Params.Vocab)
	}
	return nil
}
