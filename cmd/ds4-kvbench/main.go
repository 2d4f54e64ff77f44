// Command ds4-kvbench measures the disk KV cache on the built-in tiny
// model and reports three figures:
//
//   - payload bytes per token for the DeepSeek V4 Flash shape, upstream's
//     v1 layout against the ds4-go layout (computed from the layout);
//
//   - restore time against re-prefill time for a prefix (--prefix tokens);
//
//   - bytes written per agent turn in a scripted conversation (--turns
//     turns, each appending a tool result and a reply), checkpointing at
//     every turn with upstream's full-rewrite format, ds4-go
//     self-contained files and ds4-go deltas, in one run; the same token
//     counts are also projected onto the Flash shape.
//
//     ds4-kvbench [--prefix 2048] [--turns 20] [--tool-tokens 120] [--reply-tokens 40] [--json]
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/kvcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command-line settings.
type options struct {
	prefix, turns, toolTokens, replyTokens, threads int
	dir                                             string
	json                                            bool
}

// Report is everything the command measures.
type Report struct {
	Flash   FlashFigures `json:"flash"`
	Restore *Restore     `json:"restore,omitempty"`
	Turns   []Turn       `json:"turns,omitempty"`
	Totals  *Turn        `json:"totals,omitempty"`
}

// FlashFigures are the payload sizes of the Flash shape.
type FlashFigures struct {
	UpstreamPerToken float64 `json:"upstream_bytes_per_token"`
	GoPerToken       float64 `json:"go_bytes_per_token"`
	UpstreamFixed    int64   `json:"upstream_fixed_bytes"`
	GoFixedAvg       int64   `json:"go_fixed_bytes_avg"`
}

// Restore compares restoring a prefix from disk with prefilling it.
type Restore struct {
	Tokens        int     `json:"tokens"`
	PrefillMS     float64 `json:"prefill_ms"`
	GoRestoreMS   float64 `json:"go_restore_ms"`
	GoBytes       int64   `json:"go_file_bytes"`
	UpRestoreMS   float64 `json:"upstream_restore_ms"`
	UpBytes       int64   `json:"upstream_file_bytes"`
	BitIdentical  bool    `json:"bit_identical"`
	PrefillTokS   float64 `json:"prefill_tokens_per_s"`
	SpeedupGo     float64 `json:"speedup_go"`
	SpeedupUp     float64 `json:"speedup_upstream"`
	RestoreFileGo string  `json:"-"`
}

// Turn is the bytes one agent turn writes with each design.
type Turn struct {
	Turn          int   `json:"turn"`
	Tokens        int   `json:"tokens"`
	Upstream      int64 `json:"upstream_bytes"`
	GoFull        int64 `json:"go_full_bytes"`
	GoDelta       int64 `json:"go_delta_bytes"`
	FlashUpstream int64 `json:"flash_upstream_bytes"`
	FlashGoDelta  int64 `json:"flash_go_delta_bytes"`
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main(command(stdout, stderr), args, stdout, stderr)
}

// command describes ds4-kvbench.
func command(stdout, stderr io.Writer) cli.Command {
	return cli.Command{
		Name:     "ds4-kvbench",
		Synopsis: []string{"[flags]"},
		Doc: `Measures the disk KV cache on the built-in tiny model: the payload bytes
per token of the DeepSeek V4 Flash shape (upstream's v1 layout against
ds4-go's), restore time against re-prefill time for a --prefix, and the
bytes written per agent turn over --turns scripted turns with upstream's
format, ds4-go self-contained files and ds4-go deltas.`,
		Run: func(args []string) error { return runBench(args, stdout, stderr) },
	}
}

// runBench parses the flags, measures and prints the report.
func runBench(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("ds4-kvbench", pflag.ContinueOnError)
	var o options
	fs.IntVar(&o.prefix, "prefix", 2048, "prefix tokens for the restore-vs-prefill timing (0 skips it)")
	fs.IntVar(&o.turns, "turns", 20, "agent turns for the bytes-per-turn comparison (0 skips it)")
	fs.IntVar(&o.toolTokens, "tool-tokens", 120, "approximate tokens of each tool result")
	fs.IntVar(&o.replyTokens, "reply-tokens", 40, "approximate tokens of each reply")
	fs.IntVarP(&o.threads, "threads", "t", 0, cli.ThreadsUsage)
	fs.StringVar(&o.dir, "dir", "", "directory for the cache files (default: a temporary one, removed)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := o.validate(fs); err != nil {
		return cli.Usage(err)
	}
	rep, err := measure(o, stderr)
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	print(stdout, rep)
	return nil
}

// validate checks the options, naming the flag and the value at fault,
// before anything is built.
func (o *options) validate(fs *pflag.FlagSet) error {
	maxCtx := layout.Tiny().ContextLength
	turnCtx := 0 // the agent turns' context, where no factor overflows it
	if o.turns <= maxCtx && o.toolTokens <= maxCtx && o.replyTokens <= maxCtx {
		turnCtx = 1024 + o.turns*(o.toolTokens+o.replyTokens+64)
	}
	for _, v := range []struct {
		name string
		bad  bool
		want string
	}{
		{"prefix", o.prefix < 0, "must be at least 0 (0: no restore timing)"},
		{"prefix", o.prefix+restoreMargin > maxCtx, fmt.Sprintf("must be at most %d (the tiny model's context less %d)", maxCtx-restoreMargin, restoreMargin)},
		{"turns", o.turns < 0, "must be at least 0 (0: no turns)"},
		{"tool-tokens", o.toolTokens <= 0, "must be at least 1"},
		{"reply-tokens", o.replyTokens <= 0, "must be at least 1"},
		{"turns", o.turns > 0 && (turnCtx == 0 || turnCtx > maxCtx), fmt.Sprintf("with --tool-tokens %d and --reply-tokens %d: the conversation would not fit the tiny model's %d-token context", o.toolTokens, o.replyTokens, maxCtx)},
	} {
		if v.bad {
			return cli.FlagError(fs, v.name, "%s", v.want)
		}
	}
	if err := cli.Threads(fs, o.threads); err != nil {
		return err
	}
	if o.dir != "" {
		if st, err := os.Stat(o.dir); err == nil && !st.IsDir() {
			return cli.FlagError(fs, "dir", "is a file, not a directory")
		}
	}
	return nil
}

// restoreMargin is the context the restore timing allocates beyond its
// prefix.
const restoreMargin = 256

// measure runs the measurements.
func measure(o options, logw io.Writer) (*Report, error) {
	rep := &Report{Flash: flashFigures()}
	if o.prefix == 0 && o.turns == 0 {
		return rep, nil
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ds4-kvbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	fmt.Fprintln(logw, "ds4-kvbench: building the tiny model")
	m, err := engine.OpenTiny()
	if err != nil {
		return nil, err
	}
	tk, err := tokenizer.Default()
	if err != nil {
		return nil, err
	}
	be := cpu.New(o.threads)
	defer be.Close()
	b := &bench{o: o, m: m, tk: tk, be: be, dir: dir, log: logw}
	if o.prefix > 0 {
		if rep.Restore, err = b.restore(); err != nil {
			return nil, err
		}
	}
	if o.turns > 0 {
		if rep.Turns, rep.Totals, err = b.agentTurns(); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// flashFigures computes the Flash-shape payload growth and fixed sizes.
func flashFigures() FlashFigures {
	p := layout.Flash()
	const ctx, t0, span = 65536, 4096, 16384
	up := engine.PayloadOptions{Version: engine.PayloadV1}
	g := engine.PayloadOptions{F16: true}
	per := func(opt engine.PayloadOptions) float64 {
		return float64(engine.PayloadSizeFor(p, ctx, t0+span, opt)-engine.PayloadSizeFor(p, ctx, t0, opt)) / span
	}
	f := FlashFigures{UpstreamPerToken: per(up), GoPerToken: per(g)}
	f.UpstreamFixed = engine.PayloadSizeFor(p, ctx, t0, up) - int64(math.Round(f.UpstreamPerToken*t0))
	// The ds4-go tail depends on T mod 128 (live frontier slots): average it.
	var sum int64
	for r := range 128 {
		sum += engine.PayloadSizeFor(p, ctx, t0+r, g) - int64(math.Round(f.GoPerToken*float64(t0+r)))
	}
	f.GoFixedAvg = sum / 128
	return f
}

type bench struct {
	o   options
	m   *engine.Model
	tk  *tokenizer.Tokenizer
	be  *cpu.Backend
	dir string
	log io.Writer
}

// textOf returns about n tokens of deterministic text built from line.
func (b *bench) textOf(n int, line func(i int) string) string {
	var sb strings.Builder
	for i := 0; len(b.tk.Encode(sb.String())) < n; i++ {
		sb.WriteString(line(i))
	}
	return sb.String()
}

func (b *bench) session(ctx int) (*engine.Session, error) {
	return engine.NewSession(b.m, b.be, engine.Options{Context: ctx})
}

func (b *bench) cache(sub string, edit func(*kvcache.Options)) (*kvcache.Cache, error) {
	opt := kvcache.Options{Dir: b.dir + "/" + sub, QuantBits: 2, Policy: kvcache.Policy{MinTokens: 1},
		Detokenize: b.tk.Decode, Budget: 1 << 40}
	if edit != nil {
		edit(&opt)
	}
	return kvcache.Open(opt)
}

// restore times prefilling a prefix against restoring it from each format.
func (b *bench) restore() (*Restore, error) {
	n := b.o.prefix
	text := prompt.BOS + b.textOf(n, func(i int) string {
		return fmt.Sprintf("Line %d of the system prompt describes tool number %d and its arguments.\n", i, i%17)
	})
	toks := b.tk.EncodeSpecial(text)[:n]
	ctx := n + restoreMargin
	s, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "ds4-kvbench: prefilling %d tokens\n", n)
	start := time.Now()
	if err := s.Prefill(toks); err != nil {
		return nil, err
	}
	prefill := time.Since(start)
	key := b.tk.Decode(toks)
	r := &Restore{Tokens: n, PrefillMS: ms(prefill), BitIdentical: true, PrefillTokS: float64(n) / prefill.Seconds()}
	for _, f := range []uint8{kvcache.VersionGo, kvcache.VersionUpstream} {
		c, err := b.cache(fmt.Sprintf("restore-%x", f), func(o *kvcache.Options) { o.Format = f })
		if err != nil {
			return nil, err
		}
		st, err := c.Store(s, kvcache.ReasonCold, kvcache.Key{}, nil)
		if err != nil {
			return nil, err
		}
		dst, err := b.session(ctx)
		if err != nil {
			return nil, err
		}
		// Best of three warm restores.
		var best time.Duration
		for i := range 3 {
			start := time.Now()
			if _, err := c.Load(dst, key); err != nil {
				return nil, err
			}
			if d := time.Since(start); i == 0 || d < best {
				best = d
			}
		}
		same := slices.Equal(dst.Tokens(), s.Tokens())
		for i, v := range s.Logits() {
			same = same && math.Float32bits(v) == math.Float32bits(dst.Logits()[i])
		}
		r.BitIdentical = r.BitIdentical && same
		if f == kvcache.VersionGo {
			r.GoRestoreMS, r.GoBytes, r.SpeedupGo = ms(best), st.Bytes, float64(prefill)/float64(best)
		} else {
			r.UpRestoreMS, r.UpBytes, r.SpeedupUp = ms(best), st.Bytes, float64(prefill)/float64(best)
		}
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// agentTurns runs the scripted conversation and checkpoints every turn
// into the three designs.
func (b *bench) agentTurns() ([]Turn, *Turn, error) {
	o := b.o
	ctx := 1024 + o.turns*(o.toolTokens+o.replyTokens+64)
	s, err := b.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	var caches [3]*kvcache.Cache
	for i, edit := range []func(*kvcache.Options){
		func(o *kvcache.Options) { o.Format = kvcache.VersionUpstream },
		func(o *kvcache.Options) { o.MaxChain = -1 },
		nil,
	} {
		if caches[i], err = b.cache(fmt.Sprintf("turns-%d", i), edit); err != nil {
			return nil, nil, err
		}
	}
	mgr := kvcache.NewManager(s, kvcache.ManagerOptions{Tokenizer: b.tk, Policy: kvcache.Policy{MinTokens: 1}})
	text := prompt.BOS + "You are a coding agent. You can run shell commands with the `sh` tool and read files with `cat`." +
		prompt.User + "Find why the tests fail and fix them." + prompt.Assistant + "</think>"
	flash := layout.Flash()
	var turns []Turn
	tot := &Turn{}
	prevT := 0
	for turn := 1; turn <= o.turns; turn++ {
		if turn > 1 {
			result := b.textOf(o.toolTokens, func(i int) string {
				return fmt.Sprintf("pkg/mod%02d/file_%03d.go:%d: ok (%d ms)\n", turn, i, 10*i+turn, 3*i+1)
			})
			text += prompt.User + prompt.ToolResultOpen + result + prompt.ToolResultClose + prompt.Assistant + "</think>"
		}
		if _, err := mgr.Sync(kvcache.Request{Text: text}); err != nil {
			return nil, nil, err
		}
		reply := b.textOf(o.replyTokens, func(i int) string {
			return fmt.Sprintf("Turn %d, step %d: I will inspect the next package and run its tests. ", turn, i)
		})
		// The scripted reply enters the session as decoding would put it.
		if err := s.Prefill(b.tk.EncodeSpecial(reply)); err != nil {
			return nil, nil, err
		}
		text += reply + prompt.EOS
		T := s.Pos()
		t := Turn{Turn: turn, Tokens: T}
		for i, c := range caches {
			before := c.Stats().BytesWritten
			st, err := c.Store(s, kvcache.ReasonEvict, kvcache.Key{}, nil)
			if err != nil {
				return nil, nil, err
			}
			if st.Skipped != "" {
				return nil, nil, fmt.Errorf("turn %d: store skipped: %s", turn, st.Skipped)
			}
			w := c.Stats().BytesWritten - before
			switch i {
			case 0:
				t.Upstream = w
			case 1:
				t.GoFull = w
			case 2:
				t.GoDelta = w
			}
		}
		keyLen := int64(len(b.tk.Decode(s.Tokens())))
		t.FlashUpstream = 52 + keyLen + engine.PayloadSizeFor(flash, 65536, T, engine.PayloadOptions{Version: engine.PayloadV1})
		t.FlashGoDelta = 128 + keyLen + engine.PayloadSizeFor(flash, 65536, T, engine.PayloadOptions{Base: prevT, F16: true})
		prevT = T
		turns = append(turns, t)
		tot.Tokens = T
		tot.Upstream += t.Upstream
		tot.GoFull += t.GoFull
		tot.GoDelta += t.GoDelta
		tot.FlashUpstream += t.FlashUpstream
		tot.FlashGoDelta += t.FlashGoDelta
		fmt.Fprintf(b.log, "ds4-kvbench: turn %d: %d tokens\n", turn, T)
	}
	return turns, tot, nil
}

func print(w io.Writer, r *Report) {
	f := r.Flash
	fmt.Fprintf(w, "Flash-shape payload growth: upstream v1 %.0f B/token, ds4-go %.0f B/token (binary16 rows)\n", f.UpstreamPerToken, f.GoPerToken)
	fmt.Fprintf(w, "Flash-shape fixed part:     upstream v1 %.1f MiB, ds4-go %.1f MiB on average\n", mibf(f.UpstreamFixed), mibf(f.GoFixedAvg))
	if x := r.Restore; x != nil {
		fmt.Fprintf(w, "\nTiny model, %d-token prefix: prefill %.0f ms (%.0f tok/s)\n", x.Tokens, x.PrefillMS, x.PrefillTokS)
		fmt.Fprintf(w, "  restore ds4-go file   %8.2f ms  (%d bytes, %.0fx faster)\n", x.GoRestoreMS, x.GoBytes, x.SpeedupGo)
		fmt.Fprintf(w, "  restore upstream file %8.2f ms  (%d bytes, %.0fx faster)\n", x.UpRestoreMS, x.UpBytes, x.SpeedupUp)
		fmt.Fprintf(w, "  restored logits bit-identical: %v\n", x.BitIdentical)
	}
	if len(r.Turns) > 0 {
		fmt.Fprintf(w, "\nBytes written per agent turn (checkpoint at every turn):\n")
		fmt.Fprintf(w, "%4s %7s %12s %12s %12s | %14s %14s\n", "turn", "tokens", "upstream", "ds4-go full", "ds4-go delta", "Flash upstream", "Flash delta")
		for _, t := range r.Turns {
			fmt.Fprintf(w, "%4d %7d %12d %12d %12d | %12.1f M %12.1f M\n", t.Turn, t.Tokens, t.Upstream, t.GoFull, t.GoDelta, mibf(t.FlashUpstream), mibf(t.FlashGoDelta))
		}
		t := r.Totals
		fmt.Fprintf(w, "%4s %7d %12d %12d %12d | %12.1f M %12.1f M\n", "sum", t.Tokens, t.Upstream, t.GoFull, t.GoDelta, mibf(t.FlashUpstream), mibf(t.FlashGoDelta))
		fmt.Fprintf(w, "ratio upstream/ds4-go delta: tiny %.2fx, Flash shape %.2fx\n",
			float64(t.Upstream)/float64(t.GoDelta), float64(t.FlashUpstream)/float64(t.FlashGoDelta))
	}
}

func mibf(n int64) float64 { return float64(n) / (1 << 20) }
