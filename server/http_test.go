package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ds4-go/ds4/engine/expertcache"
)

// Raw-HTTP tests: error shapes, limits, authentication, cancellation and
// concurrency.

func TestErrors(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	small, _ := scriptServer(t, nil)
	small.ctx = 64
	long := strings.Repeat("word ", 200)
	cases := []struct {
		name, path, body string
		status           int
		want             string // substring of the body
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages":`, 400, `{"error":{"message":"invalid JSON request","type":"invalid_request_error"}}`},
		{"not an object", "/v1/chat/completions", `[1,2]`, 400, `invalid JSON request`},
		{"empty body", "/v1/responses", ``, 400, `invalid JSON request`},
		{"missing messages", "/v1/chat/completions", `{"model":"deepseek-v4-flash"}`, 400, `"message":"missing messages"`},
		{"missing prompt", "/v1/completions", `{}`, 400, `"message":"missing prompt"`},
		{"missing input", "/v1/responses", `{}`, 400, `"message":"missing input"`},
		{"missing messages anthropic", "/v1/messages", `{"max_tokens":5}`, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"missing messages"}}`},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`, 404, `"code":"model_not_found"`},
		{"unknown model anthropic", "/v1/messages", `{"model":"claude-3","messages":[]}`, 404, `"type":"not_found_error"`},
		{"model not a string", "/v1/chat/completions", `{"model":5,"messages":[]}`, 400, `"param":"model"`},
		{"temperature range", "/v1/chat/completions", `{"temperature":101,"messages":[]}`, 400, `temperature must be between 0 and 100`},
		{"negative max_tokens", "/v1/chat/completions", `{"max_tokens":-1,"messages":[]}`, 400, `"param":"max_tokens"`},
		{"fractional max_tokens", "/v1/messages", `{"max_tokens":1.5,"messages":[]}`, 400, `max_tokens must be an integer`},
		{"huge max_tokens", "/v1/completions", `{"max_tokens":1e300,"prompt":"x"}`, 400, `"param":"max_tokens"`},
		{"top_p range", "/v1/responses", `{"top_p":1.5,"input":"x"}`, 400, `top_p must be between 0 and 1`},
		{"min_p type", "/v1/chat/completions", `{"min_p":"high","messages":[]}`, 400, `min_p must be a number`},
		{"top_k negative", "/v1/messages", `{"top_k":-3,"messages":[]}`, 400, `top_k must be between`},
		{"seed fraction", "/v1/chat/completions", `{"seed":0.5,"messages":[]}`, 400, `"param":"seed"`},
		{"stream type", "/v1/chat/completions", `{"stream":"yes","messages":[]}`, 400, `stream must be a boolean`},
		{"bad effort", "/v1/chat/completions", `{"reasoning_effort":"extreme","messages":[]}`, 400, `"param":"reasoning_effort"`},
		{"responses tool_choice", "/v1/responses", `{"tool_choice":"required","input":"x"}`, 400, `tool_choice requires tools to be offered`},
		{"responses forced tool", "/v1/responses", `{"tool_choice":{"type":"function","name":"f"},"input":"x"}`, 400, `tool_choice names \"f\", which is not an offered tool`},
		{"responses unknown tool_choice", "/v1/responses", `{"tool_choice":"sometimes","input":"x"}`, 400, `tool_choice=sometimes not supported`},
		{"responses hosted tool_choice", "/v1/responses", `{"tool_choice":{"type":"web_search_preview"},"input":"x"}`, 400, `forced tool_choice of type \"web_search_preview\" not supported`},
		{"chat forced unknown tool", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}}}`, 400, `"param":"tool_choice"`},
		{"anthropic forced without tools", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"any"}}`, 400, `tool_choice requires tools to be offered`},
		{"forced call max_tokens", "/v1/chat/completions", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required"}`, 400, `a forced tool call needs at least`},
		{"previous_response_id", "/v1/responses", `{"previous_response_id":"resp_1","input":"x"}`, 400, `previous_response_id is not supported; replay full input instead`},
		{"responses image", "/v1/responses", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, 400, `unsupported content part`},
		{"responses status", "/v1/responses", `{"input":[{"type":"message","role":"user","content":"x","status":"in_progress"}]}`, 400, `cannot be replayed`},
		{"responses unknown item", "/v1/responses", `{"input":[{"type":"mystery"}]}`, 400, `unsupported input item type`},
		{"orphan tool output", "/v1/responses", `{"input":[{"type":"function_call_output","call_id":"call_x","output":"1"}]}`, 400, `Responses continuation state is not available for call_id call_x`},
		{"context overflow chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, `"code":"context_length_exceeded","n_prompt_tokens":`},
		{"context overflow anthropic", "/v1/messages", `{"max_tokens":1,"messages":[{"role":"user","content":"` + long + `"}]}`, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Prompt has `},
		{"context overflow completions", "/v1/completions", `{"prompt":"` + long + `"}`, 400, `"param":"prompt","code":"context_length_exceeded"`},
	}
	for _, c := range cases {
		url := ts.url
		if strings.Contains(c.name, "overflow") {
			url = small.url
		}
		status, h, body := post(t, url+c.path, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s\nwant %d containing %s", c.name, status, body, c.status, c.want)
		}
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", c.name, ct)
		}
		if !json.Valid([]byte(body)) {
			t.Errorf("%s: invalid JSON body %q", c.name, body)
		}
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/nothing", 404},
		{"GET", "/v1/chat/completions", 405},
		{"POST", "/v1/models", 404},
		{"GET", "/v1/models/gpt-4o", 404},
	} {
		req, _ := http.NewRequest(c.method, ts.url+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !json.Valid(b) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	ts, _ := scriptServer(t, func(c *Config) { c.MaxBodyBytes = 1000 })
	status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("x", 2000)+`"}]}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "request body exceeds 1000 bytes") {
		t.Errorf("%d %s", status, body)
	}
	status, _, body = post(t, ts.url+"/v1/messages", `{"messages":[{"role":"user","content":"`+strings.Repeat("x", 2000)+`"}]}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"type":"request_too_large"`) {
		t.Errorf("anthropic: %d %s", status, body)
	}
}

func TestAuth(t *testing.T) {
	ts, _ := scriptServer(t, func(c *Config) { c.APIKey = "k3y" })
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`
	for _, c := range []struct {
		name   string
		header []string
		status int
	}{
		{"none", nil, 401},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, 401},
		{"bearer", []string{"Authorization", "Bearer k3y"}, 200},
		{"lower-case bearer", []string{"Authorization", "bearer k3y"}, 200},
		{"x-api-key", []string{"x-api-key", "k3y"}, 200},
		{"wrong x-api-key", []string{"x-api-key", "k3y2"}, 401},
	} {
		status, _, b := post(t, ts.url+"/v1/chat/completions", body, c.header...)
		if status != c.status {
			t.Errorf("%s: %d %s", c.name, status, b)
		}
	}
	if status, _ := get(t, ts.url+"/v1/models"); status != 401 {
		t.Errorf("models without key: %d", status)
	}
	if status, _ := get(t, ts.url+"/metrics"); status != 401 {
		t.Errorf("metrics without key: %d", status)
	}
	if status, b := get(t, ts.url+"/healthz"); status != 200 || b != "ok\n" {
		t.Errorf("healthz: %d %q", status, b)
	}
}

// fakeAddrListener reports a non-loopback address.
type fakeAddrListener struct{ net.Listener }

func (l fakeAddrListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8000}
}

func TestServeRefusesPublicAddressWithoutKey(t *testing.T) {
	sess := newScriptSession(t, 512)
	s, err := New(Config{Session: sess, Tokenizer: sess.tok})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(fakeAddrListener{ln}); err == nil || !strings.Contains(err.Error(), "without an API key") {
		t.Errorf("Serve: %v", err)
	}
}

func TestCORS(t *testing.T) {
	ts, _ := scriptServer(t, func(c *Config) { c.CORS = true })
	req, _ := http.NewRequest(http.MethodOptions, ts.url+"/v1/chat/completions", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Methods") != "GET, POST, OPTIONS" {
		t.Errorf("preflight %d %v", resp.StatusCode, resp.Header)
	}
	_, h, _ := post(t, ts.url+"/v1/chat/completions", `{}`)
	if h.Get("Access-Control-Allow-Origin") != "*" {
		t.Error("no CORS header on an error response")
	}
	plain, _ := scriptServer(t, nil)
	_, h, _ = post(t, plain.url+"/v1/chat/completions", `{}`)
	if h.Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS header without --cors")
	}
}

func TestMetrics(t *testing.T) {
	ts, _ := scriptServer(t, nil, "one two three")
	post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"think":false}`)
	post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"one two three"},{"role":"user","content":"more"}],"think":false}`)
	post(t, ts.url+"/v1/chat/completions", `{`)
	status, body := get(t, ts.url+"/metrics")
	if status != 200 {
		t.Fatal(status)
	}
	for _, want := range []string{
		`ds4_requests_total{path="/v1/chat/completions",status="200"} 2`,
		`ds4_requests_total{path="/v1/chat/completions",status="400"} 1`,
		"ds4_tokens_in_total ", "ds4_tokens_out_total 3",
		"ds4_prefill_tokens_per_second ", "ds4_decode_tokens_per_second ",
		"ds4_kv_cache_hits_total 1", "ds4_kv_cache_misses_total 1",
		"ds4_queue_depth 0", `ds4_generations_total{finish="stop"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

// TestMetricsExperts checks the SSD streaming expert cache's counters in
// /metrics: absent when the model does not stream its experts, and with
// their values and the bytes read per token evaluated when it does.
func TestMetricsExperts(t *testing.T) {
	st := expertcache.Stats{Hits: 30, Misses: 10, BytesRead: 7 << 20, ReadP50: 1500 * time.Microsecond, ReadP99: 4 * time.Millisecond, Direct: true, Slots: 289, SlotBytes: 7424000}
	for _, c := range []struct {
		name    string
		experts func() (expertcache.Stats, bool)
		want    []string
	}{
		{"none", nil, nil},
		{"not streaming", func() (expertcache.Stats, bool) { return expertcache.Stats{}, false }, nil},
		{"streaming", func() (expertcache.Stats, bool) { return st, true }, []string{
			"ds4_ssd_expert_hits_total 30", "ds4_ssd_expert_misses_total 10", "ds4_ssd_expert_hit_ratio 0.75",
			"ds4_ssd_read_bytes_total 7340032", "# TYPE ds4_ssd_read_bytes_per_token gauge",
			"ds4_ssd_cache_slots 289", "ds4_ssd_cache_slot_bytes 7424000", "ds4_ssd_direct_io 1",
			`ds4_ssd_read_seconds{quantile="0.5"} 0.0015`, `ds4_ssd_read_seconds{quantile="0.99"} 0.004`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, _ := scriptServer(t, func(cfg *Config) { cfg.Experts = c.experts }, "one two three")
			post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"think":false}`)
			status, body := get(t, ts.url+"/metrics")
			if status != 200 {
				t.Fatal(status)
			}
			if c.want == nil {
				if strings.Contains(body, "ds4_ssd_") {
					t.Errorf("metrics show the expert cache without streaming:\n%s", body)
				}
				return
			}
			for _, want := range c.want {
				if !strings.Contains(body, want) {
					t.Errorf("metrics lack %q:\n%s", want, body)
				}
			}
			// Bytes per token: 7 MiB over the tokens evaluated.
			var in, out, per float64
			for _, line := range strings.Split(body, "\n") {
				fmt.Sscanf(line, "ds4_prefill_tokens_total %g", &in)
				fmt.Sscanf(line, "ds4_tokens_out_total %g", &out)
				fmt.Sscanf(line, "ds4_ssd_read_bytes_per_token %g", &per)
			}
			if in+out == 0 || math.Abs(per-float64(7<<20)/(in+out)) > 1e-6*per {
				t.Errorf("bytes per token %g, want %d over %g+%g tokens", per, 7<<20, in, out)
			}
		})
	}
}

// streamRequest opens a streaming request on a raw connection and returns
// it with a reader positioned after the response headers.
func streamRequest(t *testing.T, url, path, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("status line %q: %v", status, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			return conn, r
		}
	}
}

func TestDisconnectCancelsGeneration(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			ts, sess := scriptServer(t, nil, "tick tock ")
			sess.loop = true
			sess.delay = 20 * time.Millisecond
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"go"}],"think":false,"stream":%v}`, stream)
			var conn net.Conn
			if stream {
				var r *bufio.Reader
				conn, r = streamRequest(t, ts.url, "/v1/chat/completions", body)
				for n := 0; n < 5; {
					line, err := r.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(line, `"content"`) {
						n++
					}
				}
			} else {
				var err error
				conn, err = net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				for sess.decodes.Load() < 5 {
					time.Sleep(time.Millisecond)
				}
			}
			conn.Close()
			closed := time.Now()
			before := sess.decodes.Load()
			waitIdle(t, ts.Server)
			freed := time.Since(closed)
			after := sess.decodes.Load() - before
			t.Logf("worker freed %v after the disconnect, %d more token(s) decoded", freed, after)
			if after > 1 {
				t.Errorf("%d tokens decoded after the client left; want at most the one in flight", after)
			}
			if ts.stats.cancelled.Load() == 0 {
				t.Error("cancellation not counted")
			}
			// The worker is free for the next request.
			sess.loop = false
			sess.push("done")
			status, _, b := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"again"}],"think":false}`)
			if status != 200 || !strings.Contains(b, `"content":"done"`) {
				t.Errorf("next request: %d %s", status, b)
			}
		})
	}
}

func TestQueuedClientLeaving(t *testing.T) {
	ts, sess := scriptServer(t, nil, "a b c d e f g h i j")
	sess.delay = 30 * time.Millisecond
	long := make(chan struct{})
	go func() {
		defer close(long)
		post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"long"}],"think":false}`)
	}()
	for !ts.stats.busy.Load() {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"queued"}]}`))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for ts.stats.queued.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	<-long
	waitIdle(t, ts.Server)
	if n := len(sess.prompts); n != 1 {
		t.Errorf("the abandoned request ran: %d prompts", n)
	}
	if ts.stats.cancelled.Load() != 1 || ts.stats.queued.Load() != 0 {
		t.Errorf("cancelled %d queued %d", ts.stats.cancelled.Load(), ts.stats.queued.Load())
	}
}

func TestConcurrentClients(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := i%2 == 1
			path := []string{"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/completions"}[i%4]
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"client %d"}],"input":"client %d","prompt":"client %d","max_tokens":3,"max_output_tokens":3,"stream":%v}`, i, i, i, stream)
			req, _ := http.NewRequest(http.MethodPost, ts.url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("client %d (%s): %d %s", i, path, resp.StatusCode, b)
				return
			}
			isSSE := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && strings.Contains(string(b), "data: ")
			if stream != isSSE || !stream && !json.Valid(b) {
				errs <- fmt.Errorf("client %d (%s): body %q", i, path, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := ts.seq.Load(); n != 8 {
		t.Errorf("%d requests ran", n)
	}
}

func TestQueueFull(t *testing.T) {
	ts, sess := scriptServer(t, func(c *Config) { c.QueueSize = 1 }, "a b c d e f g h")
	sess.delay = 30 * time.Millisecond
	body := `{"messages":[{"role":"user","content":"x"}],"think":false}`
	var wg sync.WaitGroup
	statuses := make(chan int, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, h, b := post(t, ts.url+"/v1/chat/completions", body)
			if status == 429 && (h.Get("Retry-After") == "" || !strings.Contains(b, `"code":"queue_full"`)) {
				t.Errorf("429 response %v %s", h, b)
			}
			statuses <- status
		}()
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	close(statuses)
	n429 := 0
	for s := range statuses {
		if s == 429 {
			n429++
		} else if s != 200 {
			t.Errorf("status %d", s)
		}
	}
	if n429 == 0 {
		t.Error("no request was refused with 429")
	}
}

func TestPrefillKeepAlive(t *testing.T) {
	ts, sess := scriptServer(t, func(c *Config) { c.KeepAlive = 30 * time.Millisecond; c.PrefillChunk = 2 }, "hi")
	sess.slowP = 20 * time.Millisecond
	status, _, body := post(t, ts.url+"/v1/messages", `{"messages":[{"role":"user","content":"a longer prompt to prefill"}],"stream":true,"max_tokens":5}`)
	if status != 200 || !strings.HasPrefix(body, ": prefill\n\n") || !strings.Contains(body, "event: message_stop") {
		t.Errorf("%d %q", status, body)
	}
}

func TestPrefillKeepAliveWithinStep(t *testing.T) {
	// One prefill step of 300 ms over 10 layers: the keep-alives of a 30 ms
	// interval come from the layer hook, not only between steps.
	ts, sess := scriptServer(t, func(c *Config) { c.KeepAlive = 30 * time.Millisecond }, "hi")
	sess.slowP, sess.layers = 300*time.Millisecond, 10
	status, _, body := post(t, ts.url+"/v1/messages", `{"messages":[{"role":"user","content":"a longer prompt to prefill"}],"stream":true,"max_tokens":5}`)
	if n := strings.Count(body, ": prefill\n\n"); status != 200 || n < 4 || !strings.Contains(body, "event: message_stop") {
		t.Errorf("%d, %d keep-alives: %q", status, n, body)
	}
	if sess.hook != nil {
		t.Error("the layer hook stays set after the prefill")
	}
}

func TestShutdownAbortsGeneration(t *testing.T) {
	sess := newScriptSession(t, 4096, "tick ")
	sess.loop, sess.delay = true, 10*time.Millisecond
	s, err := New(Config{Session: sess, Tokenizer: sess.tok})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	url := "http://" + ln.Addr().String()
	conn, r := streamRequest(t, url, "/v1/chat/completions", `{"messages":[{"role":"user","content":"go"}],"stream":true,"think":false}`)
	defer conn.Close()
	r.ReadString('\n')
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if time.Since(start) > 2*time.Second || !strings.Contains(string(rest), `"finish_reason":"error"`) {
		t.Errorf("shutdown took %v; stream tail %q", time.Since(start), rest)
	}
}
