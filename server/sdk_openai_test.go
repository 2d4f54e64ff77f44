package server

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ds4-go/ds4/engine/layout"
)

// The integration tests below drive the real server over loopback HTTP
// with the official OpenAI Go SDK. The tiny model writes random text, so
// tests that need particular replies (tool calls, stop sequences) run the
// server over a scripted session instead; everything between the socket
// and the session is the production code.

var callIDPattern = regexp.MustCompile(`^call_[0-9a-f]{32}$`)

func openaiClient(ts *testServer, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(ts.url + "/v1/"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(60 * time.Second),
	}, opts...)...)
}

// weatherScript is a generated tool call in canonical DSML.
const weatherScript = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
	"<｜DSML｜parameter name=\"city\" string=\"true\">Rome & \"Lazio\"</｜DSML｜parameter>\n" +
	"<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n" +
	"</｜DSML｜invoke>\n</｜DSML｜tool_calls>"

func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Get the current weather for a city"),
		Parameters: shared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
			"required":   []string{"city"},
		},
	})
}

func TestOpenAIModels(t *testing.T) {
	ts := tinyServer(t, 1024, nil)
	c := openaiClient(ts)
	ctx := context.Background()
	page, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.OwnedBy != "ds4.c" || m.Object != "model" {
			t.Errorf("model %+v", m)
		}
		if !strings.Contains(m.RawJSON(), `"tiny":true`) || !strings.Contains(m.RawJSON(), `"context_length":1024`) {
			t.Errorf("model JSON does not report the tiny model and context: %s", m.RawJSON())
		}
		if !strings.Contains(m.RawJSON(), `"logit_bias"`) {
			t.Errorf("supported_parameters lacks logit_bias, which the server applies: %s", m.RawJSON())
		}
	}
	if strings.Join(ids, ",") != "deepseek-v4-flash,deepseek-v4-pro" {
		t.Errorf("ids %v", ids)
	}
	m, err := c.Models.Get(ctx, "deepseek-v4-pro")
	if err != nil || m.ID != "deepseek-v4-pro" {
		t.Fatalf("get: %v %+v", err, m)
	}
	_, err = c.Models.Get(ctx, "gpt-4o")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("unknown model: %v", err)
	}
}

// TestOpenAIModelsLoadedModel reads /v1/models with the SDK for models
// identified from their metadata: the loaded model's id comes first and
// both ids report its real name.
func TestOpenAIModelsLoadedModel(t *testing.T) {
	slice := func(m layout.Params, n int) layout.Params { m.SetLayers(n); return m }
	for _, tc := range []struct {
		name     string
		p        layout.Params
		ids      string
		realName string
	}{
		{"pro", layout.Pro(), "deepseek-v4-pro,deepseek-v4-flash", "DeepSeek V4 Pro"},
		{"pro slice", slice(layout.Pro(), 2), "deepseek-v4-pro,deepseek-v4-flash", "DeepSeek V4 Pro"},
		{"flash", layout.Flash(), "deepseek-v4-flash,deepseek-v4-pro", "DeepSeek V4 Flash"},
		{"flash slice", slice(layout.Flash(), 4), "deepseek-v4-flash,deepseek-v4-pro", "DeepSeek V4 Flash"},
		{"other shape", layout.Tiny(), "deepseek-v4-flash,deepseek-v4-pro", "DS4-tiny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, name := Identify(tc.p)
			ts := tinyServer(t, 1024, func(c *Config) { c.ModelID, c.ModelName = id, name+" (model.gguf)" })
			c := openaiClient(ts)
			ctx := context.Background()
			page, err := c.Models.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range page.Data {
				ids = append(ids, m.ID)
			}
			if got := strings.Join(ids, ","); got != tc.ids {
				t.Errorf("ids %s, want %s", got, tc.ids)
			}
			for _, alias := range []string{ModelFlash, ModelPro} {
				m, err := c.Models.Get(ctx, alias)
				if err != nil || m.ID != alias {
					t.Fatalf("get %s: %v %+v", alias, err, m)
				}
				if want := `"name":"` + tc.realName + ` (model.gguf)"`; !strings.Contains(m.RawJSON(), want) {
					t.Errorf("%s: %s lacks %s", alias, m.RawJSON(), want)
				}
			}
		})
	}
}

func TestOpenAIChatPlain(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	c := openaiClient(ts)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:     "deepseek-v4-flash",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello!")},
		MaxTokens: openai.Int(6),
		Seed:      openai.Int(42),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Object != "chat.completion" || resp.Model != "deepseek-v4-flash" {
		t.Errorf("envelope %+v", resp)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "length" && ch.FinishReason != "stop" {
		t.Errorf("finish %q", ch.FinishReason)
	}
	if resp.Usage.CompletionTokens == 0 || resp.Usage.CompletionTokens > 6 || resp.Usage.PromptTokens == 0 ||
		resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage %+v", resp.Usage)
	}
	if ch.Message.Content == "" && ch.Message.JSON.ExtraFields["reasoning_content"].Raw() == "" {
		t.Errorf("empty reply %s", ch.Message.RawJSON())
	}
}

func TestOpenAIChatStreamingUsage(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	c := openaiClient(ts)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:           "deepseek-v4-flash",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to three.")},
		MaxTokens:       openai.Int(8),
		ReasoningEffort: shared.ReasoningEffort("none"),
		StreamOptions:   openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks, usageChunks := 0, 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if len(ch.Choices) == 0 {
			usageChunks++
		}
		acc.AddChunk(ch)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if usageChunks != 1 || acc.Usage.CompletionTokens == 0 || acc.Usage.CompletionTokens > 8 {
		t.Errorf("usage chunks %d usage %+v", usageChunks, acc.Usage)
	}
	if chunks < 3 {
		t.Errorf("only %d chunks", chunks)
	}
	if acc.Choices[0].Message.Content == "" {
		t.Error("no streamed content")
	}
}

func TestOpenAIChatToolRoundTrip(t *testing.T) {
	ts, sess := scriptServer(t, nil, weatherScript, "It is sunny in Rome.")
	c := openaiClient(ts)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:           "deepseek-v4-flash",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Rome?")},
		Tools:           []openai.ChatCompletionToolUnionParam{weatherTool()},
		ReasoningEffort: shared.ReasoningEffort("none"),
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("reply %s", ch.RawJSON())
	}
	call := ch.Message.ToolCalls[0]
	if !callIDPattern.MatchString(call.ID) || call.Type != "function" || call.Function.Name != "get_weather" {
		t.Errorf("call %+v", call)
	}
	if call.Function.Arguments != `{"city":"Rome & \"Lazio\"","days":3}` {
		t.Errorf("arguments %s", call.Function.Arguments)
	}
	if !strings.Contains(sess.prompt(0), `"name":"get_weather"`) || !strings.Contains(sess.prompt(0), "## Tools") {
		t.Errorf("tool schema not rendered: %q", sess.prompt(0))
	}

	// Second turn: the client sends the call back as JSON with its result;
	// the prompt must hold the exact sampled DSML, and the live KV is reused.
	params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"sky":"clear"}`, call.ID))
	resp2, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp2.Choices[0].Message.Content; got != "It is sunny in Rome." || resp2.Choices[0].FinishReason != "stop" {
		t.Errorf("second reply %q %q", got, resp2.Choices[0].FinishReason)
	}
	want := weatherScript + "<｜end▁of▁sentence｜><｜User｜><tool_result>{\"sky\":\"clear\"}</tool_result><｜Assistant｜></think>"
	if p := sess.prompt(-1); !strings.HasSuffix(p, want) {
		t.Errorf("second prompt does not replay the sampled DSML:\n%q", p)
	}
	if resp2.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Errorf("live KV not reused: %+v", resp2.Usage)
	}
}

func TestOpenAIChatStreamingTools(t *testing.T) {
	ts, _ := scriptServer(t, nil, "Checking.</think>"+weatherScript)
	c := openaiClient(ts)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "deepseek-v4-flash",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Rome?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool()},
	})
	acc := openai.ChatCompletionAccumulator{}
	var fragments []string
	var reasoning strings.Builder
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
		if len(ch.Choices) > 0 {
			if r := ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; r.Raw() != "" {
				var s string
				json.Unmarshal([]byte(r.Raw()), &s)
				reasoning.WriteString(s)
			}
			for _, tc := range ch.Choices[0].Delta.ToolCalls {
				if tc.Function.Arguments != "" {
					fragments = append(fragments, tc.Function.Arguments)
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != "Checking." {
		t.Errorf("reasoning %q", reasoning.String())
	}
	if len(fragments) < 3 {
		t.Errorf("arguments were not streamed in fragments: %q", fragments)
	}
	msg := acc.Choices[0].Message
	if acc.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
		t.Fatalf("accumulated %+v", acc.Choices[0])
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(msg.ToolCalls[0].Function.Arguments), &args); err != nil || args["city"] != `Rome & "Lazio"` || args["days"] != 3.0 {
		t.Errorf("arguments %q: %v", msg.ToolCalls[0].Function.Arguments, err)
	}
	if !callIDPattern.MatchString(msg.ToolCalls[0].ID) {
		t.Errorf("id %q", msg.ToolCalls[0].ID)
	}
	if len(finished) != 1 || finished[0].Name != "get_weather" {
		t.Errorf("finished tool calls %+v", finished)
	}
}

func TestOpenAICompletions(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	c := openaiClient(ts)
	ctx := context.Background()
	resp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "deepseek-v4-flash",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "cmpl-") || resp.Object != "text_completion" || resp.Choices[0].Text == "" ||
		resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 5 {
		t.Errorf("completion %s", resp.RawJSON())
	}
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:     "deepseek-v4-flash",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(5),
	})
	var text strings.Builder
	finish := ""
	for stream.Next() {
		ch := stream.Current()
		text.WriteString(ch.Choices[0].Text)
		if ch.Choices[0].FinishReason != "" {
			finish = string(ch.Choices[0].FinishReason)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.Len() == 0 || finish != "length" {
		t.Errorf("streamed %q finish %q", text.String(), finish)
	}
}

func TestOpenAIResponses(t *testing.T) {
	ts := tinyServer(t, 2048, nil)
	c := openaiClient(ts)
	ctx := context.Background()
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model:           "deepseek-v4-flash",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hi")},
		Instructions:    openai.String("You are terse."),
		MaxOutputTokens: openai.Int(6),
		Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffort("none")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "resp_") || resp.Object != "response" || resp.Status != "incomplete" ||
		resp.IncompleteDetails.Reason != "max_output_tokens" || resp.OutputText() == "" {
		t.Errorf("response %s", resp.RawJSON())
	}
	if resp.Usage.OutputTokens != 6 || resp.Usage.TotalTokens != resp.Usage.InputTokens+6 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestOpenAIResponsesStreaming(t *testing.T) {
	ts, _ := scriptServer(t, nil, "Plan: greet.</think>Hello there!")
	c := openaiClient(ts)
	stream := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model:     "deepseek-v4-flash",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hi")},
		Reasoning: shared.ReasoningParam{Summary: shared.ReasoningSummary("auto")},
	})
	var types []string
	var text, summary strings.Builder
	var final responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.reasoning_summary_text.delta":
			summary.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"response.created",
		"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed",
	}
	if got := dedupe(types); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
	if text.String() != "Hello there!" || summary.String() != "Plan: greet." {
		t.Errorf("text %q summary %q", text.String(), summary.String())
	}
	if final.Status != "completed" || final.OutputText() != "Hello there!" || len(final.Output) != 2 || final.Usage.OutputTokens == 0 {
		t.Errorf("final %s", final.RawJSON())
	}
}

func TestOpenAIResponsesFunctionCall(t *testing.T) {
	ts, sess := scriptServer(t, nil, weatherScript, "Done.")
	c := openaiClient(ts)
	ctx := context.Background()
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:       "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}
	params := responses.ResponseNewParams{
		Model:     "deepseek-v4-flash",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Rome?")},
		Tools:     []responses.ToolUnionParam{tool},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffort("none")},
	}
	resp, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" {
		t.Fatalf("output %s", resp.RawJSON())
	}
	fc := resp.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || fc.Arguments != `{"city":"Rome & \"Lazio\"","days":3}` || !callIDPattern.MatchString(fc.CallID) || !strings.HasPrefix(fc.ID, "fc_") {
		t.Errorf("function call %+v", fc)
	}
	// Replay the call with its output: the live binding continues the KV.
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("Weather in Rome?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(fc.CallID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny")},
		}},
	}}
	resp2, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp2.OutputText() != "Done." || resp2.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("second response %s", resp2.RawJSON())
	}
	if p := sess.prompt(-1); !strings.HasSuffix(p, weatherScript+"<｜end▁of▁sentence｜><｜User｜><tool_result>sunny</tool_result><｜Assistant｜></think>") {
		t.Errorf("second prompt %q", p)
	}
}

// dedupe collapses runs of equal strings.
func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
