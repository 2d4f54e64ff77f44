package server

import (
	"bytes"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
)

// emitter writes one protocol's response: the stream's opening events,
// its deltas and the final response or closing events.
type emitter interface {
	// begin opens a stream (streaming only).
	begin(g *gen)
	// events streams reasoning, content and tool-call events.
	events(g *gen, evs []dsml.Event)
	// text streams raw completion text.
	text(g *gen, s string)
	// end writes the final response or the stream's closing events.
	end(g *gen, res *result)
}

func newEmitter(r *request) emitter {
	switch r.api {
	case apiCompletions:
		return &completionsEmitter{}
	case apiMessages:
		return &messagesEmitter{}
	case apiResponses:
		return &responsesEmitter{}
	}
	return &chatEmitter{}
}

// writeBody writes a complete non-streaming response.
func (g *gen) writeBody(body []byte) {
	rc := http.NewResponseController(g.j.w)
	rc.SetWriteDeadline(time.Now().Add(g.s.cfg.WriteTimeout))
	writeJSON(g.j.w, body)
}

// Usage objects (docs/formats/server.md#usage).

func (g *gen) usageOpenAI() ordered {
	p, c := g.prompt, g.completion
	return ordered{
		{"prompt_tokens", p},
		{"completion_tokens", c},
		{"total_tokens", p + c},
		{"prompt_tokens_details", ordered{{"cached_tokens", g.cached}, {"cache_write_tokens", p - g.cached}}},
	}
}

// usageAnthropic is the Anthropic usage object: prompt tokens reused from
// the live KV or a disk checkpoint are cache reads, and the others are
// input tokens or, when the request asked for caching with cache_control,
// cache writes (every evaluated prompt token stays in the live KV for the
// next request).
func (g *gen) usageAnthropic(output int) ordered {
	input, creation := g.prompt-g.cached, 0
	if g.r.cacheControl {
		input, creation = 0, input
	}
	return ordered{
		{"input_tokens", input},
		{"output_tokens", output},
		{"cache_read_input_tokens", g.cached},
		{"cache_creation_input_tokens", creation},
	}
}

func (g *gen) usageResponses() ordered {
	p, c := g.prompt, g.completion
	return ordered{
		{"input_tokens", p},
		{"input_tokens_details", ordered{{"cached_tokens", g.cached}, {"cache_write_tokens", p - g.cached}}},
		{"output_tokens", c},
		{"output_tokens_details", ordered{{"reasoning_tokens", 0}}},
		{"total_tokens", p + c},
	}
}

// logprobsOpenAI is the Chat Completions logprobs object, one content
// entry per generated token, or nil when not requested.
func (g *gen) logprobsOpenAI() any {
	if !g.r.logprobs {
		return nil
	}
	content := make([]ordered, len(g.lpTok))
	for i, t := range g.lpTok {
		top := make([]ordered, 0, g.lpOff[i+1]-g.lpOff[i])
		for _, a := range g.lpTop[g.lpOff[i]:g.lpOff[i+1]] {
			top = append(top, g.tokenLogprob(a))
		}
		content[i] = append(g.tokenLogprob(t), field{"top_logprobs", top})
	}
	return ordered{{"content", content}}
}

// tokenLogprob is the {token, logprob, bytes} object of t; a logprob of
// -Inf is written as OpenAI's -9999.
func (g *gen) tokenLogprob(t sample.TokenLogprob) ordered {
	b := g.s.tok.TokenBytes(t.ID)
	lp := float64(t.Logprob)
	if math.IsInf(lp, -1) || math.IsNaN(lp) {
		lp = -9999
	}
	return ordered{{"token", string(b)}, {"logprob", float32JSON(lp)}, {"bytes", byteList(b)}}
}

// newStreamID returns the id of call index i, generated when its stream
// starts, and records it as the call's final id.
func (g *gen) newStreamID(i int, prefix string) string {
	for len(g.streamIDs) <= i {
		g.streamIDs = append(g.streamIDs, "")
	}
	taken := map[string]bool{}
	for _, id := range g.streamIDs {
		taken[id] = true
	}
	id := g.s.tools.newCallID(prefix, taken)
	g.streamIDs[i] = id
	return id
}

// chatEmitter writes Chat Completions responses (docs/formats/server.md#chat-completions-output).
type chatEmitter struct {
	live int // tool calls streamed live
}

func (e *chatEmitter) chunk(g *gen, delta ordered, finish any) {
	g.j.sse.event("", ordered{
		{"id", g.id},
		{"object", "chat.completion.chunk"},
		{"created", g.created},
		{"model", g.r.model},
		{"choices", []ordered{{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}},
	})
}

func (e *chatEmitter) begin(g *gen) {
	e.chunk(g, ordered{{"role", "assistant"}}, nil)
}

func (e *chatEmitter) events(g *gen, evs []dsml.Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case dsml.EventReasoning:
			e.chunk(g, ordered{{"reasoning_content", ev.Text}}, nil)
		case dsml.EventContent:
			e.chunk(g, ordered{{"content", ev.Text}}, nil)
		case dsml.EventCallStart:
			e.live++
			id := g.newStreamID(ev.Index, "call_")
			e.chunk(g, ordered{{"tool_calls", []ordered{{
				{"index", ev.Index},
				{"id", id},
				{"type", "function"},
				{"function", ordered{{"name", ev.Name}, {"arguments", ""}}},
			}}}}, nil)
		case dsml.EventCallArgs:
			e.chunk(g, ordered{{"tool_calls", []ordered{{
				{"index", ev.Index},
				{"function", ordered{{"arguments", ev.Text}}},
			}}}}, nil)
		}
	}
}

func (e *chatEmitter) text(*gen, string) {}

func chatToolCalls(res *result, withIndex bool) []ordered {
	var calls []ordered
	for i, c := range res.Calls {
		o := ordered{}
		if withIndex {
			o = append(o, field{"index", i})
		}
		o = append(o,
			field{"id", c.ID},
			field{"type", "function"},
			field{"function", ordered{{"name", c.Name}, {"arguments", c.CompactArguments()}}})
		calls = append(calls, o)
	}
	return calls
}

func (e *chatEmitter) end(g *gen, res *result) {
	if !g.r.stream {
		msg := ordered{{"role", "assistant"}, {"content", res.Content}}
		if res.Reasoning != "" {
			msg = append(msg, field{"reasoning_content", res.Reasoning})
		}
		if len(res.Calls) > 0 {
			msg = append(msg, field{"tool_calls", chatToolCalls(res, false)})
		}
		g.writeBody(append(marshal(ordered{
			{"id", g.id},
			{"object", "chat.completion"},
			{"created", g.created},
			{"model", g.r.model},
			{"choices", []ordered{{{"index", 0}, {"message", msg}, {"logprobs", g.logprobsOpenAI()}, {"finish_reason", g.finish}}}},
			{"usage", g.usageOpenAI()},
		}), '\n'))
		return
	}
	if len(res.Calls) > 0 && e.live == 0 {
		e.chunk(g, ordered{{"tool_calls", chatToolCalls(res, true)}}, nil)
	}
	e.chunk(g, ordered{}, g.finish)
	if g.r.includeUsage {
		g.j.sse.event("", ordered{
			{"id", g.id},
			{"object", "chat.completion.chunk"},
			{"created", g.created},
			{"model", g.r.model},
			{"choices", []ordered{}},
			{"usage", g.usageOpenAI()},
		})
	}
	g.j.sse.data("[DONE]")
}

// completionsEmitter writes legacy Completions responses (docs/formats/server.md#completions-output,
// docs/formats/server.md#completions-output).
type completionsEmitter struct{}

func (e *completionsEmitter) chunk(g *gen, text string, finish any) {
	g.j.sse.event("", ordered{
		{"id", g.id},
		{"object", "text_completion"},
		{"created", g.created},
		{"model", g.r.model},
		{"choices", []ordered{{{"text", text}, {"index", 0}, {"finish_reason", finish}}}},
	})
}

func (e *completionsEmitter) begin(*gen)                {}
func (e *completionsEmitter) events(*gen, []dsml.Event) {}
func (e *completionsEmitter) text(g *gen, s string)     { e.chunk(g, s, nil) }
func (e *completionsEmitter) end(g *gen, res *result) {
	if !g.r.stream {
		g.writeBody(append(marshal(ordered{
			{"id", g.id},
			{"object", "text_completion"},
			{"created", g.created},
			{"model", g.r.model},
			{"choices", []ordered{{{"text", res.Content}, {"index", 0}, {"finish_reason", g.finish}}}},
			{"usage", g.usageOpenAI()},
		}), '\n'))
		return
	}
	e.chunk(g, "", g.finish)
	if g.r.includeUsage {
		g.j.sse.event("", ordered{
			{"id", g.id},
			{"object", "text_completion"},
			{"created", g.created},
			{"model", g.r.model},
			{"choices", []ordered{}},
			{"usage", g.usageOpenAI()},
		})
	}
	g.j.sse.data("[DONE]")
}

// messagesEmitter writes Anthropic Messages responses (docs/formats/server.md#messages-output).
type messagesEmitter struct {
	index        int    // index of the next content block
	open         string // type of the open block, "" when none
	sentThinking bool
	sentText     bool
	live         int // tool calls streamed live
}

// stopReason maps the finish reason to Anthropic's.
func (g *gen) stopReason() (reason string, seq any) {
	switch {
	case g.finish == "tool_calls":
		return "tool_use", nil
	case g.finish == "length":
		return "max_tokens", nil
	case g.stopHit != "":
		return "stop_sequence", g.stopHit
	}
	return "end_turn", nil
}

func (e *messagesEmitter) send(g *gen, name string, body ordered) {
	g.j.sse.event(name, append(ordered{{"type", name}}, body...))
}

func (e *messagesEmitter) startBlock(g *gen, block ordered) {
	e.send(g, "content_block_start", ordered{{"index", e.index}, {"content_block", block}})
	e.open = block[0].v.(string)
}

func (e *messagesEmitter) delta(g *gen, d ordered) {
	e.send(g, "content_block_delta", ordered{{"index", e.index}, {"delta", d}})
}

func (e *messagesEmitter) closeBlock(g *gen) {
	if e.open == "" {
		return
	}
	if e.open == "thinking" {
		e.delta(g, ordered{{"type", "signature_delta"}, {"signature", g.id}})
	}
	e.send(g, "content_block_stop", ordered{{"index", e.index}})
	e.open = ""
	e.index++
}

func (e *messagesEmitter) begin(g *gen) {
	e.send(g, "message_start", ordered{{"message", ordered{
		{"id", g.id},
		{"type", "message"},
		{"role", "assistant"},
		{"model", g.r.model},
		{"content", []any{}},
		{"stop_reason", nil},
		{"stop_sequence", nil},
		{"usage", g.usageAnthropic(0)},
	}}})
}

func (e *messagesEmitter) events(g *gen, evs []dsml.Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case dsml.EventReasoning:
			if e.open != "thinking" {
				e.closeBlock(g)
				e.startBlock(g, ordered{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}})
				e.sentThinking = true
			}
			e.delta(g, ordered{{"type", "thinking_delta"}, {"thinking", ev.Text}})
		case dsml.EventContent:
			if e.open != "text" {
				e.closeBlock(g)
				e.startBlock(g, ordered{{"type", "text"}, {"text", ""}})
				e.sentText = true
			}
			e.delta(g, ordered{{"type", "text_delta"}, {"text", ev.Text}})
		case dsml.EventCallStart:
			e.closeBlock(g)
			e.live++
			id := g.newStreamID(ev.Index, "toolu_")
			e.startBlock(g, ordered{{"type", "tool_use"}, {"id", id}, {"name", ev.Name}, {"input", ordered{}}})
		case dsml.EventCallArgs:
			if e.open == "tool_use" {
				e.delta(g, ordered{{"type", "input_json_delta"}, {"partial_json", ev.Text}})
			}
		case dsml.EventCallEnd, dsml.EventError:
			if e.open == "tool_use" {
				e.closeBlock(g)
			}
		}
	}
}

func (e *messagesEmitter) text(*gen, string) {}

func (e *messagesEmitter) end(g *gen, res *result) {
	reason, seq := g.stopReason()
	if !g.r.stream {
		var content []ordered
		if res.Reasoning != "" {
			content = append(content, ordered{{"type", "thinking"}, {"thinking", res.Reasoning}, {"signature", g.id}})
		}
		if res.Content != "" {
			content = append(content, ordered{{"type", "text"}, {"text", res.Content}})
		}
		for _, c := range res.Calls {
			content = append(content, ordered{{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", validJSONObject(c.CompactArguments())}})
		}
		if len(content) == 0 || (len(content) == 1 && res.Reasoning != "") {
			content = append(content, ordered{{"type", "text"}, {"text", ""}})
		}
		g.writeBody(append(marshal(ordered{
			{"id", g.id},
			{"type", "message"},
			{"role", "assistant"},
			{"model", g.r.model},
			{"content", content},
			{"stop_reason", reason},
			{"stop_sequence", seq},
			{"usage", g.usageAnthropic(g.completion)},
		}), '\n'))
		return
	}
	e.closeBlock(g)
	if e.sentThinking && !e.sentText && len(res.Calls) == 0 {
		e.startBlock(g, ordered{{"type", "text"}, {"text", ""}})
		e.closeBlock(g)
	}
	for i := e.live; i < len(res.Calls); i++ {
		c := res.Calls[i]
		e.startBlock(g, ordered{{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", ordered{}}})
		e.delta(g, ordered{{"type", "input_json_delta"}, {"partial_json", string(validJSONObject(c.CompactArguments()))}})
		e.closeBlock(g)
	}
	e.send(g, "message_delta", ordered{
		{"delta", ordered{{"stop_reason", reason}, {"stop_sequence", seq}}},
		{"usage", ordered{{"output_tokens", g.completion}}},
	})
	e.send(g, "message_stop", nil)
}

// responsesEmitter writes Responses API responses (docs/formats/server.md#responses-output).
type responsesEmitter struct {
	seq                 int
	respID, rsID, msgID string
	next                int // next output index
	rsIndex, msgIndex   int
	rsOpen, msgOpen     bool
	reasoning, content  strings.Builder
	callEvents          bool
}

func (e *responsesEmitter) ids() {
	if e.respID == "" {
		e.respID, e.rsID, e.msgID = "resp_"+randomHex(12), "rs_"+randomHex(12), "msg_"+randomHex(12)
	}
}

func (e *responsesEmitter) send(g *gen, typ string, body ordered) {
	ev := append(ordered{{"type", typ}, {"sequence_number", e.seq}}, body...)
	e.seq++
	g.j.sse.event("", ev)
}

func (e *responsesEmitter) begin(g *gen) {
	e.ids()
	e.send(g, "response.created", ordered{{"response", ordered{
		{"id", e.respID},
		{"object", "response"},
		{"created_at", g.created},
		{"status", "in_progress"},
		{"model", g.r.model},
		{"output", []any{}},
	}}})
}

func (e *responsesEmitter) openMessage(g *gen) {
	if e.msgOpen {
		return
	}
	e.msgOpen, e.msgIndex = true, e.next
	e.next++
	e.send(g, "response.output_item.added", ordered{{"output_index", e.msgIndex}, {"item", ordered{
		{"id", e.msgID}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"}, {"content", []any{}},
	}}})
	e.send(g, "response.content_part.added", ordered{
		{"item_id", e.msgID}, {"output_index", e.msgIndex}, {"content_index", 0},
		{"part", ordered{{"type", "output_text"}, {"text", ""}, {"annotations", []any{}}}},
	})
}

func (e *responsesEmitter) textDelta(g *gen, s string) {
	e.openMessage(g)
	e.content.WriteString(s)
	e.send(g, "response.output_text.delta", ordered{
		{"item_id", e.msgID}, {"output_index", e.msgIndex}, {"content_index", 0}, {"delta", s},
	})
}

func (e *responsesEmitter) events(g *gen, evs []dsml.Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case dsml.EventReasoning:
			if !g.r.summaries {
				continue
			}
			if !e.rsOpen {
				e.rsOpen, e.rsIndex = true, e.next
				e.next++
				e.send(g, "response.output_item.added", ordered{{"output_index", e.rsIndex}, {"item", ordered{
					{"id", e.rsID}, {"type", "reasoning"}, {"status", "in_progress"}, {"summary", []any{}},
				}}})
				e.send(g, "response.reasoning_summary_part.added", ordered{
					{"item_id", e.rsID}, {"output_index", e.rsIndex}, {"summary_index", 0},
					{"part", ordered{{"type", "summary_text"}, {"text", ""}}},
				})
			}
			e.reasoning.WriteString(ev.Text)
			e.send(g, "response.reasoning_summary_text.delta", ordered{
				{"item_id", e.rsID}, {"output_index", e.rsIndex}, {"summary_index", 0}, {"delta", ev.Text},
			})
		case dsml.EventContent:
			e.textDelta(g, ev.Text)
		case dsml.EventCallStart, dsml.EventError:
			e.callEvents = true
		}
	}
}

func (e *responsesEmitter) text(*gen, string) {}

// itemStatus is the status of output items for the finish reason.
func (g *gen) itemStatus() string {
	if g.finish == "length" || g.finish == "error" {
		return "incomplete"
	}
	return "completed"
}

// reasoningStatus is the status of the reasoning item: completed once
// the model closed its reasoning, whatever ended the turn.
func (g *gen) reasoningStatus() string {
	if bytes.Contains(g.raw, []byte(prompt.ThinkClose)) {
		return "completed"
	}
	return "incomplete"
}

func (e *responsesEmitter) reasoningItem(status, text string) ordered {
	summary := []ordered{}
	if text != "" {
		summary = append(summary, ordered{{"type", "summary_text"}, {"text", text}})
	}
	return ordered{{"id", e.rsID}, {"type", "reasoning"}, {"status", status}, {"summary", summary}}
}

func (e *responsesEmitter) messageItem(status, text string) ordered {
	return ordered{{"id", e.msgID}, {"type", "message"}, {"status", status}, {"role", "assistant"},
		{"content", []ordered{{{"type", "output_text"}, {"text", text}, {"annotations", []any{}}}}}}
}

// callItem is the output item of call c with item id fc.
func (g *gen) callItem(c dsml.Call, fc, status string, withArgs bool) ordered {
	name := g.r.toolNames[c.Name]
	args := validJSONObject(c.CompactArguments())
	if name.toolSearch {
		if !withArgs {
			args = "{}"
		}
		return ordered{{"id", fc}, {"type", "tool_search_call"}, {"status", status}, {"call_id", c.ID}, {"execution", "client"}, {"arguments", args}}
	}
	wire := c.Name
	if name.wire != "" {
		wire = name.wire
	}
	o := ordered{{"id", fc}, {"type", "function_call"}, {"status", status}, {"name", wire}}
	if name.namespace != "" {
		o = append(o, field{"namespace", name.namespace})
	}
	argText := ""
	if withArgs {
		argText = string(args)
	}
	return append(o, field{"call_id", c.ID}, field{"arguments", argText})
}

func (e *responsesEmitter) response(g *gen, output []ordered) ordered {
	status := "completed"
	switch g.finish {
	case "length":
		status = "incomplete"
	case "error":
		status = "failed"
	}
	o := ordered{{"id", e.respID}, {"object", "response"}, {"created_at", g.created}, {"status", status}, {"model", g.r.model}}
	switch status {
	case "failed":
		o = append(o, field{"error", ordered{{"code", "server_error"}, {"message", "generation failed"}}})
	case "incomplete":
		o = append(o, field{"incomplete_details", ordered{{"reason", "max_output_tokens"}}})
	}
	if output == nil {
		output = []ordered{}
	}
	return append(o, field{"output", output}, field{"usage", g.usageResponses()})
}

func (e *responsesEmitter) end(g *gen, res *result) {
	e.ids()
	status := g.itemStatus()
	var output []ordered
	if !g.r.stream {
		if res.Reasoning != "" && g.r.summaries {
			output = append(output, e.reasoningItem(g.reasoningStatus(), res.Reasoning))
		}
		if res.Content != "" {
			output = append(output, e.messageItem(status, res.Content))
		}
		for _, c := range res.Calls {
			output = append(output, g.callItem(c, "fc_"+randomHex(12), status, true))
		}
		g.writeBody(marshal(e.response(g, output)))
		return
	}
	if e.rsOpen {
		text := e.reasoning.String()
		rsStatus := g.reasoningStatus()
		e.send(g, "response.reasoning_summary_text.done", ordered{
			{"item_id", e.rsID}, {"output_index", e.rsIndex}, {"summary_index", 0}, {"text", text},
		})
		e.send(g, "response.reasoning_summary_part.done", ordered{
			{"item_id", e.rsID}, {"output_index", e.rsIndex}, {"summary_index", 0},
			{"part", ordered{{"type", "summary_text"}, {"text", text}}},
		})
		item := e.reasoningItem(rsStatus, text)
		e.send(g, "response.output_item.done", ordered{{"output_index", e.rsIndex}, {"item", item}})
		output = append(output, item)
	}
	if res.parseErr != nil && e.callEvents {
		if tail := suppressedTail(string(g.raw)); tail != "" {
			e.textDelta(g, tail)
		}
	}
	if e.msgOpen {
		text := e.content.String()
		e.send(g, "response.output_text.done", ordered{
			{"item_id", e.msgID}, {"output_index", e.msgIndex}, {"content_index", 0}, {"text", text},
		})
		e.send(g, "response.content_part.done", ordered{
			{"item_id", e.msgID}, {"output_index", e.msgIndex}, {"content_index", 0},
			{"part", ordered{{"type", "output_text"}, {"text", text}, {"annotations", []any{}}}},
		})
		item := e.messageItem(status, text)
		e.send(g, "response.output_item.done", ordered{{"output_index", e.msgIndex}, {"item", item}})
		output = append(output, item)
	}
	for _, c := range res.Calls {
		fc := "fc_" + randomHex(12)
		idx := e.next
		e.next++
		e.send(g, "response.output_item.added", ordered{{"output_index", idx}, {"item", g.callItem(c, fc, "in_progress", false)}})
		if !g.r.toolNames[c.Name].toolSearch {
			args := string(validJSONObject(c.CompactArguments()))
			e.send(g, "response.function_call_arguments.delta", ordered{{"item_id", fc}, {"output_index", idx}, {"delta", args}})
			done := ordered{{"item_id", fc}, {"output_index", idx}, {"name", c.Name}}
			if n := g.r.toolNames[c.Name]; n.wire != "" {
				done = ordered{{"item_id", fc}, {"output_index", idx}, {"name", n.wire}}
				if n.namespace != "" {
					done = append(done, field{"namespace", n.namespace})
				}
			}
			e.send(g, "response.function_call_arguments.done", append(done, field{"arguments", args}))
		}
		item := g.callItem(c, fc, status, true)
		e.send(g, "response.output_item.done", ordered{{"output_index", idx}, {"item", item}})
		output = append(output, item)
	}
	terminal := "response.completed"
	switch g.finish {
	case "length":
		terminal = "response.incomplete"
	case "error":
		terminal = "response.failed"
	}
	e.send(g, terminal, ordered{{"response", e.response(g, output)}})
}

// suppressedTail returns the text from the tool-call block opener on,
// which a stream suppressed before the block turned out malformed.
func suppressedTail(raw string) string {
	if i := strings.LastIndex(raw, "</think>"); i >= 0 {
		raw = raw[i+len("</think>"):]
	}
	for _, op := range []string{dsml.ToolCallsOpen, "<DSML｜tool_calls>", "<tool_calls>"} {
		if i := strings.Index(raw, op); i >= 0 {
			return raw[i:]
		}
	}
	return ""
}
