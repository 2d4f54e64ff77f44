package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// binding ties protocol state to a live token position (docs/formats/server.md#live-protocol-bindings): it is
// usable only while the session is still at pos.
type binding struct {
	valid   bool
	pos     int
	visible string   // the rendering the live KV stands for, without the final EOS
	ids     []string // the tool-call ids of the live assistant turn
}

// liveBindings are the live protocol bindings: Responses, Anthropic and
// thinking (docs/formats/server.md#live-protocol-bindings). The worker sets them; request decoders read
// the call ids concurrently.
type liveBindings struct {
	mu                  sync.Mutex
	resp, anthr, thinkB binding
}

func (l *liveBindings) get() (resp, anthr, think binding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resp, l.anthr, l.thinkB
}

func (l *liveBindings) set(resp, anthr, think binding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resp, l.anthr, l.thinkB = resp, anthr, think
}

func (l *liveBindings) clear() { l.set(binding{}, binding{}, binding{}) }

// validateResults checks that every tool result of a Messages or
// Responses request answers a call that is either replayed earlier in the
// request or still live (docs/formats/server.md#messages, docs/formats/server.md#responses); it flags requests that depend
// on the live state. It runs in time linear in the number of calls and
// results.
func (s *Server) validateResults(r *request, format string) error {
	var liveIDs map[string]bool // built on the first result without a prior call
	calls := map[string]bool{}  // ids of the calls of the assistant messages so far
	for i, m := range r.msgs {
		if m.Role == prompt.RoleAssistant {
			for _, c := range m.ToolCalls {
				if c.ID != "" {
					calls[c.ID] = true
				}
			}
			continue
		}
		if r.api == apiMessages && m.Role != prompt.RoleUser {
			continue
		}
		if r.api == apiResponses && m.Role != prompt.RoleTool && m.Role != prompt.RoleFunction {
			continue
		}
		for _, id := range r.resultIDs[i] {
			if id != "" && calls[id] {
				continue
			}
			if liveIDs == nil {
				liveIDs = s.liveIDs(r.api)
			}
			if !liveIDs[id] {
				return badRequest(format, id)
			}
			r.requiresLive = true
		}
	}
	return nil
}

// liveIDs returns the tool-call ids of the live Responses (or, for a
// Messages request, Anthropic) bindings of every slot.
func (s *Server) liveIDs(a api) map[string]bool {
	ids := map[string]bool{}
	for _, sl := range s.slots {
		resp, anthr, _ := sl.live.get()
		live := resp
		if a == apiMessages {
			live = anthr
		}
		if live.valid {
			for _, id := range live.ids {
				ids[id] = true
			}
		}
	}
	return ids
}

// prepareLiveTail finds the part of a Messages or Responses request that
// continues a live tool-call turn (docs/formats/server.md#responses-binding, docs/formats/server.md#messages-binding) and renders it.
func (r *request) prepareLiveTail(opt prompt.Options) error {
	n := len(r.msgs)
	isResult := func(i int) bool {
		role := r.msgs[i].Role
		if r.api == apiMessages {
			return role == prompt.RoleUser && len(r.resultIDs[i]) > 0
		}
		return role == prompt.RoleTool || role == prompt.RoleFunction
	}
	end := n
	if r.api == apiMessages {
		for end > 0 && r.msgs[end-1].Role == prompt.RoleSystem {
			end--
		}
	}
	start := end
	for start > 0 && isResult(start-1) {
		start--
	}
	if start == end {
		return nil
	}
	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	first := start
	for first > 0 && r.api == apiResponses && (r.msgs[first-1].Role == prompt.RoleSystem || r.msgs[first-1].Role == prompt.RoleDeveloper) {
		first--
	}
	if r.api == apiResponses && first > 0 {
		a := r.msgs[start-1]
		if a.Role != prompt.RoleAssistant || len(a.ToolCalls) == 0 {
			return nil
		}
		for _, c := range a.ToolCalls {
			add(c.ID)
		}
	} else {
		for i := start; i < n; i++ {
			for _, id := range r.resultIDs[i] {
				add(id)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	tail, err := prompt.RenderLiveTailSpans(r.msgs, start, opt)
	if err != nil {
		return fmt.Errorf("live tail: %w", err)
	}
	r.liveTail, r.liveIDs, r.liveTailPrompt = start, ids, tail
	return nil
}

// sameIDs reports whether a and b hold the same ids.
func sameIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(b))
	for _, id := range b {
		in[id] = true
	}
	for _, id := range a {
		if !in[id] {
			return false
		}
	}
	return true
}

// render attaches exact tool-call replay, prepares the live tail, renders
// the prompt and tokenizes it, or only counts its tokens for count_tokens.
// A prompt that certainly overflows the context by its size in bytes is
// refused before it is rendered or tokenized, and tokenizing stops as
// soon as the prompt fills the context.
func (s *Server) render(r *request) error {
	if n := r.textBytes(); n > s.promptByteLimit() {
		return s.tooManyBytes(r.api, n)
	}
	opt := prompt.Options{Think: r.think, ContextSize: s.ctx}
	if r.hasTools {
		opt.Tools = r.tools
	}
	var rendered prompt.Rendered
	var err error
	if r.api == apiCompletions {
		rendered, err = prompt.RenderCompletionSpans(r.completion, opt)
	} else {
		if s.tools != nil {
			s.restoreToolIDs(r.msgs)
			r.replayed, r.canonical = prompt.AttachRawDSML(r.msgs, s.tools.get)
		}
		if r.api == apiMessages || r.api == apiResponses {
			if err := r.prepareLiveTail(opt); err != nil {
				return err
			}
		}
		rendered, err = prompt.RenderSpans(r.msgs, opt)
	}
	if err != nil {
		return badRequest("%v", err)
	}
	r.rendered, r.client = rendered.Text, rendered.Client
	if n := int64(len(r.rendered)); n > s.promptByteLimit() {
		return s.tooManyBytes(r.api, n)
	}
	if len(r.rendered) >= LargeRequestBytes {
		if err := s.acquireLarge(r.ctx, r); err != nil {
			return err
		}
	}
	if s.cfg.tokenizeHook != nil {
		s.cfg.tokenizeHook()
	}
	limit := s.promptLimit()
	if r.counting {
		n, ok := s.tok.CountRenderedLimit(r.rendered, r.client, limit)
		if !ok {
			return overflowAtLeast(r.api, n, s.ctx)
		}
		r.count = n
		return nil
	}
	tokens, ok := s.tok.AppendEncodeRenderedLimit(make([]int, 0, min(len(r.rendered)/3+4, limit+1)), r.rendered, r.client, limit)
	if !ok {
		return overflowAtLeast(r.api, len(tokens), s.ctx)
	}
	r.tokens = tokens
	return nil
}

// toolContext reports whether the rendered history has tool context
// (docs/formats/server.md#prompt-rendering).
func (r *request) toolContext() bool {
	if r.hasTools && schemasPresent(r.tools) {
		return true
	}
	for _, m := range r.msgs {
		if m.Role == prompt.RoleTool || m.Role == prompt.RoleFunction || (m.Role == prompt.RoleAssistant && len(m.ToolCalls) > 0) {
			return true
		}
	}
	return false
}

// plan is how the worker brings the session to a request's prompt: the
// effective prompt tokens, how many of them the live session already holds
// and which rule of the decision ladder chose them.
type plan struct {
	tokens []int
	reuse  int
	source string
}

// protocol reports whether the plan continues a protocol binding
// (docs/formats/server.md#decision-ladder steps 1–3 and 5), which the disk cache manager does not know.
func (p plan) protocol() bool {
	switch p.source {
	case "responses-visible", "responses-tool-output", "anthropic-tool-output", "thinking-visible":
		return true
	}
	return false
}

// plan runs the decision ladder of docs/formats/server.md#decision-ladder (without the disk cache)
// on slot sl: protocol continuations, token prefix, thinking binding, text
// prefix, cold. logMiss logs a live miss.
func (s *Server) plan(sl *slot, r *request, logMiss bool) (plan, error) {
	live := sl.sess.Tokens()
	pos := len(live)
	resp, anthr, think := sl.live.get()
	// fromLive continues the live tokens with the tokens of text[from:],
	// a rendering whose client ranges are client.
	fromLive := func(text string, from int, client []tokenizer.Span, source string) plan {
		t := make([]int, 0, pos+(len(text)-from)/2)
		t = append(t, live...)
		return plan{s.tok.AppendEncodeRendered(t, text, from, client), pos, source}
	}
	candidates := func() (plan, bool) {
		if pos == 0 {
			return plan{}, false
		}
		switch r.api {
		case apiResponses:
			if resp.valid && resp.pos == pos {
				if len(resp.visible) < len(r.rendered) && strings.HasPrefix(r.rendered, resp.visible) {
					return fromLive(r.rendered, len(resp.visible), r.client, "responses-visible"), true
				}
				if tail := r.liveTailPrompt; tail.Text != "" && sameIDs(r.liveIDs, resp.ids) {
					return fromLive(tail.Text, 0, tail.Client, "responses-tool-output"), true
				}
			}
		case apiMessages:
			if tail := r.liveTailPrompt; anthr.valid && anthr.pos == pos && tail.Text != "" && sameIDs(r.liveIDs, anthr.ids) {
				return fromLive(tail.Text, 0, tail.Client, "anthropic-tool-output"), true
			}
		}
		return plan{}, false
	}
	if p, ok := candidates(); ok {
		return p, nil
	}
	if r.requiresLive {
		what := "Responses continuation state is not available; retry by replaying the full input history"
		if r.api == apiMessages {
			what = "Anthropic continuation state is not available; retry by replaying the full messages history"
		}
		return plan{}, &apiError{status: http.StatusConflict, message: what}
	}
	if pos > 0 && len(r.tokens) >= pos && slices.Equal(r.tokens[:pos], live) {
		return plan{r.tokens, pos, "memory-token"}, nil
	}
	if pos > 0 && (r.api == apiChat || r.api == apiMessages) && think.valid && think.pos == pos &&
		len(think.visible) < len(r.rendered) && strings.HasPrefix(r.rendered, think.visible) {
		return fromLive(r.rendered, len(think.visible), r.client, "thinking-visible"), nil
	}
	if pos > 0 {
		// The live tokens must spell the prompt's beginning with control
		// tokens exactly where the template has them, none in client text.
		if s.tok.PrefixAgrees(live, r.rendered, r.client) {
			return fromLive(r.rendered, len(s.tok.Decode(live)), r.client, "memory-text"), nil
		}
		if logMiss {
			s.log.Printf("ds4-server: live kv cache miss: %d live tokens, common prefix %d of %d prompt tokens%s", pos, commonPrefix(live, r.tokens), len(r.tokens), s.slotName(sl))
		}
	}
	return plan{r.tokens, 0, "cold"}, nil
}

// commonPrefix returns the length of the common prefix of a and b.
func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// restoreToolIDs loads into the tool memory the ids of msgs' tool calls
// that it lacks but a disk checkpoint saved (docs/formats/server.md#tool-call-replay-memory).
func (s *Server) restoreToolIDs(msgs []prompt.Message) {
	if s.cfg.KVStore == nil {
		return
	}
	want := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID != "" && !s.tools.has(c.ID) {
				want[c.ID] = true
			}
		}
	}
	if len(want) == 0 {
		return
	}
	for _, e := range s.cfg.KVStore.ToolEntries(func(id string) bool { return want[id] }) {
		s.tools.put(e.ID, e.DSML)
	}
}
