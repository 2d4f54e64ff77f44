// Command ds4-server serves DeepSeek V4 Flash over HTTP with the OpenAI
// (chat completions, completions, responses) and Anthropic (messages) APIs.
//
//	ds4-server [-m FILE] [--ctx N] [--host HOST] [--port N] [--api-key KEY] ...
//
// With no -m and no ./ds4flash.gguf it serves the built-in tiny synthetic
// model (random weights), and says so at start-up and in /v1/models. It
// listens on 127.0.0.1 by default; binding any other address requires an
// API key (--api-key or DS4_API_KEY). --kv-disk-dir enables the disk KV
// cache (package kvcache) with the --kv-cache-* policy flags of upstream.
// --kv-cache-upstream-format writes upstream's KVC files, which carry no
// checksums: a flipped byte in a checkpoint's payload loads silently
// (ds4-go's own format checks CRCs over the header, rows and logits).
// The first SIGINT or SIGTERM stops accepting requests, aborts the
// generation in progress and saves the live session to the disk cache; a
// second one exits at once.
//
// Upstream's launch lines run unchanged (see internal/cli). Deviations
// from upstream: --power, --quality, --prefill-chunk and the SSD-streaming
// flags are accepted with a notice, and --mtp*, --metal, --cuda and
// --backend other than cpu are refused (exit status 2). The command line
// and the paths it names are checked before the model is loaded.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/kvcache"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/quant"
	"github.com/ds4-go/ds4/server"
	"github.com/ds4-go/ds4/steering"
)

// defaultModel is the GGUF ds4-server looks for when -m is not given.
const defaultModel = engine.DefaultModel

// apiKeyEnv names the environment variable that can hold the API key.
const apiKeyEnv = "DS4_API_KEY"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer, hooks *testHooks) int {
	return cli.Main(command(stderr, hooks), args, stdout, stderr)
}

// command describes ds4-server.
func command(stderr io.Writer, hooks *testHooks) cli.Command {
	return cli.Command{
		Name:     "ds4-server",
		Synopsis: []string{"[flags]"},
		Doc: `Serves DeepSeek V4 Flash over HTTP with the OpenAI (chat completions,
completions, responses) and Anthropic (messages) APIs, on 127.0.0.1
unless --host says otherwise (any other address needs an API key). With
no -m and no ./` + defaultModel + ` it serves the built-in tiny synthetic model.
The first SIGINT or SIGTERM stops accepting requests and saves the live
session to the disk KV cache; a second one exits at once.`,
		Run: func(args []string) error {
			o, err := parseFlags(args, stderr)
			if err != nil {
				return err
			}
			return serve(o, stderr, hooks)
		},
	}
}

// options are the parsed command line.
type options struct {
	model, host, trace, chdir, apiKey, kvDir string
	ctx, tokens, threads, port, queue        int
	parallel                                 int
	maxConns                                 int
	kvSpaceMB, toolIDs, maxBodyMB            int
	kvPolicy                                 kvcache.Policy
	kvRejectQuant, kvUpstream                bool
	cors, noReplay, anyModel, warm           bool
	keepAlive, readTimeout                   time.Duration
	steerFile                                string
	steerFFN, steerAttn                      float32 // resolved scales; both 0 means no steering
	rawFFN, rawAttn                          float64 // the scales as given
	ssd                                      *cli.Streaming
}

// flagSet returns the flag set that parses into o, holding the defaults.
func (o *options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("ds4-server", pflag.ContinueOnError)
	fs.StringVarP(&o.model, "model", "m", "", cli.ModelUsage)
	fs.IntVarP(&o.ctx, "ctx", "c", 32768, "context size in tokens, allocated at start-up")
	fs.IntVar(&o.parallel, "parallel", 1, "slots: requests served at once, each on its own session of --ctx tokens, their decode steps batched (also -np)")
	fs.IntVar(&o.parallel, "np", 1, "same as --parallel")
	fs.MarkHidden("np")
	fs.IntVarP(&o.tokens, "tokens", "n", server.DefaultMaxTokens, "default maximum output tokens when a request sets none")
	fs.IntVarP(&o.threads, "threads", "t", 0, cli.ThreadsUsage)
	fs.StringVar(&o.chdir, "chdir", "", "change to DIR before loading")
	fs.BoolVar(&o.warm, "warm-weights", false, "read every page of the weights before serving: a slower start, no page faults in the first requests")
	fs.StringVar(&o.host, "host", "127.0.0.1", "address to listen on (localhost means 127.0.0.1); non-loopback addresses need --api-key")
	fs.IntVar(&o.port, "port", 8000, "port to listen on")
	fs.StringVar(&o.apiKey, "api-key", "", "require this key as a bearer token or x-api-key (default $"+apiKeyEnv+")")
	fs.BoolVar(&o.cors, "cors", false, "send permissive CORS headers")
	fs.StringVar(&o.trace, "trace", "", "write a human-readable trace of every request to FILE (mode 0600: it holds whole prompts)")
	kvDefaults := kvcache.DefaultPolicy()
	fs.StringVar(&o.kvDir, "kv-disk-dir", "", "enable the disk KV cache in DIR")
	fs.IntVar(&o.kvSpaceMB, "kv-disk-space-mb", 4096, "disk KV cache budget in MiB")
	fs.IntVar(&o.kvPolicy.MinTokens, "kv-cache-min-tokens", kvDefaults.MinTokens, "shortest checkpoint saved or loaded")
	fs.IntVar(&o.kvPolicy.ColdMaxTokens, "kv-cache-cold-max-tokens", kvDefaults.ColdMaxTokens, "cold saves only for prompts up to N tokens; 0 disables them")
	fs.IntVar(&o.kvPolicy.ContinuedInterval, "kv-cache-continued-interval-tokens", kvDefaults.ContinuedInterval, "spacing of continued saves; 0 disables them")
	fs.IntVar(&o.kvPolicy.TrimTokens, "kv-cache-boundary-trim-tokens", kvDefaults.TrimTokens, "cold-save tail trim")
	fs.IntVar(&o.kvPolicy.AlignTokens, "kv-cache-boundary-align-tokens", kvDefaults.AlignTokens, "cold and continued save alignment; 0 disables it")
	fs.BoolVar(&o.kvRejectQuant, "kv-cache-reject-different-quant", false, "only reuse checkpoints written with the same routed-expert quantization")
	fs.BoolVar(&o.kvUpstream, "kv-cache-upstream-format", false, "write checkpoints in upstream ds4's file format, which has no checksums: a corrupted payload byte loads silently")
	fs.BoolVar(&o.noReplay, "disable-exact-dsml-tool-replay", false, "render every past tool call canonically instead of replaying the sampled DSML")
	fs.IntVar(&o.toolIDs, "tool-memory-max-ids", server.DefaultToolMemoryIDs, "bound of the exact tool-call replay memory, in ids")
	fs.IntVar(&o.queue, "queue", server.DefaultQueueSize, "requests that may wait for the worker before new ones get 429")
	fs.IntVar(&o.maxBodyMB, "max-body-mb", server.DefaultMaxBodyBytes>>20, "largest request body in MiB")
	fs.BoolVar(&o.anyModel, "accept-any-model", false, "serve requests for any model id instead of answering 404 for unknown ones")
	fs.DurationVar(&o.keepAlive, "keep-alive", server.DefaultKeepAlive, "interval of SSE keep-alive comments while a stream waits")
	fs.DurationVar(&o.readTimeout, "read-timeout", server.DefaultReadTimeout, "time a client has to send a request, headers and body; a connection past it is closed (responses are not limited)")
	fs.IntVar(&o.maxConns, "max-connections", server.DefaultMaxConnections, "open client connections; more get 503 and are closed")
	fs.StringVar(&o.steerFile, "dir-steering-file", "", "directional steering vector FILE (.f32)")
	fs.Float64Var(&o.rawFFN, "dir-steering-ffn", 0, "steering scale at the FFN output in [-100, 100] (1 when only a file is given)")
	fs.Float64Var(&o.rawAttn, "dir-steering-attn", 0, "steering scale at the attention output in [-100, 100]")
	o.ssd = cli.AddStreaming(fs)
	cli.AddUpstream(fs, upstreamFlags()...)
	return fs
}

// parseFlags parses and checks the command line; its errors are usage
// errors.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := o.flagSet()
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := o.check(fs, stderr); err != nil {
		return nil, cli.Usage(err)
	}
	if o.host == "localhost" {
		o.host = "127.0.0.1"
	}
	if o.apiKey == "" {
		o.apiKey = os.Getenv(apiKeyEnv)
	}
	return &o, nil
}

// check checks the parsed flags, naming the flag and the value at fault,
// and resolves the steering scales.
func (o *options) check(fs *pflag.FlagSet, stderr io.Writer) error {
	if err := cli.CheckUpstream(fs, stderr, "ds4-server", upstreamFlags()...); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	o.steerFFN, o.steerAttn, err = steering.Scales(o.steerFile, o.rawFFN, o.rawAttn, fs.Changed("dir-steering-ffn"), fs.Changed("dir-steering-attn"))
	if err != nil {
		return err
	}
	if err := cli.Context(fs, "ctx", o.ctx); err != nil {
		return err
	}
	if err := cli.Threads(fs, o.threads); err != nil {
		return err
	}
	if err := o.ssd.Check(); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		bad  bool
		want string
	}{
		{"tokens", o.tokens <= 0, "must be at least 1"},
		{"parallel", o.parallel <= 0, "must be at least 1"},
		{"port", o.port < 0 || o.port > 65535, "must be in [0, 65535]"},
		{"kv-disk-space-mb", o.kvSpaceMB <= 0, "must be at least 1"},
		{"kv-cache-min-tokens", o.kvPolicy.MinTokens <= 0, "must be at least 1"},
		{"kv-cache-cold-max-tokens", o.kvPolicy.ColdMaxTokens < 0, "must be at least 0 (0: no cold saves)"},
		{"kv-cache-continued-interval-tokens", o.kvPolicy.ContinuedInterval < 0, "must be at least 0 (0: no continued saves)"},
		{"kv-cache-boundary-trim-tokens", o.kvPolicy.TrimTokens < 0, "must be at least 0"},
		{"kv-cache-boundary-align-tokens", o.kvPolicy.AlignTokens < 0, "must be at least 0 (0: no alignment)"},
		{"kv-cache-cold-max-tokens", o.kvPolicy.ColdMaxTokens != 0 && o.kvPolicy.ColdMaxTokens < o.kvPolicy.MinTokens,
			fmt.Sprintf("must be 0 or at least --kv-cache-min-tokens (%d)", o.kvPolicy.MinTokens)},
		{"tool-memory-max-ids", o.toolIDs <= 0, "must be at least 1"},
		{"queue", o.queue <= 0, "must be at least 1"},
		{"max-body-mb", o.maxBodyMB <= 0, "must be at least 1"},
		{"keep-alive", o.keepAlive <= 0, "must be positive"},
		{"read-timeout", o.readTimeout <= 0, "must be positive"},
		{"max-connections", o.maxConns <= 0, "must be at least 1"},
	} {
		if c.bad {
			return cli.FlagError(fs, c.name, "%s", c.want)
		}
	}
	return nil
}

// testHooks let tests learn the listening address and stop the server.
type testHooks struct {
	ready chan<- string
	stop  <-chan struct{}
}

// serve loads the model, serves until a signal or hooks.stop, and shuts
// down.
func serve(o *options, stderr io.Writer, hooks *testHooks) error {
	logger := log.New(stderr, "", log.LstdFlags)
	if err := o.prepare(); err != nil {
		return cli.Usage(err)
	}
	m, name, tiny, err := openModel(o, stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	if tok.VocabSize() > m.Params.Vocab {
		return fmt.Errorf("the tokenizer has %d tokens but the model only %d", tok.VocabSize(), m.Params.Vocab)
	}
	be := cpu.New(o.threads)
	defer be.Close()
	steer, err := loadSteering(o, m)
	if err != nil {
		return err
	}
	// The slots take turns, so they share one set of scratch buffers.
	sessions, ws := make([]*engine.Session, o.parallel), engine.NewWorkspace(m)
	for i := range sessions {
		if sessions[i], err = engine.NewSession(m, be, engine.Options{Context: o.ctx, Steering: steer, Workspace: ws}); err != nil {
			return err
		}
	}
	var trace io.Writer
	if o.trace != "" {
		f, err := cli.CreatePrivate(o.trace)
		if err != nil {
			return err
		}
		defer f.Close()
		trace = f
	}
	id, _ := server.Identify(m.Params)
	l := &loaded{m: m, tok: tok, sessions: sessions, name: name, id: id, tiny: tiny}
	srv, err := newServer(o, l, trace, logger, stderr)
	if err != nil {
		return err
	}
	return listenAndServe(srv, o, l, logger, hooks)
}

// prepare changes to --chdir and checks the listening address and the
// paths, which are relative to it, before anything is loaded.
func (o *options) prepare() error {
	if o.chdir != "" {
		if err := os.Chdir(o.chdir); err != nil {
			return fmt.Errorf("--chdir %s: %w", o.chdir, err)
		}
	}
	if ip := net.ParseIP(o.host); o.apiKey == "" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--host %s: listening on %q needs an API key (--api-key or $%s)", o.host, o.host, apiKeyEnv)
	}
	return checkPaths(o)
}

// loaded is what the server serves: the model, its tokenizer and the
// slots' sessions, and the model's name for the log and /v1/models.
type loaded struct {
	m        *engine.Model
	tok      *tokenizer.Tokenizer
	sessions []*engine.Session
	name     string
	id       string // the model's id in /v1/models (server.Identify)
	tiny     bool   // the built-in tiny model
}

// openModel opens the model of -m with cli.OpenModel, checks --ctx against
// its context length and warms its weights for --warm-weights; name names
// it for the log and /v1/models: the released model its metadata
// describes (server.Identify) and the file.
func openModel(o *options, stderr io.Writer) (m *engine.Model, name string, tiny bool, err error) {
	m, opened, err := cli.OpenModel(o.model, false, "ds4-server", stderr)
	if err != nil {
		return nil, "", false, err
	}
	name, tiny = "DS4 tiny (embedded synthetic model)", opened == ""
	if !tiny {
		shown := o.model
		if shown == "" {
			shown = defaultModel
		}
		_, model := server.Identify(m.Params)
		name = model + " (" + shown + ")"
	}
	if max := m.Params.ContextLength; max > 0 && o.ctx > max {
		return nil, "", false, cli.Usage(fmt.Errorf("--ctx %d: must be at most %d, the context length of %s", o.ctx, max, name))
	}
	if _, err := o.ssd.StartStreaming(m, opened, cli.StreamSetup{Context: o.ctx, Sessions: o.parallel}, "ds4-server", stderr); err != nil {
		return nil, "", false, err
	}
	if o.warm {
		m.WarmWeights(stderr, "ds4-server")
	}
	return m, name, tiny, nil
}

// newServer assembles the server's configuration, with the disk KV cache
// when --kv-disk-dir asks for it, and creates the server.
func newServer(o *options, l *loaded, trace io.Writer, logger *log.Logger, stderr io.Writer) (*server.Server, error) {
	toolIDs := o.toolIDs
	if o.noReplay {
		toolIDs = -1
	}
	var srv *server.Server
	cfg := server.Config{
		Sessions:         sessionsOf(l.sessions),
		Tokenizer:        l.tok,
		ModelName:        l.name,
		ModelID:          l.id,
		Tiny:             l.tiny,
		DefaultMaxTokens: o.tokens,
		QueueSize:        o.queue,
		MaxBodyBytes:     int64(o.maxBodyMB) << 20,
		APIKey:           o.apiKey,
		CORS:             o.cors,
		AcceptAnyModel:   o.anyModel,
		KeepAlive:        o.keepAlive,
		ReadTimeout:      o.readTimeout,
		MaxConnections:   o.maxConns,
		ToolMemoryIDs:    toolIDs,
		Trace:            trace,
		Log:              logger,
		Experts:          func() (expertcache.Stats, bool) { return cli.ExpertStats(l.m) },
	}
	if o.kvDir != "" {
		store, managers, err := openKVCache(o, l, stderr, func(key []byte) []kvcache.ToolEntry { return srv.ToolEntries(key) })
		if err != nil {
			logger.Printf("ds4-server: disk KV cache disabled: %v", err)
		} else {
			cfg.KVCaches = managers
			if !o.noReplay {
				cfg.KVStore = store
			}
			st := store.Stats()
			logger.Printf("ds4-server: disk KV cache in %s: %d checkpoints, %d of %d MiB", store.Dir(), st.Files, st.Bytes>>20, o.kvSpaceMB)
		}
	}
	var err error
	srv, err = server.New(cfg)
	return srv, err
}

// listenAndServe serves srv on the address of o until it fails, a signal
// arrives or hooks.stop closes, then shuts it down.
func listenAndServe(srv *server.Server, o *options, l *loaded, logger *log.Logger, hooks *testHooks) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		return err
	}
	what := "model " + l.name
	if l.tiny {
		what = "the embedded tiny model (random weights, gibberish output: no -m given and no ./" + defaultModel + ")"
	}
	logMemory(logger, what, o, l.m)
	logger.Printf("ds4-server: listening on http://%s", ln.Addr())
	if hooks != nil && hooks.ready != nil {
		hooks.ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	var stop <-chan struct{}
	if hooks != nil {
		stop = hooks.stop
	}
	select {
	case err := <-errc:
		return err
	case <-sig:
		logger.Printf("ds4-server: shutting down (signal again to exit at once)")
		go func() { <-sig; os.Exit(130) }()
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	return <-errc
}

// logMemory logs what is served and, with several slots, the memory they
// take: their KV state, the prefill scratch buffers they share, and the
// total with the weights the forward passes read.
func logMemory(logger *log.Logger, what string, o *options, m *engine.Model) {
	if o.parallel == 1 {
		logger.Printf("ds4-server: serving %s, context %d tokens, ~%d MiB of KV state", what, o.ctx, kvEstimateMiB(m, o.ctx))
		return
	}
	ctxBytes, _, _ := engine.ContextMemory(m.Params, o.ctx)
	scratch := engine.ScratchMemory(m.Params, min(engine.PrefillChunk, o.ctx))
	var weights int64
	for _, b := range m.ResidentData() {
		weights += int64(len(b))
	}
	n := int64(o.parallel)
	logger.Printf("ds4-server: serving %s, %d slots of %d tokens: ~%d MiB of KV state and ~%d MiB of shared scratch buffers, ~%d MiB in all with the %d MiB of weights the passes read",
		what, o.parallel, o.ctx, n*ctxBytes>>20, scratch>>20, (n*ctxBytes+scratch+weights)>>20, weights>>20)
}

// checkPaths checks the files the flags name before anything is loaded.
func checkPaths(o *options) error {
	if err := cli.InputFile("model", o.model); err != nil {
		return err
	}
	if o.steerFFN != 0 || o.steerAttn != 0 {
		if err := cli.InputFile("dir-steering-file", o.steerFile); err != nil {
			return err
		}
	}
	if o.kvDir != "" {
		if st, err := os.Stat(o.kvDir); err == nil && !st.IsDir() {
			return fmt.Errorf("--kv-disk-dir %s: is a file, not a directory", o.kvDir)
		}
	}
	return cli.OutputFile("trace", o.trace)
}

// upstreamFlags are upstream ds4-server's flags that this build accepts
// without effect or refuses (see internal/cli).
func upstreamFlags() [][]cli.Upstream {
	return [][]cli.Upstream{cli.Backends(), cli.Tuning(), cli.MTP()}
}

// sessionsOf returns the sessions as the server's Session interface.
func sessionsOf(sessions []*engine.Session) []server.Session {
	out := make([]server.Session, len(sessions))
	for i, s := range sessions {
		out[i] = s
	}
	return out
}

// openKVCache opens the disk KV cache and returns it with the function
// that makes each slot's manager over it.
func openKVCache(o *options, l *loaded, stderr io.Writer, tools func(key []byte) []kvcache.ToolEntry) (
	*kvcache.Cache, func(int, server.Session, engine.Evaluator) server.KVCache, error) {
	m, tok := l.m, l.tok
	slogger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	bits := 2
	if m.Recipe.GateUp == quant.Q4_K {
		bits = 4
	}
	opt := kvcache.Options{
		Dir:                  o.kvDir,
		Budget:               int64(o.kvSpaceMB) << 20,
		QuantBits:            bits,
		RejectDifferentQuant: o.kvRejectQuant,
		Policy:               o.kvPolicy,
		Detokenize:           tok.Decode,
		MaxToolIDs:           o.toolIDs,
		Logger:               slogger,
	}
	if o.kvUpstream {
		opt.Format = kvcache.VersionUpstream
	}
	store, err := kvcache.Open(opt)
	if err != nil {
		return nil, nil, err
	}
	managers := func(slot int, _ server.Session, ev engine.Evaluator) server.KVCache {
		mo := kvcache.ManagerOptions{Cache: store, Tokenizer: tok, Policy: o.kvPolicy, Logger: slogger, Evaluator: ev}
		if o.parallel > 1 {
			mo.Logger = slogger.With("slot", slot)
		}
		if !o.noReplay {
			mo.Tools = tools
		}
		return kvcache.NewManager(l.sessions[slot], mo)
	}
	return store, managers, nil
}

// loadSteering reads the steering direction when a scale is non-zero.
func loadSteering(o *options, m *engine.Model) (*engine.Steering, error) {
	if o.steerFFN == 0 && o.steerAttn == 0 {
		return nil, nil // steering off: the file is not read
	}
	return steering.Load(o.steerFile, o.steerFFN, o.steerAttn, m.Params.Layers, m.Params.Embd)
}

// kvEstimateMiB estimates the session's cache memory: the raw window and
// the compressed and indexer rows of every compressed layer.
func kvEstimateMiB(m *engine.Model, ctx int) int {
	p := m.Params
	floats := 0
	for il := range p.Layers {
		floats += min(p.Window, ctx) * p.HeadDim
		if r := p.Ratio(il); r != 0 {
			floats += (ctx/r + 2) * p.HeadDim
			if r == 4 {
				floats += (ctx/4 + 2) * p.IndexerDim
			}
		}
	}
	return floats * 4 >> 20
}
