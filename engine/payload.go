package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/quant"
)

// Session payload versions. A payload is the engine-owned serialization
// of a session (docs/formats/kvcache.md#session-payload); the disk cache wraps it in a file.
//
// PayloadV1 is upstream ds4's layout, byte for byte: thirteen u32 header
// fields, the tokens, the logits, the per-layer row counts, then per layer
// the raw window in logical order, the compressed rows and the full
// compressor (and indexer) frontier tensors, all float32 little-endian.
// It has no checksum and is always self-contained.
//
// PayloadGo is the ds4-go layout. It differs from PayloadV1 in four ways:
//   - the header has sixteen u32 fields: the thirteen of v1 (version 0x101),
//     then the base token count B, a flags word (bit 0: cache rows stored
//     as binary16; bit 1: written by a NumericsOfficial session) and a
//     CRC-32C of the fifteen words before it;
//   - it may be a delta: it holds tokens B..T−1 and the compressed and
//     indexer rows produced by them, and needs a parent payload holding the
//     first B tokens (B = 0 is self-contained);
//   - the body is split in a head (tokens, row counts, rows: everything a
//     child payload builds on) and a tail (logits, raw window, frontiers:
//     the state at T, which a child replaces), each followed by its CRC-32C,
//     so a chain restore reads only the head of every parent;
//   - frontier slots that the compressor overwrites before reading them
//     are not stored (ratio 4: the 4 previous-window slots plus T mod 4;
//     other ratios: T mod ratio), and rows may be binary16, which is
//     lossless for NumericsDS4 sessions because their cached rows are
//     rounded to binary16 when they are produced.
//
// Both layouts store the raw window in logical order (oldest row first),
// so the reader re-places it in its own ring. Readers check every count
// against the compressor schedule (a ratio-r layer holds exactly T/r
// rows) and ignore the prefill-chunk field, since this engine's prefill
// is chunk-invariant.
const (
	PayloadV1 = 1
	PayloadGo = 0x101
)

// Errors a payload reader wraps: ErrPayloadIncompatible for a well-formed
// payload this session cannot take (other model, context, numerics; the
// session is left unchanged), ErrPayloadCorrupt for damaged or malformed
// bytes (truncation, checksum, impossible counts).
var (
	ErrPayloadIncompatible = errors.New("engine: incompatible session payload")
	ErrPayloadCorrupt      = errors.New("engine: corrupt session payload")
)

const (
	payloadMagic  = 0x34565344 // "DSV4"
	v1HeaderWords = 13
	goHeaderWords = 16
	flagRowsF16   = 1 << 0
	flagOfficial  = 1 << 1
	ioChunk       = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PayloadOptions select a payload's layout.
type PayloadOptions struct {
	// Version is PayloadGo (the default when 0) or PayloadV1.
	Version int
	// Base is the number of leading tokens a PayloadGo delta leaves to its
	// parent payload; 0 writes a self-contained payload.
	Base int
	// F16 stores PayloadGo cache rows as binary16; only NumericsDS4
	// sessions, whose rows are binary16 values, may use it.
	F16 bool
}

// Numerics returns the session's numerics.
func (s *Session) Numerics() Numerics { return s.opt.Numerics }

// payloadGeom is the shape of one payload.
type payloadGeom struct {
	p        layout.Params
	version  int
	ctx      int // context the payload was written with
	tokens   int // T
	base     int // B
	raw      int // raw rows stored, min(T, window)
	window   int
	rawCap   int
	compCap  int
	prefill  int
	flags    uint32
	headSize int64 // PayloadGo: header + head section with its CRC
	size     int64
}

func newGeom(p layout.Params, version, ctx, tokens, base int, flags uint32) payloadGeom {
	g := payloadGeom{p: p, version: version, ctx: ctx, tokens: tokens, base: base, flags: flags}
	g.window = min(p.Window, ctx)
	g.rawCap = g.window
	g.raw = min(tokens, g.window)
	g.compCap = ctx/4 + 2
	g.prefill = min(2048, ctx)
	g.sizes()
	return g
}

// rowBytes is the stored size of one cache value.
func (g *payloadGeom) rowBytes() int64 {
	if g.flags&flagRowsF16 != 0 {
		return 2
	}
	return 4
}

// frontier returns the stored slot range [lo, hi) of an attention
// compressor of ratio r and its slot width for the given row width d.
func (g *payloadGeom) frontier(r, d int) (lo, hi, w int) {
	if r == 4 {
		w = 2 * d
		if g.version == PayloadV1 {
			return 0, 8, w
		}
		return 0, 4 + g.tokens%4, w
	}
	if g.version == PayloadV1 {
		return 0, r, d
	}
	return 0, g.tokens % r, d
}

func (g *payloadGeom) sizes() {
	p, T, B := g.p, int64(g.tokens), int64(g.base)
	D, I, V, L := int64(p.HeadDim), int64(p.IndexerDim), int64(p.Vocab), int64(p.Layers)
	es := g.rowBytes()
	var n int64
	if g.version == PayloadV1 {
		n = 4*v1HeaderWords + 4*T + 4*V + 8*L
		for il := range p.Layers {
			n += int64(g.raw) * D * 4
			r := p.Ratio(il)
			if r == 0 {
				continue
			}
			lo, hi, w := g.frontier(r, p.HeadDim)
			n += T/int64(r)*D*4 + 2*int64((hi-lo)*w)*4
			if r == 4 {
				lo, hi, w := g.frontier(4, p.IndexerDim)
				n += T/4*I*4 + 2*int64((hi-lo)*w)*4
			}
		}
		g.size = n
		return
	}
	n = 4*goHeaderWords + 4*(T-B) + 8*L
	for il := range p.Layers {
		r := int64(p.Ratio(il))
		if r == 0 {
			continue
		}
		n += (T/r - B/r) * D * es
		if r == 4 {
			n += (T/4 - B/4) * I * es
		}
	}
	n += 4
	g.headSize = n
	n += 4 * V
	for il := range p.Layers {
		n += int64(g.raw) * D * es
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		lo, hi, w := g.frontier(r, p.HeadDim)
		n += 2 * int64((hi-lo)*w) * 4
		if r == 4 {
			lo, hi, w := g.frontier(4, p.IndexerDim)
			n += 2 * int64((hi-lo)*w) * 4
		}
	}
	g.size = n + 4
}

// geom checks opt against the session and returns the payload's shape.
func (s *Session) geom(opt PayloadOptions) (payloadGeom, error) {
	v := opt.Version
	if v == 0 {
		v = PayloadGo
	}
	T := len(s.tokens)
	var flags uint32
	switch v {
	case PayloadV1:
		if opt.Base != 0 || opt.F16 {
			return payloadGeom{}, errors.New("engine: a v1 payload is self-contained float32")
		}
	case PayloadGo:
		if opt.Base < 0 || opt.Base > T {
			return payloadGeom{}, fmt.Errorf("engine: payload base %d outside 0..%d", opt.Base, T)
		}
		if opt.F16 {
			if s.opt.Numerics != NumericsDS4 {
				return payloadGeom{}, errors.New("engine: binary16 payload rows need NumericsDS4")
			}
			flags |= flagRowsF16
		}
		if s.opt.Numerics == NumericsOfficial {
			flags |= flagOfficial
		}
	default:
		return payloadGeom{}, fmt.Errorf("engine: unknown payload version %#x", v)
	}
	if T == 0 {
		return payloadGeom{}, errors.New("engine: an empty session has no payload")
	}
	return newGeom(s.m.Params, v, s.opt.Context, T, opt.Base, flags), nil
}

// PayloadSize returns the size in bytes of the payload WritePayload would
// write with opt.
func (s *Session) PayloadSize(opt PayloadOptions) (int64, error) {
	g, err := s.geom(opt)
	return g.size, err
}

// PayloadSizeFor returns the size of the payload of a session of a model
// with parameters p and context ctx holding tokens tokens (counting a
// PayloadGo delta from opt.Base), without a session.
func PayloadSizeFor(p layout.Params, ctx, tokens int, opt PayloadOptions) int64 {
	v := opt.Version
	if v == 0 {
		v = PayloadGo
	}
	var flags uint32
	if opt.F16 && v == PayloadGo {
		flags = flagRowsF16
	}
	base := opt.Base
	if v == PayloadV1 {
		base = 0
	}
	g := newGeom(p, v, ctx, tokens, base, flags)
	return g.size
}

// WritePayload serializes the session's state with the layout opt selects
// and returns the bytes written.
func (s *Session) WritePayload(w io.Writer, opt PayloadOptions) (int64, error) {
	g, err := s.geom(opt)
	if err != nil {
		return 0, err
	}
	e := &encoder{w: w, buf: make([]byte, 0, ioChunk)}
	if g.version == PayloadV1 {
		s.writeV1(e, &g)
	} else {
		s.writeGo(e, &g)
	}
	e.flush()
	if e.err != nil {
		return e.n, fmt.Errorf("engine: write payload: %w", e.err)
	}
	if e.n != g.size {
		return e.n, fmt.Errorf("engine: wrote %d payload bytes, expected %d", e.n, g.size)
	}
	return e.n, nil
}

func (g *payloadGeom) headerWords() []uint32 {
	p := g.p
	h := []uint32{payloadMagic, uint32(g.version), uint32(g.ctx), uint32(g.prefill), uint32(g.rawCap),
		uint32(g.window), uint32(g.compCap), uint32(g.tokens), uint32(p.Layers), uint32(p.HeadDim),
		uint32(p.IndexerDim), uint32(p.Vocab), uint32(g.raw)}
	if g.version == PayloadGo {
		h = append(h, uint32(g.base), g.flags)
	}
	return h
}

func (s *Session) writeCounts(e *encoder) {
	p := s.m.Params
	for il := range s.layers {
		e.u32(uint32(s.layers[il].compLen))
	}
	for il := range s.layers {
		n := 0
		if p.HasIndexer(il) {
			n = s.layers[il].icompLen
		}
		e.u32(uint32(n))
	}
}

// rawRows calls f with the last n rows of the window, oldest first.
func (s *Session) rawRows(st *layerState, n int, f func([]float32)) {
	d := s.m.Params.HeadDim
	for k := st.rawLen - n; k < st.rawLen; k++ {
		slot := (st.rawStart + k) % s.rawCap
		f(st.raw[slot*d : (slot+1)*d])
	}
}

func (s *Session) writeV1(e *encoder, g *payloadGeom) {
	p := s.m.Params
	for _, v := range g.headerWords() {
		e.u32(v)
	}
	for _, t := range s.tokens {
		e.u32(uint32(t))
	}
	e.f32s(s.logits)
	s.writeCounts(e)
	for il := range s.layers {
		st := &s.layers[il]
		s.rawRows(st, g.raw, e.f32s)
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		e.f32s(st.comp[:st.compLen*p.HeadDim])
		e.f32s(st.skv)
		e.f32s(st.ssc)
		if r == 4 {
			e.f32s(st.icomp[:st.icompLen*p.IndexerDim])
			e.f32s(st.iskv)
			e.f32s(st.issc)
		}
	}
}

func (s *Session) writeGo(e *encoder, g *payloadGeom) {
	p := s.m.Params
	rows := e.f32s
	if g.flags&flagRowsF16 != 0 {
		rows = e.f16s
	}
	e.crc = 0
	for _, v := range g.headerWords() {
		e.u32(v)
	}
	e.u32(e.crc)
	e.crc = 0
	for _, t := range s.tokens[g.base:] {
		e.u32(uint32(t))
	}
	s.writeCounts(e)
	for il := range s.layers {
		st := &s.layers[il]
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		rows(st.comp[g.base/r*p.HeadDim : st.compLen*p.HeadDim])
		if r == 4 {
			rows(st.icomp[g.base/4*p.IndexerDim : st.icompLen*p.IndexerDim])
		}
	}
	e.u32(e.crc)
	e.crc = 0
	e.f32s(s.logits)
	for il := range s.layers {
		st := &s.layers[il]
		s.rawRows(st, g.raw, rows)
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		lo, hi, w := g.frontier(r, p.HeadDim)
		e.f32s(st.skv[lo*w : hi*w])
		e.f32s(st.ssc[lo*w : hi*w])
		if r == 4 {
			lo, hi, w := g.frontier(4, p.IndexerDim)
			e.f32s(st.iskv[lo*w : hi*w])
			e.f32s(st.issc[lo*w : hi*w])
		}
	}
	e.u32(e.crc)
}

// encoder buffers little-endian output and keeps a running CRC-32C.
type encoder struct {
	w   io.Writer
	buf []byte
	n   int64
	crc uint32
	err error
}

// reserve returns the next n (≤ ioChunk) bytes of the buffer.
func (e *encoder) reserve(n int) []byte {
	if len(e.buf)+n > cap(e.buf) {
		e.flush()
	}
	b := e.buf[len(e.buf) : len(e.buf)+n]
	e.buf = e.buf[:len(e.buf)+n]
	return b
}

func (e *encoder) flush() {
	if len(e.buf) > 0 && e.err == nil {
		k, err := e.w.Write(e.buf)
		e.n += int64(k)
		e.err = err
	}
	e.buf = e.buf[:0]
}

func (e *encoder) u32(v uint32) {
	b := e.reserve(4)
	binary.LittleEndian.PutUint32(b, v)
	e.crc = crc32.Update(e.crc, castagnoli, b)
}

func (e *encoder) f32s(x []float32) {
	for len(x) > 0 {
		k := min(len(x), ioChunk/4)
		b := e.reserve(4 * k)
		for i, v := range x[:k] {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		e.crc = crc32.Update(e.crc, castagnoli, b)
		x = x[k:]
	}
}

// f16s writes x as binary16, failing if a value does not survive the
// conversion bit for bit.
func (e *encoder) f16s(x []float32) {
	for len(x) > 0 {
		k := min(len(x), ioChunk/2)
		b := e.reserve(2 * k)
		for i, v := range x[:k] {
			h := quant.F32ToF16(v)
			if math.Float32bits(quant.F16ToF32(h)) != math.Float32bits(v) && e.err == nil {
				e.err = fmt.Errorf("cache value %v is not a binary16 value", v)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		e.crc = crc32.Update(e.crc, castagnoli, b)
		x = x[k:]
	}
}

// PayloadError is a payload reading error that says which payload of a
// chain (0 = the root) failed.
type PayloadError struct {
	Part int
	Err  error
}

// Error implements error.
func (e *PayloadError) Error() string { return fmt.Sprintf("engine: payload %d: %v", e.Part+1, e.Err) }

// Unwrap returns the underlying error.
func (e *PayloadError) Unwrap() error { return e.Err }

// PayloadPart is one payload of a chain: a reader positioned at the
// payload's first byte and the payload's size.
type PayloadPart struct {
	R    io.Reader
	Size int64
}

// ReadPayload restores the session from a self-contained payload of size
// bytes read from r. See ReadPayloadChain for the error contract.
func (s *Session) ReadPayload(r io.Reader, size int64) error {
	return s.ReadPayloadChain([]PayloadPart{{r, size}})
}

// ReadPayloadChain restores the session from a chain of payloads, root
// first: each part after the first must be a PayloadGo delta whose base
// is the previous part's token count. Only the head of a PayloadGo parent
// is read. Every count and length is validated against the model and the
// session's context. Errors are *PayloadError values wrapping
// ErrPayloadIncompatible, ErrPayloadCorrupt or an I/O error. Errors found
// in the headers, which are all read first, leave the session unchanged;
// an error found after the restore began leaves it reset to empty.
func (s *Session) ReadPayloadChain(parts []PayloadPart) error {
	if len(parts) == 0 {
		return errors.New("engine: empty payload chain")
	}
	gs := make([]payloadGeom, len(parts))
	ds := make([]*decoder, len(parts))
	buf := make([]byte, ioChunk)
	for i, part := range parts {
		ds[i] = &decoder{r: part.R, left: part.Size, buf: buf}
		g, err := s.readHeader(ds[i])
		switch {
		case err != nil:
		case i == 0 && g.base != 0:
			err = fmt.Errorf("%w: delta from %d tokens has no parent", ErrPayloadIncompatible, g.base)
		case i > 0 && (g.version != PayloadGo || g.base != gs[i-1].tokens):
			err = fmt.Errorf("%w: base %d does not continue the parent's %d tokens", ErrPayloadIncompatible, g.base, gs[i-1].tokens)
		case g.size != part.Size:
			err = fmt.Errorf("%w: %d bytes, its header implies %d", ErrPayloadCorrupt, part.Size, g.size)
		}
		if err != nil {
			return &PayloadError{i, err}
		}
		gs[i] = g
	}
	s.resetStates()
	var err error
	for i := range parts {
		last := i == len(parts)-1
		if gs[i].version == PayloadV1 {
			err = s.readV1(ds[i], &gs[i])
		} else {
			err = s.readGo(ds[i], &gs[i], last)
		}
		if err == nil && ds[i].err != nil {
			err = ds[i].err
		}
		if err == nil && last && ds[i].left != 0 {
			err = fmt.Errorf("%w: %d trailing payload bytes", ErrPayloadCorrupt, ds[i].left)
		}
		if err != nil {
			s.Reset()
			return &PayloadError{i, err}
		}
	}
	return nil
}

// readHeader reads and validates a payload header against the session.
func (s *Session) readHeader(d *decoder) (payloadGeom, error) {
	b := d.read(8)
	if d.err != nil {
		return payloadGeom{}, d.err
	}
	magic, version := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
	hcrc := crc32.Update(0, castagnoli, b) // b is reused by the next read
	if magic != payloadMagic {
		return payloadGeom{}, fmt.Errorf("%w: bad magic %#08x", ErrPayloadCorrupt, magic)
	}
	words := v1HeaderWords
	switch version {
	case PayloadV1:
	case PayloadGo:
		words = goHeaderWords
	default:
		return payloadGeom{}, fmt.Errorf("%w: unsupported version %#x", ErrPayloadIncompatible, version)
	}
	h := make([]uint32, words)
	h[0], h[1] = magic, version
	rest := d.read(4 * (words - 2))
	if d.err != nil {
		return payloadGeom{}, d.err
	}
	for i := range words - 2 {
		h[i+2] = binary.LittleEndian.Uint32(rest[4*i:])
	}
	var base, flags uint32
	if version == PayloadGo {
		if crc32.Update(hcrc, castagnoli, rest[:len(rest)-4]) != h[15] {
			return payloadGeom{}, fmt.Errorf("%w: header checksum mismatch", ErrPayloadCorrupt)
		}
		base, flags = h[13], h[14]
	}
	p := s.m.Params
	ctx, T, R := int64(h[2]), int64(h[7]), int64(h[12])
	switch {
	case h[8] != uint32(p.Layers) || h[9] != uint32(p.HeadDim) || h[10] != uint32(p.IndexerDim) || h[11] != uint32(p.Vocab):
		return payloadGeom{}, fmt.Errorf("%w: written for a different layout (layers %d, head %d, indexer %d, vocab %d; model %d, %d, %d, %d)",
			ErrPayloadIncompatible, h[8], h[9], h[10], h[11], p.Layers, p.HeadDim, p.IndexerDim, p.Vocab)
	case ctx == 0 || T == 0 || T > ctx:
		return payloadGeom{}, fmt.Errorf("%w: %d tokens for context %d", ErrPayloadCorrupt, T, ctx)
	case ctx > int64(s.opt.Context) || T >= int64(s.opt.Context):
		return payloadGeom{}, fmt.Errorf("%w: %d tokens at context %d do not fit current context %d", ErrPayloadIncompatible, T, ctx, s.opt.Context)
	case flags&^(flagRowsF16|flagOfficial) != 0:
		return payloadGeom{}, fmt.Errorf("%w: unknown flags %#x", ErrPayloadCorrupt, flags)
	case version == PayloadGo && (flags&flagOfficial != 0) != (s.opt.Numerics == NumericsOfficial):
		return payloadGeom{}, fmt.Errorf("%w: written with other numerics", ErrPayloadIncompatible)
	case int64(base) > T:
		return payloadGeom{}, fmt.Errorf("%w: base %d beyond %d tokens", ErrPayloadCorrupt, base, T)
	}
	g := newGeom(p, int(version), int(ctx), int(T), int(base), flags)
	switch {
	case int64(h[5]) != int64(g.window):
		return payloadGeom{}, fmt.Errorf("%w: raw window %d, the model's at context %d is %d", ErrPayloadIncompatible, h[5], ctx, g.window)
	case h[4] == 0 || R > int64(h[4]) || R != int64(g.raw) || int(R) != min(int(T), s.rawCap):
		return payloadGeom{}, fmt.Errorf("%w: %d raw rows (ring %d) for %d tokens and window %d", ErrPayloadCorrupt, R, h[4], T, g.window)
	case int64(h[6]) > int64(s.opt.Context/4+2):
		return payloadGeom{}, fmt.Errorf("%w: compressed capacity %d exceeds the current %d", ErrPayloadIncompatible, h[6], s.opt.Context/4+2)
	}
	return g, nil
}

// readCounts reads the per-layer row counts and checks them against the
// compressor schedule: a layer of ratio r holds exactly T/r rows.
func (s *Session) readCounts(d *decoder, g *payloadGeom) error {
	p := s.m.Params
	b := d.read(8 * p.Layers)
	if d.err != nil {
		return d.err
	}
	for il := range p.Layers {
		nc := binary.LittleEndian.Uint32(b[4*il:])
		ni := binary.LittleEndian.Uint32(b[4*(p.Layers+il):])
		var wc, wi uint32
		if r := p.Ratio(il); r != 0 {
			wc = uint32(g.tokens / r)
			if r == 4 {
				wi = uint32(g.tokens / 4)
			}
		}
		if nc != wc || ni != wi {
			return fmt.Errorf("%w: layer %d holds %d compressed and %d indexer rows, %d tokens make %d and %d",
				ErrPayloadCorrupt, il, nc, ni, g.tokens, wc, wi)
		}
	}
	return nil
}

// readTokens appends n token ids, each checked against the vocabulary.
func (s *Session) readTokens(d *decoder, n int) error {
	vocab := uint32(s.m.Params.Vocab)
	for n > 0 {
		k := min(n, ioChunk/4)
		b := d.read(4 * k)
		if d.err != nil {
			return d.err
		}
		for i := range k {
			t := binary.LittleEndian.Uint32(b[4*i:])
			if t >= vocab {
				return fmt.Errorf("%w: token %d outside the vocabulary (%d)", ErrPayloadCorrupt, t, vocab)
			}
			s.tokens = append(s.tokens, int(t))
		}
		n -= k
	}
	return nil
}

// readRaw reads n window rows into slots 0..n−1.
func (s *Session) readRaw(d *decoder, st *layerState, n int, rows func([]float32)) {
	rows(st.raw[:n*s.m.Params.HeadDim])
	st.rawStart, st.rawLen = 0, n
}

func (s *Session) readV1(d *decoder, g *payloadGeom) error {
	p := s.m.Params
	if err := s.readTokens(d, g.tokens); err != nil {
		return err
	}
	d.f32s(s.logits)
	if err := s.readCounts(d, g); err != nil {
		return err
	}
	for il := range s.layers {
		st := &s.layers[il]
		s.readRaw(d, st, g.raw, d.f32s)
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		st.compLen = g.tokens / r
		d.f32s(st.comp[:st.compLen*p.HeadDim])
		d.f32s(st.skv)
		d.f32s(st.ssc)
		if r == 4 {
			st.icompLen = g.tokens / 4
			d.f32s(st.icomp[:st.icompLen*p.IndexerDim])
			d.f32s(st.iskv)
			d.f32s(st.issc)
		}
	}
	return d.err
}

// check compares the decoder's running CRC with the next stored one.
func (d *decoder) check(what string) error {
	want := d.crc
	b := d.read(4)
	if d.err != nil {
		return d.err
	}
	if binary.LittleEndian.Uint32(b) != want {
		return fmt.Errorf("%w: %s checksum mismatch", ErrPayloadCorrupt, what)
	}
	d.crc = 0
	return nil
}

func (s *Session) readGo(d *decoder, g *payloadGeom, last bool) error {
	p := s.m.Params
	rows := d.f32s
	if g.flags&flagRowsF16 != 0 {
		rows = d.f16s
	}
	d.crc = 0
	if err := s.readTokens(d, g.tokens-g.base); err != nil {
		return err
	}
	if err := s.readCounts(d, g); err != nil {
		return err
	}
	for il := range s.layers {
		st := &s.layers[il]
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		rows(st.comp[g.base/r*p.HeadDim : g.tokens/r*p.HeadDim])
		st.compLen = g.tokens / r
		if r == 4 {
			rows(st.icomp[g.base/4*p.IndexerDim : g.tokens/4*p.IndexerDim])
			st.icompLen = g.tokens / 4
		}
	}
	if err := d.check("head"); err != nil || !last {
		return err
	}
	d.f32s(s.logits)
	for il := range s.layers {
		st := &s.layers[il]
		s.readRaw(d, st, g.raw, rows)
		r := p.Ratio(il)
		if r == 0 {
			continue
		}
		lo, hi, w := g.frontier(r, p.HeadDim)
		d.f32s(st.skv[lo*w : hi*w])
		d.f32s(st.ssc[lo*w : hi*w])
		if r == 4 {
			lo, hi, w := g.frontier(4, p.IndexerDim)
			d.f32s(st.iskv[lo*w : hi*w])
			d.f32s(st.issc[lo*w : hi*w])
		}
	}
	return d.check("tail")
}

// decoder reads exactly the payload's bytes, never past its size, and
// keeps a running CRC-32C; the first error sticks.
type decoder struct {
	r    io.Reader
	left int64
	buf  []byte
	crc  uint32
	err  error
}

// read returns the next n (≤ ioChunk) bytes, or nil after an error.
func (d *decoder) read(n int) []byte {
	if d.err != nil {
		return nil
	}
	if int64(n) > d.left {
		d.err = fmt.Errorf("%w: truncated", ErrPayloadCorrupt)
		return nil
	}
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: truncated", ErrPayloadCorrupt)
		}
		d.err = err
		return nil
	}
	d.left -= int64(n)
	d.crc = crc32.Update(d.crc, castagnoli, b)
	return b
}

func (d *decoder) f32s(x []float32) {
	for len(x) > 0 && d.err == nil {
		k := min(len(x), ioChunk/4)
		b := d.read(4 * k)
		if b == nil {
			return
		}
		for i := range x[:k] {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		x = x[k:]
	}
}

func (d *decoder) f16s(x []float32) {
	for len(x) > 0 && d.err == nil {
		k := min(len(x), ioChunk/2)
		b := d.read(2 * k)
		if b == nil {
			return
		}
		for i := range x[:k] {
			h := binary.LittleEndian.Uint16(b[2*i:])
			if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
				h = h&0x8000 | 0x7e00 // the NaN binary16 rounding produces
			}
			x[i] = quant.F16ToF32(h)
		}
		x = x[k:]
	}
}
