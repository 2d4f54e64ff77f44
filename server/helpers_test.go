package server

import (
	"context"
	"flag"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

var (
	tinyOnce  sync.Once
	tinyModel *engine.Model
	tinyErr   error
)

// tiny returns the shared embedded tiny model.
func tiny(t testing.TB) *engine.Model {
	t.Helper()
	tinyOnce.Do(func() { tinyModel, tinyErr = engine.OpenTiny() })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyModel
}

func testTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// testServer is a Server listening on a loopback port.
type testServer struct {
	*Server
	url string // http://127.0.0.1:PORT
}

// startServer starts a server for cfg and stops it when the test ends.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = testTokenizer(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{Server: s, url: "http://" + ln.Addr().String()}
}

// testSlots is the number of slots tinyServer gives its servers;
// TestSDKParallelSlots runs the SDK tests again with 4.
var testSlots = flag.Int("slots", 1, "slots of the servers tinyServer starts")

// tinyServer starts a server over fresh sessions of the tiny model, as
// many as -slots says.
func tinyServer(t testing.TB, ctx int, mod func(*Config)) *testServer {
	t.Helper()
	return tinySlots(t, ctx, *testSlots, mod)
}

// tinySessions returns n fresh sessions of the tiny model sharing one
// workspace, as ds4-server's slots do.
func tinySessions(t testing.TB, ctx, n int) []*engine.Session {
	t.Helper()
	be := cpu.New(0)
	t.Cleanup(be.Close)
	out := make([]*engine.Session, n)
	ws := engine.NewWorkspace(tiny(t))
	for i := range out {
		sess, err := engine.NewSession(tiny(t), be, engine.Options{Context: ctx, Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = sess
	}
	return out
}

// tinySlots starts a server with n slots over fresh sessions of the tiny
// model.
func tinySlots(t testing.TB, ctx, n int, mod func(*Config)) *testServer {
	t.Helper()
	sessions := tinySessions(t, ctx, n)
	cfg := Config{Session: sessions[0], Tiny: true, ModelName: "tiny"}
	if n > 1 {
		for _, s := range sessions {
			cfg.Sessions = append(cfg.Sessions, s)
		}
	}
	if mod != nil {
		mod(&cfg)
	}
	return startServer(t, cfg)
}

// scriptSession is a Session whose "model" writes scripted replies: after
// every prefill it takes the next script and makes each of its tokens in
// turn the only possible next token, then EOS. It records the text of
// every prompt it was brought to.
type scriptSession struct {
	tok   *tokenizer.Tokenizer
	ctx   int
	eos   int
	delay time.Duration // per decoded token
	slowP time.Duration // per prefill call, spread over its layers
	// layers is the number of layer hook calls a prefill call makes
	// (0: none).
	layers int
	hook   func()

	mu      sync.Mutex
	tokens  []int
	scripts [][]int
	cur     []int
	idx     int
	loop    bool // repeat the current script forever
	logits  []float32
	hot     int
	// decoy, when ≥ 0, is a second possible token (slightly less likely
	// than the script's) offered once decoyFrom script tokens were decoded,
	// except at script index decoySkip.
	decoy, decoyFrom, decoySkip int
	prompts                     []string

	decodes atomic.Int64
}

func newScriptSession(t testing.TB, ctx int, scripts ...string) *scriptSession {
	tok := testTokenizer(t)
	s := &scriptSession{tok: tok, ctx: ctx, eos: tok.Special(tokenizer.EOS), logits: make([]float32, tok.VocabSize()), hot: -1, decoy: -1}
	for i := range s.logits {
		s.logits[i] = float32(math.Inf(-1))
	}
	s.push(scripts...)
	return s
}

// push queues replies.
func (s *scriptSession) push(scripts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range scripts {
		s.scripts = append(s.scripts, s.tok.EncodeSpecial(sc))
	}
}

func (s *scriptSession) Context() int { return s.ctx }
func (s *scriptSession) Pos() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}
func (s *scriptSession) Tokens() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.tokens...)
}
func (s *scriptSession) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = s.tokens[:0]
}

func (s *scriptSession) SetLayerHook(f func()) { s.hook = f }
func (s *scriptSession) Layers() int           { return s.layers }

func (s *scriptSession) Prefill(tokens []int) error {
	steps := max(1, s.layers)
	for i := range steps {
		if s.slowP > 0 {
			time.Sleep(s.slowP / time.Duration(steps))
		}
		if s.hook != nil && i < s.layers {
			s.hook()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tokens)+len(tokens) > s.ctx {
		return engine.ErrContextFull
	}
	s.tokens = append(s.tokens, tokens...)
	s.prompts = append(s.prompts, string(s.tok.Decode(s.tokens)))
	s.cur, s.idx = nil, 0
	if len(s.scripts) > 0 {
		s.cur, s.scripts = s.scripts[0], s.scripts[1:]
	}
	return nil
}

func (s *scriptSession) Decode(token int) error {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.decodes.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tokens) >= s.ctx {
		return engine.ErrContextFull
	}
	s.tokens = append(s.tokens, token)
	s.idx++
	return nil
}

func (s *scriptSession) Logits() []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.eos
	switch {
	case s.idx < len(s.cur):
		next = s.cur[s.idx]
	case s.loop && len(s.cur) > 0:
		next = s.cur[s.idx%len(s.cur)]
	}
	if s.hot >= 0 {
		s.logits[s.hot] = float32(math.Inf(-1))
	}
	if s.decoy >= 0 {
		s.logits[s.decoy] = float32(math.Inf(-1))
		if s.idx >= s.decoyFrom && s.idx != s.decoySkip && s.idx < len(s.cur) && next != s.decoy {
			s.logits[s.decoy] = -0.1
		}
	}
	s.hot = next
	s.logits[next] = 0
	return s.logits
}

// prompt returns the i-th recorded prompt (negative counts from the end).
func (s *scriptSession) prompt(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 {
		i += len(s.prompts)
	}
	if i < 0 || i >= len(s.prompts) {
		return ""
	}
	return s.prompts[i]
}

// scriptServer starts a server over a script session.
func scriptServer(t testing.TB, mod func(*Config), scripts ...string) (*testServer, *scriptSession) {
	t.Helper()
	sess := newScriptSession(t, 8192, scripts...)
	cfg := Config{Session: sess, PrefillChunk: 1 << 20}
	if mod != nil {
		mod(&cfg)
	}
	cfg.Tokenizer = sess.tok
	return startServer(t, cfg), sess
}

// post sends a JSON body and returns the status, headers and body.
func post(t testing.TB, url, body string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// get fetches url.
func get(t testing.TB, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sseEvents splits an SSE body into its data payloads, with "event:" names
// kept as "name|payload".
func sseEvents(body string) []string {
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		name, data := "", ""
		for _, line := range strings.Split(ev, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
		if data == "" {
			continue
		}
		if name != "" {
			data = name + "|" + data
		}
		out = append(out, data)
	}
	return out
}

// waitIdle waits until the worker has no request running or queued.
func waitIdle(t testing.TB, s *Server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.stats.busy.Load() || s.stats.queued.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("worker still busy")
		}
		time.Sleep(time.Millisecond)
	}
}
