package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// Identify returns the /v1/models id and name of a model of shape p, read
// from its metadata: ModelPro and "DeepSeek V4 Pro" for V4 Pro or a slice
// of it, ModelFlash and "DeepSeek V4 Flash" for Flash or a slice of it;
// any other shape answers as ModelFlash under its general.name.
func Identify(p layout.Params) (id, name string) {
	m, ok := p.Model()
	switch {
	case ok && m.Name == layout.Pro().Name:
		return ModelPro, "DeepSeek V4 Pro"
	case ok:
		return ModelFlash, "DeepSeek V4 Flash"
	case p.Name != "":
		return ModelFlash, p.Name
	}
	return ModelFlash, "DeepSeek V4 (custom shape)"
}

// Model ids the server answers to.
const (
	ModelFlash = "deepseek-v4-flash"
	ModelPro   = "deepseek-v4-pro"
	// Aliases of DeepSeek's own API: the first disables thinking, the
	// second enables it, unless the request says otherwise (docs/formats/server.md#thinking-controls).
	modelChat     = "deepseek-chat"
	modelReasoner = "deepseek-reasoner"
)

// Request limits beyond the spec's type rules.
const (
	maxIntField  = math.MaxInt32
	maxStops     = 64
	maxStopBytes = 1024
	// maxTopLogprobs is OpenAI's limit on top_logprobs.
	maxTopLogprobs = 20
	// MaxRequestItems bounds the items of one request, counted together:
	// its messages or Responses input items, its Anthropic system and
	// content blocks and its tool calls.
	MaxRequestItems = 100000
)

// request is a decoded, validated and rendered API request, ready for the
// worker.
type request struct {
	api          api
	model        string
	stream       bool
	includeUsage bool

	msgs       []prompt.Message
	resultIDs  [][]string // per message: the tool-call ids it answers
	completion string     // the /v1/completions prompt
	tools      []prompt.Tool
	toolNames  map[string]toolName // Responses: model-side name → wire identity
	hasTools   bool
	force      *toolForce // forced tool choice, nil when not forced
	think      prompt.Think
	summaries  bool // Responses: reasoning summaries opted in
	counting   bool // count_tokens: no output limit is read
	// Anthropic: the request marks something with cache_control, so its
	// uncached prompt tokens are reported as cache writes.
	cacheControl bool

	sampling  sample.Params // client values (used when not thinking)
	maxTokens int           // -1: the server default
	stops     []string
	logitBias []logitBias // Chat Completions and Completions, by token id

	// Chat Completions logprobs: whether they are returned and how many
	// alternatives each generated token gets (0..maxTopLogprobs).
	logprobs    bool
	topLogprobs int

	// Live protocol continuation (docs/formats/server.md#live-protocol-bindings): the index of the live tail in
	// msgs (-1 when none) and the call ids it answers.
	liveTail       int
	liveIDs        []string
	liveTailPrompt prompt.Rendered
	requiresLive   bool

	replayed, canonical int // exact-replay statistics
	items               int // items counted against MaxRequestItems

	rendered string           // the prompt text
	client   []tokenizer.Span // its client-text ranges, tokenized without specials
	tokens   []int            // its rendered-chat tokenization (not kept when counting)
	count    int              // count_tokens: the number of tokens of rendered
	body     []byte           // the raw request, for the trace

	ctx   context.Context // ends the wait for a large-request slot
	large bool            // holds a large-request slot
}

// toolName is how a Responses tool appears on the wire.
type toolName struct {
	wire, namespace string
	toolSearch      bool
}

// thinkControls accumulates the thinking controls of a request (docs/formats/server.md#thinking-controls).
type thinkControls struct {
	enabled  bool
	explicit bool
	effort   prompt.Think
}

func newThinkControls() thinkControls {
	return thinkControls{enabled: true, effort: prompt.ThinkHigh}
}

// thinking applies a "thinking" member: a boolean, or an object whose
// "type" is "enabled" or "disabled"; other values count as explicit but
// change nothing.
func (t *thinkControls) thinking(f fields, k string) error {
	raw, ok := f[k]
	if !ok {
		return nil
	}
	t.explicit = true
	switch firstByte(raw) {
	case 't', 'f':
		b, _, err := f.boolean(k)
		if err != nil {
			return err
		}
		t.enabled = b
	case '{':
		o, err := decodeObject(raw)
		if err != nil {
			return errInvalidJSON
		}
		typ, _, err := o.str("type")
		if err != nil {
			return fieldError(k+".type", "must be a string")
		}
		switch typ {
		case "enabled":
			t.enabled = true
		case "disabled":
			t.enabled = false
		}
	}
	return nil
}

// think applies the boolean "think" member.
func (t *thinkControls) think(f fields) error {
	if !f.present("think") {
		return nil
	}
	t.explicit = true
	b, ok, err := f.boolean("think")
	if ok {
		t.enabled = b
	}
	return err
}

// effortValue applies a reasoning effort string; null changes nothing.
func (t *thinkControls) effortValue(f fields, k string) error {
	s, ok, err := f.str(k)
	if err != nil || !ok {
		return err
	}
	m, err := prompt.ThinkForEffort(s)
	if err != nil {
		return fieldError(k, "must be one of max, xhigh, high, medium, low, minimal, none")
	}
	t.effort = m
	return nil
}

// mode resolves the thinking mode for model and the context size.
func (t thinkControls) mode(model string, ctx int) prompt.Think {
	enabled := t.enabled
	if !t.explicit && model == modelChat {
		enabled = false
	}
	if !t.explicit && model == modelReasoner {
		enabled = true
	}
	m := prompt.ThinkHigh
	switch {
	case !enabled || t.effort == prompt.ThinkOff:
		m = prompt.ThinkOff
	case t.effort == prompt.ThinkMax:
		m = prompt.ThinkMax
	}
	return prompt.ThinkForContext(m, ctx)
}

// decodeModel reads "model" and checks it against the models served.
func (s *Server) decodeModel(f fields) (string, error) {
	m, ok, err := f.str("model")
	if err != nil {
		return "", err
	}
	if !ok {
		return ModelFlash, nil
	}
	if !s.knownModel(m) {
		return "", &apiError{
			status:  http.StatusNotFound,
			message: "The model `" + m + "` does not exist; this server serves " + ModelFlash + " and " + ModelPro,
			param:   "model",
			code:    "model_not_found",
		}
	}
	return m, nil
}

// knownModel reports whether the server answers to model id m.
func (s *Server) knownModel(m string) bool {
	switch m {
	case ModelFlash, ModelPro, modelChat, modelReasoner:
		return true
	}
	return s.cfg.AcceptAnyModel
}

// decodeSampling reads the sampling members that api supports.
func decodeSampling(f fields, a api) (sample.Params, error) {
	p := sample.Defaults()
	p.Seed = 0
	if x, ok, err := f.number("temperature", 0, sample.MaxTemperature); err != nil {
		return p, err
	} else if ok {
		p.Temperature = float32(x)
	}
	if x, ok, err := f.number("top_p", 0, 1); err != nil {
		return p, err
	} else if ok {
		p.TopP = float32(x)
	}
	if a == apiResponses {
		return p, nil
	}
	if x, ok, err := f.integer("top_k", 0, maxIntField); err != nil {
		return p, err
	} else if ok {
		p.TopK = int(x)
	}
	if a == apiMessages {
		return p, nil
	}
	if x, ok, err := f.number("min_p", 0, 1); err != nil {
		return p, err
	} else if ok {
		p.MinP = float32(x)
	}
	seed, err := decodeSeed(f)
	p.Seed = seed
	return p, err
}

// decodeSeed reads "seed": an integer; zero or negative means random.
func decodeSeed(f fields) (uint64, error) {
	raw, ok := f.get("seed")
	if !ok {
		return 0, nil
	}
	s := string(raw)
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil && i < 0 {
		return 0, nil
	}
	x, ok2, err := f.number("seed", -math.MaxFloat64, math.MaxFloat64)
	if err != nil || !ok2 {
		return 0, err
	}
	if x != math.Trunc(x) || x >= 1<<64 {
		return 0, fieldError("seed", "must be an integer below 2^64")
	}
	if x <= 0 {
		return 0, nil
	}
	return uint64(x), nil
}

// decodeMaxTokens reads the output limit: the first present of keys, each
// of which must be a non-negative integer no larger than ctx, the
// context size (a larger limit could never be honoured). A limit that
// fits the context but not the room the prompt leaves is clamped when
// generating.
func decodeMaxTokens(f fields, ctx int, keys ...string) (int, error) {
	n := -1
	for _, k := range keys {
		x, ok, err := f.integer(k, 0, maxIntField)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		if x > int64(ctx) {
			return 0, fieldError(k, fmt.Sprintf("is %d, more than this server's context size of %d tokens; at most %d", x, ctx, ctx))
		}
		if n < 0 {
			n = int(x)
		}
	}
	return n, nil
}

// decodeStops reads stop sequences: a string or an array of strings
// (non-strings skipped, empty strings dropped); other types are ignored.
func decodeStops(f fields, k string) ([]string, error) {
	raw, ok := f.get(k)
	if !ok {
		return nil, nil
	}
	var stops []string
	switch firstByte(raw) {
	case '"':
		s, _ := decodeString(raw)
		if s != "" {
			stops = append(stops, s)
		}
	case '[':
		a, err := decodeArray(raw)
		if err != nil {
			return nil, errInvalidJSON
		}
		for _, e := range a {
			if s, ok := decodeString(e); ok && s != "" {
				stops = append(stops, s)
			}
		}
	}
	if len(stops) > maxStops {
		return nil, fieldError(k, "must hold at most "+strconv.Itoa(maxStops)+" sequences")
	}
	for _, s := range stops {
		if len(s) > maxStopBytes {
			return nil, fieldError(k, "sequences must be at most "+strconv.Itoa(maxStopBytes)+" bytes long")
		}
	}
	return stops, nil
}

// decodeTools reads a tools array (docs/formats/server.md#tool-schemas) into schema lines; names
// receives the wire identities of Responses namespace and tool_search
// tools.
func decodeTools(elems []json.RawMessage, names map[string]toolName) []prompt.Tool {
	var tools []prompt.Tool
	for _, e := range elems {
		o, err := decodeObject(e)
		if err != nil {
			tools = append(tools, prompt.Tool{Schema: string(e)})
			continue
		}
		if fn, ok := o["function"]; ok {
			tools = append(tools, prompt.Tool{Schema: string(fn)})
			continue
		}
		typ, _ := decodeString(o["type"])
		switch typ {
		case "namespace":
			ns, _ := decodeString(o["name"])
			inner, _ := decodeArray(o["tools"])
			for _, ie := range inner {
				it, err := decodeObject(ie)
				if err != nil {
					continue
				}
				if t, ok := decodeString(it["type"]); it.present("type") && (!ok || t != "function") {
					continue
				}
				name, _ := decodeString(it["name"])
				if name == "" {
					continue
				}
				desc, _ := decodeString(it["description"])
				params := ""
				if p, ok := it.get("parameters"); ok {
					params = string(p)
				} else if p, ok := it.get("input_schema"); ok {
					params = string(p)
				}
				tools = append(tools, prompt.FunctionTool(ns+name, desc, params))
				if names != nil {
					names[ns+name] = toolName{wire: name, namespace: ns}
				}
			}
			continue
		case "tool_search":
			desc, ok := decodeString(o["description"])
			if !ok {
				desc = "Search available tools."
			}
			params := ""
			if p, ok := o.get("parameters"); ok {
				params = string(p)
			}
			tools = append(tools, prompt.FunctionTool("tool_search", desc, params))
			if names != nil {
				names["tool_search"] = toolName{wire: "tool_search", toolSearch: true}
			}
			continue
		}
		tools = append(tools, prompt.Tool{Schema: string(e)})
	}
	return tools
}

// schemasPresent reports whether any tool has a schema line.
func schemasPresent(tools []prompt.Tool) bool {
	for _, t := range tools {
		if t.Schema != "" {
			return true
		}
	}
	return false
}

// decodeChatCall reads an OpenAI tool call {id, function:{name, arguments}};
// ok is false for entries lacking a name or arguments.
func decodeChatCall(raw json.RawMessage) (dsml.Call, bool) {
	o, err := decodeObject(raw)
	if err != nil {
		return dsml.Call{}, false
	}
	id, _ := decodeString(o["id"])
	fn, err := decodeObject(o["function"])
	if err != nil {
		return dsml.Call{}, false
	}
	name, ok := decodeString(fn["name"])
	args, present := fn.get("arguments")
	if !ok || !present {
		return dsml.Call{}, false
	}
	text, isStr := decodeString(args)
	if !isStr {
		text = string(args)
	}
	return dsml.Call{ID: id, Name: name, Arguments: text}, true
}

// trimLastNewlineJoin appends part to b, separated by "\n" unless b is
// empty or already ends in one (the Anthropic system join).
func trimLastNewlineJoin(b *strings.Builder, part string) {
	if n := b.Len(); n > 0 && b.String()[n-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(part)
}

// countItems adds n items, found in the request member k, to the
// request's count and fails with a 400 naming k once the count passes
// MaxRequestItems.
func (r *request) countItems(k string, n int) error {
	r.items += n
	if r.items > MaxRequestItems {
		return fieldError(k, fmt.Sprintf("brings the request to more than %d items (messages or input items, Anthropic system and content blocks and tool calls together), this server's limit", MaxRequestItems))
	}
	return nil
}
