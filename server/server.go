package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/kvcache"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// Defaults of the Config fields.
const (
	DefaultMaxTokens    = 393216
	DefaultQueueSize    = 16
	DefaultMaxBodyBytes = 64 << 20
	DefaultKeepAlive    = 5 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the time a client has to send a request,
	// headers and body.
	DefaultReadTimeout = time.Minute
	// DefaultMaxConnections bounds the open client connections.
	DefaultMaxConnections = 256
)

// Session is the inference timeline the server's worker owns:
// *engine.Session implements it.
type Session interface {
	// Context returns the context size in tokens.
	Context() int
	// Pos returns the number of evaluated tokens.
	Pos() int
	// Tokens returns the evaluated tokens.
	Tokens() []int
	// Prefill evaluates tokens at the next positions.
	Prefill(tokens []int) error
	// Decode evaluates one token at the next position.
	Decode(token int) error
	// Logits returns the logits after the last evaluated token.
	Logits() []float32
	// Reset empties the session.
	Reset()
	// SetLayerHook makes the session call f after each layer it evaluates
	// (nil: stop); engine.PrefillChunks reports the prefill's progress,
	// and so the worker's keep-alives, from it.
	SetLayerHook(f func())
	// Layers returns the number of layer hook calls per evaluation.
	Layers() int
}

// KVCache is the disk KV cache manager the worker syncs prompts through;
// *kvcache.Manager implements it.
type KVCache interface {
	// Sync brings the session to the request's prompt.
	Sync(kvcache.Request) (kvcache.Result, error)
	// Decode evaluates a generated token, first saving a continued
	// checkpoint when checkpoint is set and the session is at a frontier.
	Decode(token int, checkpoint bool) error
	// Bind records the visible transcript the live session stands for.
	Bind(kind kvcache.KeyKind, visible []byte)
	// Invalidate empties the live session.
	Invalidate()
	// Close saves the live session at shutdown.
	Close() (kvcache.Stored, bool)
}

// ToolStore looks up tool-call ids saved with disk checkpoints;
// *kvcache.Cache implements it.
type ToolStore interface {
	// ToolEntries returns the saved entries whose id wanted accepts.
	ToolEntries(wanted func(id string) bool) []kvcache.ToolEntry
}

// Config configures a Server.
type Config struct {
	// Session is the one inference session; the server is its only user
	// from New on. Required unless Sessions is set.
	Session Session
	// Sessions, when set, are the sessions of the server's slots (and
	// Session is ignored): the server runs up to one request on each at
	// a time, batching their decode steps (engine.DecodeBatch when every
	// session is an *engine.Session). They must have the same context
	// size, and as the server never evaluates two at once they may share
	// an engine.Workspace.
	Sessions []Session
	// KVCaches, when set, returns the disk KV cache manager of each slot
	// (it takes precedence over KVCache): slot is the slot's index, sess
	// its session and ev what the manager must evaluate the session
	// through (kvcache.ManagerOptions.Evaluator).
	KVCaches func(slot int, sess Session, ev engine.Evaluator) KVCache
	// BatchGrace is how long a decode step waits for the slots that have
	// not submitted their next token yet once one has; 0 means
	// DefaultBatchGrace.
	BatchGrace time.Duration
	// Tokenizer tokenizes prompts; nil means tokenizer.Default().
	Tokenizer *tokenizer.Tokenizer
	// ModelName names the loaded model in /v1/models and logs.
	ModelName string
	// ModelID is the loaded model's id, ModelFlash or ModelPro (see
	// Identify); "" means ModelFlash. /v1/models lists it first, the
	// other id after it as an alias reporting the same model.
	ModelID string
	// Tiny says the session runs the embedded tiny model (random weights),
	// which /v1/models reports.
	Tiny bool
	// DefaultMaxTokens is the output limit when a request sets none.
	DefaultMaxTokens int
	// QueueSize bounds the requests waiting for the worker; more are
	// refused with 429.
	QueueSize int
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64
	// APIKey, when set, must be presented as a bearer token or in the
	// x-api-key header. Serve refuses a non-loopback listener without one.
	APIKey string
	// CORS adds permissive CORS headers to every response.
	CORS bool
	// AcceptAnyModel serves requests for any model id (upstream
	// behaviour) instead of answering 404 for unknown ones.
	AcceptAnyModel bool
	// KeepAlive is the interval of SSE comment lines while a streaming
	// request waits in the queue or in a long prefill.
	KeepAlive time.Duration
	// PrefillChunk is the number of prompt tokens evaluated between
	// cancellation checks (keep-alives come between layers too); 0 means
	// engine.PrefillChunk.
	PrefillChunk int
	// WriteTimeout bounds each write to a client.
	WriteTimeout time.Duration
	// ReadTimeout bounds the time from the start of a request to the end
	// of its body; a connection whose request is not complete by then is
	// closed. It does not limit the response.
	ReadTimeout time.Duration
	// MaxConnections bounds the open client connections; connections past
	// it get a 503 and are closed.
	MaxConnections int
	// ToolMemoryIDs bounds the exact tool-call replay memory; negative
	// disables exact replay.
	ToolMemoryIDs int
	// KVCache, when set, brings the session to each prompt through the
	// disk KV cache (a *kvcache.Manager of Session) when there is one
	// slot; the server still runs
	// the protocol continuations of docs/formats/server.md#decision-ladder steps 1–3 and 5 itself.
	KVCache KVCache
	// KVStore, when set, supplies the tool-call ids saved with disk
	// checkpoints, for exact replay after a restart (a *kvcache.Cache).
	KVStore ToolStore
	// Trace, when set, receives a human-readable trace of every request.
	Trace io.Writer
	// Log receives operational messages; nil discards them.
	Log *log.Logger
	// Experts, when set, returns the expert cache's counters and true
	// while the model streams its routed experts from disk
	// (--ssd-streaming); /metrics shows them.
	Experts func() (expertcache.Stats, bool)
	// LargeRequests bounds the requests with a body or rendered prompt of
	// LargeRequestBytes or more that are decoded and tokenized at once
	// (others wait); 0 means runtime.GOMAXPROCS.
	LargeRequests int

	// tokenizeHook, when set, is called before each prompt is tokenized
	// (tests).
	tokenizeHook func()
}

// Server serves the OpenAI, Anthropic and Responses APIs over its engine
// sessions, the slots. Requests are decoded concurrently, wait in one
// queue and run on the slot chosen for them, at most one per slot.
type Server struct {
	cfg    Config
	tok    *tokenizer.Tokenizer
	ctx    int // context size of every slot
	eos    int
	log    *log.Logger
	tools  *toolMemory
	stats  metrics
	queue  chan *job
	qmu    sync.RWMutex // guards sends on queue against its closing
	qdone  bool         // queue closed
	seq    atomic.Int64 // response counter
	trace  sync.Mutex
	http   *http.Server
	base   context.Context // cancelled by Shutdown
	stop   context.CancelFunc
	closed atomic.Bool
	wg     sync.WaitGroup // the dispatcher
	start  time.Time

	slots     []*slot
	sched     *scheduler // nil with one slot
	slotsWG   sync.WaitGroup
	freed     chan struct{} // wakes the dispatcher when a slot is freed
	smu       sync.Mutex    // guards the slots' choice fields
	busySlots int
	useSeq    int64

	maxTokenBytes int           // the longest token's length in bytes
	large         chan struct{} // large-request slots (a semaphore)
}

// New returns a Server for cfg and starts its worker.
func New(cfg Config) (*Server, error) {
	if len(cfg.Sessions) == 0 && cfg.Session == nil {
		return nil, errors.New("server: no session")
	}
	for _, sess := range cfg.Sessions {
		if sess == nil || sess.Context() != cfg.Sessions[0].Context() {
			return nil, errors.New("server: the slots' sessions must exist and have the same context size")
		}
	}
	if cfg.Tokenizer == nil {
		t, err := tokenizer.Default()
		if err != nil {
			return nil, fmt.Errorf("server: tokenizer: %w", err)
		}
		cfg.Tokenizer = t
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "DeepSeek V4 Flash"
	}
	switch cfg.ModelID {
	case "":
		cfg.ModelID = ModelFlash
	case ModelFlash, ModelPro:
	default:
		return nil, fmt.Errorf("server: model id %q: want %s or %s", cfg.ModelID, ModelFlash, ModelPro)
	}
	setDefault(&cfg.DefaultMaxTokens, DefaultMaxTokens)
	setDefault(&cfg.QueueSize, DefaultQueueSize)
	setDefault(&cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&cfg.KeepAlive, DefaultKeepAlive)
	setDefault(&cfg.PrefillChunk, engine.PrefillChunk)
	setDefault(&cfg.WriteTimeout, DefaultWriteTimeout)
	setDefault(&cfg.ReadTimeout, DefaultReadTimeout)
	setDefault(&cfg.MaxConnections, DefaultMaxConnections)
	setDefault(&cfg.ToolMemoryIDs, DefaultToolMemoryIDs)
	setDefault(&cfg.LargeRequests, runtime.GOMAXPROCS(0))
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	s := &Server{
		cfg:   cfg,
		tok:   cfg.Tokenizer,
		eos:   cfg.Tokenizer.Special(tokenizer.EOS),
		log:   cfg.Log,
		queue: make(chan *job, cfg.QueueSize),
		start: time.Now(),
		freed: make(chan struct{}, 1),

		maxTokenBytes: max(1, cfg.Tokenizer.MaxTokenBytes()),
		large:         make(chan struct{}, max(1, cfg.LargeRequests)),
	}
	if cfg.ToolMemoryIDs > 0 {
		s.tools = newToolMemory(cfg.ToolMemoryIDs, DefaultToolMemoryBytes)
	}
	s.base, s.stop = context.WithCancel(context.Background())
	// ReadTimeout sets a read deadline when a request starts, which
	// net/http lifts once the body has been read to its end (it then reads
	// on only to notice a client that leaves), so it bounds the request and
	// never the response. A body that does not come in time fails that
	// deadline, and so does net/http's draining of it after the handler
	// returns, which ends the connection.
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadTimeout:       cfg.ReadTimeout,
		ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout),
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          cfg.Log,
	}
	s.slots = s.newSlots(cfg)
	s.ctx = s.slots[0].sess.Context()
	s.wg.Add(1)
	go s.dispatch()
	s.slotsWG.Add(len(s.slots))
	for _, sl := range s.slots {
		go s.runSlot(sl)
	}
	return s, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Serve accepts connections on ln until Shutdown, at most
// Config.MaxConnections at a time. It refuses a listener on a non-loopback
// address when no API key is configured.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.APIKey == "" && !IsLoopback(ln.Addr()) {
		ln.Close()
		return fmt.Errorf("server: refusing to listen on %s without an API key", ln.Addr())
	}
	err := s.http.Serve(newLimitListener(ln, s.cfg.MaxConnections, &s.stats))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests, aborts the generation in progress at
// its next token, fails the queued requests with 503 and waits for the
// handlers and the worker to finish or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stop()
	err := s.http.Shutdown(ctx)
	s.qmu.Lock()
	s.qdone = true
	close(s.queue)
	s.qmu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// IsLoopback reports whether addr is a loopback TCP address.
func IsLoopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// statusWriter records the status code for the metrics. A response to a
// request whose body was not read to its end closes the connection: the
// rest of the body would have to be read first.
type statusWriter struct {
	http.ResponseWriter
	status int
	body   *requestBody // nil: the request has no body
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.body != nil && !w.body.done {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routes maps generation endpoints to their protocol.
var routes = map[string]api{
	"/v1/chat/completions": apiChat,
	"/v1/completions":      apiCompletions,
	"/v1/responses":        apiResponses,
	"/v1/messages":         apiMessages,
}

func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	if r.ContentLength != 0 {
		w.body = &requestBody{ReadCloser: r.Body}
		r.Body = w.body
	}
	path := r.URL.Path
	a, generate := routes[path]
	ea := a // the error shape of the checks before routing
	if path == "/v1/messages/count_tokens" {
		ea = apiMessages
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Printf("ds4-server: panic serving %s: %v\n%s", path, p, debug.Stack())
			if w.status == 0 {
				writeError(w, a, &apiError{status: http.StatusInternalServerError, message: "internal error"})
			}
		}
		s.stats.request(path, a, generate, w.status)
	}()
	if s.cfg.CORS {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "*")
	}
	if s.cfg.APIKey == "" && !loopbackHost(r.Host) {
		writeError(w, ea, &apiError{status: http.StatusForbidden, code: "host_not_allowed",
			message: fmt.Sprintf("Host %q is not a loopback name: without an API key the server only answers requests addressed to localhost, 127.0.0.0/8 or [::1]", r.Host)})
		return
	}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
		return
	}
	if !s.authorized(r) {
		writeError(w, ea, &apiError{status: http.StatusUnauthorized, message: "invalid or missing API key", code: "invalid_api_key"})
		return
	}
	post := r.Method == http.MethodPost && (generate || path == "/v1/messages/count_tokens")
	if post && s.cfg.APIKey == "" && !jsonContentType(r.Header.Get("Content-Type")) {
		writeError(w, ea, &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
			message: fmt.Sprintf("Content-Type %q is not application/json: without an API key the server only accepts JSON bodies", r.Header.Get("Content-Type"))})
		return
	}
	switch {
	case path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		s.serveCountTokens(w, r)
	case generate && r.Method == http.MethodPost:
		s.serveGenerate(w, r, a)
	case path == "/metrics" && r.Method == http.MethodGet:
		s.serveMetrics(w)
	case path == "/v1/models" && r.Method == http.MethodGet:
		s.serveModels(w, "")
	case strings.HasPrefix(path, "/v1/models/") && r.Method == http.MethodGet:
		s.serveModels(w, strings.TrimPrefix(path, "/v1/models/"))
	case generate:
		w.Header().Set("Allow", "POST, OPTIONS")
		writeError(w, a, &apiError{status: http.StatusMethodNotAllowed, message: "method not allowed"})
	default:
		writeError(w, a, errNotFound)
	}
}

// authorized checks the API key, if one is configured.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := r.Header.Get("X-Api-Key")
	if auth := r.Header.Get("Authorization"); key == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		key = strings.TrimSpace(auth[7:])
	}
	return subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

// modelObject is the /v1/models entry for id.
func (s *Server) modelObject(id string) ordered {
	maxc := min(s.cfg.DefaultMaxTokens, s.ctx)
	name := s.cfg.ModelName
	o := ordered{
		{"id", id},
		{"object", "model"},
		{"created", int64(1767225600)},
		{"owned_by", "ds4.c"},
		{"name", name},
		{"context_length", s.ctx},
		{"top_provider", ordered{{"context_length", s.ctx}, {"max_completion_tokens", maxc}, {"is_moderated", false}}},
		{"supported_parameters", []string{"tools", "tool_choice", "max_tokens", "temperature", "top_p",
			"top_k", "min_p", "stop", "seed", "stream", "reasoning_effort", "logit_bias", "logprobs", "top_logprobs"}},
	}
	if s.cfg.Tiny {
		o = append(o, field{"tiny", true}, field{"description", "embedded tiny synthetic model (random weights, gibberish output): no -m given"})
	}
	return o
}

func (s *Server) serveModels(w http.ResponseWriter, id string) {
	var body []byte
	switch id {
	case "":
		alias := ModelPro
		if s.cfg.ModelID == ModelPro {
			alias = ModelFlash
		}
		body = marshal(ordered{{"object", "list"}, {"data", []ordered{s.modelObject(s.cfg.ModelID), s.modelObject(alias)}}})
	case ModelFlash, ModelPro:
		body = marshal(s.modelObject(id))
	default:
		writeError(w, apiOther, &apiError{status: http.StatusNotFound, message: "The model `" + id + "` does not exist", code: "model_not_found"})
		return
	}
	writeJSON(w, append(body, '\n'))
}

// serveCountTokens answers Anthropic's token counting endpoint with the
// length of the rendered prompt, which Claude Code uses to size its context.
func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, apiMessages, aerr)
		return
	}
	req, err := s.decodeCount(r.Context(), body)
	if err != nil {
		writeError(w, apiMessages, asAPIError(err))
		return
	}
	writeJSON(w, append(marshal(ordered{{"input_tokens", req.count}}), '\n'))
}

// ToolEntries returns the tool-map entries to save with a checkpoint keyed
// by key: the remembered ids of every DSML block in it. It serves as
// kvcache.ManagerOptions.Tools.
func (s *Server) ToolEntries(key []byte) []kvcache.ToolEntry {
	return kvcache.ToolEntriesFor(key, s.tools.idsOf)
}

// writeJSON writes a complete 200 JSON response.
func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// readBody reads the request body within the size limit; the server's
// read timeout bounds the time it may take.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, message: fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBodyBytes), code: "request_too_large"}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, tooLarge // refused unread; the reply closes the connection
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge
		case errors.As(err, &ne) && ne.Timeout():
			return nil, &apiError{status: http.StatusRequestTimeout, message: fmt.Sprintf("request body not received within the server's read timeout of %v", s.cfg.ReadTimeout), code: "request_timeout"}
		}
		return nil, badRequest("bad HTTP request")
	}
	return body, nil
}
