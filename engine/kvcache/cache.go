package kvcache

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/quant"
)

// Options configure a Cache.
type Options struct {
	// Dir is the cache directory, created (mode 0700) if missing.
	Dir string
	// Budget is the disk budget in bytes (--kv-disk-space-mb × 1 MiB);
	// 0 means 4096 MiB.
	Budget int64
	// QuantBits is the running engine's routed-expert quantization, 2 or 4.
	QuantBits int
	// RejectDifferentQuant loads only files written with QuantBits.
	RejectDifferentQuant bool
	// Policy supplies MinTokens (for stores and lookups) and ColdMaxTokens
	// (consume-on-load of upstream files).
	Policy Policy
	// Format is VersionGo (the default when 0) or VersionUpstream for
	// files upstream ds4 can read.
	Format uint8
	// MaxChain is the longest parent chain a ds4-go file may end: a store
	// whose best parent already ends a chain this long writes a
	// self-contained file. 0 means 16; a negative value disables deltas.
	MaxChain int
	// Detokenize returns the key text of tokens (the concatenated token
	// bytes); it is required for token-text keys.
	Detokenize func(tokens []int) []byte
	// MaxToolIDs bounds tool-map sections read back (4 × this entries);
	// 0 means 100000.
	MaxToolIDs int
	// Logger receives the cache's log lines; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// QuantBits returns the routed-expert quantization a model's checkpoints
// are tagged with: 4 when the routed expert gate tensor is Q4_K, else 2.
func QuantBits(m *engine.Model) int {
	if len(m.Layers) > 0 && m.Layers[0].GateExps.Type == quant.Q4_K {
		return 4
	}
	return 2
}

// Cache is a directory of KV checkpoint files with an in-process index.
// It is safe for concurrent use; one process should own a directory.
type Cache struct {
	opt     Options
	dir     string
	budget  int64
	log     *slog.Logger
	mu      sync.Mutex
	entries map[string]*Entry
	stats   CacheStats
	crashAt int64 // test hook: abandon a write after this many bytes
}

// Entry is the index record of one cache file.
type Entry struct {
	SHA    string
	Path   string
	Header Header
	Size   int64

	parent *Entry
}

// Parent returns the entry a ds4-go delta builds on, or nil.
func (e *Entry) Parent() *Entry { return e.parent }

// Depth returns the number of ancestors of the entry.
func (e *Entry) Depth() int {
	n := 0
	for p := e.parent; p != nil; p = p.parent {
		n++
	}
	return n
}

// ChainBytes returns the bytes of the files needed to restore the entry.
func (e *Entry) ChainBytes() int64 {
	var n int64
	for p := e; p != nil; p = p.parent {
		n += p.Size
	}
	return n
}

// chainCtx returns the largest context of the entry's chain: the
// smallest session context that can restore it.
func (e *Entry) chainCtx() uint32 {
	var c uint32
	for p := e; p != nil; p = p.parent {
		c = max(c, p.Header.Ctx)
	}
	return c
}

// chain returns the entry's files, root first.
func (e *Entry) chain() []*Entry {
	var out []*Entry
	for p := e; p != nil; p = p.parent {
		out = append(out, p)
	}
	slices.Reverse(out)
	return out
}

// usedAt is the time eviction ages hits from.
func (e *Entry) usedAt() uint64 {
	if e.Header.LastUsed != 0 {
		return e.Header.LastUsed
	}
	return e.Header.Created
}

// CacheStats are the cache's counters since Open.
type CacheStats struct {
	Files        int              `json:"files"`
	Bytes        int64            `json:"bytes"`
	Stores       map[string]int64 `json:"stores"`       // by reason
	DeltaStores  int64            `json:"delta_stores"` // stores written as deltas
	Reuses       int64            `json:"reuses"`       // stores that found the checkpoint on disk
	Skips        map[string]int64 `json:"skips"`        // stores skipped, by cause
	BytesWritten int64            `json:"bytes_written"`
	Loads        int64            `json:"loads"`
	LoadFailures map[string]int64 `json:"load_failures"` // by cause
	BytesRead    int64            `json:"bytes_read"`
	Evictions    int64            `json:"evictions"`
	EvictedBytes int64            `json:"evicted_bytes"`
	Removed      map[string]int64 `json:"removed"` // files deleted as unusable, by cause
}

func (s *CacheStats) clone() CacheStats {
	out := *s
	out.Stores, out.Skips = cloneMap(s.Stores), cloneMap(s.Skips)
	out.LoadFailures, out.Removed = cloneMap(s.LoadFailures), cloneMap(s.Removed)
	return out
}

func cloneMap(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func bump(m *map[string]int64, k string) {
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[k]++
}

// Open opens (creating it if needed) a cache directory: it deletes stale
// temporary files, indexes the valid cache files, removes damaged ds4-go
// files and deltas whose parent is gone, and runs an eviction pass.
func Open(opt Options) (*Cache, error) {
	if opt.Dir == "" {
		return nil, errors.New("kvcache: no directory")
	}
	if opt.Budget <= 0 {
		opt.Budget = 4096 << 20
	}
	if opt.Format == 0 {
		opt.Format = VersionGo
	}
	if opt.Format != VersionGo && opt.Format != VersionUpstream {
		return nil, fmt.Errorf("kvcache: unknown format %#x", opt.Format)
	}
	if opt.MaxChain == 0 {
		opt.MaxChain = 16
	}
	if opt.MaxToolIDs <= 0 {
		opt.MaxToolIDs = 100000
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kvcache: %w", err)
	}
	c := &Cache{opt: opt, dir: opt.Dir, budget: opt.Budget, log: log, entries: map[string]*Entry{}, crashAt: -1}
	if err := c.scan(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.evict("")
	c.mu.Unlock()
	log.Info("KV disk cache", "dir", c.dir, "budget_mib", mib(opt.Budget), "format", formatName(opt.Format),
		"cross_quant", !opt.RejectDifferentQuant, "files", len(c.entries), "min", opt.Policy.MinTokens,
		"cold_max", opt.Policy.ColdMaxTokens, "continued", opt.Policy.ContinuedInterval,
		"trim", opt.Policy.TrimTokens, "align", opt.Policy.AlignTokens, "hit_half_life", "21600s")
	return c, nil
}

func formatName(v uint8) string {
	if v == VersionUpstream {
		return "upstream-v1"
	}
	return "ds4-go"
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

// Stats returns a copy of the counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats.clone()
	st.Files = len(c.entries)
	for _, e := range c.entries {
		st.Bytes += e.Size
	}
	return st
}

// Entries returns a snapshot of the indexed files (parents included),
// longest key first.
func (c *Cache) Entries() []*Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked(func(*Entry) bool { return true })
}

// snapshotLocked copies the entries keep accepts, with copies of their
// ancestors as parents.
func (c *Cache) snapshotLocked(keep func(*Entry) bool) []*Entry {
	copies := map[*Entry]*Entry{}
	var cp func(e *Entry) *Entry
	cp = func(e *Entry) *Entry {
		if e == nil {
			return nil
		}
		if x, ok := copies[e]; ok {
			return x
		}
		x := *e
		copies[e] = &x
		x.parent = cp(e.parent)
		return &x
	}
	out := make([]*Entry, 0, len(c.entries))
	for _, e := range c.entries {
		if keep(e) {
			out = append(out, cp(e))
		}
	}
	slices.SortFunc(out, func(a, b *Entry) int {
		if a.Header.KeyLen != b.Header.KeyLen {
			return int(b.Header.KeyLen) - int(a.Header.KeyLen)
		}
		return strings.Compare(a.SHA, b.SHA)
	})
	return out
}

// Rescan rebuilds the index from the directory (for files changed by
// another process).
func (c *Cache) Rescan() error {
	c.mu.Lock()
	c.entries = map[string]*Entry{}
	c.mu.Unlock()
	return c.scan()
}

// scan indexes the directory.
func (c *Cache) scan() error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("kvcache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(c.dir, name)
		if strings.Contains(name, ".kv.tmp.") {
			// A write that never reached its rename: a crash.
			if os.Remove(path) == nil {
				bump(&c.stats.Removed, "stale-temp")
				c.log.Debug("kv cache removed stale temporary file", "file", path)
			}
			continue
		}
		sha, ok := parseName(name)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		e, err := readEntry(sha, path)
		switch {
		case err == nil:
			c.entries[sha] = e
		case e != nil && (e.Size < upstreamHeaderSize+4 || errors.Is(err, errCorrupt) && e.Header.Version == VersionGo):
			// Too short for any header, or a damaged ds4-go file.
			c.log.Warn("kv cache removed damaged file", "file", path, "err", err)
			if os.Remove(path) == nil {
				bump(&c.stats.Removed, "corrupt")
			}
		default:
			c.log.Debug("kv cache ignored file", "file", path, "err", err)
		}
	}
	c.link()
	return nil
}

// readEntry reads and checks the header of one file.
func readEntry(sha, path string) (*Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, headerPrefix)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	h, err := decodeHeader(b[:n], fi.Size())
	return &Entry{SHA: sha, Path: path, Header: h, Size: fi.Size()}, err
}

// link resolves the parents of ds4-go deltas and removes deltas whose
// parent is missing or was replaced.
func (c *Cache) link() {
	for {
		removed := false
		for _, e := range c.entries {
			if e.Header.Version != VersionGo || e.Header.ParentID == 0 {
				e.parent = nil
				continue
			}
			p := c.entries[hex.EncodeToString(e.Header.ParentSHA[:])]
			if p == nil || p.Header.Version != VersionGo || p.Header.FileID != e.Header.ParentID || p.Header.Tokens != e.Header.ParentTokens {
				c.log.Warn("kv cache removed delta whose parent is gone", "file", e.Path)
				c.removeLocked(e, "dangling")
				removed = true
				break
			}
			e.parent = p
		}
		if !removed {
			return
		}
	}
}

// children returns the entries whose parent is e.
func (c *Cache) children(e *Entry) []*Entry {
	var out []*Entry
	for _, x := range c.entries {
		if x.parent == e {
			out = append(out, x)
		}
	}
	return out
}

// removeLocked deletes a file and every delta built on it.
func (c *Cache) removeLocked(e *Entry, why string) (files int, bytes int64) {
	for _, ch := range c.children(e) {
		f, b := c.removeLocked(ch, why)
		files, bytes = files+f, bytes+b
	}
	if c.entries[e.SHA] == e {
		delete(c.entries, e.SHA)
	}
	if err := os.Remove(e.Path); err == nil || errors.Is(err, fs.ErrNotExist) {
		files++
		bytes += e.Size
		if why != "evicted" {
			bump(&c.stats.Removed, why)
		}
	}
	return files, bytes
}

// Key selects a checkpoint's key text.
type Key struct {
	Kind KeyKind
	// Text is the key text: the visible transcript for visible kinds; for
	// token text, nil means Options.Detokenize of the session's tokens
	// (a caller that keeps that text may pass it).
	Text []byte
}

// Stored describes the outcome of a Store.
type Stored struct {
	SHA     string
	Path    string
	Tokens  int
	Bytes   int64  // bytes written (0 when the checkpoint was already on disk)
	Parent  string // SHA of the parent of a delta, "" for a self-contained file
	Reused  bool   // an identical checkpoint was already on disk
	Skipped string // why nothing was stored, "" otherwise
}

// Store saves the session's whole state as a checkpoint (docs/formats/kvcache.md#storing-a-checkpoint).
// With the ds4-go format, when an indexed file holds a token prefix of
// the session, the new file is a delta on it. Skips are not errors: they
// are reported in Stored.Skipped.
func (c *Cache) Store(s *engine.Session, reason Reason, key Key, tools []ToolEntry) (Stored, error) {
	start := time.Now()
	toks := s.Tokens()
	T := len(toks)
	c.mu.Lock()
	defer c.mu.Unlock()
	skip := func(why string) (Stored, error) {
		bump(&c.stats.Skips, why)
		c.log.Debug("kv cache skipped", "tokens", T, "reason", reason.String(), "because", why)
		return Stored{Tokens: T, Skipped: why}, nil
	}
	switch {
	case T == 0:
		return skip("empty session")
	case T < c.opt.Policy.MinTokens:
		return skip("below min tokens")
	case c.opt.QuantBits != 2 && c.opt.QuantBits != 4:
		return skip("engine quant is not 2 or 4 bits")
	}
	keyText := key.Text
	if key.Kind == KeyTokenText && keyText == nil {
		if c.opt.Detokenize == nil {
			return Stored{}, errors.New("kvcache: no Detokenize for a token-text key")
		}
		keyText = c.opt.Detokenize(toks)
	}
	switch {
	case len(keyText) == 0:
		return skip("empty key text")
	case uint64(len(keyText)) > math.MaxUint32:
		return skip("key text too long")
	}
	sha := KeySHA(keyText)
	path := filepath.Join(c.dir, fileName(sha))
	digest := TokensDigest(toks)
	var num uint8
	if s.Numerics() == engine.NumericsOfficial {
		num |= numOfficial
	} else if c.opt.Format == VersionGo {
		num |= numF16
	}
	section := encodeToolMap(tools)

	old := c.entries[sha]
	if old != nil {
		if c.sameCheckpoint(old, keyText, digest, num, s.Context()) {
			return c.reuseLocked(old, section, reason)
		}
		// The rename below replaces the file atomically; until then it
		// stays on disk, out of the index. Deltas on it cannot survive.
		c.log.Info("kv cache replacing incompatible file", "file", old.Path)
		for _, ch := range c.children(old) {
			c.removeLocked(ch, "dangling")
		}
		delete(c.entries, sha)
	}
	var parent *Entry
	if c.opt.Format == VersionGo {
		parent = c.bestParent(toks, num, s.Context())
	}
	popt := engine.PayloadOptions{Version: engine.PayloadV1}
	if c.opt.Format == VersionGo {
		popt = engine.PayloadOptions{Version: engine.PayloadGo, F16: num&numF16 != 0}
		if parent != nil {
			popt.Base = int(parent.Header.Tokens)
		}
	}
	psize, err := s.PayloadSize(popt)
	if err != nil {
		return Stored{}, fmt.Errorf("kvcache: %w", err)
	}
	now := uint64(c.opt.Now().Unix())
	h := Header{
		Version: c.opt.Format, QuantBits: uint8(c.opt.QuantBits), Reason: reason, Ext: uint8(key.Kind),
		Numerics: num, Tokens: uint32(T), Ctx: uint32(s.Context()), Created: now, LastUsed: now,
		PayloadBytes: uint64(psize), KeyLen: uint32(len(keyText)),
	}
	if len(section) > 0 {
		h.Ext |= ExtToolMap
	}
	if c.opt.Format == VersionGo {
		h.SectionBytes, h.SectionCRC = uint64(len(section)), crc32.Checksum(section, castagnoli)
		h.FileID = newFileID()
		h.TokensDigest = digest
		if parent != nil {
			h.ParentID, h.ParentTokens = parent.Header.FileID, parent.Header.Tokens
			h.ParentSHA = sha1Bytes(parent.SHA)
		}
	}
	size := h.minSize()
	if c.opt.Format == VersionUpstream {
		size += int64(len(section))
	}
	restoreOld := func() {
		if old != nil {
			if _, err := os.Stat(old.Path); err == nil {
				c.entries[sha] = old
			}
		}
	}
	if required := size + (size+99)/100; required > c.budget {
		restoreOld()
		return skip("larger than the disk budget")
	}
	if err := c.writeFile(path, &h, keyText, s, popt, section); err != nil {
		restoreOld()
		bump(&c.stats.Skips, "write failed")
		c.log.Warn("kv cache store failed", "tokens", T, "reason", reason.String(), "err", err)
		return Stored{}, fmt.Errorf("kvcache: store %s: %w", path, err)
	}
	e := &Entry{SHA: sha, Path: path, Header: h, Size: size, parent: parent}
	e.Header.statsOK = true
	c.entries[sha] = e
	bump(&c.stats.Stores, reason.String())
	c.stats.BytesWritten += size
	st := Stored{SHA: sha, Path: path, Tokens: T, Bytes: size}
	if parent != nil {
		c.stats.DeltaStores++
		st.Parent = parent.SHA
	}
	c.log.Info("kv cache stored", "tokens", T, "reason", reason.String(), "key", key.Kind.String(),
		"size_mib", mib(size), "parent_tokens", h.ParentTokens, "save_ms", ms(time.Since(start)), "file", path)
	c.evict(sha)
	return st, nil
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) }
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}

func sha1Bytes(hexSHA string) [20]byte {
	var b [20]byte
	hex.Decode(b[:], []byte(hexSHA))
	return b
}

// newFileID returns a random nonzero file identity.
func newFileID() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// sameCheckpoint reports whether an indexed file already holds this
// checkpoint: same key bytes, compatible quant and context and, for
// ds4-go files, the same tokens and numerics.
func (c *Cache) sameCheckpoint(e *Entry, key []byte, digest [20]byte, num uint8, ctx int) bool {
	h := &e.Header
	if h.Version != c.opt.Format || h.KeyLen != uint32(len(key)) || e.chainCtx() > uint32(ctx) {
		return false
	}
	if int(h.QuantBits) != c.opt.QuantBits && c.opt.RejectDifferentQuant {
		return false
	}
	if h.Version == VersionGo && (h.TokensDigest != digest || h.Numerics != num) {
		return false
	}
	f, err := os.Open(e.Path)
	if err != nil {
		return false
	}
	defer f.Close()
	got := make([]byte, len(key))
	if _, err := f.ReadAt(got, h.dataOffset()); err != nil {
		return false
	}
	return bytes.Equal(got, key)
}

// reuseLocked handles a store whose checkpoint is already on disk: the
// payload is kept; a changed tool map is rewritten (atomically, by
// copying the file) and the file is touched.
func (c *Cache) reuseLocked(e *Entry, section []byte, reason Reason) (Stored, error) {
	st := Stored{SHA: e.SHA, Path: e.Path, Tokens: int(e.Header.Tokens), Reused: true}
	if p := e.parent; p != nil {
		st.Parent = p.SHA
	}
	old, err := c.readSection(e)
	if err == nil && len(section) > 0 && !bytes.Equal(old, section) {
		n, err := c.rewriteSection(e, section)
		if err != nil {
			return st, fmt.Errorf("kvcache: rewrite tool map of %s: %w", e.Path, err)
		}
		st.Bytes = n
		c.stats.BytesWritten += n
	}
	e.Header.LastUsed = uint64(c.opt.Now().Unix())
	c.writeStats(e)
	c.stats.Reuses++
	c.log.Debug("kv cache store found the checkpoint on disk", "tokens", e.Header.Tokens, "reason", reason.String(), "file", e.Path)
	return st, nil
}

// bestParent returns the longest ds4-go file whose tokens are a prefix of
// toks and which can take one more link, or nil.
func (c *Cache) bestParent(toks []int, num uint8, ctx int) *Entry {
	if c.opt.MaxChain < 0 {
		return nil
	}
	var cands []*Entry
	for _, e := range c.entries {
		h := &e.Header
		if h.Version == VersionGo && int(h.Tokens) < len(toks) && h.Numerics == num &&
			int(h.QuantBits) == c.opt.QuantBits && e.chainCtx() <= uint32(ctx) && e.Depth()+1 < c.opt.MaxChain {
			cands = append(cands, e)
		}
	}
	slices.SortFunc(cands, func(a, b *Entry) int { return int(b.Header.Tokens) - int(a.Header.Tokens) })
	digests := map[uint32][20]byte{}
	for _, e := range cands {
		// A delta must save at least a tenth of a full file.
		if int(e.Header.Tokens)*10 < len(toks) {
			break
		}
		d, ok := digests[e.Header.Tokens]
		if !ok {
			d = TokensDigest(toks[:e.Header.Tokens])
			digests[e.Header.Tokens] = d
		}
		if d == e.Header.TokensDigest {
			return e
		}
	}
	return nil
}

// crashError is returned by the test hook that simulates a crash.
var errCrash = errors.New("simulated crash")

// countWriter counts bytes and can simulate a crash.
type countWriter struct {
	w       io.Writer
	n       int64
	crashAt int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	if w.crashAt >= 0 && w.n+int64(len(p)) > w.crashAt {
		k, _ := w.w.Write(p[:w.crashAt-w.n])
		w.n += int64(k)
		return k, errCrash
	}
	k, err := w.w.Write(p)
	w.n += int64(k)
	return k, err
}

// writeFile writes a cache file durably: a temporary file in the same
// directory, fsync, rename over the final name, fsync of the directory.
func (c *Cache) writeFile(path string, h *Header, key []byte, s *engine.Session, popt engine.PayloadOptions, section []byte) error {
	return c.atomicWrite(path, func(w io.Writer) error {
		if _, err := w.Write(h.encode()); err != nil {
			return err
		}
		if _, err := w.Write(key); err != nil {
			return err
		}
		if _, err := s.WritePayload(w, popt); err != nil {
			return err
		}
		_, err := w.Write(section)
		return err
	})
}

// atomicWrite runs fill on a temporary file and renames it to path.
func (c *Cache) atomicWrite(path string, fill func(io.Writer) error) error {
	tmp := path + ".tmp." + strconv.Itoa(os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	cw := &countWriter{w: f, crashAt: c.crashAt}
	bw := bufio.NewWriterSize(cw, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if errors.Is(err, errCrash) {
		f.Close() // the process "died": the temporary file stays
		return err
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(c.dir)
	return nil
}

// syncDir makes a rename durable; errors are ignored (not every
// filesystem supports it).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// readSection returns the bytes after the payload (the tool map), checked
// against the section CRC for ds4-go files.
func (c *Cache) readSection(e *Entry) ([]byte, error) {
	off := e.Header.payloadOffset() + int64(e.Header.PayloadBytes)
	n := e.Size - off
	if n <= 0 {
		return nil, nil
	}
	f, err := os.Open(e.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, err
	}
	if e.Header.Version == VersionGo && crc32.Checksum(b, castagnoli) != e.Header.SectionCRC {
		return nil, fmt.Errorf("%w: tool-map section checksum mismatch", errCorrupt)
	}
	return b, nil
}

// rewriteSection replaces a file's sections by copying its header, key
// and payload into a new file; it returns the bytes written.
func (c *Cache) rewriteSection(e *Entry, section []byte) (int64, error) {
	src, err := os.Open(e.Path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	h := e.Header
	h.Ext |= ExtToolMap
	h.LastUsed = uint64(c.opt.Now().Unix())
	body := h.payloadOffset() - h.dataOffset() + int64(h.PayloadBytes)
	if h.Version == VersionGo {
		h.SectionBytes, h.SectionCRC = uint64(len(section)), crc32.Checksum(section, castagnoli)
	}
	err = c.atomicWrite(e.Path, func(w io.Writer) error {
		hb := h.encode()
		if h.Version != VersionGo {
			hb = hb[:upstreamHeaderSize] // the key length word is copied with the body
		}
		if _, err := w.Write(hb); err != nil {
			return err
		}
		if _, err := io.Copy(w, io.NewSectionReader(src, int64(len(hb)), body)); err != nil {
			return err
		}
		_, err := w.Write(section)
		return err
	})
	if err != nil {
		return 0, err
	}
	size := h.minSize()
	if h.Version != VersionGo {
		size += int64(len(section))
	}
	e.Header, e.Size = h, size
	return size, nil
}

// writeStats rewrites a file's hit count and last-use time in place. The
// write is not synced: the fields are advisory, and a torn ds4-go stats
// block only resets them.
func (c *Cache) writeStats(e *Entry) {
	f, err := os.OpenFile(e.Path, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if e.Header.Version == VersionGo {
		f.WriteAt(e.Header.encodeStats(), 112)
		return
	}
	f.WriteAt(e.Header.encode()[:upstreamHeaderSize], 0)
}

// evict removes files until the cache fits its budget (docs/formats/kvcache.md#eviction).
// A ds4-go delta is scored by its tokens per byte of its whole chain, a
// file's score is the best of its own and its descendants', and removing
// a file removes its descendants. protect (with its ancestors) survives
// unless its chain alone exceeds the budget. For self-contained files
// this is exactly upstream's policy.
func (c *Cache) evict(protect string) {
	var total int64
	for _, e := range c.entries {
		total += e.Size
	}
	if p := c.entries[protect]; p != nil && p.ChainBytes() > c.budget {
		protect = ""
	}
	now := uint64(c.opt.Now().Unix())
	for total > c.budget && len(c.entries) > 0 {
		score := c.scores(protect, now)
		var victim *Entry
		for _, e := range c.entries {
			if victim == nil || evictBefore(e, victim, score) {
				victim = e
			}
		}
		h := victim.Header
		files, freed := c.removeLocked(victim, "evicted")
		if files == 0 {
			return // unlink failed
		}
		total -= freed
		c.stats.Evictions += int64(files)
		c.stats.EvictedBytes += freed
		c.log.Info("kv cache evicted", "reason", "disk-cache-full", "tokens", h.Tokens, "hits", h.Hits,
			"size_mib", mib(freed), "files", files, "file", victim.Path)
	}
}

// evictBefore orders eviction candidates: lower score first; on a tie,
// deeper deltas before their ancestors, then the older last use.
func evictBefore(a, b *Entry, score map[*Entry]float64) bool {
	if score[a] != score[b] {
		return score[a] < score[b]
	}
	if da, db := a.Depth(), b.Depth(); da != db {
		return da > db
	}
	if a.usedAt() != b.usedAt() {
		return a.usedAt() < b.usedAt()
	}
	return a.SHA < b.SHA
}

// halfLife is the hit decay half-life of eviction scores.
const halfLife = 6 * 60 * 60

// scores returns every entry's eviction score.
func (c *Cache) scores(protect string, now uint64) map[*Entry]float64 {
	own := make(map[*Entry]float64, len(c.entries))
	for _, e := range c.entries {
		if e.SHA == protect {
			own[e] = math.Inf(1)
			continue
		}
		hits := float64(e.Header.Hits)
		t := e.usedAt()
		if t == 0 {
			hits = 0
		} else if now > t {
			hits *= math.Exp2(-float64(now-t) / halfLife)
			if hits < 0.01 {
				hits = 0
			}
		}
		own[e] = (hits + 1) * float64(e.Header.Tokens) / float64(e.ChainBytes())
	}
	score := make(map[*Entry]float64, len(own))
	for e, s := range own {
		for p := e; p != nil; p = p.parent {
			score[p] = max(score[p], s)
		}
	}
	return score
}
