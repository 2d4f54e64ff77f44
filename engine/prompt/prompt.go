// Package prompt renders chat messages into the exact prompt text that
// DeepSeek V4 Flash is fed, special-token strings included, following
// upstream ds4_server.c (render_chat_prompt_text and friends) byte for byte.
//
// The Render functions return the text alone; the Spans variants also
// return the byte ranges of client text (system, user, tool-result and
// assistant text, tool schemas, completion prompts), which are tokenized
// without special-token recognition so that only the template's own
// special strings (and DSML blocks, which the renderer builds or replays
// from the model's own output) become control tokens. Upstream recognizes
// special strings everywhere, so client text could forge turns.
package prompt

import (
	"fmt"
	"strings"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// Special-token strings and fixed texts of the chat template.
const (
	BOS        = tokenizer.BOS
	EOS        = tokenizer.EOS
	User       = tokenizer.User
	Assistant  = tokenizer.Assistant
	ThinkOpen  = tokenizer.ThinkOpen
	ThinkClose = tokenizer.ThinkEnd

	// ToolResultOpen and ToolResultClose wrap each tool result; they are
	// ordinary text, not special tokens.
	ToolResultOpen  = "<tool_result>"
	ToolResultClose = "</tool_result>"

	// CompletionSystem is the fixed system text of the completions
	// template and the CLI default (note: no final period).
	CompletionSystem = "You are a helpful assistant"
)

// ThinkMaxPrefix is inserted right after BOS in ThinkMax mode.
const ThinkMaxPrefix = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n" +
	"You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n" +
	"Explicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"

// MaxThinkContext is the smallest context size, in tokens, at which
// ThinkMax is honoured; below it ThinkMax becomes ThinkHigh.
const MaxThinkContext = 393216

// ToolsPrefix and ToolsSuffix enclose the tool schema lines in the system
// prompt.
const (
	ToolsPrefix = "## Tools\n\n" +
		"You have access to a set of tools to help answer the user question. " +
		"You can invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n" +
		"<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"$TOOL_NAME\">\n" +
		"<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n" +
		"...\n" +
		"</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"$TOOL_NAME2\">\n" +
		"...\n" +
		"</｜DSML｜invoke>\n" +
		"</｜DSML｜tool_calls>\n\n" +
		"String parameters should be specified as raw text and set `string=\"true\"`. " +
		"Preserve characters such as `>`, `&`, and `&&` exactly; never replace normal string characters with XML or HTML entity escapes. " +
		"Only if a string value itself contains the exact closing parameter tag `</｜DSML｜parameter>`, write that tag as `&lt;/｜DSML｜parameter>` inside the value. " +
		"For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n" +
		"If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n" +
		"Otherwise, output directly after </think> with tool calls or final response.\n\n" +
		"### Available Tool Schemas\n\n"
	ToolsSuffix = "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls. " +
		"Use the exact parameter names from the schemas."
)

// Message roles the renderer knows. Any other role is skipped (upstream
// behaviour) unless Options.Strict is set.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleFunction  = "function"
)

// Think is the thinking mode of a request.
type Think uint8

// Thinking modes.
const (
	// ThinkOff makes the model answer directly after "</think>".
	ThinkOff Think = iota
	// ThinkHigh makes the model reason after "<think>" before answering.
	ThinkHigh
	// ThinkMax is ThinkHigh with ThinkMaxPrefix after BOS; it needs a
	// context of at least MaxThinkContext tokens.
	ThinkMax
)

// String returns the mode's name.
func (t Think) String() string {
	switch t {
	case ThinkOff:
		return "off"
	case ThinkHigh:
		return "high"
	case ThinkMax:
		return "max"
	}
	return fmt.Sprintf("Think(%d)", uint8(t))
}

// Enabled reports whether the mode thinks (ThinkHigh or ThinkMax).
func (t Think) Enabled() bool { return t == ThinkHigh || t == ThinkMax }

// ThinkForContext returns the mode actually used with an engine context of
// contextSize tokens: ThinkMax becomes ThinkHigh below MaxThinkContext.
func ThinkForContext(t Think, contextSize int) Think {
	if t == ThinkMax && contextSize < MaxThinkContext {
		return ThinkHigh
	}
	return t
}

// ThinkForEffort maps a reasoning_effort value to a mode: "max" is
// ThinkMax, "xhigh", "high", "medium", "low" and "minimal" are ThinkHigh,
// "none" is ThinkOff; anything else is an error.
func ThinkForEffort(effort string) (Think, error) {
	switch effort {
	case "max":
		return ThinkMax, nil
	case "xhigh", "high", "medium", "low", "minimal":
		return ThinkHigh, nil
	case "none":
		return ThinkOff, nil
	}
	return ThinkOff, fmt.Errorf("prompt: unknown reasoning effort %q", effort)
}

// Message is one chat message in rendering order.
type Message struct {
	// Role is one of the Role constants.
	Role string
	// Content is the message text, inserted raw (tool results are only
	// escaped against their own closing tag).
	Content string
	// Reasoning is an assistant turn's reasoning, kept in the prompt when
	// thinking is on and the history has tool context or the turn comes
	// after the last user or tool message.
	Reasoning string
	// ToolCalls are an assistant turn's tool calls.
	ToolCalls []dsml.Call
	// RawDSML, when non-empty, is the exact DSML block sampled for
	// ToolCalls; it is rendered verbatim instead of the canonical DSML.
	RawDSML string
	// ToolCallID is the id of the call a tool message answers; it is not
	// rendered (Strict checks it).
	ToolCallID string
	// Name is the tool or author name; it is not rendered.
	Name string
}

// Tool is one tool offered to the model.
type Tool struct {
	// Schema is the JSON text shown to the model, byte for byte as the
	// client sent it: for OpenAI tools the raw "function" value, for
	// Anthropic tools the raw tool object. Empty schemas are skipped.
	Schema string
}

// FunctionTool builds a tool schema the way upstream synthesizes one for
// Responses namespace tools: {"name":…,"description":…,"parameters":…},
// with parameters defaulting to an empty object schema.
func FunctionTool(name, description, parameters string) Tool {
	if parameters == "" {
		parameters = `{"type":"object","properties":{}}`
	}
	return Tool{Schema: `{"name":` + dsml.QuoteJSON(name) +
		`,"description":` + dsml.QuoteJSON(description) +
		`,"parameters":` + parameters + `}`}
}

// ToolsBlock returns the tools section of the system prompt, or "" when
// no tool has a schema.
func ToolsBlock(tools []Tool) string {
	var lines []string
	for _, t := range tools {
		if t.Schema != "" {
			lines = append(lines, t.Schema)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return ToolsPrefix + strings.Join(lines, "\n") + ToolsSuffix
}

// Options controls rendering.
type Options struct {
	// Think is the requested thinking mode.
	Think Think
	// ContextSize is the engine context size in tokens. When positive,
	// ThinkMax is downgraded as ThinkForContext says; zero leaves Think
	// unchanged.
	ContextSize int
	// Tools are the tools offered (pass none when tool_choice is "none").
	Tools []Tool
	// Strict makes Render and RenderLiveTail reject messages that Validate
	// rejects instead of rendering them the lenient upstream way.
	Strict bool
}

// EffectiveThink returns the thinking mode rendering uses.
func (o Options) EffectiveThink() Think {
	if o.ContextSize > 0 {
		return ThinkForContext(o.Think, o.ContextSize)
	}
	return o.Think
}

func (o Options) check(msgs []Message) (Think, error) {
	t := o.EffectiveThink()
	if t > ThinkMax {
		return t, fmt.Errorf("prompt: invalid thinking mode %d", uint8(t))
	}
	if o.Strict {
		if err := Validate(msgs); err != nil {
			return t, err
		}
	}
	return t, nil
}

// Rendered is a rendered prompt: its text and the byte ranges of the text
// that hold client text.
type Rendered struct {
	// Text is the prompt text, as Render returns it.
	Text string
	// Client lists, sorted and disjoint, the byte ranges of Text that came
	// from client text; special-token strings there are ordinary text.
	Client []tokenizer.Span
}

// Tokens returns the tokenization of r: the template's special strings are
// control tokens and client text is encoded as ordinary text.
func (r Rendered) Tokens(tok *tokenizer.Tokenizer) []int {
	return tok.AppendEncodeRendered(make([]int, 0, len(r.Text)/3+4), r.Text, 0, r.Client)
}

// writer builds a Rendered, recording which writes are client text.
type writer struct {
	b      strings.Builder
	client []tokenizer.Span
}

// template appends text of the template itself.
func (w *writer) template(s string) { w.b.WriteString(s) }

// text appends client text, merging it with a client range it extends.
func (w *writer) text(s string) {
	if s == "" {
		return
	}
	start := w.b.Len()
	w.b.WriteString(s)
	if n := len(w.client); n > 0 && w.client[n-1].End == start {
		w.client[n-1].End = w.b.Len()
		return
	}
	w.client = append(w.client, tokenizer.Span{Start: start, End: w.b.Len()})
}

func (w *writer) rendered() Rendered { return Rendered{Text: w.b.String(), Client: w.client} }

// writeTools writes the tools section of the system prompt, ToolsBlock,
// with the schemas as client text, and reports whether it wrote any.
func (w *writer) writeTools(tools []Tool) bool {
	first := true
	for _, t := range tools {
		if t.Schema == "" {
			continue
		}
		if first {
			w.template(ToolsPrefix)
		} else {
			w.template("\n")
		}
		w.text(t.Schema)
		first = false
	}
	if !first {
		w.template(ToolsSuffix)
	}
	return !first
}

// Render returns the prompt text for msgs; see RenderSpans.
func Render(msgs []Message, opt Options) (string, error) {
	r, err := RenderSpans(msgs, opt)
	return r.Text, err
}

// RenderSpans renders the prompt for msgs: BOS, the ThinkMax prefix, the
// system block (tools first, then system and developer messages joined by
// a blank line), the turns, and, when the last rendered message is a user
// or tool message, the generation prefix of a new assistant turn.
func RenderSpans(msgs []Message, opt Options) (Rendered, error) {
	think, err := opt.check(msgs)
	if err != nil {
		return Rendered{}, err
	}
	var w writer
	w.template(BOS)
	if think == ThinkMax {
		w.template(ThinkMaxPrefix)
	}
	start := w.b.Len()
	tools := w.writeTools(opt.Tools)
	sysLen := w.b.Len() - start
	for _, m := range msgs {
		if isSystem(m.Role) {
			if sysLen > 0 {
				w.template("\n\n")
			}
			w.text(m.Content)
			sysLen += len(m.Content)
		}
	}
	toolContext := tools
	lastUser := -1
	for i, m := range msgs {
		switch m.Role {
		case RoleUser, RoleTool, RoleFunction:
			lastUser = i
		}
		if m.Role == RoleTool || m.Role == RoleFunction || (m.Role == RoleAssistant && len(m.ToolCalls) > 0) {
			toolContext = true
		}
	}
	w.writeTurns(msgs, 0, think.Enabled(), func(i int) bool { return toolContext || i > lastUser })
	return w.rendered(), nil
}

// RenderLiveTail returns the text of RenderLiveTailSpans.
func RenderLiveTail(msgs []Message, start int, opt Options) (string, error) {
	r, err := RenderLiveTailSpans(msgs, start, opt)
	return r.Text, err
}

// RenderLiveTailSpans renders msgs[start:] as the continuation of a live
// session whose last assistant turn is already in the KV cache (upstream
// render_live_tool_tail): EOS, the turns with every assistant reasoning
// kept, and the generation prefix. System messages are skipped.
func RenderLiveTailSpans(msgs []Message, start int, opt Options) (Rendered, error) {
	think, err := opt.check(msgs)
	if err != nil {
		return Rendered{}, err
	}
	if start < 0 || start > len(msgs) {
		return Rendered{}, fmt.Errorf("prompt: live tail start %d out of range [0,%d]", start, len(msgs))
	}
	var w writer
	w.template(EOS)
	w.writeTurns(msgs, start, think.Enabled(), func(int) bool { return true })
	return w.rendered(), nil
}

// writeTurns renders the non-system messages from start on. Message
// text is client text; DSML blocks are template (built from the calls'
// fields or replayed from the model's own sampled bytes).
func (w *writer) writeTurns(msgs []Message, start int, think bool, keepReasoning func(int) bool) {
	pendingAssistant, pendingTool := false, false
	for i := start; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case RoleUser:
			w.template(User)
			w.text(m.Content)
			pendingAssistant, pendingTool = true, false
		case RoleTool, RoleFunction:
			if !pendingTool {
				w.template(User)
			}
			w.template(ToolResultOpen)
			w.text(EscapeToolResult(m.Content))
			w.template(ToolResultClose)
			pendingAssistant, pendingTool = true, true
		case RoleAssistant:
			if pendingAssistant {
				w.template(Assistant)
				if think && keepReasoning(i) {
					w.template(ThinkOpen)
					w.text(m.Reasoning)
				}
				w.template(ThinkClose)
			}
			w.text(m.Content)
			w.template(m.dsml())
			w.template(EOS)
			pendingAssistant, pendingTool = false, false
		}
	}
	if pendingAssistant {
		w.template(GenerationPrefix(think))
	}
}

// dsml returns the DSML block of an assistant message: the exact sampled
// bytes when known, the canonical rendering otherwise.
func (m Message) dsml() string {
	if len(m.ToolCalls) == 0 {
		return ""
	}
	if m.RawDSML != "" {
		return m.RawDSML
	}
	return dsml.Render(m.ToolCalls)
}

// GenerationPrefix returns the opener of a new assistant turn:
// Assistant followed by "<think>" when thinking, "</think>" otherwise.
func GenerationPrefix(thinking bool) string {
	if thinking {
		return Assistant + ThinkOpen
	}
	return Assistant + ThinkClose
}

// AssistantSuffix returns what follows a prompt's generation prefix once
// the assistant turn m is complete, as the next request renders it when
// the turn keeps its reasoning: reasoning and "</think>" (when thinking),
// content, the DSML block and EOS. The server uses it to canonicalize the
// live cache after a tool-call turn.
func AssistantSuffix(m Message, thinking bool) string {
	var b strings.Builder
	if thinking {
		b.WriteString(m.Reasoning)
		b.WriteString(ThinkClose)
	}
	b.WriteString(m.Content)
	b.WriteString(m.dsml())
	b.WriteString(EOS)
	return b.String()
}

// RenderCompletion returns the text of RenderCompletionSpans.
func RenderCompletion(prompt string, opt Options) (string, error) {
	r, err := RenderCompletionSpans(prompt, opt)
	return r.Text, err
}

// RenderCompletionSpans renders the prompt of the completions endpoint:
// BOS, the ThinkMax prefix, CompletionSystem, the user turn with prompt
// (client text) and the generation prefix.
func RenderCompletionSpans(prompt string, opt Options) (Rendered, error) {
	think, err := opt.check(nil)
	if err != nil {
		return Rendered{}, err
	}
	var w writer
	w.template(BOS)
	if think == ThinkMax {
		w.template(ThinkMaxPrefix)
	}
	w.template(CompletionSystem)
	w.template(User)
	w.text(prompt)
	w.template(GenerationPrefix(think.Enabled()))
	return w.rendered(), nil
}

// EscapeToolResult escapes a tool result for its wrapper: each literal
// "</tool_result>" becomes "&lt;/tool_result>"; nothing else changes.
func EscapeToolResult(s string) string {
	return strings.ReplaceAll(s, ToolResultClose, "&lt;"+ToolResultClose[1:])
}

func isSystem(role string) bool { return role == RoleSystem || role == RoleDeveloper }

// Validate checks msgs more strictly than rendering does: every role must
// be known, a tool message must answer an assistant message with tool
// calls (and name one of its call ids when it carries an id), tool calls
// need a name, and RawDSML needs tool calls.
func Validate(msgs []Message) error {
	var calls []dsml.Call
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleDeveloper:
		case RoleUser:
			calls = nil
		case RoleAssistant:
			for j, c := range m.ToolCalls {
				if c.Name == "" {
					return fmt.Errorf("prompt: message %d: tool call %d has no name", i, j)
				}
			}
			if m.RawDSML != "" && len(m.ToolCalls) == 0 {
				return fmt.Errorf("prompt: message %d: raw DSML without tool calls", i)
			}
			calls = m.ToolCalls
		case RoleTool, RoleFunction:
			if len(calls) == 0 {
				return fmt.Errorf("prompt: message %d: tool result without a preceding assistant tool call", i)
			}
			if m.ToolCallID != "" && !hasCallID(calls, m.ToolCallID) {
				return fmt.Errorf("prompt: message %d: tool result for unknown call id %q", i, m.ToolCallID)
			}
		default:
			return fmt.Errorf("prompt: message %d: unknown role %q", i, m.Role)
		}
	}
	return nil
}

func hasCallID(calls []dsml.Call, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// AttachRawDSML prepares exact replay (upstream
// tool_memory_attach_to_messages): every message with tool calls and no
// RawDSML gets the block that lookup returns for its call ids when all ids
// are found and map to the same block. It returns how many messages got a
// block and how many keep the canonical rendering.
func AttachRawDSML(msgs []Message, lookup func(id string) (block string, ok bool)) (replayed, canonical int) {
	for i := range msgs {
		m := &msgs[i]
		if len(m.ToolCalls) == 0 || m.RawDSML != "" {
			continue
		}
		block, exact := "", true
		for j, c := range m.ToolCalls {
			b, ok := lookup(c.ID)
			if !ok || (j > 0 && b != block) {
				exact = false
				break
			}
			block = b
		}
		if exact && block != "" {
			m.RawDSML = block
			replayed++
		} else {
			canonical++
		}
	}
	return replayed, canonical
}
