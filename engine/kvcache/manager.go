package kvcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// Tokenizer is what a Manager needs from a tokenizer; *tokenizer.Tokenizer
// implements it. Special takes a special token's text; AppendEncodeRendered
// and PrefixAgrees take the client-text ranges of a rendered prompt.
type Tokenizer interface {
	Decode(ids []int) []byte
	AppendEncodeRendered(dst []int, text string, from int, client []tokenizer.Span) []int
	PrefixAgrees(ids []int, text string, client []tokenizer.Span) bool
	Special(name string) int
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Cache is the disk cache; nil disables disk saves and loads.
	Cache *Cache
	// Tokenizer tokenizes prompt suffixes and renders key texts.
	Tokenizer Tokenizer
	// Policy holds the save-moment settings.
	Policy Policy
	// Chunk is the prefill chunk: progress is reported at absolute
	// multiples of it. 0 means engine.PrefillChunk.
	Chunk int
	// Tools returns the tool-map entries to store with a key text (nil:
	// no tool maps).
	Tools func(key []byte) []ToolEntry
	// Logger receives debug lines for hits and misses; nil discards them.
	Logger *slog.Logger
	// Evaluator, when set, evaluates the manager's prefill chunks and
	// decoded tokens instead of the session itself (a scheduler that
	// batches several sessions' steps); it must evaluate on the session
	// the manager owns.
	Evaluator engine.Evaluator
}

// Source says where a synced prompt's reused tokens came from (the
// server's cache source labels, docs/formats/server.md#decision-ladder).
type Source string

// Sources of reused state.
const (
	SourceMemoryToken Source = "memory-token" // the live tokens are a prefix of the request tokens
	SourceMemoryText  Source = "memory-text"  // the live text is a prefix of the request text
	SourceDisk        Source = "disk-text"    // a disk checkpoint's key is a prefix of the request text
	SourceCold        Source = "cold"         // nothing reused
)

// Live-miss reasons (docs/formats/server.md#trace-file).
const (
	MissNoLive        = "no-live-checkpoint"
	MissTokenMismatch = "token-mismatch"
	MissShorter       = "incoming-prompt-shorter-than-live-checkpoint"
	MissTextMismatch  = "text-mismatch"
)

// Request is a prompt to bring the live session to.
type Request struct {
	// Text is the rendered prompt; it keys text-prefix and disk reuse.
	Text string
	// Client lists the byte ranges of Text that hold client text
	// (prompt.Rendered.Client): special strings there are ordinary text,
	// and reused tokens must not hold control tokens there.
	Client []tokenizer.Span
	// Tokens is the tokenization of Text, if the caller has it; when nil,
	// suffixes are tokenized as needed (and Text as a whole when cold).
	Tokens []int
	// Progress, if set, is called after every prefill chunk with the
	// tokens done and the prompt length; an error stops the prefill (the
	// session keeps the prefix done so far).
	Progress func(done, total int) error
	// Layer, if set, is called after each layer of each prefill chunk with
	// the position counted as reached (engine.PrefillOptions.Progress).
	Layer func(pos int)
}

// Result describes a Sync.
type Result struct {
	Source    Source
	Reused    int     // tokens not evaluated (usage "cached")
	Prefilled int     // tokens evaluated
	Prompt    []int   // the effective prompt (the session's tokens)
	Miss      string  // why the live session was not reused, "" on a live hit
	Disk      *Loaded // the checkpoint loaded, for SourceDisk
	Saved     []Stored
}

// Stats are a Manager's counters, for logs and harnesses.
type Stats struct {
	Requests        int64            `json:"requests"`
	MemoryTokenHits int64            `json:"memory_token_hits"`
	MemoryTextHits  int64            `json:"memory_text_hits"`
	DiskHits        int64            `json:"disk_hits"`
	Cold            int64            `json:"cold"`
	Misses          map[string]int64 `json:"misses"`      // live misses by reason
	DiskMisses      map[string]int64 `json:"disk_misses"` // disk lookups that gave nothing, by cause
	ReusedTokens    int64            `json:"reused_tokens"`
	PrefilledTokens int64            `json:"prefilled_tokens"`
	Saves           map[string]int64 `json:"saves"` // checkpoints stored, by reason
	Cache           *CacheStats      `json:"cache,omitempty"`
}

// Manager owns one live session and a disk cache and brings the session
// to each request's prompt reusing as much state as it can: the live
// session when it is a token or text prefix of the request, else the
// best disk checkpoint, else a cold prefill; it saves checkpoints at the
// four save moments of docs/formats/kvcache.md#save-moments. Sync, Decode, Close and Invalidate
// must not run concurrently; Stats may.
type Manager struct {
	opt  ManagerOptions
	sess *engine.Session
	log  *slog.Logger
	cont Continued

	user, assistant int

	textToks []int // the tokens text is the decoding of
	text     []byte

	bind struct {
		kind KeyKind
		text []byte
		pos  int
	}

	mu    sync.Mutex
	stats Stats
}

// NewManager returns a Manager of the session s.
func NewManager(s *engine.Session, opt ManagerOptions) *Manager {
	if opt.Chunk <= 0 {
		opt.Chunk = engine.PrefillChunk
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opt: opt, sess: s, log: log, cont: Continued{Policy: opt.Policy}, user: -1, assistant: -1}
	if opt.Tokenizer != nil {
		m.user, m.assistant = opt.Tokenizer.Special(tokenizer.User), opt.Tokenizer.Special(tokenizer.Assistant)
	}
	m.bind.pos = -1
	return m
}

// Session returns the live session.
func (m *Manager) Session() *engine.Session { return m.sess }

// Stats returns a copy of the counters, with the cache's.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	st := m.stats
	st.Misses, st.DiskMisses, st.Saves = cloneMap(m.stats.Misses), cloneMap(m.stats.DiskMisses), cloneMap(m.stats.Saves)
	m.mu.Unlock()
	if m.opt.Cache != nil {
		cs := m.opt.Cache.Stats()
		st.Cache = &cs
	}
	return st
}

func (m *Manager) count(f func(*Stats)) {
	m.mu.Lock()
	f(&m.stats)
	m.mu.Unlock()
}

// liveText returns the decoded text of the live tokens, extending a
// cached decoding when the session only grew.
func (m *Manager) liveText() []byte {
	toks := m.sess.Tokens()
	n := len(m.textToks)
	if n > len(toks) || !slices.Equal(m.textToks, toks[:n]) {
		m.textToks, m.text, n = m.textToks[:0], m.text[:0], 0
	}
	if n < len(toks) {
		m.text = append(m.text, m.opt.Tokenizer.Decode(toks[n:])...)
		m.textToks = append(m.textToks, toks[n:]...)
	}
	return m.text
}

// Bind records that the live session, at its current position, stands
// for a visible transcript (docs/formats/server.md#live-protocol-bindings): evict and shutdown saves made
// while the session is still there use it as the key.
func (m *Manager) Bind(kind KeyKind, visible []byte) {
	m.bind.kind, m.bind.text, m.bind.pos = kind, slices.Clone(visible), m.sess.Pos()
}

// evictKey returns the key of an evict or shutdown save.
func (m *Manager) evictKey() Key {
	if m.bind.pos == m.sess.Pos() && m.bind.kind != KeyTokenText {
		return Key{Kind: m.bind.kind, Text: m.bind.text}
	}
	return Key{Kind: KeyTokenText, Text: m.liveText()}
}

// Invalidate empties the live session (after a stop-sequence hit or an
// error).
func (m *Manager) Invalidate() {
	m.sess.Reset()
	m.bind.pos = -1
}

// Sync brings the live session to the request's prompt (docs/formats/server.md#decision-ladder
// steps 4, 6, 7 and 8, with the cold and continued saves of
// docs/formats/kvcache.md#save-moments). On a prefill error the session is reset.
func (m *Manager) Sync(req Request) (Result, error) {
	m.count(func(s *Stats) { s.Requests++ })
	live := m.sess.Tokens()
	pos := len(live)
	var res Result
	var prompt []int
	switch {
	case pos > 0 && len(req.Tokens) >= pos && slices.Equal(req.Tokens[:pos], live):
		res.Source, res.Reused, prompt = SourceMemoryToken, pos, req.Tokens
	case pos > 0 && m.opt.Tokenizer != nil && req.Text != "" && bytes.HasPrefix([]byte(req.Text), m.liveText()) &&
		m.opt.Tokenizer.PrefixAgrees(live, req.Text, req.Client):
		res.Source, res.Reused = SourceMemoryText, pos
		prompt = m.opt.Tokenizer.AppendEncodeRendered(slices.Clone(live), req.Text, len(m.text), req.Client)
	default:
		res.Miss = m.missReason(req, live)
		m.count(func(s *Stats) { bump(&s.Misses, res.Miss) })
		m.log.Debug("live kv cache miss", "reason", res.Miss, "live_tokens", pos)
		m.cont.Reset()
		if pos >= m.opt.Policy.MinTokens && pos > 0 {
			if st, ok := m.save(ReasonEvict, m.evictKey()); ok {
				res.Saved = append(res.Saved, st)
			}
		}
		prompt = m.fromDisk(req, &res)
	}
	if res.Source == "" {
		res.Source = SourceCold
		m.sess.Reset()
		prompt = req.Tokens
		if prompt == nil && m.opt.Tokenizer != nil {
			prompt = m.opt.Tokenizer.AppendEncodeRendered(nil, req.Text, 0, req.Client)
		}
	}
	if len(prompt) == 0 || len(prompt) >= m.sess.Context() {
		return res, fmt.Errorf("kvcache: prompt of %d tokens exceeds context %d", len(prompt), m.sess.Context())
	}
	m.count(func(s *Stats) {
		switch res.Source {
		case SourceMemoryToken:
			s.MemoryTokenHits++
		case SourceMemoryText:
			s.MemoryTextHits++
		case SourceDisk:
			s.DiskHits++
		case SourceCold:
			s.Cold++
		}
		s.ReusedTokens += int64(res.Reused)
	})
	m.log.Debug("kv cache decision", "source", string(res.Source), "reused", res.Reused, "prompt", len(prompt), "miss", res.Miss)
	if res.Source == SourceCold && m.opt.Cache != nil {
		if b := m.opt.Policy.ColdBoundary(prompt, m.user, m.assistant); b > 0 {
			old := m.cont.Suppress(b)
			if err := m.advance(prompt[:b], len(prompt), req, &res); err != nil {
				return res, err
			}
			if st, ok := m.save(ReasonCold, Key{}); ok {
				res.Saved = append(res.Saved, st)
				m.cont.Note(b)
			} else {
				m.cont.Restore(old)
			}
		}
	}
	if err := m.advance(prompt, len(prompt), req, &res); err != nil {
		return res, err
	}
	res.Prompt = m.sess.Tokens()
	return res, nil
}

// missReason classifies a live miss.
func (m *Manager) missReason(req Request, live []int) string {
	switch {
	case len(live) == 0:
		return MissNoLive
	case req.Tokens == nil:
		return MissTextMismatch
	case len(req.Tokens) < len(live) && slices.Equal(req.Tokens, live[:len(req.Tokens)]):
		return MissShorter
	}
	return MissTokenMismatch
}

// fromDisk tries the disk cache and returns the effective prompt of a hit.
func (m *Manager) fromDisk(req Request, res *Result) []int {
	c := m.opt.Cache
	text := req.Text
	if text == "" && req.Tokens != nil && m.opt.Tokenizer != nil {
		text = string(m.opt.Tokenizer.Decode(req.Tokens))
	}
	if c == nil || text == "" {
		return nil
	}
	ld, err := c.Load(m.sess, []byte(text))
	for _, f := range ld.Failures {
		m.count(func(s *Stats) { bump(&s.DiskMisses, f.Cause) })
		m.log.Debug("kv cache disk candidate failed", "file", f.Path, "cause", f.Cause, "err", f.Err)
	}
	if err != nil {
		if errors.Is(err, ErrNoCheckpoint) {
			m.count(func(s *Stats) { bump(&s.DiskMisses, "no-candidate") })
		}
		m.log.Debug("kv cache disk miss", "err", err)
		return nil
	}
	loaded := m.sess.Tokens()
	exact := len(req.Tokens) >= len(loaded) && slices.Equal(req.Tokens[:len(loaded)], loaded)
	if !exact && ld.Kind == KeyTokenText && !m.opt.Tokenizer.PrefixAgrees(loaded, text, req.Client) {
		// The key text matches but the checkpoint holds control tokens
		// where the request has client text, or ordinary ones where it has
		// template specials: reusing it would change what the model sees.
		m.count(func(s *Stats) { bump(&s.DiskMisses, "special-mismatch") })
		m.log.Debug("kv cache disk candidate disagrees on special tokens", "file", ld.Path)
		m.sess.Reset()
		return nil
	}
	res.Source, res.Reused, res.Disk = SourceDisk, ld.Tokens, &ld
	m.cont.Note(ld.Tokens)
	if exact {
		return req.Tokens
	}
	return m.opt.Tokenizer.AppendEncodeRendered(slices.Clone(loaded), text, ld.KeyLen, req.Client)
}

// advance prefills prompt[pos:end] in chunks ending at absolute multiples
// of the chunk and at continued frontiers, saving continued checkpoints.
func (m *Manager) advance(prompt []int, total int, req Request, res *Result) error {
	step := 0
	if m.opt.Cache != nil {
		step = m.opt.Policy.ContinuedStep()
	}
	from := m.sess.Pos()
	var stopped error
	err := engine.PrefillChunks(context.Background(), m.eval(), prompt[from:], engine.PrefillOptions{
		Chunk: m.opt.Chunk,
		End: func(pos int) int {
			next := (pos/m.opt.Chunk + 1) * m.opt.Chunk
			if step > 0 {
				next = min(next, (pos/step+1)*step)
			}
			return next
		},
		Progress: req.Layer,
		AfterChunk: func(pos int) error {
			res.Prefilled += pos - from
			m.count(func(s *Stats) { s.PrefilledTokens += int64(pos - from) })
			from = pos
			if st, ok := m.maybeContinued(); ok {
				res.Saved = append(res.Saved, st)
			}
			if req.Progress != nil {
				stopped = req.Progress(pos, total)
			}
			return stopped
		},
	})
	if err != nil && stopped == nil {
		m.Invalidate()
		return fmt.Errorf("kvcache: prefill: %w", err)
	}
	return err
}

// maybeContinued stores a continued checkpoint when the live session is
// at a new continued frontier.
func (m *Manager) maybeContinued() (Stored, bool) {
	if m.opt.Cache == nil || !m.cont.Target(m.sess.Pos()) {
		return Stored{}, false
	}
	st, ok := m.save(ReasonContinued, Key{})
	if ok {
		m.cont.Note(m.sess.Pos())
	}
	return st, ok
}

// Decode evaluates one generated token; with checkpoint set it first
// saves a continued checkpoint if the session is at a frontier (callers
// pass false inside a DSML tool block, docs/formats/kvcache.md#continued-saves).
func (m *Manager) Decode(token int, checkpoint bool) error {
	if checkpoint {
		m.maybeContinued()
	}
	return m.eval().Decode(token)
}

// eval returns what evaluates the session: ManagerOptions.Evaluator or
// the session itself.
func (m *Manager) eval() engine.Evaluator {
	if m.opt.Evaluator != nil {
		return m.opt.Evaluator
	}
	return m.sess
}

// Checkpoint stores the live session now, keyed like an evict save (the
// visible binding if it is at the live position, else the token text);
// it reports whether the checkpoint is on disk afterwards.
func (m *Manager) Checkpoint(reason Reason) (Stored, bool) {
	if m.opt.Cache == nil || m.sess.Pos() == 0 {
		return Stored{}, false
	}
	return m.save(reason, m.evictKey())
}

// Close saves the live session with reason shutdown (docs/formats/kvcache.md#shutdown-save).
func (m *Manager) Close() (Stored, bool) {
	if m.opt.Cache == nil || m.sess.Pos() == 0 || m.sess.Pos() < m.opt.Policy.MinTokens {
		return Stored{}, false
	}
	return m.save(ReasonShutdown, m.evictKey())
}

// save stores the live session; it reports whether the checkpoint is on
// disk afterwards.
func (m *Manager) save(reason Reason, key Key) (Stored, bool) {
	c := m.opt.Cache
	if c == nil {
		return Stored{}, false
	}
	if key.Kind == KeyTokenText && key.Text == nil && m.opt.Tokenizer != nil {
		key.Text = m.liveText()
	}
	var tools []ToolEntry
	if m.opt.Tools != nil {
		text := key.Text
		if text == nil && m.opt.Tokenizer != nil {
			text = m.liveText()
		}
		tools = m.opt.Tools(text)
	}
	st, err := c.Store(m.sess, reason, key, tools)
	if err != nil {
		m.log.Warn("kv cache save failed", "reason", reason.String(), "err", err)
		return st, false
	}
	if st.Skipped != "" {
		return st, false
	}
	m.count(func(s *Stats) { bump(&s.Saves, reason.String()) })
	return st, true
}
