package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/kvcache"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
)

// Job states: a queued job is taken by the worker (running) or given up by
// its handler when the client leaves first (abandoned).
const (
	jobQueued int32 = iota
	jobRunning
	jobAbandoned
)

// job is one request waiting for or running on the worker.
type job struct {
	id     string // request id: the X-Request-Id header, named in logs
	ctx    context.Context
	req    *request
	w      http.ResponseWriter
	sse    *sseWriter // nil unless streaming
	state  atomic.Int32
	mu     sync.Mutex // serializes queue keep-alives with the worker's takeover
	done   chan struct{}
	queued time.Time
}

// errShutdown is reported to requests that meet a stopping server.
var errShutdown = &apiError{status: http.StatusServiceUnavailable, message: "server shutting down"}

// serveGenerate decodes a generation request concurrently with the worker,
// queues it and waits until the worker has answered it.
func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request, a api) {
	// Writes set deadlines; the next request on the connection must not
	// inherit them.
	defer http.NewResponseController(w).SetWriteDeadline(time.Time{})
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, a, aerr)
		return
	}
	req, err := s.decodeRequest(r.Context(), a, body)
	if err != nil {
		writeError(w, a, asAPIError(err))
		return
	}
	j := &job{id: id, ctx: r.Context(), req: req, w: w, done: make(chan struct{}), queued: time.Now()}
	if req.stream {
		j.sse = &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	}
	if aerr := s.enqueue(j); aerr != nil {
		writeError(w, a, aerr)
		return
	}
	s.wait(j)
}

// enqueue adds j to the queue without blocking.
func (s *Server) enqueue(j *job) *apiError {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	if s.qdone || s.base.Err() != nil {
		return errShutdown
	}
	s.stats.queued.Add(1)
	select {
	case s.queue <- j:
		return nil
	default:
		s.stats.queued.Add(-1)
		s.stats.rejected.Add(1)
		return &apiError{status: http.StatusTooManyRequests, message: fmt.Sprintf("server busy: %d requests already queued; retry later", cap(s.queue)), code: "queue_full"}
	}
}

// wait blocks until the worker is done with j. A client that leaves while
// j is still queued abandons it; a streaming client gets keep-alive
// comments while it waits.
func (s *Server) wait(j *job) {
	var tick <-chan time.Time
	if j.sse != nil {
		t := time.NewTicker(s.cfg.KeepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-j.done:
			return
		case <-j.ctx.Done():
			if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
				s.stats.queued.Add(-1)
				s.stats.cancelled.Add(1)
				return
			}
			<-j.done
			return
		case <-tick:
			j.mu.Lock()
			if j.state.Load() == jobQueued {
				j.sse.comment("queued")
			}
			j.mu.Unlock()
		}
	}
}

// newRequestID returns a fresh request id, "req_" and 24 hex digits.
func newRequestID() string { return "req_" + randomHex(12) }

// runJob answers one request; a panic fails the request, not the server.
// The panic and its stack go to the log under the request id; the client
// gets a generic message naming only that id, as the panic text can hold
// internals (paths, prompt bytes, tensor shapes).
func (s *Server) runJob(sl *slot, j *job) {
	g := &gen{s: s, sl: sl, j: j, r: j.req, pending: -1}
	defer func() {
		if p := recover(); p != nil {
			s.log.Printf("ds4-server: request %s%s: panic: %v\n%s", j.id, s.slotName(sl), p, debug.Stack())
			sl.invalidate()
			g.fail(&apiError{status: http.StatusInternalServerError, message: "internal error (request id " + j.id + ")", code: "internal_error"})
		}
	}()
	if s.base.Err() != nil {
		g.fail(errShutdown)
		return
	}
	if j.ctx.Err() != nil {
		s.stats.cancelled.Add(1)
		return
	}
	g.run()
}

// gen is the state of one generation.
type gen struct {
	s  *Server
	sl *slot // the slot it runs on
	j  *job
	r  *request

	em       emitter
	id       string
	created  int64
	thinking bool
	source   string

	prompt, cached int   // usage: effective prompt tokens, reused tokens
	promptTokens   []int // the effective prompt
	completion     int

	raw     []byte
	emitted int // raw bytes already passed on to the stream
	maxStop int
	stopHit string // the stop sequence that ended generation

	stream    *dsml.Stream  // chat-kind streaming
	tracker   *dsml.Tracker // with tools: greedy structure, block end
	force     *forcer       // forced tool choice (force.go)
	streamIDs []string      // tool-call ids streamed live, by call index

	// Logprobs, when requested: per generated token the sampled token,
	// and its alternatives as lpTop[lpOff[i]:lpOff[i+1]].
	lpTok     []sample.TokenLogprob
	lpTop     []sample.TokenLogprob
	lpOff     []int
	lpScratch []sample.TokenLogprob

	biasSaved []float32 // the logits logit_bias replaced, for restoreBias

	finish  string
	errMsg  string
	pending int // the last sampled token, evaluated after the response

	prefill, decode time.Duration
	firstToken      time.Duration
}

// fail reports e before or, when the stream has started, inside the
// response.
func (g *gen) fail(e *apiError) {
	if g.j.sse != nil && g.j.sse.started {
		g.j.sse.streamError(g.r.api, e.message)
		return
	}
	writeError(g.j.w, g.r.api, e)
}

// cancelled returns why generation must stop early, if it must.
func (g *gen) cancelled() string {
	switch {
	case g.s.base.Err() != nil:
		return "shutdown requested"
	case g.j.ctx.Err() != nil:
		return "client disconnected"
	case g.j.sse != nil && g.j.sse.err != nil:
		return "client stream write failed"
	}
	return ""
}

func (g *gen) run() {
	s, r, sl := g.s, g.r, g.sl
	start := time.Now()
	p, err := s.plan(sl, r, true)
	if err != nil {
		g.fail(asAPIError(err))
		return
	}
	if len(p.tokens) >= s.ctx {
		p = plan{r.tokens, 0, "cold"}
	}
	s.setState(sl, slotPrefill)
	p, err = g.sync(p)
	sl.tokens.Store(int64(sl.sess.Pos()))
	if err != nil {
		if why := g.cancelled(); why != "" {
			s.stats.cancelled.Add(1)
			s.log.Printf("ds4-server: request abandoned during prefill%s: %s", s.slotName(sl), why)
			return
		}
		sl.invalidate()
		g.fail(&apiError{status: http.StatusInternalServerError, message: err.Error()})
		return
	}
	sl.live.clear()
	s.park(sl)
	g.source, g.promptTokens = p.source, p.tokens
	g.prefill = time.Since(start)
	g.prompt, g.cached = len(p.tokens), p.reuse
	s.stats.prefilled(len(p.tokens)-p.reuse, g.prefill, p.reuse, p.source)

	n := s.seq.Add(1)
	g.id = "chatcmpl-" + strconv.FormatInt(n, 10)
	switch r.api {
	case apiCompletions:
		g.id = "cmpl-" + strconv.FormatInt(n, 10)
	case apiMessages:
		g.id = "msg_" + randomHex(12)
	}
	g.created = time.Now().Unix()
	g.thinking = r.think.Enabled()
	g.em = newEmitter(r)
	for _, st := range r.stops {
		g.maxStop = max(g.maxStop, len(st))
	}
	if r.hasTools {
		g.tracker = dsml.NewTracker(g.thinking)
	}
	if r.stream && r.api != apiCompletions {
		g.stream = dsml.NewStream(dsml.StreamOptions{Thinking: g.thinking, Tools: r.hasTools})
	}
	if aerr := g.forceCheck(g.tokenLimit()); aerr != nil {
		g.fail(aerr)
		return
	}
	if r.stream {
		g.em.begin(g)
	}
	s.setState(sl, slotDecode)
	g.generate()
	res := g.result()
	g.setBindings(res)
	s.setFinishing(sl, g.promptTokens)
	if g.j.ctx.Err() == nil {
		g.em.end(g, res)
	}
	if g.pending >= 0 && g.finish != "error" {
		if err := sl.evaluate(g.pending, false); err != nil {
			s.log.Printf("ds4-server: evaluating the last token%s: %v", s.slotName(sl), err)
			sl.invalidate()
		}
	}
	if kv := sl.kv; kv != nil {
		resp, _, think := sl.live.get()
		switch {
		case resp.valid && resp.pos == sl.sess.Pos():
			kv.Bind(kvcache.KeyResponsesVisible, []byte(resp.visible))
		case think.valid && think.pos == sl.sess.Pos():
			kv.Bind(kvcache.KeyThinkingVisible, []byte(think.visible))
		}
	}
	s.stats.generated(g.completion, g.decode, g.finish)
	s.traceRequest(g, res)
}

// sync brings the session to the planned prompt, prefilling in chunks so
// that a client that leaves stops it and long prefills send keep-alives,
// between chunks and between the layers of one. With a disk KV cache the
// cache manager decides how unless the plan is a protocol continuation; it
// returns the plan carried out.
func (g *gen) sync(p plan) (plan, error) {
	keepAlive := func(int) {
		if sse := g.j.sse; sse != nil && time.Since(sse.lastWrite(g.j.queued)) >= g.s.cfg.KeepAlive {
			sse.comment("prefill")
		}
	}
	progress := func(done, total int) error {
		if why := g.cancelled(); why != "" {
			return errors.New(why)
		}
		if done < total {
			keepAlive(done)
		}
		return nil
	}
	if err := progress(0, 1); err != nil {
		return p, err
	}
	if kv := g.sl.kv; kv != nil {
		req := kvcache.Request{Text: g.r.rendered, Client: g.r.client, Tokens: g.r.tokens, Progress: progress, Layer: keepAlive}
		if p.protocol() {
			req.Tokens = p.tokens
		}
		res, err := kv.Sync(req)
		if err != nil {
			return p, err
		}
		if !p.protocol() {
			p.source = string(res.Source)
		}
		return plan{res.Prompt, res.Reused, p.source}, nil
	}
	sess := g.sl.sess
	if p.reuse == 0 && sess.Pos() > 0 {
		sess.Reset()
	}
	total := len(p.tokens)
	err := engine.PrefillChunks(g.j.ctx, g.sl.ev, p.tokens[p.reuse:], engine.PrefillOptions{
		Chunk:      g.s.cfg.PrefillChunk,
		Progress:   keepAlive,
		AfterChunk: func(pos int) error { return progress(pos, total) },
	})
	if err != nil {
		return p, fmt.Errorf("prefill: %w", err)
	}
	return p, nil
}

// thinkingParams are the sampling settings of thinking modes, which ignore
// the client's (docs/formats/server.md#sampling).
var thinkingParams = sample.Params{Temperature: 1, TopK: 0, TopP: 1, MinP: 0.05}

// generate runs the decode loop (docs/formats/server.md#decode-loop).
func (g *gen) generate() {
	s, r := g.s, g.r
	limit := g.tokenLimit()
	sampler := sample.New(r.sampling)
	base := sampler.Params()
	if g.thinking {
		base = thinkingParams
	}
	t0 := time.Now()
	defer func() { g.decode = time.Since(t0) }()
	// The context ends the loop when the client leaves, the server shuts
	// down or a stream write fails.
	ctx, cancel := context.WithCancel(g.j.ctx)
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()
	if g.cancelled() != "" {
		cancel()
	}
	var evalErr error
	res, _ := engine.Generate(ctx, g.sl.ev, engine.GenerateOptions{
		MaxTokens: limit,
		EOS:       s.eos,
		Choose: func(logits []float32, n int) int {
			return g.choose(sampler, base, logits, limit-n)
		},
		Token: func(tok, n int) bool {
			g.completion = n
			stop := g.token(tok)
			if g.cancelled() != "" {
				cancel()
			}
			return stop
		},
		Evaluate: func(tok int) error {
			evalErr = g.sl.evaluate(tok, g.tracker == nil || !g.tracker.Opened() && !g.tracker.State().InBlock())
			return evalErr
		},
	})
	if res.Tokens > 0 {
		g.firstToken = res.FirstToken
	}
	g.pending = res.Pending
	switch {
	case evalErr != nil:
		g.finish, g.errMsg = "error", evalErr.Error()
	case res.Reason == engine.StopCancelled:
		g.finish, g.errMsg = "error", g.cancelled()
		if g.j.ctx.Err() != nil || g.j.sse != nil && g.j.sse.err != nil {
			s.stats.cancelled.Add(1)
		}
	case res.Reason == engine.StopEOS:
		g.finish = "stop"
	case res.Reason == engine.StopLength:
		g.finish = "length"
	}
	g.flush(true)
	if g.stream != nil {
		g.em.events(g, g.stream.Close())
	}
}

// choose picks the next token from logits: logit_bias, greedy decoding
// inside DSML structure and a forced tool choice apply, and its logprobs
// are recorded when asked for. left is the tokens the turn may still
// generate.
func (g *gen) choose(sampler *sample.Sampler, base sample.Params, logits []float32, left int) int {
	r := g.r
	p := base
	if g.tracker != nil && g.tracker.State().Greedy() {
		p.Temperature = 0
	}
	// logit_bias changes the session's logits only while this token is
	// chosen: a disk checkpoint saved with the next evaluation must hold
	// the model's own.
	g.biasSaved = applyBias(logits, r.logitBias, g.biasSaved)
	var tok int
	if g.force != nil && !g.force.failed {
		tok = g.force.next(sampler, logits, p, left)
	} else {
		tok = sampler.SampleWith(logits, p)
	}
	if r.logprobs && tok != g.s.eos {
		g.recordLogprobs(logits, tok)
	}
	restoreBias(logits, r.logitBias, g.biasSaved)
	return tok
}

// token takes a generated token into the reply and streams what is safe
// to stream; it reports whether the reply ends with it (a stop sequence
// or the end of a tool-call block).
func (g *gen) token(tok int) (end bool) {
	text := g.s.tok.TokenBytes(tok)
	prev := len(g.raw)
	g.raw = append(g.raw, text...)
	if g.tracker != nil {
		g.tracker.Write(string(text))
	}
	if g.force != nil {
		g.force.advance(text)
	}
	if g.checkStops(prev) {
		g.finish, end = "stop", true
	} else if g.tracker != nil && g.tracker.Closed() {
		g.finish, end = "tool_calls", true
	}
	g.flush(false)
	return end
}

// tokenLimit returns how many tokens the turn may generate.
func (g *gen) tokenLimit() int {
	limit := g.r.maxTokens
	if limit < 0 {
		limit = g.s.cfg.DefaultMaxTokens
	}
	return min(limit, g.s.ctx-g.sl.sess.Pos())
}

// recordLogprobs records the logprob of tok and the top alternatives
// under logits, the distribution tok was sampled from.
func (g *gen) recordLogprobs(logits []float32, tok int) {
	if g.lpOff == nil {
		g.lpOff = append(g.lpOff, 0)
	}
	g.lpTok = append(g.lpTok, sample.TokenLogprob{ID: tok, Logprob: sample.Logprob(logits, tok)})
	g.lpScratch = sample.TopLogprobs(logits, g.r.topLogprobs, g.lpScratch)
	g.lpTop = append(g.lpTop, g.lpScratch...)
	g.lpOff = append(g.lpOff, len(g.lpTop))
}

// checkStops looks for a stop sequence that ends in the bytes appended
// after prev; on a hit it truncates the text there (docs/formats/server.md#stop-sequences).
func (g *gen) checkStops(prev int) bool {
	if g.maxStop == 0 {
		return false
	}
	from := max(0, prev-(g.maxStop-1))
	best := -1
	for _, st := range g.r.stops {
		if i := bytes.Index(g.raw[from:], []byte(st)); i >= 0 && (best < 0 || from+i < best) {
			best, g.stopHit = from+i, st
		}
	}
	if best < 0 {
		return false
	}
	g.raw = g.raw[:best]
	return true
}

// flush passes the generated text that can no longer be part of a stop
// sequence on to the stream (all of it when final).
func (g *gen) flush(final bool) {
	if !g.r.stream {
		return
	}
	safe := len(g.raw)
	if !final && g.maxStop > 1 {
		safe -= g.maxStop - 1
	}
	if g.r.api == apiCompletions && !final {
		safe = utf8SafeLen(g.raw[:max(safe, g.emitted)])
	}
	if safe <= g.emitted {
		return
	}
	chunk := string(g.raw[g.emitted:safe])
	g.emitted = safe
	if g.stream != nil {
		g.em.events(g, g.stream.Write(chunk))
	} else {
		g.em.text(g, chunk)
	}
}

// utf8SafeLen returns the length of b without an incomplete UTF-8
// sequence at its end.
func utf8SafeLen(b []byte) int {
	n := len(b)
	for i := 1; i <= 3 && i <= n; i++ {
		c := b[n-i]
		if c&0xC0 == 0x80 {
			continue // continuation byte
		}
		if c >= 0xC0 {
			need := 2
			if c >= 0xE0 {
				need = 3
			}
			if c >= 0xF0 {
				need = 4
			}
			if i < need {
				return n - i
			}
		}
		return n
	}
	return n
}

// result is the parsed outcome of a generation.
type result struct {
	dsml.Result
	parseErr error
}

// result parses the generation, settles the finish reason and assigns and
// remembers tool-call ids (docs/formats/server.md#parsing-the-generation).
func (g *gen) result() *result {
	s, r := g.s, g.r
	text := string(g.raw)
	if r.api == apiCompletions {
		return &result{Result: dsml.Result{Content: text}}
	}
	opened := g.tracker != nil && g.tracker.Opened()
	if opened && !g.tracker.Closed() && g.finish != "error" {
		g.finish, g.errMsg = "error", "unterminated tool call"
	}
	if g.thinking && !strings.Contains(text, prompt.ThinkClose) {
		// Reasoning the turn never closed is still reasoning, as the
		// stream sent it (upstream returns it as content).
		return &result{Result: dsml.Result{Reasoning: strings.TrimPrefix(text, prompt.ThinkOpen)}}
	}
	res, err := dsml.Parse(text, g.thinking)
	out := &result{Result: res, parseErr: err}
	if err != nil {
		if opened && g.finish != "error" && g.finish != "length" {
			g.finish = "stop"
		}
		if opened {
			s.log.Printf("ds4-server: invalid tool call returned as assistant text: %v", err)
		}
		return out
	}
	if len(res.Calls) == 0 {
		return out
	}
	prefix := "call_"
	if r.api == apiMessages {
		prefix = "toolu_"
	}
	taken := map[string]bool{}
	for i := range out.Calls {
		id := ""
		if i < len(g.streamIDs) {
			id = g.streamIDs[i]
		}
		if id == "" || taken[id] {
			id = s.tools.newCallID(prefix, taken)
		}
		taken[id] = true
		out.Calls[i].ID = id
		s.tools.put(id, res.RawDSML)
	}
	g.finish = "tool_calls"
	return out
}

// setBindings records the live protocol bindings of the finished turn
// (docs/formats/server.md#live-protocol-bindings). A stop-sequence hit leaves the live KV holding more than the
// reply, so it binds nothing.
func (g *gen) setBindings(res *result) {
	r := g.r
	var resp, anthr, think binding
	ok := g.finish != "error" && g.finish != "length" && g.stopHit == "" && res.parseErr == nil
	pos := g.sl.sess.Pos()
	if g.pending >= 0 {
		pos++
	}
	var ids []string
	for _, c := range res.Calls {
		ids = append(ids, c.ID)
	}
	if ok {
		switch r.api {
		case apiResponses:
			var b strings.Builder
			b.WriteString(r.rendered)
			if g.thinking {
				if r.summaries && len(res.Calls) > 0 {
					b.WriteString(res.Reasoning)
				}
				b.WriteString(prompt.ThinkClose)
			}
			b.WriteString(res.Content)
			b.WriteString(res.RawDSML)
			resp = binding{valid: true, pos: pos, visible: b.String(), ids: ids}
		case apiMessages:
			if len(ids) > 0 {
				anthr = binding{valid: true, pos: pos, ids: ids}
			}
		}
		if (r.api == apiChat || r.api == apiMessages) && !r.hasTools && !r.toolContext() && g.thinking &&
			len(res.Calls) == 0 && bytes.Contains(g.raw, []byte(prompt.ThinkClose)) && strings.HasSuffix(r.rendered, prompt.ThinkOpen) {
			think = binding{valid: true, pos: pos, visible: strings.TrimSuffix(r.rendered, prompt.ThinkOpen) + prompt.ThinkClose + res.Content}
		}
	}
	g.sl.live.set(resp, anthr, think)
}
