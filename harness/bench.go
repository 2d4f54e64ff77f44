package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// BenchConfig is a ds4-bench sweep (docs/formats/harness.md#bench-sweep).
type BenchConfig struct {
	CtxStart  int     `parquet:"ctx_start"` // first frontier
	CtxMax    int     `parquet:"ctx_max"`   // last frontier, always measured
	CtxAlloc  int     `parquet:"ctx_alloc"` // session context; 0 means CtxMax + GenTokens + 1
	StepIncr  int     `parquet:"step_incr"` // linear step, used when StepMul is 1
	StepMul   float64 `parquet:"step_mul"`  // multiplicative step (>= 1)
	GenTokens int     `parquet:"-"`         // greedy tokens decoded at each frontier (gen_tokens of each row)
	Repeat    int     `parquet:"repeats"`   // measurements per frontier; 0 means 1
}

// DefaultBenchConfig returns upstream's defaults.
func DefaultBenchConfig() BenchConfig {
	return BenchConfig{CtxStart: 2048, CtxMax: 32768, StepIncr: 2048, StepMul: 1, GenTokens: 128, Repeat: 1}
}

// Normalize checks the configuration with upstream's rules and fills the
// defaults of CtxAlloc and Repeat.
func (c *BenchConfig) Normalize() error {
	if c.Repeat == 0 {
		c.Repeat = 1
	}
	switch {
	case c.CtxStart <= 0 || c.CtxMax <= 0 || c.GenTokens <= 0 || c.Repeat <= 0 || c.CtxAlloc < 0:
		return errors.New("--ctx-start, --ctx-max, --gen-tokens and --repeat must be positive")
	case math.IsNaN(c.StepMul) || math.IsInf(c.StepMul, 0):
		return errors.New("--step-mul must be a finite number")
	case c.CtxStart > c.CtxMax:
		return errors.New("--ctx-start must be <= --ctx-max")
	case c.StepMul < 1:
		return errors.New("--step-mul must be >= 1")
	case c.StepMul == 1 && c.StepIncr <= 0:
		return errors.New("--step-incr must be positive when --step-mul is 1")
	case int64(c.CtxMax)+int64(c.GenTokens)+1 > math.MaxInt32:
		return errors.New("requested context is too large")
	}
	if c.CtxAlloc == 0 {
		c.CtxAlloc = c.CtxMax + c.GenTokens + 1
	}
	if c.CtxAlloc <= c.CtxMax+c.GenTokens {
		return errors.New("--ctx-alloc must be greater than ctx-max + gen-tokens")
	}
	return nil
}

// Next returns the frontier after cur (docs/formats/harness.md#frontiers).
func (c BenchConfig) Next(cur int) int {
	if cur >= c.CtxMax {
		return c.CtxMax
	}
	var next int
	if c.StepMul == 1 {
		if cur > math.MaxInt32-c.StepIncr {
			next = c.CtxMax
		} else {
			next = cur + c.StepIncr
		}
	} else {
		v := math.Ceil(float64(cur) * c.StepMul)
		if v > math.MaxInt32 {
			next = c.CtxMax
		} else {
			next = int(v)
		}
		if next <= cur {
			next = cur + 1
		}
	}
	return min(next, c.CtxMax)
}

// Frontiers returns the frontier sequence: CtxStart, then Next until
// CtxMax, which always ends it.
func (c BenchConfig) Frontiers() []int {
	var fs []int
	for f := c.CtxStart; ; f = c.Next(f) {
		fs = append(fs, f)
		if f >= c.CtxMax {
			return fs
		}
	}
}

// BenchRow is one measured frontier. The first six fields are upstream's
// CSV columns; with Repeat > 1 the rates are means, the SD fields their
// sample standard deviations and the CI fields the bounds of their 95%
// confidence intervals (meanCI; 0 for one run).
type BenchRow struct {
	CtxTokens      int64   `parquet:"ctx_tokens"`
	PrefillTokens  int64   `parquet:"prefill_tokens"`
	PrefillTPS     float64 `parquet:"prefill_tps"`
	GenTokens      int64   `parquet:"gen_tokens"`
	GenTPS         float64 `parquet:"gen_tps"`
	KVCacheBytes   int64   `parquet:"kvcache_bytes"`
	PrefillTPSSD   float64 `parquet:"prefill_tps_sd"`
	GenTPSSD       float64 `parquet:"gen_tps_sd"`
	PrefillTPSCILo float64 `parquet:"prefill_tps_ci_lo"`
	PrefillTPSCIHi float64 `parquet:"prefill_tps_ci_hi"`
	GenTPSCILo     float64 `parquet:"gen_tps_ci_lo"`
	GenTPSCIHi     float64 `parquet:"gen_tps_ci_hi"`
	PrefillSeconds float64 `parquet:"prefill_seconds"`
	GenSeconds     float64 `parquet:"gen_seconds"`
	// The SSD streaming expert cache over the frontier's work (all
	// repeats); 0 when the model does not stream its experts.
	SSDHitRate       float64 `parquet:"ssd_hit_rate"`
	SSDBytesPerToken float64 `parquet:"ssd_bytes_per_token"`
	SSDReadP50MS     float64 `parquet:"ssd_read_p50_ms"`
	SSDReadP99MS     float64 `parquet:"ssd_read_p99_ms"`
	Repeats          int64   `parquet:"-"`
	// Probe holds the greedy tokens decoded at the frontier (the same in
	// every repeat); it is not written out.
	Probe []int `parquet:"-"`
}

// Bench runs a frontier sweep over one token sequence in one session.
type Bench struct {
	Session *engine.Session
	Tokens  []int // the fixed sequence; at least CtxMax tokens
	EOS     int   // never chosen by the greedy probe
	Config  BenchConfig
	// KVBytes returns kvcache_bytes for the session at a frontier; nil
	// means the size of upstream's session payload layout (PayloadV1).
	KVBytes func(*engine.Session) (int64, error)
	// Row, when set, is called with each frontier's row as soon as it is
	// measured; an error stops the sweep.
	Row func(BenchRow) error
	// Progress, when set, is called with the number of tokens evaluated
	// by each prefill interval or decode step.
	Progress func(tokens int)
	// Experts, when set, returns the expert cache's counters and true
	// while the model streams its experts (--ssd-streaming); the rows'
	// ssd_ columns come from it.
	Experts func() (expertcache.Stats, bool)
}

// Work returns the number of tokens a sweep evaluates, for progress bars.
func (c BenchConfig) Work() int64 {
	var n int64
	prev := 0
	for _, f := range c.Frontiers() {
		n += int64(f-prev+c.GenTokens) * int64(max(c.Repeat, 1))
		prev = f
	}
	return n
}

// Run measures every frontier (docs/formats/harness.md#per-frontier-measurement): an incremental prefill of the
// new interval (timed), an untimed snapshot, GenTokens greedy non-EOS
// decode steps (timed), and an untimed restore, so the next prefill
// extends the measured sequence, never the probe. With Repeat > 1 each
// frontier is measured Repeat times from the state of the previous one.
// Rows measured before an error are returned with it.
func (b *Bench) Run(ctx context.Context) ([]BenchRow, error) {
	c := b.Config
	if err := c.Normalize(); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if len(b.Tokens) < c.CtxMax {
		return nil, fmt.Errorf("harness: prompt has %d tokens, need at least --ctx-max=%d", len(b.Tokens), c.CtxMax)
	}
	s := b.Session
	if s.Context() < c.CtxMax+c.GenTokens+1 {
		return nil, fmt.Errorf("harness: session context %d is smaller than ctx-max + gen-tokens + 1 = %d", s.Context(), c.CtxMax+c.GenTokens+1)
	}
	kvBytes := b.KVBytes
	if kvBytes == nil {
		kvBytes = func(s *engine.Session) (int64, error) {
			return s.PayloadSize(engine.PayloadOptions{Version: engine.PayloadV1})
		}
	}
	var (
		rows     []BenchRow
		prevSnap *engine.Snapshot // the state at the previous frontier (Repeat > 1)
		prev     int
	)
	for _, f := range c.Frontiers() {
		row := BenchRow{CtxTokens: int64(f), PrefillTokens: int64(f - prev), GenTokens: int64(c.GenTokens), Repeats: int64(c.Repeat)}
		pre := make([]float64, 0, c.Repeat)
		gen := make([]float64, 0, c.Repeat)
		st0, streaming := b.experts()
		var snap *engine.Snapshot
		for r := range c.Repeat {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			if r > 0 {
				if err := b.rewind(prevSnap); err != nil {
					return rows, fmt.Errorf("harness: restore before %d failed: %w", f, err)
				}
			}
			t0 := time.Now()
			if err := b.sync(ctx, b.Tokens[:f]); err != nil {
				return rows, fmt.Errorf("harness: prefill to %d failed: %w", f, err)
			}
			preSec := time.Since(t0).Seconds()
			snap = s.Snapshot()
			if r == 0 {
				n, err := kvBytes(s)
				if err != nil {
					return rows, fmt.Errorf("harness: snapshot at %d failed: %w", f, err)
				}
				row.KVCacheBytes = n
			}
			probe, genSec, err := b.probe(ctx)
			if err != nil {
				return rows, fmt.Errorf("harness: frontier %d: %w", f, err)
			}
			if err := s.Restore(snap); err != nil {
				return rows, fmt.Errorf("harness: restore at %d failed: %w", f, err)
			}
			pre = append(pre, rate(f-prev, preSec))
			gen = append(gen, rate(c.GenTokens, genSec))
			row.PrefillSeconds += preSec / float64(c.Repeat)
			row.GenSeconds += genSec / float64(c.Repeat)
			if r == 0 {
				row.Probe = probe
			} else if !slices.Equal(probe, row.Probe) {
				return rows, fmt.Errorf("harness: the greedy probe at frontier %d differs between repeats", f)
			}
		}
		_, row.PrefillTPSSD = meanSD(pre)
		_, row.GenTPSSD = meanSD(gen)
		row.PrefillTPS, row.PrefillTPSCILo, row.PrefillTPSCIHi = meanCI(pre)
		row.GenTPS, row.GenTPSCILo, row.GenTPSCIHi = meanCI(gen)
		if st1, ok := b.experts(); streaming && ok {
			row.setSSD(st0, st1, c.Repeat*(f-prev+c.GenTokens))
		}
		rows = append(rows, row)
		if b.Row != nil {
			if err := b.Row(row); err != nil {
				return rows, err
			}
		}
		if c.Repeat > 1 {
			prevSnap = snap
		}
		prev = f
	}
	return rows, nil
}

// experts returns the expert cache's counters, if the model streams its
// experts.
func (b *Bench) experts() (expertcache.Stats, bool) {
	if b.Experts == nil {
		return expertcache.Stats{}, false
	}
	return b.Experts()
}

// setSSD sets the row's ssd_ columns from the cache's counters before
// (st0) and after (st1) the frontier's work of tokens tokens evaluated:
// hit rate and bytes per token over that work, and the read latency
// quantiles the cache reports at its end.
func (r *BenchRow) setSSD(st0, st1 expertcache.Stats, tokens int) {
	d := st1.Sub(st0)
	r.SSDHitRate = d.HitRate()
	if tokens > 0 {
		r.SSDBytesPerToken = float64(d.BytesRead) / float64(tokens)
	}
	r.SSDReadP50MS = float64(st1.ReadP50) / float64(time.Millisecond)
	r.SSDReadP99MS = float64(st1.ReadP99) / float64(time.Millisecond)
}

// rewind puts the session back at the previous frontier (empty at the
// start).
func (b *Bench) rewind(snap *engine.Snapshot) error {
	if snap == nil {
		b.Session.Reset()
		return nil
	}
	return b.Session.Restore(snap)
}

// sync makes the session hold exactly tokens: when its tokens are a
// prefix only the rest is evaluated, otherwise it starts over.
func (b *Bench) sync(ctx context.Context, tokens []int) error {
	s := b.Session
	have := s.Tokens()
	if len(have) > len(tokens) || !slices.Equal(have, tokens[:len(have)]) {
		s.Reset()
	}
	done := s.Pos()
	return s.PrefillChunks(ctx, tokens[done:], engine.PrefillOptions{AfterChunk: func(pos int) error {
		b.progress(pos - done)
		done = pos
		return nil
	}})
}

// probe generates GenTokens greedy tokens, never EOS, after the session's
// last one and returns them with the seconds taken. The timed span covers
// choosing and evaluating every probe token: Generate leaves the last one
// pending, and probe evaluates it inside the span, so the rate counts
// GenTokens decode steps as upstream's loop does.
func (b *Bench) probe(ctx context.Context) ([]int, float64, error) {
	s, n := b.Session, b.Config.GenTokens
	probe := make([]int, 0, n)
	opt := engine.GenerateOptions{MaxTokens: n, EOS: -1,
		Choose: func(logits []float32, _ int) int { return argmaxExcluding(logits, b.EOS) },
		Token: func(tok, _ int) bool {
			probe = append(probe, tok)
			b.progress(1)
			return tok < 0
		},
	}
	t0 := time.Now()
	g, err := s.Generate(ctx, opt)
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("decode failed: %w", err)
	case g.Reason == engine.StopCancelled:
		return nil, 0, context.Cause(ctx)
	case g.Reason == engine.StopToken:
		return nil, 0, errors.New("failed to choose non-EOS token")
	case g.Tokens < n:
		return nil, 0, errors.New("generation would exceed allocated context")
	}
	if err := s.Decode(g.Pending); err != nil {
		return nil, 0, fmt.Errorf("decode failed: %w", err)
	}
	return probe, time.Since(t0).Seconds(), nil
}

func (b *Bench) progress(n int) {
	if b.Progress != nil {
		b.Progress(n)
	}
}

// rate returns n/sec, 0 when sec is not positive.
func rate(n int, sec float64) float64 {
	if sec > 0 {
		return float64(n) / sec
	}
	return 0
}

// argmaxExcluding returns the first index of the largest logit other than
// skip, or -1 when there is none.
func argmaxExcluding(logits []float32, skip int) int {
	best := -1
	for i, v := range logits {
		if i == skip || v != v {
			continue
		}
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	return best
}

// EncodeChat encodes text as one user message with thinking off, as
// upstream's encode_chat_prompt(system, text, no-think) does: BOS, the
// system text (plain, when not empty), <｜User｜>, the text (plain),
// <｜Assistant｜>, </think>.
func EncodeChat(tok *tokenizer.Tokenizer, system, text string) []int {
	ids := []int{tok.Special(tokenizer.BOS)}
	ids = tok.AppendEncode(ids, system, false)
	ids = append(ids, tok.Special(tokenizer.User))
	ids = tok.AppendEncode(ids, text, false)
	return append(ids, tok.Special(tokenizer.Assistant), tok.Special(tokenizer.ThinkEnd))
}
