package server

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// Integration tests with the official Anthropic Go SDK (see
// sdk_openai_test.go for how the tests are set up).

var toolUseIDPattern = regexp.MustCompile(`^toolu_[0-9a-f]{32}$`)

func anthropicClient(ts *testServer, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(ts.url),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(60 * time.Second),
	}, opts...)...)
}

func weatherToolParam() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("Get the current weather for a city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
			Required:   []string{"city"},
		},
	}}
}

func userText(s string) anthropic.MessageParam {
	return anthropic.NewUserMessage(anthropic.NewTextBlock(s))
}

func TestAnthropicMessagesPlain(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	c := anthropicClient(ts)
	msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "deepseek-v4-flash",
		MaxTokens: 6,
		Messages:  []anthropic.MessageParam{userText("Hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 6 {
		t.Errorf("message %s", msg.RawJSON())
	}
	if len(msg.Content) == 0 || msg.Usage.InputTokens == 0 {
		t.Errorf("content/usage %s", msg.RawJSON())
	}
}

func TestAnthropicMessagesSystemAndThinking(t *testing.T) {
	ts, sess := scriptServer(t, nil, "Let me think.</think>Hi!")
	c := anthropicClient(ts)
	msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "deepseek-v4-flash",
		MaxTokens: 50,
		System:    []anthropic.TextBlockParam{{Text: "x-anthropic-billing-header: dropped"}, {Text: "You are kind."}, {Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{userText("Hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "<｜begin▁of▁sentence｜>You are kind.\nBe brief.<｜User｜>Hello<｜Assistant｜><think>"
	if p := sess.prompt(0); p != want {
		t.Errorf("prompt %q\nwant   %q", p, want)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != "Let me think." ||
		msg.Content[0].Signature != msg.ID || msg.Content[1].Text != "Hi!" || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("message %s", msg.RawJSON())
	}
}

func TestAnthropicMessagesStreaming(t *testing.T) {
	ts, _ := scriptServer(t, nil, "Thinking hard.</think>Hello, world!")
	c := anthropicClient(ts)
	stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "deepseek-v4-flash",
		MaxTokens: 50,
		Messages:  []anthropic.MessageParam{userText("Hello")},
	})
	msg := anthropic.Message{}
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(dedupe(types), " "); got != want {
		t.Errorf("events %s", got)
	}
	if len(msg.Content) != 2 || msg.Content[0].Thinking != "Thinking hard." || msg.Content[0].Signature != msg.ID ||
		msg.Content[1].Text != "Hello, world!" || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens == 0 {
		t.Errorf("accumulated %s", msg.RawJSON())
	}
}

func TestAnthropicMessagesTools(t *testing.T) {
	ts, sess := scriptServer(t, nil, "I should call the tool.</think>"+weatherScript, "Sunny.</think>It is sunny.")
	c := anthropicClient(ts)
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     "deepseek-v4-flash",
		MaxTokens: 200,
		Messages:  []anthropic.MessageParam{userText("Weather in Rome?")},
		Tools:     []anthropic.ToolUnionParam{weatherToolParam()},
	}
	stream := c.Messages.NewStreaming(ctx, params)
	msg := anthropic.Message{}
	partials := 0
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			partials++
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 || msg.Content[1].Type != "tool_use" {
		t.Fatalf("message %s", msg.RawJSON())
	}
	use := msg.Content[1]
	var input map[string]any
	if err := json.Unmarshal(use.Input, &input); err != nil || input["city"] != `Rome & "Lazio"` || input["days"] != 3.0 {
		t.Errorf("input %s: %v", use.Input, err)
	}
	if !toolUseIDPattern.MatchString(use.ID) || use.Name != "get_weather" || partials < 3 {
		t.Errorf("tool_use %s (%d input_json_delta events)", use.RawJSON(), partials)
	}
	if !strings.Contains(sess.prompt(0), `"name":"get_weather"`) {
		t.Errorf("tool schema not in prompt %q", sess.prompt(0))
	}

	// Tool round trip: the live Anthropic binding continues the KV with
	// just the tool result.
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "21 C", false)))
	msg2, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg2.Content) != 2 || msg2.Content[1].Text != "It is sunny." || msg2.Usage.CacheReadInputTokens == 0 {
		t.Errorf("second message %s", msg2.RawJSON())
	}
	if p := sess.prompt(-1); !strings.HasSuffix(p, weatherScript+"<｜end▁of▁sentence｜><｜User｜><tool_result>21 C</tool_result><｜Assistant｜><think>") {
		t.Errorf("second prompt %q", p)
	}

	// A result for a call the server never made is refused.
	bad := params
	bad.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_unknown", "x", false))}
	_, err = c.Messages.New(ctx, bad)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Error(), "toolu_unknown") {
		t.Errorf("unknown tool_use_id: %v", err)
	}
}

func TestAnthropicStopSequences(t *testing.T) {
	ts, _ := scriptServer(t, nil, "Answer: 42 STOP and more", "Answer: 42 STOP and more")
	c := anthropicClient(ts)
	params := anthropic.MessageNewParams{
		Model:         "deepseek-v4-flash",
		MaxTokens:     50,
		StopSequences: []string{"STOP", "never"},
		Thinking:      anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}},
		Messages:      []anthropic.MessageParam{userText("What is it?")},
	}
	msg, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != "STOP" || len(msg.Content) != 1 || msg.Content[0].Text != "Answer: 42 " {
		t.Errorf("message %s", msg.RawJSON())
	}
	stream := c.Messages.NewStreaming(context.Background(), params)
	acc := anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != anthropic.StopReasonStopSequence || acc.StopSequence != "STOP" || acc.Content[0].Text != "Answer: 42 " {
		t.Errorf("streamed %s", acc.RawJSON())
	}
}

func TestAnthropicErrors(t *testing.T) {
	ts, _ := scriptServer(t, func(c *Config) { c.APIKey = "sekret" })
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "deepseek-v4-flash", MaxTokens: 5, Messages: []anthropic.MessageParam{userText("hi")}}
	noKey := anthropicClient(ts)
	_, err := noKey.Messages.New(ctx, params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.RawJSON(), "authentication_error") {
		t.Errorf("bad key: %v", err)
	}
	_, err = noKey.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "deepseek-v4-flash", Messages: params.Messages})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.RawJSON(), `"type":"authentication_error"`) {
		t.Errorf("count_tokens, bad key: %v", err)
	}
	c := anthropicClient(ts, option.WithAPIKey("sekret"))
	params.Model = "claude-opus-4-5"
	_, err = c.Messages.New(ctx, params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.RawJSON(), "not_found_error") {
		t.Errorf("unknown model: %v", err)
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	c := anthropicClient(ts)
	n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "deepseek-v4-flash",
		Messages: []anthropic.MessageParam{userText("Hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	// BOS, User, "Hello", Assistant, <think>.
	if n.InputTokens != 5 {
		t.Errorf("input tokens %d", n.InputTokens)
	}
}
