package server

import (
	"context"
	"errors"
	"log"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
)

// panicSecret is the text of the panics below; no client may see it.
const panicSecret = "kernel fault at /srv/secret/model.gguf"

// Ways a panicSession's Decode panics.
const (
	panicNone     int32 = iota
	panicDirect         // on the worker goroutine
	panicInKernel       // in every piece of a job on the CPU backend's workers
)

// panicSession is a real session of the tiny model whose Decode panics
// as armed says.
type panicSession struct {
	Session
	be    *cpu.Backend
	armed atomic.Int32
}

func (s *panicSession) Decode(tok int) error {
	switch s.armed.Load() {
	case panicDirect:
		panic(panicSecret)
	case panicInKernel:
		s.be.Parallel(64, backends.TaskFunc(func(int) { panic(panicSecret) }))
	}
	return s.Session.Decode(tok)
}

var requestIDPattern = regexp.MustCompile(`req_[0-9a-f]{24}`)

// TestWorkerPanicHidden makes the session panic inside a request: the
// client gets a 500 (or a stream error) with a generic message naming the
// request id, which is also the X-Request-Id header; the log has the id and
// the panic text; the server keeps serving.
func TestWorkerPanicHidden(t *testing.T) {
	be := cpu.New(0)
	t.Cleanup(be.Close)
	es, err := engine.NewSession(tiny(t), be, engine.Options{Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	sess := &panicSession{Session: es, be: be}
	var logBuf syncBuffer
	ts := startServer(t, Config{Session: sess, Tiny: true, ModelName: "tiny", Log: log.New(&logBuf, "", 0)})
	ctx := context.Background()
	oc, ac := openaiClient(ts), anthropicClient(ts)

	for _, c := range []struct {
		name  string
		armed int32
		do    func(t *testing.T) (status int, header http.Header, body string)
	}{
		{"openai chat", panicDirect, func(t *testing.T) (int, http.Header, string) {
			_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:     "deepseek-v4-flash",
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				MaxTokens: openai.Int(4),
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("want an API error, got %v", err)
			}
			return apiErr.StatusCode, apiErr.Response.Header, apiErr.RawJSON()
		}},
		{"anthropic messages", panicDirect, func(t *testing.T) (int, http.Header, string) {
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
				Model: "deepseek-v4-flash", MaxTokens: 4, Messages: []anthropic.MessageParam{userText("hi")},
			})
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("want an API error, got %v", err)
			}
			return apiErr.StatusCode, apiErr.Response.Header, apiErr.RawJSON()
		}},
		{"chat stream", panicDirect, func(t *testing.T) (int, http.Header, string) {
			return post(t, ts.url+"/v1/chat/completions", `{"model":"deepseek-v4-flash","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`)
		}},
		{"completions, panic on a CPU helper goroutine", panicInKernel, func(t *testing.T) (int, http.Header, string) {
			_, err := oc.Completions.New(ctx, openai.CompletionNewParams{
				Model:     "deepseek-v4-flash",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
				MaxTokens: openai.Int(4),
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("want an API error, got %v", err)
			}
			return apiErr.StatusCode, apiErr.Response.Header, apiErr.RawJSON()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sess.armed.Store(c.armed)
			status, header, body := c.do(t)
			sess.armed.Store(panicNone)
			streamed := strings.HasPrefix(header.Get("Content-Type"), "text/event-stream")
			if status != http.StatusInternalServerError && !streamed {
				t.Errorf("status %d, want 500", status)
			}
			id := header.Get("X-Request-Id")
			if !requestIDPattern.MatchString(id) {
				t.Fatalf("X-Request-Id %q", id)
			}
			if strings.Contains(body, "secret") || strings.Contains(body, "kernel") {
				t.Errorf("the reply leaks the panic: %s", body)
			}
			if !strings.Contains(body, "internal error (request id "+id+")") {
				t.Errorf("the reply does not name the request id %s: %s", id, body)
			}
			// A helper goroutine's panic reaches the worker wrapped in a
			// *cpu.PanicError, whose text carries the value after a prefix.
			if line := logLine(logBuf.String(), "request "+id+": panic: "); !strings.Contains(line, panicSecret) {
				t.Errorf("the log lacks the id and the panic:\n%s", logBuf.String())
			}
			// The server survives and answers the next request.
			if status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); status != http.StatusOK {
				t.Errorf("after the panic: %d %s", status, body)
			}
		})
	}
}

// logLine returns the first line of log that contains s, or "".
func logLine(log, s string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
