package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
		// The prompt is far larger than the script session's context
		// (count_tokens counts it).
		if (err != nil || tc.name != "count_tokens") && !strings.Contains(rawError(err), "context size") {
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
