package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// Conformance tests: the same request gives the same answer streamed and
// not, and fields carry the values the official APIs define.

// split is a turn as a client sees it: reasoning, visible text and how it
// ended.
type split struct {
	reasoning, content, finish string
}

// extraString decodes an SDK extra field holding a JSON string.
func extraString(raw string) string {
	var s string
	json.Unmarshal([]byte(raw), &s)
	return s
}

// chatSplit runs a chat request with the OpenAI SDK, streamed or not.
func chatSplit(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, stream bool) split {
	t.Helper()
	ctx := context.Background()
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		return split{extraString(ch.Message.JSON.ExtraFields["reasoning_content"].Raw()), ch.Message.Content, string(ch.FinishReason)}
	}
	s := c.Chat.Completions.NewStreaming(ctx, p)
	var out split
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) == 0 {
			continue
		}
		d := ch.Choices[0].Delta
		out.reasoning += extraString(d.JSON.ExtraFields["reasoning_content"].Raw())
		out.content += d.Content
		if f := ch.Choices[0].FinishReason; f != "" {
			out.finish = string(f)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// messagesSplit runs an Anthropic request with the Anthropic SDK, streamed
// or not; the block types are part of the reasoning field.
func messagesSplit(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams, stream bool) split {
	t.Helper()
	ctx := context.Background()
	var msg anthropic.Message
	if !stream {
		m, err := c.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		msg = *m
	} else {
		s := c.Messages.NewStreaming(ctx, p)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var out split
	var types []string
	for _, b := range msg.Content {
		types = append(types, b.Type)
		out.reasoning += b.Thinking
		out.content += b.Text
	}
	out.finish = string(msg.StopReason) + " " + strings.Join(types, ",")
	return out
}

// responsesSplit runs a Responses request with the OpenAI SDK, streamed or
// not, and reads the final response object; the reasoning item's status
// is part of the finish field.
func responsesSplit(t *testing.T, c openai.Client, p responses.ResponseNewParams, stream bool) split {
	t.Helper()
	ctx := context.Background()
	var resp responses.Response
	if !stream {
		r, err := c.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		resp = *r
	} else {
		s := c.Responses.NewStreaming(ctx, p)
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.completed", "response.incomplete", "response.failed":
				resp = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	out := split{content: resp.OutputText(), finish: string(resp.Status)}
	for _, it := range resp.Output {
		if it.Type == "reasoning" {
			for _, s := range it.Summary {
				out.reasoning += s.Text
			}
			out.finish += " reasoning:" + string(it.Status)
		}
	}
	return out
}

// TestReasoningSplitStreamedAndNot checks that a turn that ends inside its
// reasoning (by max_tokens or by EOS before "</think>") is reasoning both
// streamed and not, on every API with a reasoning channel.
func TestReasoningSplitStreamedAndNot(t *testing.T) {
	const script = "Let us weigh the options carefully before answering"
	cases := []struct {
		name      string
		maxTokens int64
		finish    map[string]string // per API: the finish field wanted
	}{
		{"max_tokens", 4, map[string]string{
			"chat":      "length",
			"messages":  "max_tokens thinking,text",
			"responses": "incomplete reasoning:incomplete",
		}},
		{"eos", 200, map[string]string{
			"chat":      "stop",
			"messages":  "end_turn thinking,text",
			"responses": "completed reasoning:incomplete",
		}},
	}
	for _, c := range cases {
		for _, a := range []string{"chat", "messages", "responses"} {
			t.Run(c.name+"/"+a, func(t *testing.T) {
				ts, _ := scriptServer(t, nil, script, script)
				var got [2]split
				for i, stream := range []bool{false, true} {
					switch a {
					case "chat":
						got[i] = chatSplit(t, openaiClient(ts), openai.ChatCompletionNewParams{
							Model:     "deepseek-v4-flash",
							Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Choose.")},
							MaxTokens: openai.Int(c.maxTokens),
						}, stream)
					case "messages":
						got[i] = messagesSplit(t, anthropicClient(ts), anthropic.MessageNewParams{
							Model:     "deepseek-v4-flash",
							MaxTokens: c.maxTokens,
							Messages:  []anthropic.MessageParam{userText("Choose.")},
						}, stream)
					case "responses":
						got[i] = responsesSplit(t, openaiClient(ts), responses.ResponseNewParams{
							Model:           "deepseek-v4-flash",
							Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Choose.")},
							MaxOutputTokens: openai.Int(c.maxTokens),
							Reasoning:       shared.ReasoningParam{Summary: shared.ReasoningSummary("auto")},
						}, stream)
					}
				}
				if got[0] != got[1] {
					t.Errorf("non-streamed %+v\n    streamed %+v", got[0], got[1])
				}
				for i, g := range got {
					if g.reasoning == "" || !strings.HasPrefix(script, g.reasoning) || g.content != "" || g.finish != c.finish[a] {
						t.Errorf("stream=%v: %+v, want reasoning, no content, finish %q", i == 1, g, c.finish[a])
					}
				}
			})
		}
	}
}

// TestResponsesIncompleteReason checks the reason of a Responses turn cut
// by max_output_tokens, streamed and not.
func TestResponsesIncompleteReason(t *testing.T) {
	ts, _ := scriptServer(t, nil, "one two three four five", "one two three four five")
	c := openaiClient(ts)
	p := responses.ResponseNewParams{
		Model:           "deepseek-v4-flash",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Count.")},
		MaxOutputTokens: openai.Int(2),
		Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffort("none")},
	}
	for _, stream := range []bool{false, true} {
		var resp responses.Response
		if !stream {
			r, err := c.Responses.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			resp = *r
		} else {
			s := c.Responses.NewStreaming(context.Background(), p)
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.incomplete" {
					resp = ev.Response
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		}
		if resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" {
			t.Errorf("stream=%v: %s", stream, resp.RawJSON())
		}
	}
}

// TestAnthropicUsageAndID checks Anthropic usage (uncached prompt tokens
// are input_tokens unless the request asked for caching; reused ones are
// cache reads) and message ids, streamed and not, against count_tokens.
func TestAnthropicUsageAndID(t *testing.T) {
	ts, _ := scriptServer(t, nil, "Hi there.", "Hi again.", "Fine.", "Fine.")
	c := anthropicClient(ts)
	ctx := context.Background()
	off := anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
	turn1 := []anthropic.MessageParam{userText("Hello")}
	turn2 := append(turn1, anthropic.NewAssistantMessage(anthropic.NewTextBlock("Hi there.")), userText("More"))
	cached := []anthropic.TextBlockParam{{Text: "Be brief.", CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	cases := []struct {
		name     string
		stream   bool
		msgs     []anthropic.MessageParam
		system   []anthropic.TextBlockParam
		warm     bool // the prompt extends the previous turn's
		creation bool // cache_control asked for caching
	}{
		{"cold", false, turn1, nil, false, false},
		{"warm streamed", true, turn2, nil, true, false},
		{"cache_control", false, turn1, cached, false, true},
		{"cache_control streamed", true, turn1, cached, false, true},
	}
	for _, tc := range cases {
		p := anthropic.MessageNewParams{Model: "deepseek-v4-flash", MaxTokens: 20, Messages: tc.msgs, System: tc.system, Thinking: off}
		count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model: "deepseek-v4-flash", Messages: tc.msgs, Thinking: off,
			System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: tc.system},
		})
		if err != nil {
			t.Fatal(err)
		}
		var msg anthropic.Message
		if !tc.stream {
			m, err := c.Messages.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			msg = *m
		} else {
			s := c.Messages.NewStreaming(ctx, p)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		}
		u := msg.Usage
		if !strings.HasPrefix(msg.ID, "msg_") {
			t.Errorf("%s: id %q", tc.name, msg.ID)
		}
		if u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens != count.InputTokens {
			t.Errorf("%s: usage %s does not add up to count_tokens %d", tc.name, u.RawJSON(), count.InputTokens)
		}
		if tc.warm != (u.CacheReadInputTokens > 0) {
			t.Errorf("%s: cache reads in %s", tc.name, u.RawJSON())
		}
		uncached := count.InputTokens - u.CacheReadInputTokens
		if tc.creation && (u.CacheCreationInputTokens != uncached || u.InputTokens != 0) ||
			!tc.creation && (u.CacheCreationInputTokens != 0 || u.InputTokens != uncached) {
			t.Errorf("%s: usage %s", tc.name, u.RawJSON())
		}
	}
}

// TestRejectedRequests checks that requests the APIs define as invalid
// get a 400 in the endpoint's error shape naming the field, instead of
// running.
func TestRejectedRequests(t *testing.T) {
	ts, _ := scriptServer(t, nil) // context 8192
	user := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		param            string // OpenAI param; for /v1/messages, the message prefix
	}{
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, "messages"},
		{"empty messages anthropic", "/v1/messages", `{"max_tokens":5,"messages":[]}`, "messages"},
		{"empty input", "/v1/responses", `{"input":[]}`, "input"},
		{"missing max_tokens anthropic", "/v1/messages", `{` + user + `}`, "max_tokens"},
		{"null max_tokens anthropic", "/v1/messages", `{"max_tokens":null,` + user + `}`, "max_tokens"},
		{"prompt object", "/v1/completions", `{"prompt":{"a":1}}`, "prompt"},
		{"prompt number", "/v1/completions", `{"prompt":5}`, "prompt"},
		{"prompt null", "/v1/completions", `{"prompt":null}`, "prompt"},
		{"prompt empty array", "/v1/completions", `{"prompt":[]}`, "prompt"},
		{"prompt objects", "/v1/completions", `{"prompt":[{"a":1}]}`, "prompt"},
		{"prompt mixed ids", "/v1/completions", `{"prompt":[1,"a"]}`, "prompt"},
		{"prompt negative id", "/v1/completions", `{"prompt":[-1]}`, "prompt"},
		{"prompt id out of vocabulary", "/v1/completions", `{"prompt":[[1,999999999]]}`, "prompt"},
		{"prompt batch", "/v1/completions", `{"prompt":["a","b"]}`, "prompt"},
		{"prompt id batch", "/v1/completions", `{"prompt":[[1],[2]]}`, "prompt"},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "messages[1].role"},
		{"unknown role anthropic", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"robot","content":"b"}]}`, "messages[0].role"},
		{"unknown role responses", "/v1/responses", `{"input":[{"role":"robot","content":"b"}]}`, "input[0].role"},
		{"chat max_tokens", "/v1/chat/completions", `{"max_tokens":10000000,` + user + `}`, "max_tokens"},
		{"chat max_completion_tokens", "/v1/chat/completions", `{"max_completion_tokens":8193,` + user + `}`, "max_completion_tokens"},
		{"chat both, max_tokens too large", "/v1/chat/completions", `{"max_completion_tokens":5,"max_tokens":8193,` + user + `}`, "max_tokens"},
		{"completions max_tokens", "/v1/completions", `{"max_tokens":10000000,"prompt":"x"}`, "max_tokens"},
		{"completions max_completion_tokens", "/v1/completions", `{"max_completion_tokens":8193,"prompt":"x"}`, "max_completion_tokens"},
		{"responses max_output_tokens", "/v1/responses", `{"max_output_tokens":10000000,"input":"x"}`, "max_output_tokens"},
		{"responses max_tokens", "/v1/responses", `{"max_tokens":8193,"input":"x"}`, "max_tokens"},
		{"anthropic max_tokens", "/v1/messages", `{"max_tokens":10000000,` + user + `}`, "max_tokens"},
	}
	for _, c := range cases {
		status, _, body := post(t, ts.url+c.path, c.body)
		var e struct {
			Type  string
			Error struct{ Type, Message, Param string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || status != 400 || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %d %s", c.name, status, body)
			continue
		}
		if c.path == "/v1/messages" {
			if e.Type != "error" || !strings.HasPrefix(e.Error.Message, c.param+" ") {
				t.Errorf("%s: %s, want an Anthropic error about %s", c.name, body, c.param)
			}
		} else if e.Error.Param != c.param {
			t.Errorf("%s: %s, want param %s", c.name, body, c.param)
		}
		if (strings.Contains(c.body, "10000000") || strings.Contains(c.body, "8193")) && !strings.Contains(e.Error.Message, "8192") {
			t.Errorf("%s: %s does not state the limit", c.name, body)
		}
	}
}

// TestMaxTokensClampedToContext checks every output-limit field on every
// endpoint of a server with a small context: a limit equal to the context
// is accepted and generation stops where the context ends (finish
// length), one token more is refused.
func TestMaxTokensClampedToContext(t *testing.T) {
	const ctx = 96
	ts := tinyServer(t, ctx, nil)
	msgs := `"messages":[{"role":"user","content":"Tell me a long story."}]`
	cases := []struct {
		path, field, rest string
	}{
		{"/v1/chat/completions", "max_tokens", msgs},
		{"/v1/chat/completions", "max_completion_tokens", msgs},
		{"/v1/completions", "max_tokens", `"prompt":"Once upon a time"`},
		{"/v1/completions", "max_completion_tokens", `"prompt":[[1,2,3]]`},
		{"/v1/responses", "max_output_tokens", `"input":"Tell me a long story."`},
		{"/v1/responses", "max_tokens", `"input":[{"role":"user","content":"Tell me a long story."}]`},
		{"/v1/messages", "max_tokens", msgs},
	}
	for _, c := range cases {
		name := c.path + " " + c.field
		// Each endpoint ignores the members of the others.
		body := func(n int) string {
			return fmt.Sprintf(`{"%s":%d,"seed":7,"thinking":{"type":"disabled"},"reasoning":{"effort":"none"},%s}`, c.field, n, c.rest)
		}
		if status, _, b := post(t, ts.url+c.path, body(ctx+1)); status != 400 || !strings.Contains(b, c.field) {
			t.Errorf("%s %d: %d %s", name, ctx+1, status, b)
		}
		status, _, b := post(t, ts.url+c.path, body(ctx))
		var r struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
			StopReason string `json:"stop_reason"`
			Status     string
			Usage      map[string]any
		}
		if err := json.Unmarshal([]byte(b), &r); err != nil || status != 200 {
			t.Errorf("%s: %d %s", name, status, b)
			continue
		}
		num := func(k string) int { f, _ := r.Usage[k].(float64); return int(f) }
		var prompt, out int
		var finish string
		switch c.path {
		case "/v1/messages":
			prompt, out, finish = num("input_tokens")+num("cache_read_input_tokens"), num("output_tokens"), r.StopReason
		case "/v1/responses":
			prompt, out, finish = num("input_tokens"), num("output_tokens"), r.Status
		default:
			prompt, out, finish = num("prompt_tokens"), num("completion_tokens"), r.Choices[0].FinishReason
		}
		if prompt+out != ctx || finish != map[string]string{"/v1/messages": "max_tokens", "/v1/responses": "incomplete"}[c.path] && finish != "length" {
			t.Errorf("%s: %d prompt + %d generated tokens in a %d-token context, finish %q", name, prompt, out, ctx, finish)
		}
	}
}

// TestAgentMaxTokens checks the output limit agent clients send (32,000):
// served under ds4-server's default context of 32,768 tokens, clamped to
// the room the prompt leaves, and refused by a server whose whole context
// is smaller.
func TestAgentMaxTokens(t *testing.T) {
	for _, c := range []struct {
		ctx    int
		status int
	}{{32768, 200}, {16384, 400}} {
		sess := newScriptSession(t, c.ctx, "Done.", "Done.")
		ts := startServer(t, Config{Session: sess, Tokenizer: sess.tok})
		for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
			status, _, body := post(t, ts.url+path, `{"max_tokens":32000,"messages":[{"role":"user","content":"hi"}]}`)
			if status != c.status || c.status == 400 && !strings.Contains(body, "16384") {
				t.Errorf("context %d %s: %d %s", c.ctx, path, status, body)
			}
		}
	}
}
