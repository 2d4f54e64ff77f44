package server

import (
	"context"
	"encoding/json"
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
