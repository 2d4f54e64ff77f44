package kvcache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ds4-go/ds4/engine"
)

// ErrNoCheckpoint is returned by Load when no indexed file's key text is
// a prefix of the prompt.
var ErrNoCheckpoint = errors.New("kvcache: no checkpoint is a prefix of the prompt")

// LoadError is the failure of one candidate file.
type LoadError struct {
	Path  string
	Cause string // corrupt, incompatible, hash-mismatch, prefix-mismatch, changed, io-error
	Err   error
}

// Error implements error.
func (e *LoadError) Error() string {
	return fmt.Sprintf("kvcache: load %s: %s: %v", e.Path, e.Cause, e.Err)
}

// Unwrap returns the underlying error.
func (e *LoadError) Unwrap() error { return e.Err }

// Loaded describes a checkpoint restored into a session.
type Loaded struct {
	SHA       string
	Path      string
	Tokens    int
	KeyLen    int // bytes of the prompt the checkpoint stands for
	Kind      KeyKind
	QuantBits int
	Files     int   // files read (the chain length)
	Bytes     int64 // payload bytes read
	Tools     []ToolEntry
	Consumed  bool          // the file was deleted after loading (upstream files only)
	Elapsed   time.Duration // load time
	Failures  []*LoadError  // better candidates that failed first
}

// maxLoadAttempts bounds the candidates one Load tries.
const maxLoadAttempts = 4

// Candidates returns the indexed files whose key text is a byte prefix of
// text and that a session of context ctx may load, best first: longest
// key, then most tokens (docs/formats/kvcache.md#candidate-selection). Only files that could match
// are hashed.
func (c *Cache) Candidates(text []byte, ctx int) []*Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.candidates(text, ctx)
}

func (c *Cache) candidates(text []byte, ctx int) []*Entry {
	var cands []*Entry
	for _, e := range c.entries {
		h := &e.Header
		if int64(h.KeyLen) > int64(len(text)) || int(h.Tokens) < c.opt.Policy.MinTokens ||
			e.chainCtx() > uint32(ctx) || int(h.Tokens) >= ctx ||
			(c.opt.RejectDifferentQuant && int(h.QuantBits) != c.opt.QuantBits) {
			continue
		}
		cands = append(cands, e)
	}
	slices.SortFunc(cands, func(a, b *Entry) int {
		if a.Header.KeyLen != b.Header.KeyLen {
			return int(b.Header.KeyLen) - int(a.Header.KeyLen)
		}
		return int(b.Header.Tokens) - int(a.Header.Tokens)
	})
	sums := map[uint32]string{}
	out := cands[:0]
	for _, e := range cands {
		n := e.Header.KeyLen
		s, ok := sums[n]
		if !ok {
			s = KeySHA(text[:n])
			sums[n] = s
		}
		if s == e.SHA {
			out = append(out, e)
		}
	}
	return out
}

// Load restores into s the best checkpoint whose key text is a prefix of
// text (docs/formats/kvcache.md#lookup-and-load). A candidate that fails is reported, taken out of
// the index (and deleted when damaged), and the next one is tried. After
// a failure the session may have been reset; it is never left holding a
// partial state. The effective prompt is the loaded tokens followed by
// the tokenization of text[Loaded.KeyLen:].
func (c *Cache) Load(s *engine.Session, text []byte) (Loaded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cands := c.candidates(text, s.Context())
	if len(cands) == 0 {
		bump(&c.stats.LoadFailures, "no-candidate")
		return Loaded{}, ErrNoCheckpoint
	}
	var fails []*LoadError
	for _, e := range cands[:min(len(cands), maxLoadAttempts)] {
		if c.entries[e.SHA] != e {
			continue // removed with a failed ancestor
		}
		ld, lerr := c.loadEntry(s, e, text)
		if lerr == nil {
			ld.Failures = fails
			return ld, nil
		}
		fails = append(fails, lerr)
		bump(&c.stats.LoadFailures, lerr.Cause)
		c.log.Warn("kv cache load failed", "file", lerr.Path, "cause", lerr.Cause, "err", lerr.Err)
	}
	errs := make([]error, len(fails))
	for i, f := range fails {
		errs[i] = f
	}
	return Loaded{Failures: fails}, errors.Join(errs...)
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n *int64
}

func (r countReader) Read(p []byte) (int, error) {
	k, err := r.r.Read(p)
	*r.n += int64(k)
	return k, err
}

// loadEntry restores one file (with its chain) into s.
func (c *Cache) loadEntry(s *engine.Session, e *Entry, text []byte) (Loaded, *LoadError) {
	start := time.Now()
	fail := func(x *Entry, cause string, err error) (Loaded, *LoadError) {
		switch cause {
		case "corrupt":
			c.removeLocked(x, "corrupt")
		case "hash-mismatch", "prefix-mismatch":
			if x.Header.Version == VersionGo {
				c.removeLocked(x, "corrupt")
			} else {
				c.unindexLocked(x)
			}
		case "incompatible", "changed", "io-error":
			c.unindexLocked(x)
		}
		return Loaded{}, &LoadError{Path: x.Path, Cause: cause, Err: err}
	}
	chain := e.chain()
	files := make([]*os.File, len(chain))
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, x := range chain {
		f, err := os.Open(x.Path)
		if err != nil {
			return fail(x, "io-error", err)
		}
		files[i] = f
		fi, err := f.Stat()
		if err != nil {
			return fail(x, "io-error", err)
		}
		b := make([]byte, headerPrefix)
		n, err := io.ReadFull(f, b)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fail(x, "io-error", err)
		}
		h, err := decodeHeader(b[:n], fi.Size())
		if err != nil {
			// It was a valid file when it was indexed.
			return fail(x, "corrupt", err)
		}
		if h.Version != x.Header.Version || h.FileID != x.Header.FileID || h.Tokens != x.Header.Tokens ||
			h.PayloadBytes != x.Header.PayloadBytes || h.KeyLen != x.Header.KeyLen {
			return fail(x, "changed", errors.New("the file changed since it was indexed"))
		}
	}
	f, h := files[len(files)-1], &e.Header
	key := make([]byte, h.KeyLen)
	if _, err := f.ReadAt(key, h.dataOffset()); err != nil {
		return fail(e, "corrupt", fmt.Errorf("truncated cached text: %w", err))
	}
	if KeySHA(key) != e.SHA {
		return fail(e, "hash-mismatch", errors.New("key text does not hash to the file name"))
	}
	if !bytes.HasPrefix(text, key) {
		return fail(e, "prefix-mismatch", errors.New("key text is not a prefix of the prompt"))
	}
	var read int64
	parts := make([]engine.PayloadPart, len(chain))
	for i, x := range chain {
		sr := io.NewSectionReader(files[i], x.Header.payloadOffset(), int64(x.Header.PayloadBytes))
		parts[i] = engine.PayloadPart{R: bufio.NewReaderSize(countReader{sr, &read}, 1<<20), Size: int64(x.Header.PayloadBytes)}
	}
	if err := s.ReadPayloadChain(parts); err != nil {
		c.stats.BytesRead += read
		culprit := e
		var pe *engine.PayloadError
		if errors.As(err, &pe) && pe.Part < len(chain) {
			culprit = chain[pe.Part]
		}
		switch {
		case errors.Is(err, engine.ErrPayloadIncompatible):
			return fail(culprit, "incompatible", err)
		case errors.Is(err, engine.ErrPayloadCorrupt):
			return fail(culprit, "corrupt", err)
		}
		return fail(culprit, "io-error", err)
	}
	c.stats.BytesRead += read
	if s.Pos() != int(h.Tokens) || (h.Version == VersionGo && TokensDigest(s.Tokens()) != h.TokensDigest) {
		s.Reset()
		return fail(e, "corrupt", fmt.Errorf("payload holds %d tokens, the header %d (or other tokens)", s.Pos(), h.Tokens))
	}
	ld := Loaded{SHA: e.SHA, Path: e.Path, Tokens: int(h.Tokens), KeyLen: int(h.KeyLen), Kind: kindOf(h.Ext),
		QuantBits: int(h.QuantBits), Files: len(chain), Bytes: read}
	if h.Ext&ExtToolMap != 0 {
		sec, err := c.readSection(e)
		if err != nil {
			c.log.Warn("kv cache ignored tool map", "file", e.Path, "err", err)
		} else {
			ld.Tools = decodeToolMap(sec, 4*c.opt.MaxToolIDs, nil)
		}
	}
	now := uint64(c.opt.Now().Unix())
	for _, x := range chain {
		x.Header.Hits++
		x.Header.LastUsed = now
		c.writeStats(x)
	}
	if h.Version == VersionUpstream && c.opt.Policy.ColdMaxTokens > 0 && int(h.Tokens) > c.opt.Policy.ColdMaxTokens {
		c.removeLocked(e, "consumed")
		ld.Consumed = true
	}
	c.stats.Loads++
	ld.Elapsed = time.Since(start)
	c.log.Info("kv cache hit text", "tokens", ld.Tokens, "text", ld.KeyLen, "quant", ld.QuantBits, "key", ld.Kind.String(),
		"files", ld.Files, "load_ms", ms(ld.Elapsed), "consumed", ld.Consumed, "file", e.Path)
	return ld, nil
}

// unindexLocked drops a file and its deltas from the index, keeping them
// on disk (they may suit another build or context).
func (c *Cache) unindexLocked(e *Entry) {
	for _, ch := range c.children(e) {
		c.unindexLocked(ch)
	}
	if c.entries[e.SHA] == e {
		delete(c.entries, e.SHA)
	}
}

// ToolEntries returns the tool-map entries, of every indexed file with a
// tool map, whose id wanted accepts (docs/formats/kvcache.md#tool-map-prefetch, served from the
// index instead of a directory scan).
func (c *Cache) ToolEntries(wanted func(id string) bool) []ToolEntry {
	c.mu.Lock()
	es := c.snapshotLocked(func(e *Entry) bool { return e.Header.Ext&ExtToolMap != 0 })
	c.mu.Unlock()
	var out []ToolEntry
	for _, e := range es {
		sec, err := c.readSection(e)
		if err != nil {
			continue
		}
		out = append(out, decodeToolMap(sec, 4*c.opt.MaxToolIDs, wanted)...)
	}
	return out
}
