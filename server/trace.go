package server

import (
	"fmt"
	"strings"
	"time"
)

// traceRequest writes a human-readable record of one request to the trace
// file (docs/formats/server.md#trace-file): what was asked, how the cache was used, the prompt, the
// generation and how it was parsed.
func (s *Server) traceRequest(g *gen, res *result) {
	if s.cfg.Trace == nil {
		return
	}
	r := g.r
	var b strings.Builder
	n := g.id[strings.LastIndexByte(g.id, '-')+1:]
	fmt.Fprintf(&b, "===== request %s %s =====\n", n, time.Now().Format(time.DateTime))
	fmt.Fprintf(&b, "kind=%s model=%q stream=%v tools=%v think=%s", r.api, r.model, r.stream, r.hasTools, r.think)
	if len(s.slots) > 1 {
		fmt.Fprintf(&b, " slot=%d", g.sl.id)
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "prompt_tokens=%d effective_tokens=%d cached_tokens=%d source=%s\n", len(r.tokens), g.prompt, g.cached, g.source)
	fmt.Fprintf(&b, "sampling: temperature=%g top_k=%d top_p=%g min_p=%g seed=%d max_tokens=%d stops=%q\n",
		r.sampling.Temperature, r.sampling.TopK, r.sampling.TopP, r.sampling.MinP, r.sampling.Seed, r.maxTokens, r.stops)
	fmt.Fprintf(&b, "tool replay: exact=%d canonical=%d live_tail=%v\n", r.replayed, r.canonical, r.liveTail >= 0)
	fmt.Fprintf(&b, "timing: prefill=%s first_token=%s decode=%s\n", g.prefill, g.firstToken, g.decode)
	fmt.Fprintf(&b, "--- request ---\n%s\n--- prompt ---\n%s\n--- generated ---\n%s\n", r.body, r.rendered, g.raw)
	fmt.Fprintf(&b, "--- parsed: finish=%s completion_tokens=%d", g.finish, g.completion)
	if g.errMsg != "" {
		fmt.Fprintf(&b, " error=%q", g.errMsg)
	}
	if res.parseErr != nil {
		fmt.Fprintf(&b, " parse_error=%q", res.parseErr)
	}
	fmt.Fprintf(&b, " ---\nreasoning: %q\ncontent: %q\n", res.Reasoning, res.Content)
	for _, c := range res.Calls {
		fmt.Fprintf(&b, "call %s %s %s\n", c.ID, c.Name, c.CompactArguments())
	}
	fmt.Fprintf(&b, "===== end request %s =====\n", n)
	s.trace.Lock()
	defer s.trace.Unlock()
	fmt.Fprint(s.cfg.Trace, b.String())
}
