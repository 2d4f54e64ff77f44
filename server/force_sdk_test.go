package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// forcedTool is a tool offered in the forced tool-choice tests.
type forcedTool struct {
	name     string
	props    map[string]any
	required []string
}

var (
	forcedWeather = forcedTool{"get_weather", map[string]any{
		"city": map[string]any{"type": "string"},
		"days": map[string]any{"type": "integer"},
	}, []string{"city"}}
	forcedSearch = forcedTool{"search_docs", map[string]any{
		"query":   map[string]any{"type": "string"},
		"limit":   map[string]any{"type": "integer"},
		"filters": map[string]any{"type": "object"},
		"tags":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	}, nil}
)

// forcedCase is one forced tool-choice request; name "" forces any tool.
type forcedCase struct {
	tools    []forcedTool
	name     string
	think    bool
	temp     float64
	seed     int64
	maxToken int64
}

var forcedCases = []forcedCase{
	{tools: []forcedTool{forcedWeather}, temp: 0.7, seed: 1, maxToken: 90},
	{tools: []forcedTool{forcedWeather, forcedSearch}, name: "search_docs", temp: 1.5, seed: 2, maxToken: 120},
	{tools: []forcedTool{forcedWeather, forcedSearch}, think: true, seed: 3, maxToken: 100},
	{tools: []forcedTool{forcedSearch, forcedWeather}, name: "get_weather", think: true, temp: 0, seed: 4, maxToken: 70},
	{tools: []forcedTool{forcedSearch}, temp: 1, seed: 5, maxToken: 160},
}

func (c forcedCase) String() string {
	return fmt.Sprintf("tools=%d name=%q think=%v temp=%v seed=%d max=%d", len(c.tools), c.name, c.think, c.temp, c.seed, c.maxToken)
}

// check verifies that a forced reply called an offered tool (the named
// one when named) with a JSON object of the tool's parameters.
func (c forcedCase) check(t *testing.T, label string, n int, name, args string) {
	t.Helper()
	if n < 1 {
		t.Errorf("%s %v: no tool call", label, c)
		return
	}
	i := slices.IndexFunc(c.tools, func(ft forcedTool) bool { return ft.name == name })
	if i < 0 || c.name != "" && name != c.name {
		t.Errorf("%s %v: called %q", label, c, name)
		return
	}
	t.Logf("%s %v: %s %s", label, c, name, args)
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil || m == nil {
		t.Errorf("%s %v: arguments %q are not a JSON object: %v", label, c, args, err)
		return
	}
	for k := range m {
		if _, ok := c.tools[i].props[k]; !ok {
			t.Errorf("%s %v: argument %q is not a parameter of %s", label, c, k, name)
		}
	}
}

func (c forcedCase) openaiTools() []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, ft := range c.tools {
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       ft.name,
			Parameters: shared.FunctionParameters{"type": "object", "properties": ft.props, "required": ft.required},
		}))
	}
	return out
}

func (c forcedCase) effort() shared.ReasoningEffort {
	if c.think {
		return "high"
	}
	return "none"
}

func TestForcedToolChoiceChat(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	cl := openaiClient(ts)
	ctx := context.Background()
	for _, tc := range forcedCases {
		params := openai.ChatCompletionNewParams{
			Model:           "deepseek-v4-flash",
			Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Rome, and docs about it?")},
			Tools:           tc.openaiTools(),
			MaxTokens:       openai.Int(tc.maxToken),
			Seed:            openai.Int(tc.seed),
			Temperature:     openai.Float(tc.temp),
			ReasoningEffort: tc.effort(),
			ToolChoice:      openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		}
		if tc.name != "" {
			params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
				Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: tc.name},
			}}
		}
		resp, err := cl.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		ch := resp.Choices[0]
		if ch.FinishReason != "tool_calls" {
			t.Errorf("%v: finish %q: %s", tc, ch.FinishReason, resp.RawJSON())
		}
		if calls := ch.Message.ToolCalls; len(calls) == 0 {
			tc.check(t, "chat", 0, "", "")
		} else {
			tc.check(t, "chat", len(calls), calls[0].Function.Name, calls[0].Function.Arguments)
		}

		stream := cl.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%v stream: %v", tc, err)
		}
		if len(acc.Choices) == 0 {
			t.Fatalf("%v stream: no choices", tc)
		}
		sc := acc.Choices[0]
		if sc.FinishReason != "tool_calls" {
			t.Errorf("%v stream: finish %q", tc, sc.FinishReason)
		}
		if calls := sc.Message.ToolCalls; len(calls) == 0 {
			tc.check(t, "chat stream", 0, "", "")
		} else {
			tc.check(t, "chat stream", len(calls), calls[0].Function.Name, calls[0].Function.Arguments)
		}
	}
}

func TestForcedToolChoiceResponses(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	cl := openaiClient(ts)
	ctx := context.Background()
	for _, tc := range forcedCases {
		var tools []responses.ToolUnionParam
		for _, ft := range tc.tools {
			tools = append(tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
				Name:       ft.name,
				Parameters: map[string]any{"type": "object", "properties": ft.props, "required": ft.required},
			}})
		}
		params := responses.ResponseNewParams{
			Model:           "deepseek-v4-flash",
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Rome?")},
			Tools:           tools,
			MaxOutputTokens: openai.Int(tc.maxToken),
			Temperature:     openai.Float(tc.temp),
			Reasoning:       shared.ReasoningParam{Effort: tc.effort()},
			ToolChoice:      responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
		}
		if tc.name != "" {
			params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: tc.name}}
		}
		check := func(label string, resp *responses.Response) {
			t.Helper()
			n, name, args := 0, "", ""
			for _, it := range resp.Output {
				if it.Type == "function_call" {
					if n == 0 {
						fc := it.AsFunctionCall()
						name, args = fc.Name, fc.Arguments
					}
					n++
				}
			}
			if resp.Status != "completed" {
				t.Errorf("%s %v: status %q: %s", label, tc, resp.Status, resp.RawJSON())
			}
			tc.check(t, label, n, name, args)
		}
		resp, err := cl.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		check("responses", resp)

		stream := cl.Responses.NewStreaming(ctx, params)
		var final *responses.Response
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.completed" || ev.Type == "response.incomplete" {
				r := ev.Response
				final = &r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%v stream: %v", tc, err)
		}
		if final == nil {
			t.Fatalf("%v stream: no final response", tc)
		}
		check("responses stream", final)
	}
}

func TestForcedToolChoiceMessages(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	cl := anthropicClient(ts)
	ctx := context.Background()
	for _, tc := range forcedCases {
		var tools []anthropic.ToolUnionParam
		for _, ft := range tc.tools {
			tools = append(tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
				Name:        ft.name,
				InputSchema: anthropic.ToolInputSchemaParam{Properties: ft.props, Required: ft.required},
			}})
		}
		params := anthropic.MessageNewParams{
			Model:      "deepseek-v4-flash",
			MaxTokens:  tc.maxToken,
			Messages:   []anthropic.MessageParam{userText("Weather in Rome?")},
			Tools:      tools,
			Thinking:   anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}},
			ToolChoice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}},
		}
		if tc.think {
			params.Thinking = anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 1024}}
		}
		if tc.name != "" {
			params.ToolChoice = anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: tc.name}}
		}
		check := func(label string, msg *anthropic.Message) {
			t.Helper()
			n, name, args := 0, "", ""
			for _, b := range msg.Content {
				if b.Type == "tool_use" {
					if n == 0 {
						name, args = b.Name, string(b.Input)
					}
					n++
				}
			}
			if msg.StopReason != anthropic.StopReasonToolUse {
				t.Errorf("%s %v: stop reason %q: %s", label, tc, msg.StopReason, msg.RawJSON())
			}
			tc.check(t, label, n, name, args)
		}
		msg, err := cl.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		check("messages", msg)

		stream := cl.Messages.NewStreaming(ctx, params)
		acc := anthropic.Message{}
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("%v stream: %v", tc, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("%v stream: %v", tc, err)
		}
		check("messages stream", &acc)
	}
}

// TestForcedToolChoiceMinimalBudget asks for a forced call with too few
// tokens (400 naming the minimum) and then with exactly the minimum, which
// must still give a complete call.
func TestForcedToolChoiceMinimalBudget(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	cl := openaiClient(ts)
	ctx := context.Background()
	for _, tc := range []forcedCase{
		{tools: []forcedTool{forcedWeather, forcedSearch}, seed: 7},
		{tools: []forcedTool{forcedSearch}, think: true, seed: 8},
	} {
		params := openai.ChatCompletionNewParams{
			Model:           "deepseek-v4-flash",
			Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go.")},
			Tools:           tc.openaiTools(),
			MaxTokens:       openai.Int(3),
			Seed:            openai.Int(tc.seed),
			ReasoningEffort: tc.effort(),
			ToolChoice:      openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		}
		_, err := cl.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		need := 0
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "max_tokens" {
			t.Fatalf("%v: %v", tc, err)
		}
		if _, err := fmt.Sscanf(apiErr.Message[strings.LastIndex(apiErr.Message, " ")+1:], "%d", &need); err != nil || need <= 3 {
			t.Fatalf("%v: message %q", tc, apiErr.Message)
		}
		params.MaxTokens = openai.Int(int64(need))
		resp, err := cl.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		ch := resp.Choices[0]
		if ch.FinishReason != "tool_calls" || resp.Usage.CompletionTokens > int64(need) || len(ch.Message.ToolCalls) != 1 {
			t.Fatalf("%v max_tokens %d: %s", tc, need, resp.RawJSON())
		}
		tc.check(t, "minimal", 1, ch.Message.ToolCalls[0].Function.Name, ch.Message.ToolCalls[0].Function.Arguments)
		t.Logf("%v: minimum %d, used %d", tc, need, resp.Usage.CompletionTokens)
	}
}
