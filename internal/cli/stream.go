package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/internal/membudget"
	"github.com/ds4-go/ds4/internal/mmap"
)

// SSDStreamingUsage is the help text of --ssd-streaming.
const SSDStreamingUsage = "keep the non-routed weights resident and read the routed experts from the model file into a cache of their own (models larger than memory)"

// CacheExpertsUsage is the help text of --ssd-streaming-cache-experts.
const CacheExpertsUsage = "the expert cache of --ssd-streaming: bytes with a unit (32GB = 32·10⁹, 512MiB = 512·2²⁰, 1.5GiB; B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) or a plain integer, a count of experts (default: 80 % of the memory this process may use, less the resident weights, the context and the session buffers)"

// Streaming is the SSD streaming flags of a command.
type Streaming struct {
	On    bool
	Cache string // --ssd-streaming-cache-experts as given; "" for the default budget
	fs    *pflag.FlagSet
}

// AddStreaming registers --ssd-streaming and --ssd-streaming-cache-experts
// on fs.
func AddStreaming(fs *pflag.FlagSet) *Streaming {
	s := &Streaming{fs: fs}
	fs.BoolVar(&s.On, "ssd-streaming", false, SSDStreamingUsage)
	fs.StringVar(&s.Cache, "ssd-streaming-cache-experts", "", CacheExpertsUsage)
	return s
}

// Check checks the flags' values: a cache size that parses, given only
// with --ssd-streaming.
func (s *Streaming) Check() error {
	if s == nil || s.Cache == "" {
		return nil
	}
	if !s.On {
		return FlagError(s.fs, "ssd-streaming-cache-experts", "needs --ssd-streaming")
	}
	if _, err := ParseCacheSize(s.Cache); err != nil {
		return FlagError(s.fs, "ssd-streaming-cache-experts", "%v", err)
	}
	return nil
}

// CacheSize is a parsed --ssd-streaming-cache-experts: a budget in bytes,
// or a count of experts.
type CacheSize struct {
	Bytes   int64
	Experts int
}

// units are the byte units of a cache size, decimal and binary, matched
// case-insensitively, longest first.
var units = []struct {
	name string
	mul  float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// ParseCacheSize parses a cache size: a number with a byte unit (32GB,
// 512MiB, 1.5GiB; decimal units are powers of 1000, binary ones of 1024)
// for bytes, or a plain integer for a count of experts.
func ParseCacheSize(v string) (CacheSize, error) {
	s := strings.TrimSpace(v)
	if s == "" {
		return CacheSize{}, errors.New("empty size")
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 {
			return CacheSize{}, errors.New("a count of experts must be at least 1")
		}
		return CacheSize{Experts: n}, nil
	}
	lower := strings.ToLower(s)
	for _, u := range units {
		num, ok := strings.CutSuffix(lower, u.name)
		if !ok {
			continue
		}
		num = strings.TrimSpace(num)
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || num == "" || strings.ContainsAny(num, "eEnNxXpP_") {
			return CacheSize{}, fmt.Errorf("%q is not a number of bytes", num)
		}
		b := f * u.mul
		if !(b >= 1) || b > math.MaxInt64/2 {
			return CacheSize{}, errors.New("the size must be at least 1 byte and below 4 EiB")
		}
		return CacheSize{Bytes: int64(b)}, nil
	}
	return CacheSize{}, errors.New("want bytes with a unit (32GB, 512MiB) or a whole count of experts")
}

// StreamSetup is what a command knows of its memory needs beyond the
// weights, for the default cache budget.
type StreamSetup struct {
	Context int // tokens of one session's context
	// Sessions is the number of sessions held at once (the server's KV
	// slots), which share one workspace; 0 means 1.
	Sessions int
	// Reserve is other memory the command holds while it runs (the
	// roofline's probe buffers, say), which the default budget leaves
	// out of the cache.
	Reserve int64
}

// Streamed is SSD streaming as StartStreaming set it up.
type Streamed struct {
	Slots     int
	SlotBytes int64
	Split     membudget.Split // the default budget's split; Memory is 0 for a size given
	Source    string          // where Split.Memory comes from
	Pin       *mmap.Pin
	// GoLimit is the Go runtime's soft memory limit StartStreaming set
	// (debug.SetMemoryLimit), 0 when it set none.
	GoLimit int64
}

// goLimitShare is the share of the process's memory the Go runtime's
// soft limit hands out before the pinned weights and the expert cache,
// which live outside its heap, are taken off: the budget's Fraction and a
// quarter of its headroom, the rest left to what the kernel holds for the
// process (the mapping's page tables, the pages of the file read on
// demand) and to the limit's being soft.
const goLimitShare = 0.85

// goMemoryLimit returns the soft limit that keeps the Go heap from
// growing, between two collections, past what mem leaves beside pinned
// bytes of weights and a cache of cache bytes; 0 when nothing is left.
// Without it the collector lets the heap reach twice its live size (a
// probe buffer freed and another allocated count both), which under a
// cgroup limit ends in the kernel killing the process.
func goMemoryLimit(mem, pinned, cache int64) int64 {
	return max(0, int64(goLimitShare*float64(mem))-pinned-cache)
}

// StartStreaming turns SSD streaming on for m, opened from path, as the
// flags ask (nothing without --ssd-streaming): it sizes the expert cache,
// streams the routed experts through it with O_DIRECT reads, pins the
// resident weights, and writes the split in one line to stderr prefixed
// with prog. The built-in tiny model has no file to read experts from:
// --ssd-streaming with it is a usage error.
func (s *Streaming) StartStreaming(m *engine.Model, path string, setup StreamSetup, prog string, stderr io.Writer) (*Streamed, error) {
	if s == nil || !s.On {
		return nil, nil
	}
	if path == "" {
		return nil, Usage(errors.New("--ssd-streaming reads the experts from the model file: give one with -m (the built-in tiny model has none)"))
	}
	layers, total, err := m.ExpertLayers()
	if err != nil {
		return nil, err
	}
	st := &Streamed{SlotBytes: expertcache.SlotBytes(layers)}
	size := CacheSize{}
	if s.Cache != "" {
		var err error
		if size, err = ParseCacheSize(s.Cache); err != nil {
			return nil, Usage(FlagError(s.fs, "ssd-streaming-cache-experts", "%v", err))
		}
	}
	switch {
	case size.Experts > 0:
		st.Slots = size.Experts
	case size.Bytes > 0:
		st.Slots = int(size.Bytes / st.SlotBytes)
	default:
		mem, err := membudget.Available("/")
		if err != nil {
			return nil, fmt.Errorf("ssd streaming: %w", err)
		}
		sessions := max(1, setup.Sessions)
		ctxBytes, _, _ := engine.ContextMemory(m.Params, setup.Context)
		scratch := engine.ScratchMemory(m.Params, min(engine.PrefillChunk, max(1, setup.Context)))
		st.Split = membudget.Budget(mem.Bytes, engine.PinnedBytes(m), int64(sessions)*ctxBytes, scratch+setup.Reserve)
		st.Source = mem.Source
		st.Slots = int(st.Split.Cache / st.SlotBytes)
	}
	used := m.Params.ExpertsUsed
	switch {
	case st.Slots < used && s.Cache == "":
		fmt.Fprintf(stderr, "%s: ssd streaming: the memory left (%s of %s, %s) holds %d experts; using the minimum, %d\n",
			prog, MiB(st.Split.Cache), MiB(st.Split.Memory), st.Source, st.Slots, used)
		st.Slots = used
	case st.Slots < 1:
		return nil, Usage(FlagError(s.fs, "ssd-streaming-cache-experts", "holds no expert of %s", MiB(st.SlotBytes)))
	}
	st.Slots = min(st.Slots, total)
	if err := m.Stream(path, engine.StreamOptions{Slots: st.Slots, Direct: true}); err != nil {
		return nil, fmt.Errorf("ssd streaming: %w", err)
	}
	st.Pin = engine.PinResident(m)
	// A limit set by GOMEMLIMIT or by an earlier call stands.
	if st.Split.Memory > 0 && debug.SetMemoryLimit(-1) == math.MaxInt64 {
		if st.GoLimit = goMemoryLimit(st.Split.Memory, st.Pin.Bytes, int64(st.Slots)*st.SlotBytes); st.GoLimit > 0 {
			debug.SetMemoryLimit(st.GoLimit)
		}
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, st.Line(m))
	return st, nil
}

// Line describes the split in one line: the resident bytes and how they
// are held, the cache's bytes and experts, and how they are read.
func (st *Streamed) Line(m *engine.Model) string {
	direct := true
	if c := m.ExpertCache(); c != nil {
		direct = c.Stats().Direct
	}
	read := "O_DIRECT"
	if !direct {
		read = "buffered reads: the file system refused O_DIRECT"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ssd streaming: resident %s (%s), expert cache %s = %d experts of %.2f MiB (%s)",
		MiB(st.Pin.Bytes), st.Pin.How, MiB(int64(st.Slots)*st.SlotBytes), st.Slots, float64(st.SlotBytes)/(1<<20), read)
	if st.Split.Memory > 0 {
		fmt.Fprintf(&b, "; budget %.0f %% of %s (%s) less context %s and sessions' and other buffers %s",
			100*membudget.Fraction, MiB(st.Split.Memory), st.Source, MiB(st.Split.Context), MiB(st.Split.Session))
	}
	if st.GoLimit > 0 {
		fmt.Fprintf(&b, "; Go heap limit %s", MiB(st.GoLimit))
	}
	if st.Pin.Err != nil {
		fmt.Fprintf(&b, "; not locked: %v", st.Pin.Err)
	}
	return b.String()
}

// Stop unpins the resident weights.
func (st *Streamed) Stop() {
	if st != nil && st.Pin != nil {
		st.Pin.Unpin()
	}
}

// MiB formats n bytes in MiB with one decimal.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// ExpertStats returns the expert cache's counters of m, and false when m
// does not stream its experts.
func ExpertStats(m *engine.Model) (expertcache.Stats, bool) {
	if m == nil {
		return expertcache.Stats{}, false
	}
	c := m.ExpertCache()
	if c == nil {
		return expertcache.Stats{}, false
	}
	return c.Stats(), true
}

// StreamSummary describes the cache's work over tokens processed tokens in
// one line: hit rate, bytes read per token and read latency.
func StreamSummary(st expertcache.Stats, tokens int) string {
	per := 0.0
	if tokens > 0 {
		per = float64(st.BytesRead) / float64(tokens)
	}
	return fmt.Sprintf("ssd: hit rate %.1f %%, %.2f MiB read/token, read p50 %.2f ms p99 %.2f ms",
		100*st.HitRate(), per/(1<<20), ms(st.ReadP50), ms(st.ReadP99))
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
