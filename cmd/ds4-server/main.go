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
	"errors"
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
	os.Exit(run(os.Args[1:], os.Stderr, nil))
}

// usageError marks mistakes in the command line (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// options are the parsed command line.
type options struct {
	model, host, trace, chdir, apiKey, kvDir string
	ctx, tokens, threads, port, queue        int
	maxConns                                 int
	kvSpaceMB, toolIDs, maxBodyMB            int
	kvPolicy                                 kvcache.Policy
	kvRejectQuant, kvUpstream                bool
	cors, noReplay, anyModel, warm           bool
	keepAlive, readTimeout                   time.Duration
	steerFile                                string
	steerFFN, steerAttn                      float32 // resolved scales; both 0 means no steering
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := pflag.NewFlagSet("ds4-server", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVarP(&o.model, "model", "m", "", "model GGUF (default ./"+defaultModel+", else the built-in tiny model)")
	fs.IntVarP(&o.ctx, "ctx", "c", 32768, "context size in tokens, allocated at start-up")
	fs.IntVarP(&o.tokens, "tokens", "n", server.DefaultMaxTokens, "default maximum output tokens when a request sets none")
	fs.IntVarP(&o.threads, "threads", "t", 0, "CPU worker threads (0: one per CPU)")
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
	var steerFFN, steerAttn float64
	fs.StringVar(&o.steerFile, "dir-steering-file", "", "directional steering vector FILE (.f32)")
	fs.Float64Var(&steerFFN, "dir-steering-ffn", 0, "steering scale at the FFN output in [-100, 100] (1 when only a file is given)")
	fs.Float64Var(&steerAttn, "dir-steering-attn", 0, "steering scale at the attention output in [-100, 100]")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ds4-server [flags]\n\n%s", fs.FlagUsages())
	}
	cli.AddUpstream(fs, upstreamFlags()...)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := cli.CheckUpstream(fs, stderr, "ds4-server", upstreamFlags()...); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	o.steerFFN, o.steerAttn, err = steering.Scales(o.steerFile, steerFFN, steerAttn, fs.Changed("dir-steering-ffn"), fs.Changed("dir-steering-attn"))
	if err != nil {
		return nil, err
	}
	if err := cli.Context(fs, "ctx", o.ctx); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		bad  bool
		want string
	}{
		{"tokens", o.tokens <= 0, "must be at least 1"},
		{"threads", o.threads < 0, "must be at least 0 (0: one thread per CPU)"},
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
			return nil, cli.FlagError(fs, c.name, "%s", c.want)
		}
	}
	if o.host == "localhost" {
		o.host = "127.0.0.1"
	}
	if o.apiKey == "" {
		o.apiKey = os.Getenv(apiKeyEnv)
	}
	return &o, nil
}

// testHooks let tests learn the listening address and stop the server.
type testHooks struct {
	ready chan<- string
	stop  <-chan struct{}
}

// run executes the command line and returns the exit status.
func run(args []string, stderr io.Writer, hooks *testHooks) int {
	o, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "ds4-server: %v\n", err)
		return 2
	}
	if err := serve(o, stderr, hooks); err != nil {
		fmt.Fprintf(stderr, "ds4-server: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func serve(o *options, stderr io.Writer, hooks *testHooks) error {
	logger := log.New(stderr, "", log.LstdFlags)
	if o.chdir != "" {
		if err := os.Chdir(o.chdir); err != nil {
			return usageError{fmt.Errorf("--chdir %s: %w", o.chdir, err)}
		}
	}
	addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
	if ip := net.ParseIP(o.host); o.apiKey == "" && (ip == nil || !ip.IsLoopback()) {
		return usageError{fmt.Errorf("--host %s: listening on %q needs an API key (--api-key or $%s)", o.host, o.host, apiKeyEnv)}
	}
	// Paths are checked after --chdir, which they are relative to.
	if err := checkPaths(o); err != nil {
		return usageError{err}
	}

	m, name, tiny, err := openModel(o.model)
	if err != nil {
		return err
	}
	if max := m.Params.ContextLength; max > 0 && o.ctx > max {
		return usageError{fmt.Errorf("--ctx %d: must be at most %d, the context length of %s", o.ctx, max, name)}
	}
	if o.warm {
		m.WarmWeights(stderr, "ds4-server")
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
	sess, err := engine.NewSession(m, be, engine.Options{Context: o.ctx, Steering: steer})
	if err != nil {
		return err
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
	toolIDs := o.toolIDs
	if o.noReplay {
		toolIDs = -1
	}
	var srv *server.Server
	cfg := server.Config{
		Session:          sess,
		Tokenizer:        tok,
		ModelName:        name,
		Tiny:             tiny,
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
	}
	if o.kvDir != "" {
		store, mgr, err := openKVCache(o, m, tok, sess, stderr, func(key []byte) []kvcache.ToolEntry { return srv.ToolEntries(key) })
		if err != nil {
			logger.Printf("ds4-server: disk KV cache disabled: %v", err)
		} else {
			cfg.KVCache = mgr
			if !o.noReplay {
				cfg.KVStore = store
			}
			st := store.Stats()
			logger.Printf("ds4-server: disk KV cache in %s: %d checkpoints, %d of %d MiB", store.Dir(), st.Files, st.Bytes>>20, o.kvSpaceMB)
		}
	}
	srv, err = server.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	what := "model " + name
	if tiny {
		what = "the embedded tiny model (random weights, gibberish output: no -m given and no ./" + defaultModel + ")"
	}
	logger.Printf("ds4-server: serving %s, context %d tokens, ~%d MiB of KV state", what, o.ctx, kvEstimateMiB(m, o.ctx))
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

// openKVCache opens the disk KV cache and its manager of sess.
func openKVCache(o *options, m *engine.Model, tok *tokenizer.Tokenizer, sess *engine.Session, stderr io.Writer,
	tools func(key []byte) []kvcache.ToolEntry) (*kvcache.Cache, *kvcache.Manager, error) {
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
	mo := kvcache.ManagerOptions{Cache: store, Tokenizer: tok, Policy: o.kvPolicy, Logger: slogger}
	if !o.noReplay {
		mo.Tools = tools
	}
	return store, kvcache.NewManager(sess, mo), nil
}

// loadSteering reads the steering direction when a scale is non-zero.
func loadSteering(o *options, m *engine.Model) (*engine.Steering, error) {
	if o.steerFFN == 0 && o.steerAttn == 0 {
		return nil, nil // steering off: the file is not read
	}
	return steering.Load(o.steerFile, o.steerFFN, o.steerAttn, m.Params.Layers, m.Params.Embd)
}

// openModel opens path, or ./ds4flash.gguf, or the built-in tiny model,
// and names it for the log.
func openModel(path string) (m *engine.Model, name string, tiny bool, err error) {
	m, opened, err := engine.OpenDefault(path)
	switch {
	case err != nil:
		return nil, "", false, err
	case opened == "":
		return m, "DS4 tiny (embedded synthetic model)", true, nil
	}
	return m, "DeepSeek V4 Flash (" + opened + ")", false, nil
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
