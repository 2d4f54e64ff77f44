package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/server/servertest"
)

// TestLoadOwnServer drives our own server on the tiny model with one and
// two clients: every request completes with the usage, the times of each
// request and of each client's sequence are monotone, the levels add up,
// and the run reads back from Parquet.
func TestLoadOwnServer(t *testing.T) {
	url := servertest.StartTiny(t, nil)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	prompt, err := LoadPrompts(tok, DefaultLoadText(), 24, true)
	require.NoError(t, err)
	model, err := EndpointModel(context.Background(), http.DefaultClient, url, "")
	require.NoError(t, err)
	var done atomic.Int64
	cfg := LoadConfig{Endpoint: url, Model: model, Clients: []int{1, 2}, Requests: 2, MaxTokens: 6, Prompt: prompt,
		Timeout: time.Minute, Done: func(LoadRequest) { done.Add(1) }}
	levels, reqs, err := Load(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, levels, 2)
	require.Len(t, reqs, 6)
	require.EqualValues(t, 6, done.Load())
	for i, q := range reqs {
		require.Empty(t, q.Error, "request %d", i)
		require.EqualValues(t, 200, q.Status)
		require.True(t, q.Usage)
		require.Positive(t, q.PromptTokens)
		require.Positive(t, q.Chunks, "request %d", i)
		require.LessOrEqual(t, q.CompletionTokens, int64(6))
		require.GreaterOrEqual(t, q.CompletionTokens, q.Chunks-1) // a chunk may hold the text of the end
		require.NotEmpty(t, q.FinishReason)
		require.Len(t, q.itl, int(q.Chunks-1))
		require.True(t, 0 <= q.StartMS && q.StartMS <= q.FirstMS && q.FirstMS <= q.LastMS && q.LastMS <= q.EndMS,
			"request %d: start %v first %v last %v end %v", i, q.StartMS, q.FirstMS, q.LastMS, q.EndMS)
		require.InDelta(t, q.FirstMS-q.StartMS, q.TTFTMS, 1e-6)
		require.Len(t, q.OutputSHA256, 64)
		require.Equal(t, digest([]byte(prompt(i))), q.PromptSHA256, "request %d", i)
		if q.Request > 0 {
			require.GreaterOrEqual(t, q.StartMS, reqs[i-1].EndMS, "request %d starts before its client's previous one ends", i)
		}
	}
	prompts, differing := DifferingOutputs(reqs)
	require.Equal(t, 6, prompts) // fresh prompts: one request each
	require.Zero(t, differing)
	for i, l := range levels {
		require.EqualValues(t, cfg.Clients[i], l.Clients)
		require.EqualValues(t, 2*cfg.Clients[i], l.Requests)
		require.Zero(t, l.Errors)
		var tokens int64
		for _, q := range reqs {
			if q.Clients == l.Clients {
				tokens += q.CompletionTokens
			}
		}
		require.Equal(t, tokens, l.CompletionTokens)
		require.Positive(t, l.DecodeTPS)
		require.InDelta(t, float64(l.PromptTokens-l.CachedTokens)/l.WallS, l.PrefillTPS, 1e-9)
		require.Positive(t, l.PrefillTPS)
		require.Positive(t, l.TTFTP50MS)
		require.LessOrEqual(t, l.TTFTP50MS, l.TTFTP99MS)
		require.LessOrEqual(t, l.ITLP50MS, l.ITLP99MS)
	}

	meta := RunMeta{RunID: "r1", Tool: "ds4-bench serve", ModelName: model, StartedAt: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}
	paths, err := WriteLoadRun(t.TempDir(), meta, LoadSetup{Endpoint: url, ModelID: model, RequestsPerClient: 2}, levels, reqs)
	require.NoError(t, err)
	lr, err := ReadRows[LoadLevelRecord](paths[0])
	require.NoError(t, err)
	require.Len(t, lr, 2)
	require.Equal(t, levels[1].DecodeTPS, lr[1].DecodeTPS)
	require.Equal(t, url, lr[0].Endpoint)
	rr, err := ReadRows[LoadRequestRecord](paths[1])
	require.NoError(t, err)
	require.Len(t, rr, 6)
	require.Equal(t, reqs[5].CompletionTokens, rr[5].CompletionTokens)
	require.Equal(t, filepath.Join("load_requests", "model="+model, "date=2026-12-03", "r1.parquet"),
		strings.TrimPrefix(paths[1], filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(paths[1]))))+"/"))
}

// sseServer serves the chat completions of the script: each item is
// written and flushed in turn, a time.Duration waits, and a func takes
// over the reply.
func sseServer(t *testing.T, script ...any) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, s := range script {
			switch s := s.(type) {
			case string:
				io.WriteString(w, s)
				w.(http.Flusher).Flush()
			case time.Duration:
				time.Sleep(s)
			case func(http.ResponseWriter):
				s(w)
				return
			}
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// chunk returns one SSE event of a chat.completion.chunk with the delta.
func chunk(delta string) string {
	return `data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
}

const finishChunk = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n"

// TestLoadStreams runs a level of one and of two clients against servers
// that stream like llama-server (no usage, several tokens in a chunk),
// like vLLM (a usage chunk with no choices) or fail: every run completes,
// with each failure recorded and counted.
func TestLoadStreams(t *testing.T) {
	const gap = 15 * time.Millisecond
	for _, tc := range []struct {
		name            string
		script          []any
		err             string // in every request's Error
		status          int64
		chunks, tokens  int64
		usage           bool
		cached, perChnk int64
		textAfter       int // gaps before the first chunk with text, the one before the script included
	}{
		{name: "llama-server", script: []any{chunk(`{"role":"assistant","content":null}`), gap, chunk(`{"content":"Hello, wo"}`), gap,
			chunk(`{"content":"rld and"}`), gap, chunk(`{"content":" more"}`), finishChunk, ": keep-alive\r\n\r\n", "data: [DONE]\n\n"},
			status: 200, chunks: 3, tokens: 3, perChnk: 1, textAfter: 2},
		{name: "vllm-usage", script: []any{chunk(`{"role":"assistant","content":""}`), gap, chunk(`{"reasoning_content":"Think"}`), gap,
			chunk(`{"content":"ab"}`), gap, chunk(`{"content":"cd"}`), finishChunk,
			`data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":4}}}` + "\n\n",
			"data: [DONE]\n\n"},
			status: 200, chunks: 3, tokens: 6, usage: true, cached: 4, perChnk: 2, textAfter: 2},
		{name: "finish-without-done", script: []any{chunk(`{"content":"a"}`), gap, chunk(`{"content":"b"}`), finishChunk},
			status: 200, chunks: 2, tokens: 2, perChnk: 1},
		{name: "http-500", script: []any{func(w http.ResponseWriter) { http.Error(w, "overloaded", 500) }},
			status: 500, err: "HTTP 500: overloaded"},
		{name: "cut-mid-line", script: []any{chunk(`{"content":"a"}`), gap, `data: {"choices":[{"del`},
			status: 200, chunks: 1, tokens: 1, err: "broken stream: unexpected EOF"},
		{name: "cut-between-chunks", script: []any{chunk(`{"content":"a"}`), gap, chunk(`{"content":"b"}`)},
			status: 200, chunks: 2, tokens: 2, perChnk: 1, err: "stream ended before [DONE]"},
		{name: "error-event", script: []any{chunk(`{"content":"a"}`), `data: {"error":{"message":"slot lost"}}` + "\n\n"},
			status: 200, chunks: 1, tokens: 1, err: "error event: slot lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := sseServer(t, append([]any{gap}, tc.script...)...)
			levels, reqs, err := Load(context.Background(), LoadConfig{Endpoint: url + "/v1", Clients: []int{1, 2}, Requests: 2, MaxTokens: 8,
				Prompt: func(seq int) string { return fmt.Sprint(seq) }, Timeout: 10 * time.Second})
			require.NoError(t, err)
			require.Len(t, reqs, 6)
			for _, q := range reqs {
				require.Equal(t, tc.status, q.Status)
				require.Equal(t, tc.chunks, q.Chunks)
				require.Equal(t, tc.tokens, q.CompletionTokens)
				require.Equal(t, tc.usage, q.Usage)
				require.Equal(t, tc.cached, q.CachedTokens)
				if tc.err == "" {
					require.Empty(t, q.Error)
				} else {
					require.Contains(t, q.Error, tc.err)
				}
				if tc.chunks == 0 {
					require.Zero(t, q.TTFTMS)
					continue
				}
				// A role-only first chunk is no token.
				require.GreaterOrEqual(t, q.TTFTMS, float64(max(1, tc.textAfter))*ms(gap))
				if tc.perChnk > 0 {
					// The latencies spread each gap over the chunk's tokens.
					require.Len(t, q.itl, int(tc.chunks-1))
					var sum time.Duration
					for _, d := range q.itl {
						sum += d
					}
					require.InDelta(t, q.LastMS-q.FirstMS, ms(sum)*float64(tc.perChnk), 0.01)
					require.InDelta(t, (q.LastMS-q.FirstMS)/float64(tc.tokens-1), q.TPOTMS, 1e-9)
				}
			}
			require.Len(t, levels, 2)
			for _, l := range levels {
				errs := int64(0)
				if tc.err != "" {
					errs = l.Requests
				}
				require.Equal(t, errs, l.Errors)
				require.Equal(t, l.Requests-errs, int64(l.RequestsPerS*l.WallS+0.5))
				require.Equal(t, tc.tokens*l.Requests, l.CompletionTokens)
			}
		})
	}
}

// TestLoadCancel checks that a run stops when its context ends, returning
// the requests that were sent and the context's error.
func TestLoadCancel(t *testing.T) {
	url := sseServer(t, chunk(`{"content":"a"}`), time.Second, finishChunk)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, reqs, err := Load(ctx, LoadConfig{Endpoint: url, Clients: []int{2, 4}, Requests: 3, MaxTokens: 8,
		Prompt: func(int) string { return "x" }})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 900*time.Millisecond)
	require.Len(t, reqs, 2)
	for _, q := range reqs {
		require.NotEmpty(t, q.Error)
	}
}

// TestLoadPrompts checks the prompts of a run: the same window for every
// request, or a new one opening with the request's number, of about the
// asked number of tokens.
func TestLoadPrompts(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	text := DefaultLoadText()
	require.Greater(t, len(tok.Encode(text)), 4000)
	same, err := LoadPrompts(tok, text, 100, false)
	require.NoError(t, err)
	require.Equal(t, same(0), same(7))
	fresh, err := LoadPrompts(tok, text, 1024, true)
	require.NoError(t, err)
	seen := map[string]bool{}
	for seq := range 12 { // wraps around the text
		p := fresh(seq)
		require.True(t, strings.HasPrefix(p, fmt.Sprintf("Request %d. ", seq)))
		require.False(t, seen[p])
		seen[p] = true
		n := len(tok.Encode(strings.TrimSuffix(p, loadInstruction)))
		require.InDelta(t, 1024, n, 12, "prompt %d: %d tokens", seq, n)
	}
	whole, err := LoadPrompts(tok, "one two", 0, false)
	require.NoError(t, err)
	require.Equal(t, "one two"+loadInstruction, whole(3))
	_, err = LoadPrompts(tok, "", 10, false)
	require.Error(t, err)
}

// TestChatURL checks the endpoint forms Load accepts.
func TestChatURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8000", "http://127.0.0.1:8000/v1/chat/completions"},
		{"http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1/chat/completions"},
		{"http://h:8080/v1", "http://h:8080/v1/chat/completions"},
		{"https://h/v1/", "https://h/v1/chat/completions"},
		{"http://h/api/v1/chat/completions", "http://h/api/v1/chat/completions"},
		{"http://h/proxy", "http://h/proxy/v1/chat/completions"},
		{"h:8000", ""},
		{"ftp://h", ""},
		{"http://", ""},
	} {
		got, err := ChatURL(tc.in)
		if tc.want == "" {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

// TestSSEReader checks the data lines read from an event stream: LF and
// CRLF endings, comments and other fields skipped, a data line without
// the space, lines longer than the read buffer, and a cut last line.
func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := ": comment\nevent: message\r\ndata: one\r\n\ndata:two\nid: 3\n\ndata: " + long + "\n\ndata:  three\n\ndata: cut"
	r := NewSSEReader(strings.NewReader(in))
	for _, want := range []string{"one", "two", long, " three"} {
		got, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
	_, err := r.Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = NewSSEReader(strings.NewReader("data: a\n")).Next()
	require.NoError(t, err)
	r = NewSSEReader(strings.NewReader("\n"))
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestDifferingOutputs(t *testing.T) {
	q := func(prompt, out, err string) LoadRequest {
		return LoadRequest{PromptSHA256: prompt, OutputSHA256: out, Error: err}
	}
	tests := []struct {
		name               string
		reqs               []LoadRequest
		prompts, differing int
	}{
		{"none", nil, 0, 0},
		{"alike", []LoadRequest{q("p", "a", ""), q("p", "a", ""), q("r", "b", "")}, 2, 0},
		{"one prompt differs twice", []LoadRequest{q("p", "a", ""), q("p", "b", ""), q("p", "c", ""), q("r", "b", "")}, 2, 1},
		{"failed requests do not count", []LoadRequest{q("p", "a", ""), q("p", "b", "HTTP 500"), q("r", "", "")}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prompts, differing := DifferingOutputs(tt.reqs)
			require.Equal(t, tt.prompts, prompts)
			require.Equal(t, tt.differing, differing)
		})
	}
}

func TestLoadRepliesAlike(t *testing.T) {
	url := servertest.StartTiny(t, nil)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	prompt, err := LoadPrompts(tok, DefaultLoadText(), 24, false)
	require.NoError(t, err)
	// deepseek-chat: replies without thinking, which ds4-server samples
	// at its own settings whatever the request says.
	cfg := LoadConfig{Endpoint: url, Model: "deepseek-chat", Clients: []int{1, 2}, Requests: 2, MaxTokens: 6, Prompt: prompt,
		Timeout: time.Minute}
	_, reqs, err := Load(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, reqs, 6)
	prompts, differing := DifferingOutputs(reqs)
	require.Equal(t, 1, prompts)
	require.Zero(t, differing)
}
