package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/prompt"
)

// decodeRequest decodes body for protocol a into a request, validates it
// and renders and tokenizes its prompt. Every failure is an *apiError. A
// large body or prompt waits for a large-request slot until ctx ends.
func (s *Server) decodeRequest(ctx context.Context, a api, body []byte) (*request, error) {
	return s.decode(&request{api: a, maxTokens: -1, liveTail: -1, body: body, ctx: ctx})
}

// decodeCount decodes an Anthropic count_tokens request, which has no
// output limit, into a request, and counts its prompt's tokens.
func (s *Server) decodeCount(ctx context.Context, body []byte) (*request, error) {
	return s.decode(&request{api: apiMessages, maxTokens: -1, liveTail: -1, body: body, counting: true, ctx: ctx})
}

// decode decodes r.body for protocol r.api into r.
func (s *Server) decode(r *request) (*request, error) {
	defer s.releaseLarge(r)
	if len(r.body) >= LargeRequestBytes {
		if err := s.acquireLarge(r.ctx, r); err != nil {
			return nil, err
		}
	}
	a := r.api
	f, err := decodeObject(r.body)
	if err != nil {
		return nil, err
	}
	if r.model, err = s.decodeModel(f); err != nil {
		return nil, err
	}
	if r.stream, _, err = f.boolean("stream"); err != nil {
		return nil, err
	}
	if r.sampling, err = decodeSampling(f, a); err != nil {
		return nil, err
	}
	switch a {
	case apiChat, apiCompletions:
		err = s.decodeChat(f, r)
	case apiMessages:
		err = s.decodeMessages(f, r)
	case apiResponses:
		err = s.decodeResponses(f, r)
	}
	if err != nil {
		return nil, err
	}
	if err := s.render(r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeLogprobs reads the Chat Completions members "logprobs" and
// "top_logprobs"; as OpenAI, top_logprobs requires logprobs. Streamed
// logprobs are not supported.
func decodeLogprobs(f fields, r *request) error {
	var err error
	if r.logprobs, _, err = f.boolean("logprobs"); err != nil {
		return err
	}
	k, ok, err := f.integer("top_logprobs", 0, maxTopLogprobs)
	if err != nil {
		return err
	}
	if ok && !r.logprobs {
		return fieldError("top_logprobs", "requires logprobs to be true")
	}
	if r.logprobs && r.stream {
		return fieldError("logprobs", "is not supported with stream")
	}
	r.topLogprobs = int(k)
	return nil
}

// decodeChat decodes a chat completions or completions request (docs/formats/server.md#chat-completions,
// docs/formats/server.md#completions).
func (s *Server) decodeChat(f fields, r *request) error {
	var err error
	if r.maxTokens, err = decodeMaxTokens(f, s.ctx, "max_completion_tokens", "max_tokens"); err != nil {
		return err
	}
	if r.stops, err = decodeStops(f, "stop"); err != nil {
		return err
	}
	if so, ok, err := f.object("stream_options"); err != nil {
		return err
	} else if ok {
		if r.includeUsage, _, err = so.boolean("include_usage"); err != nil {
			return fieldError("stream_options.include_usage", "must be a boolean")
		}
	}
	if r.api == apiChat {
		if err := decodeLogprobs(f, r); err != nil {
			return err
		}
	}
	if err := s.decodeChoices(f, r); err != nil {
		return err
	}
	tc := newThinkControls()
	if err := tc.thinking(f, "thinking"); err != nil {
		return err
	}
	if err := tc.think(f); err != nil {
		return err
	}
	if err := tc.effortValue(f, "reasoning_effort"); err != nil {
		return err
	}
	r.think = tc.mode(r.model, s.ctx)

	if r.api == apiCompletions {
		raw, ok := f["prompt"]
		if !ok {
			return &apiError{status: 400, message: "missing prompt", param: "prompt"}
		}
		r.completion, err = s.decodePrompt(raw)
		return err
	}

	err = forEachMessage(f, r, func(i int, m fields, msg prompt.Message) error {
		msg.Content = lenientText(m["content"])
		msg.Reasoning = lenientText(m["reasoning_content"])
		if id, ok, err := m.str("tool_call_id"); err != nil {
			return fieldError("messages.tool_call_id", "must be a string")
		} else if ok {
			msg.ToolCallID = id
		}
		calls, _, err := m.array("tool_calls")
		if err != nil {
			return fieldError("messages.tool_calls", "must be an array")
		}
		if err := r.countItems(fmt.Sprintf("messages[%d].tool_calls", i), len(calls)); err != nil {
			return err
		}
		for _, c := range calls {
			if call, ok := decodeChatCall(c); ok {
				msg.ToolCalls = append(msg.ToolCalls, call)
			}
		}
		var ids []string
		if msg.ToolCallID != "" && (msg.Role == prompt.RoleTool || msg.Role == prompt.RoleFunction) {
			ids = []string{msg.ToolCallID}
		}
		r.msgs = append(r.msgs, msg)
		r.resultIDs = append(r.resultIDs, ids)
		return nil
	})
	if err != nil {
		return err
	}
	tools, _, err := f.array("tools")
	if err != nil {
		return err
	}
	r.tools = decodeTools(tools, nil)
	choice, _ := decodeString(f["tool_choice"])
	r.hasTools = schemasPresent(r.tools) && choice != "none"
	r.force, err = decodeToolChoice(r, f["tool_choice"])
	return err
}

// decodeMessages decodes an Anthropic Messages request (docs/formats/server.md#messages).
func (s *Server) decodeMessages(f fields, r *request) error {
	var err error
	if !r.counting {
		if r.maxTokens, err = decodeMaxTokens(f, s.ctx, "max_tokens"); err != nil {
			return err
		}
		if r.maxTokens < 0 {
			return fieldError("max_tokens", "is required")
		}
	}
	if r.stops, err = decodeStops(f, "stop_sequences"); err != nil {
		return err
	}
	tc := newThinkControls()
	if err := tc.thinking(f, "thinking"); err != nil {
		return err
	}
	if oc, ok, err := f.object("output_config"); err != nil {
		return err
	} else if ok {
		if err := tc.effortValue(oc, "effort"); err != nil {
			return fieldError("output_config.effort", "must be one of max, xhigh, high, medium, low, minimal, none")
		}
	}
	if err := tc.effortValue(f, "reasoning_effort"); err != nil {
		return err
	}
	r.think = tc.mode(r.model, s.ctx)
	r.cacheControl = asksForCaching(f)

	var system strings.Builder
	switch raw := f["system"]; firstByte(raw) {
	case '"':
		text, _ := decodeString(raw)
		system.WriteString(text)
	case '[':
		parts, err := decodeArray(raw)
		if err != nil {
			return errInvalidJSON
		}
		if err := r.countItems("system", len(parts)); err != nil {
			return err
		}
		for _, p := range parts {
			text, ok := decodeString(p)
			if !ok {
				o, err := decodeObject(p)
				if err != nil {
					continue
				}
				if text, ok = decodeString(o["text"]); !ok {
					continue
				}
			}
			if strings.HasPrefix(text, "x-anthropic-") {
				continue
			}
			trimLastNewlineJoin(&system, text)
		}
	}

	err = forEachMessage(f, r, func(i int, m fields, msg prompt.Message) error {
		ids, err := r.decodeAnthropicContent(m["content"], fmt.Sprintf("messages[%d].content", i), &msg)
		if err != nil {
			return err
		}
		r.msgs = append(r.msgs, msg)
		r.resultIDs = append(r.resultIDs, ids)
		return nil
	})
	if err != nil {
		return err
	}
	if system.Len() > 0 {
		r.msgs = append(r.msgs, prompt.Message{Role: prompt.RoleSystem, Content: system.String()})
		r.resultIDs = append(r.resultIDs, nil)
	}
	tools, _, err := f.array("tools")
	if err != nil {
		return err
	}
	r.tools = decodeTools(tools, nil)
	choiceNone := false
	if tc, err := decodeObject(f["tool_choice"]); err == nil {
		t, _ := decodeString(tc["type"])
		choiceNone = t == "none"
	}
	r.hasTools = schemasPresent(r.tools) && !choiceNone
	if r.force, err = decodeToolChoice(r, f["tool_choice"]); err != nil {
		return err
	}
	return s.validateResults(r, "Anthropic continuation state is not available for tool_use_id %s; retry by replaying the full messages history")
}

// asksForCaching reports whether an Anthropic request sets cache_control
// at its top level, on a system block or a tool (decodeAnthropicContent
// looks at the message content blocks).
func asksForCaching(f fields) bool {
	marked := func(raw json.RawMessage) bool {
		o, err := decodeObject(raw)
		if err != nil {
			return false
		}
		_, ok := o.get("cache_control")
		return ok
	}
	if _, ok := f.get("cache_control"); ok {
		return true
	}
	var blocks []json.RawMessage
	for _, k := range []string{"system", "tools"} {
		if a, err := decodeArray(f[k]); err == nil {
			blocks = append(blocks, a...)
		}
	}
	for _, b := range blocks {
		if marked(b) {
			return true
		}
	}
	return false
}

// decodeAnthropicContent flattens Anthropic message content, the request
// member k, into msg and returns the tool_use ids its tool_result blocks
// answer; a block with cache_control sets r.cacheControl.
func (r *request) decodeAnthropicContent(raw json.RawMessage, k string, msg *prompt.Message) ([]string, error) {
	switch firstByte(raw) {
	case '"':
		msg.Content, _ = decodeString(raw)
		return nil, nil
	case '[':
	default:
		return nil, nil
	}
	blocks, err := decodeArray(raw)
	if err != nil {
		return nil, errInvalidJSON
	}
	if err := r.countItems(k, len(blocks)); err != nil {
		return nil, err
	}
	var content, reasoning strings.Builder
	var ids []string
	for _, b := range blocks {
		if s, ok := decodeString(b); ok {
			content.WriteString(s)
			continue
		}
		o, err := decodeObject(b)
		if err != nil {
			continue
		}
		if _, ok := o.get("cache_control"); ok {
			r.cacheControl = true
		}
		typ, _ := decodeString(o["type"])
		switch typ {
		case "tool_use":
			id, _ := decodeString(o["id"])
			name, _ := decodeString(o["name"])
			args := "{}"
			if in, ok := o.get("input"); ok {
				args = string(in)
			}
			msg.ToolCalls = append(msg.ToolCalls, dsml.Call{ID: id, Name: name, Arguments: args})
		case "tool_result":
			if id, ok := decodeString(o["tool_use_id"]); ok && id != "" {
				ids = append(ids, id)
			}
			content.WriteString(prompt.ToolResultOpen)
			content.WriteString(prompt.EscapeToolResult(lenientText(o["content"])))
			content.WriteString(prompt.ToolResultClose)
		default:
			if t, ok := decodeString(o["text"]); ok {
				content.WriteString(t)
			}
			if t, ok := decodeString(o["thinking"]); ok {
				reasoning.WriteString(t)
			}
		}
	}
	msg.Content, msg.Reasoning = content.String(), reasoning.String()
	return ids, nil
}

// decodeResponses decodes a Responses request (docs/formats/server.md#responses).
func (s *Server) decodeResponses(f fields, r *request) error {
	var err error
	if r.maxTokens, err = decodeMaxTokens(f, s.ctx, "max_output_tokens", "max_tokens"); err != nil {
		return err
	}
	for _, k := range []string{"previous_response_id", "conversation"} {
		if _, ok := f.get(k); ok {
			return &apiError{status: 400, message: k + " is not supported; replay full input instead", param: k}
		}
	}
	tc := newThinkControls()
	if rs, ok, err := f.object("reasoning"); err != nil {
		return err
	} else if ok {
		if e, ok, err := rs.str("effort"); err != nil {
			return fieldError("reasoning.effort", "must be a string")
		} else if ok {
			m, err := prompt.ThinkForEffort(e)
			if err != nil {
				return fieldError("reasoning.effort", "must be one of max, xhigh, high, medium, low, minimal, none")
			}
			tc.explicit, tc.effort = true, m
			tc.enabled = m != prompt.ThinkOff
		}
		sum, _ := decodeString(rs["summary"])
		r.summaries = sum == "auto" || sum == "concise" || sum == "detailed"
	}
	r.think = tc.mode(r.model, s.ctx)

	r.toolNames = map[string]toolName{}
	choice, _ := decodeString(f["tool_choice"])
	tools, _, err := f.array("tools")
	if err != nil {
		return err
	}
	r.tools = decodeTools(tools, r.toolNames)

	raw, ok := f["input"]
	if !ok {
		return badRequest("missing input")
	}
	var loaded []prompt.Tool
	switch firstByte(raw) {
	case '"':
		text, _ := decodeString(raw)
		r.msgs = append(r.msgs, prompt.Message{Role: prompt.RoleUser, Content: text})
		r.resultIDs = append(r.resultIDs, nil)
	case '[':
		if loaded, err = r.decodeResponsesInput(raw); err != nil {
			return err
		}
		if len(r.msgs) == 0 {
			return fieldError("input", "must not be empty")
		}
	default:
		return fieldError("input", "must be a string or an array")
	}
	if instr, ok, err := f.str("instructions"); err != nil {
		return err
	} else if ok && instr != "" {
		r.msgs = append([]prompt.Message{{Role: prompt.RoleSystem, Content: instr}}, r.msgs...)
		r.resultIDs = append([][]string{nil}, r.resultIDs...)
	}
	r.tools = append(r.tools, loaded...)
	r.hasTools = schemasPresent(r.tools) && choice != "none"
	if r.force, err = decodeToolChoice(r, f["tool_choice"]); err != nil {
		return err
	}
	return s.validateResults(r, "Responses continuation state is not available for call_id %s; retry by replaying the full input history")
}

// Responses item types that produce an assistant tool call, with the tool
// name they stand for ("" = the item's own name).
var responsesCallItems = map[string]string{
	"function_call":         "",
	"custom_tool_call":      "",
	"local_shell_call":      "local_shell",
	"web_search_call":       "web_search_call",
	"tool_search_call":      "tool_search",
	"image_generation_call": "image_generation_call",
}

// Responses item types that carry a tool output.
var responsesOutputItems = map[string]bool{
	"function_call_output":         true,
	"custom_tool_call_output":      true,
	"local_shell_call_output":      true,
	"web_search_call_output":       true,
	"tool_search_output":           true,
	"tool_search_call_output":      true,
	"image_generation_call_output": true,
}

// responsesContent reads a strict Responses content array (docs/formats/server.md#responses):
// strings and typed text parts only.
func responsesContent(raw json.RawMessage) (string, error) {
	switch firstByte(raw) {
	case 0, 'n':
		if isNull(raw) {
			return "", nil
		}
	case '"':
		s, _ := decodeString(raw)
		return s, nil
	case '[':
		a, err := decodeArray(raw)
		if err != nil {
			return "", errInvalidJSON
		}
		var b strings.Builder
		for _, e := range a {
			if s, ok := decodeString(e); ok {
				b.WriteString(s)
				continue
			}
			o, err := decodeObject(e)
			if err != nil {
				return "", badRequest("invalid JSON request: unsupported content part")
			}
			typ, _ := decodeString(o["type"])
			switch typ {
			case "input_text", "output_text", "text", "summary_text", "reasoning_text":
			default:
				return "", badRequest("invalid JSON request: unsupported content part type %q", typ)
			}
			t, present := o["text"]
			if !present {
				return "", badRequest("invalid JSON request: content part without text")
			}
			if !isNull(t) {
				s, ok := decodeString(t)
				if !ok {
					return "", errInvalidJSON
				}
				b.WriteString(s)
			}
		}
		return b.String(), nil
	}
	return "", errInvalidJSON
}

// decodeResponsesInput converts Responses input items into messages and
// returns the tool schemas that tool_search_output items loaded.
func (r *request) decodeResponsesInput(raw json.RawMessage) ([]prompt.Tool, error) {
	items, err := decodeArray(raw)
	if err != nil {
		return nil, errInvalidJSON
	}
	if err := r.countItems("input", len(items)); err != nil {
		return nil, err
	}
	var loaded []prompt.Tool
	var pending strings.Builder // reasoning not yet attached to an assistant message
	push := func(m prompt.Message, ids []string) {
		r.msgs = append(r.msgs, m)
		r.resultIDs = append(r.resultIDs, ids)
	}
	for i, it := range items {
		o, err := decodeObject(it)
		if err != nil {
			return nil, fieldError("input", "items must be objects")
		}
		str := func(k string) (string, bool, error) {
			s, ok, err := o.str(k)
			if err != nil {
				return "", false, fieldError("input."+k, "must be a string")
			}
			return s, ok, nil
		}
		typ, ok, err := str("type")
		if err != nil {
			return nil, err
		}
		if !ok {
			typ = "message"
		}
		if st, ok, err := str("status"); err != nil {
			return nil, err
		} else if ok && st != "" && st != "completed" {
			return nil, badRequest("invalid JSON request: input item with status %q cannot be replayed", st)
		}
		role, hasRole, err := str("role")
		if err != nil {
			return nil, err
		}
		_, isCall := responsesCallItems[typ]
		consumes := (typ == "message" && hasRole && role == prompt.RoleAssistant) || isCall
		bookkeeping := typ == "compaction" || typ == "context_compaction"
		if !consumes && !bookkeeping && pending.Len() > 0 {
			push(prompt.Message{Role: prompt.RoleAssistant, Reasoning: pending.String()}, nil)
			pending.Reset()
		}
		callID, _, err := str("call_id")
		if err != nil {
			return nil, err
		}
		itemID, _, err := str("id")
		if err != nil {
			return nil, err
		}
		if callID == "" {
			callID = itemID
		}
		// rawText reads a member that may be a JSON string (its text) or
		// any other value (its raw JSON).
		rawText := func(k string) (string, bool) {
			v, ok := o.get(k)
			if !ok {
				return "", false
			}
			if s, ok := decodeString(v); ok {
				return s, true
			}
			return string(v), true
		}
		switch {
		case typ == "message":
			content, err := responsesContent(o["content"])
			if err != nil {
				return nil, err
			}
			m := prompt.Message{Role: prompt.RoleUser, Content: content}
			if hasRole {
				switch role {
				case prompt.RoleUser, prompt.RoleAssistant, prompt.RoleSystem, prompt.RoleDeveloper:
				default:
					return nil, fieldError(fmt.Sprintf("input[%d].role", i), fmt.Sprintf("%q is not a known role", role))
				}
				m.Role = role
			}
			if m.Role == prompt.RoleAssistant && pending.Len() > 0 {
				m.Reasoning = pending.String()
				pending.Reset()
			}
			push(m, nil)
		case typ == "reasoning":
			for _, k := range []string{"summary", "content"} {
				t, err := responsesContent(o[k])
				if err != nil {
					return nil, err
				}
				if t != "" {
					if pending.Len() > 0 {
						pending.WriteByte('\n')
					}
					pending.WriteString(t)
				}
			}
		case isCall:
			name := responsesCallItems[typ]
			var args string
			var ok bool
			if name == "" {
				n, _, err := str("name")
				if err != nil {
					return nil, err
				}
				ns, _, err := str("namespace")
				if err != nil {
					return nil, err
				}
				name = n
				if typ == "function_call" && ns != "" && n != "" {
					name = ns + n
				}
				if args, ok = rawText("arguments"); !ok {
					args, ok = rawText("input")
				}
			} else {
				if a, present := o.get("action"); present {
					args, ok = string(a), true
				} else if args, ok = rawText("arguments"); !ok {
					args, ok = rawText("input")
				}
			}
			if !ok {
				args = "{}"
			}
			call := dsml.Call{ID: callID, Name: name, Arguments: args}
			if n := len(r.msgs); n > 0 && r.msgs[n-1].Role == prompt.RoleAssistant {
				last := &r.msgs[n-1]
				if pending.Len() > 0 && last.Reasoning == "" {
					last.Reasoning = pending.String()
				}
				pending.Reset()
				last.ToolCalls = append(last.ToolCalls, call)
			} else {
				push(prompt.Message{Role: prompt.RoleAssistant, Reasoning: pending.String(), ToolCalls: []dsml.Call{call}}, nil)
				pending.Reset()
			}
		case responsesOutputItems[typ]:
			var content string
			if out, ok := o.get("output"); ok {
				switch firstByte(out) {
				case '[':
					if content, err = responsesContent(out); err != nil {
						return nil, err
					}
				case '"':
					content, _ = decodeString(out)
				default:
					content = string(out)
				}
			} else if res, ok := rawText("result"); ok {
				content = res
			} else if tools, ok := o.get("tools"); ok {
				content = string(tools)
			}
			if typ == "tool_search_output" {
				if tools, ok := o.get("tools"); ok {
					elems, err := decodeArray(tools)
					if err != nil {
						return nil, fieldError("input.tools", "must be an array")
					}
					loaded = append(loaded, decodeTools(elems, r.toolNames)...)
				}
			}
			var ids []string
			if callID != "" {
				ids = []string{callID}
			}
			push(prompt.Message{Role: prompt.RoleTool, Content: content, ToolCallID: callID}, ids)
		case bookkeeping:
		default:
			return nil, badRequest("invalid JSON request: unsupported input item type %q", typ)
		}
	}
	if pending.Len() > 0 {
		push(prompt.Message{Role: prompt.RoleAssistant, Reasoning: pending.String()}, nil)
	}
	return loaded, nil
}

// decodePrompt reads a Completions prompt: a string, or one prompt as an
// array of one string, an array of token ids or an array of one such
// array (token ids are decoded to text). Batches of several prompts are
// refused: a response holds one choice.
func (s *Server) decodePrompt(raw json.RawMessage) (string, error) {
	bad := fieldError("prompt", "must be a string, an array of strings, an array of token ids or an array of token-id arrays")
	if p, ok := decodeString(raw); ok {
		return p, nil
	}
	a, err := decodeArray(raw)
	if err != nil {
		return "", bad
	}
	if len(a) == 0 {
		return "", fieldError("prompt", "must not be empty")
	}
	switch firstByte(a[0]) {
	case '"', '[':
		if len(a) > 1 {
			return "", fieldError("prompt", fmt.Sprintf("holds %d prompts; this server answers one prompt per request", len(a)))
		}
		if p, ok := decodeString(a[0]); ok {
			return p, nil
		}
		if firstByte(a[0]) != '[' {
			return "", bad
		}
		if a, err = decodeArray(a[0]); err != nil || len(a) == 0 {
			return "", bad
		}
	}
	ids := make([]int, len(a))
	for i, e := range a {
		id, err := strconv.ParseUint(string(bytes.TrimSpace(e)), 10, 31)
		if err != nil {
			return "", bad
		}
		if int(id) >= s.tok.VocabSize() {
			return "", fieldError("prompt", fmt.Sprintf("holds token id %d, outside the vocabulary of %d tokens", id, s.tok.VocabSize()))
		}
		ids[i] = int(id)
	}
	// Decode in chunks: the text of a few ids may be long enough to
	// overflow the context, and is not built whole then.
	var b strings.Builder
	for len(ids) > 0 {
		n := min(len(ids), 4096)
		b.Write(s.tok.Decode(ids[:n]))
		ids = ids[n:]
		if int64(b.Len()) > s.promptByteLimit() {
			return "", s.tooManyBytes(apiCompletions, int64(b.Len()))
		}
	}
	return b.String(), nil
}

// knownRole reports whether the prompt renderer knows role.
func knownRole(role string) bool {
	switch role {
	case prompt.RoleSystem, prompt.RoleDeveloper, prompt.RoleUser, prompt.RoleAssistant, prompt.RoleTool, prompt.RoleFunction:
		return true
	}
	return false
}

// forEachMessage decodes the request's "messages" array, counting its
// messages against the item limit of r, and calls fn with each message's
// index, object and a Message holding the role it declares (user when it
// names none), stopping at the first error.
func forEachMessage(f fields, r *request, fn func(i int, m fields, msg prompt.Message) error) error {
	raw, ok := f["messages"]
	if !ok {
		return badRequest("missing messages")
	}
	elems, err := decodeArray(raw)
	if err != nil {
		return fieldError("messages", "must be an array")
	}
	if len(elems) == 0 {
		return fieldError("messages", "must not be empty")
	}
	if err := r.countItems("messages", len(elems)); err != nil {
		return err
	}
	for i, e := range elems {
		m, err := decodeObject(e)
		if err != nil {
			return fieldError("messages", "must hold objects")
		}
		msg := prompt.Message{Role: prompt.RoleUser}
		if role, ok, err := m.str("role"); err != nil {
			return fieldError("messages.role", "must be a string")
		} else if ok {
			if !knownRole(role) {
				return fieldError(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("%q is not a known role", role))
			}
			msg.Role = role
		}
		if err := fn(i, m, msg); err != nil {
			return err
		}
	}
	return nil
}
