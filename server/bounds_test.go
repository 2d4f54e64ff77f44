package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// Tests of the bounds on request decoding: tool-call id validation in
// linear time and the request item limit.

// manyCallsResponses is a Responses input of one user message, n function
// calls with distinct ids and n outputs that all answer the last call:
// validating it by rescanning the calls per output takes n² comparisons.
func manyCallsResponses(n int) []responses.ResponseInputItemUnionParam {
	items := []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("go", responses.EasyInputMessageRoleUser)}
	for i := range n {
		items = append(items, responses.ResponseInputItemParamOfFunctionCall("{}", fmt.Sprintf("call_%06d", i), "f"))
	}
	last := fmt.Sprintf("call_%06d", n-1)
	for range n {
		items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(last),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("ok")},
		}})
	}
	return items
}

// manyCallsAnthropic is the Anthropic form of manyCallsResponses: one
// assistant message with n tool_use blocks and one user message whose n
// tool_result blocks all answer the last one.
func manyCallsAnthropic(n int) []anthropic.MessageParam {
	uses := make([]anthropic.ContentBlockParamUnion, n)
	results := make([]anthropic.ContentBlockParamUnion, n)
	for i := range n {
		uses[i] = anthropic.NewToolUseBlock(fmt.Sprintf("toolu_%06d", i), map[string]any{}, "f")
		results[i] = anthropic.NewToolResultBlock(fmt.Sprintf("toolu_%06d", n-1), "ok", false)
	}
	return []anthropic.MessageParam{userText("go"), anthropic.NewAssistantMessage(uses...), anthropic.NewUserMessage(results...)}
}

// TestToolResultValidationLinear sends the largest requests the item limit
// allows whose tool results all answer the last of their calls. Before
// validation used maps it rescanned every call per result: about 30 s of
// CPU per request; now a second or so. The bound is generous (a loaded
// machine), the gap to quadratic time far larger.
func TestToolResultValidationLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("large requests")
	}
	ts, _ := scriptServer(t, nil)
	const n = (MaxRequestItems - 3) / 2
	const bound = 10 * time.Second
	cases := []struct {
		name string
		send func(ctx context.Context) error
	}{
		{"responses", func(ctx context.Context) error {
			c := openaiClient(ts)
			_, err := c.Responses.New(ctx, responses.ResponseNewParams{
				Model: "deepseek-v4-flash",
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: manyCallsResponses(n)},
			})
			return err
		}},
		{"chat", func(ctx context.Context) error {
			calls := make([]openai.ChatCompletionMessageToolCallUnionParam, n)
			msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go"), {}}
			for i := range n {
				calls[i] = openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       fmt.Sprintf("call_%06d", i),
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "f", Arguments: "{}"},
				}}
				msgs = append(msgs, openai.ToolMessage("ok", fmt.Sprintf("call_%06d", n-1)))
			}
			msgs[1] = openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}}
			c := openaiClient(ts)
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "deepseek-v4-flash", Messages: msgs})
			return err
		}},
		{"messages", func(ctx context.Context) error {
			c := anthropicClient(ts)
			_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
				Model:     "deepseek-v4-flash",
				MaxTokens: 16,
				Messages:  manyCallsAnthropic(n),
			})
			return err
		}},
		{"count_tokens", func(ctx context.Context) error {
			c := anthropicClient(ts)
			_, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
				Model:    "deepseek-v4-flash",
				Messages: manyCallsAnthropic(n),
			})
			return err
		}},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		start := time.Now()
		err := tc.send(ctx)
		cancel()
		took := time.Since(start)
		if took >= bound {
			t.Errorf("%s: no answer within %v", tc.name, bound)
			continue
		}
		// The prompt is far larger than the script session's context.
		if !strings.Contains(rawError(err), "context size") {
			t.Errorf("%s: %s after %v, want a context overflow", tc.name, rawError(err), took)
		}
		t.Logf("%s: %d calls and results answered in %v", tc.name, n, took.Round(time.Millisecond))
	}
}

// TestRequestItemLimit checks that a request with more than
// MaxRequestItems messages, input items, content blocks and tool calls is
// refused with a 400 naming the member that passed the limit, and that a
// request at the limit is decoded.
func TestRequestItemLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("large requests")
	}
	ts, _ := scriptServer(t, nil)
	ctx := context.Background()
	chatMsgs := func(n int) []openai.ChatCompletionMessageParamUnion {
		m := make([]openai.ChatCompletionMessageParamUnion, n)
		for i := range m {
			m[i] = openai.UserMessage("x")
		}
		return m
	}
	chatCalls := func(n int) []openai.ChatCompletionMessageParamUnion {
		calls := make([]openai.ChatCompletionMessageToolCallUnionParam, n)
		for i := range calls {
			calls[i] = openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       fmt.Sprintf("call_%d", i),
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "f", Arguments: "{}"},
			}}
		}
		return []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("x"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}},
		}
	}
	chat := func(msgs []openai.ChatCompletionMessageParamUnion) error {
		c := openaiClient(ts)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "deepseek-v4-flash", Messages: msgs})
		return err
	}
	respItems := func(n int) error {
		items := make([]responses.ResponseInputItemUnionParam, n)
		for i := range items {
			items[i] = responses.ResponseInputItemParamOfMessage("x", responses.EasyInputMessageRoleUser)
		}
		c := openaiClient(ts)
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "deepseek-v4-flash", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
		return err
	}
	anthBlocks := func(n int) error {
		blocks := make([]anthropic.ContentBlockParamUnion, n)
		for i := range blocks {
			blocks[i] = anthropic.NewTextBlock("x")
		}
		c := anthropicClient(ts)
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "deepseek-v4-flash", MaxTokens: 16,
			Messages: []anthropic.MessageParam{userText("x"), anthropic.NewUserMessage(blocks...)}})
		return err
	}
	const max = MaxRequestItems
	cases := []struct {
		name  string
		err   error
		param string // "" when the request must pass the item limit
	}{
		{"chat messages at the limit", chat(chatMsgs(max)), ""},
		{"chat messages past the limit", chat(chatMsgs(max + 1)), "messages"},
		{"chat tool_calls past the limit", chat(chatCalls(max - 1)), "messages[1].tool_calls"},
		{"responses input at the limit", respItems(max), ""},
		{"responses input past the limit", respItems(max + 1), "input"},
		{"anthropic blocks at the limit", anthBlocks(max - 3), ""},
		{"anthropic blocks past the limit", anthBlocks(max - 2), "messages[1].content"},
	}
	for _, tc := range cases {
		if tc.param == "" {
			// Decoded: the prompt then overflows the small context.
			if tc.err == nil || strings.Contains(rawError(tc.err), "items") || !strings.Contains(rawError(tc.err), "context size") {
				t.Errorf("%s: %s", tc.name, rawError(tc.err))
			}
			continue
		}
		var oe *openai.Error
		var ae *anthropic.Error
		switch {
		case errors.As(tc.err, &oe):
			if oe.StatusCode != 400 || oe.Param != tc.param || !strings.Contains(oe.Message, fmt.Sprint(max)) {
				t.Errorf("%s: %d %s", tc.name, oe.StatusCode, oe.RawJSON())
			}
		case errors.As(tc.err, &ae):
			if ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), tc.param+" brings the request to more than") {
				t.Errorf("%s: %d %s", tc.name, ae.StatusCode, ae.RawJSON())
			}
		default:
			t.Errorf("%s: %v", tc.name, tc.err)
		}
	}
}

// rawError returns the body of an SDK error, or its text.
func rawError(err error) string {
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case err == nil:
		return "<nil>"
	case errors.As(err, &oe):
		return oe.RawJSON()
	case errors.As(err, &ae):
		return ae.RawJSON()
	}
	return err.Error()
}

// tokenCounter is a tokenize hook that counts calls and the most
// tokenizations seen at once, each held for hold.
type tokenCounter struct {
	hold                time.Duration
	calls, active, peak atomic.Int64
}

func (c *tokenCounter) hook() {
	c.calls.Add(1)
	n := c.active.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	time.Sleep(c.hold)
	c.active.Add(-1)
}

// boundServer starts a server over a script session with a context of ctx
// tokens whose tokenizations c counts.
func boundServer(t *testing.T, ctx int, c *tokenCounter, mod func(*Config)) *testServer {
	sess := newScriptSession(t, ctx, "ok")
	cfg := Config{Session: sess, Tokenizer: sess.tok, PrefillChunk: 1 << 20, tokenizeHook: c.hook}
	if mod != nil {
		mod(&cfg)
	}
	return startServer(t, cfg)
}

// chatBody is a chat request whose one user message is text.
func chatBody(text string) string {
	b, _ := json.Marshal(map[string]any{"model": "deepseek-v4-flash", "max_tokens": 1,
		"messages": []map[string]any{{"role": "user", "content": text}}})
	return string(b)
}

// countBody is a count_tokens request whose one user message is text.
func countBody(text string) string {
	b, _ := json.Marshal(map[string]any{"model": "deepseek-v4-flash",
		"messages": []map[string]any{{"role": "user", "content": text}}})
	return string(b)
}

// overflow decodes a context_length_exceeded error body of either shape.
func overflow(t *testing.T, body string) (msg string, promptTokens, ctx int) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Type    string `json:"type"`
			N       int    `json:"n_prompt_tokens"`
			Ctx     int    `json:"n_ctx"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Ctx == 0 {
		t.Fatalf("not a context overflow: %s", body)
	}
	return e.Error.Message, e.Error.N, e.Error.Ctx
}

// TestOversizePromptNotTokenized checks that a prompt longer in bytes
// than the context could ever hold (--ctx × 128, the longest token) is
// refused without being tokenized, on every endpoint, with a lower bound
// on its tokens.
func TestOversizePromptNotTokenized(t *testing.T) {
	const ctx = 4096
	var c tokenCounter
	ts := boundServer(t, ctx, &c, nil)
	big := strings.Repeat("x", (ctx-1)*128+1) // one letter run: one BPE piece
	ids := strings.TrimSuffix(strings.Repeat("69933,", ctx+1), ",")
	cases := []struct {
		name, path, body string
		atLeast          int
	}{
		{"chat", "/v1/chat/completions", chatBody(big), ctx},
		{"count_tokens", "/v1/messages/count_tokens", countBody(big), ctx},
		{"messages", "/v1/messages", `{"model":"deepseek-v4-flash","max_tokens":1,"messages":[{"role":"user","content":"` + big + `"}]}`, ctx},
		{"responses", "/v1/responses", `{"model":"deepseek-v4-flash","input":"` + big + `"}`, ctx},
		{"completions", "/v1/completions", `{"model":"deepseek-v4-flash","prompt":"` + big + `"}`, ctx},
		// 4,097 ids of the 128-space token: 15 bytes of JSON per 128 bytes of text.
		{"completions token ids", "/v1/completions", `{"model":"deepseek-v4-flash","prompt":[` + ids + `]}`, ctx},
		{"chat, ten times too long", "/v1/chat/completions", chatBody(strings.Repeat(big, 10)), 10 * (ctx - 1)},
	}
	for _, tc := range cases {
		status, _, body := post(t, ts.url+tc.path, tc.body)
		if status != 400 {
			t.Errorf("%s: %d %.300s", tc.name, status, body)
			continue
		}
		msg, n, nctx := overflow(t, body)
		if n < tc.atLeast || nctx != ctx || !strings.Contains(msg, fmt.Sprintf("at least %d tokens", n)) {
			t.Errorf("%s: %s", tc.name, body)
		}
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("the tokenizer ran %d times", n)
	}
}

// TestTokenizationStopsAtContext checks that a prompt short enough in
// bytes to fit but with more tokens than the context is tokenized only
// until it fills the context: the error states the count where it
// stopped, the context size.
func TestTokenizationStopsAtContext(t *testing.T) {
	const ctx = 4096
	var c tokenCounter
	ts := boundServer(t, ctx, &c, nil)
	words := strings.Repeat(" word", 100000) // 100,000 tokens in 500,000 bytes
	cases := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", chatBody(words)},
		{"count_tokens", "/v1/messages/count_tokens", countBody(words)},
	}
	for _, tc := range cases {
		status, _, body := post(t, ts.url+tc.path, tc.body)
		if status != 400 {
			t.Errorf("%s: %d %.300s", tc.name, status, body)
			continue
		}
		if _, n, _ := overflow(t, body); n != ctx {
			t.Errorf("%s: stopped at %d tokens, want %d: %s", tc.name, n, ctx, body)
		}
	}
	// Below the context, count_tokens counts exactly.
	status, _, body := post(t, ts.url+"/v1/messages/count_tokens", countBody(words[:5*4000]))
	if status != 200 || body != "{\"input_tokens\":4004}\n" {
		t.Errorf("count below the context: %d %s", status, body)
	}
}

// TestLargeRequestSlots sends many large requests at once and checks that
// no more of them are tokenized at once than Config.LargeRequests allows,
// and that all get their answer.
func TestLargeRequestSlots(t *testing.T) {
	const slots, clients = 2, 6
	c := tokenCounter{hold: 200 * time.Millisecond}
	ts := boundServer(t, 1<<20, &c, func(cfg *Config) { cfg.LargeRequests = slots })
	text := strings.Repeat(" word", LargeRequestBytes/5+1)
	var wg sync.WaitGroup
	answers := make([]string, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, body := "/v1/messages/count_tokens", countBody(text)
			if i%2 == 1 {
				path, body = "/v1/chat/completions", chatBody(text)
			}
			status, _, resp := post(t, ts.url+path, body)
			answers[i] = fmt.Sprintf("%d %.200s", status, resp)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if !strings.HasPrefix(a, "200 ") {
			t.Errorf("client %d: %s", i, a)
		}
	}
	if p := c.peak.Load(); p != slots {
		t.Errorf("%d large prompts tokenized at once, want %d", p, slots)
	}
}

// TestLargePromptMemory measures the heap a burst of concurrent large
// prompts allocates and keeps: refused ones are never rendered whole or
// tokenized, and nothing is kept once they are answered.
func TestLargePromptMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("large requests")
	}
	const ctx, clients, size = 4096, 6, 16 << 20
	var c tokenCounter
	ts := boundServer(t, ctx, &c, nil)
	body := countBody(strings.Repeat("lorem ipsum ", size/12))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, _, resp := post(t, ts.url+"/v1/messages/count_tokens", body); status != 400 {
				t.Errorf("%d %.200s", status, resp)
			}
		}()
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRequest := float64(after.TotalAlloc-before.TotalAlloc) / clients / float64(len(body))
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("allocated %.1f bytes per body byte per request; heap kept %d KiB", perRequest, kept>>10)
	if perRequest > 8 {
		t.Errorf("allocated %.1f bytes per body byte per request", perRequest)
	}
	if kept > 32<<20 {
		t.Errorf("heap grew by %d MiB after the requests", kept>>20)
	}
}
