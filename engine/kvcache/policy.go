package kvcache

// Policy holds the save-moment settings of docs/formats/kvcache.md#save-moments (the server's
// --kv-cache-* flags).
type Policy struct {
	MinTokens         int // shortest checkpoint saved or loaded
	ColdMaxTokens     int // cold saves only for prompts up to this; 0 disables them
	ContinuedInterval int // spacing of continued saves; 0 disables them
	TrimTokens        int // cold-save tail trim
	AlignTokens       int // cold/continued alignment; 0 disables it
}

// DefaultPolicy returns upstream's defaults.
func DefaultPolicy() Policy {
	return Policy{MinTokens: 512, ColdMaxTokens: 30000, ContinuedInterval: 10000, TrimTokens: 32, AlignTokens: 2048}
}

// StoreLen returns the trimmed and aligned cold-save length for a prompt
// of n tokens (docs/formats/kvcache.md#cold-save step 2).
func (p Policy) StoreLen(n int) int {
	if n > p.MinTokens+p.TrimTokens {
		s := n - p.TrimTokens
		if p.AlignTokens > 0 {
			s -= s % p.AlignTokens
		}
		if s >= p.MinTokens {
			return s
		}
	}
	return n
}

// ChatAnchor returns the index of the last user token before the first
// assistant token of tokens, when it is at least MinTokens, else -1
// (docs/formats/kvcache.md#cold-save step 1).
func (p Policy) ChatAnchor(tokens []int, user, assistant int) int {
	last := -1
	for i, t := range tokens {
		if t == assistant {
			break
		}
		if t == user {
			last = i
		}
	}
	if last >= p.MinTokens {
		return last
	}
	return -1
}

// ColdBoundary returns where a cold prompt of these tokens is saved: the
// chat anchor if there is one, else StoreLen. It returns 0 when the
// prompt is not eligible for a cold save (docs/formats/kvcache.md#cold-save).
func (p Policy) ColdBoundary(tokens []int, user, assistant int) int {
	n := len(tokens)
	if p.ColdMaxTokens <= 0 || n < p.MinTokens || n > p.ColdMaxTokens {
		return 0
	}
	if a := p.ChatAnchor(tokens, user, assistant); a >= 0 {
		return a
	}
	return p.StoreLen(n)
}

// ContinuedStep returns the spacing of continued saves: the interval
// rounded up to the alignment, or 0 when disabled (docs/formats/kvcache.md#continued-saves).
func (p Policy) ContinuedStep() int {
	switch {
	case p.ContinuedInterval <= 0:
		return 0
	case p.AlignTokens > 0:
		return (p.ContinuedInterval + p.AlignTokens - 1) / p.AlignTokens * p.AlignTokens
	}
	return p.ContinuedInterval
}

// Continued tracks the continued-save frontier of one live session
// (docs/formats/kvcache.md#continued-saves).
type Continued struct {
	Policy Policy
	Last   int // the last stored (or loaded) frontier
}

// Target reports whether a live session of n tokens is at a continued
// frontier that has not been stored yet.
func (c *Continued) Target(n int) bool {
	step := c.Policy.ContinuedStep()
	return step > 0 && n >= c.Policy.MinTokens && n%step == 0 && n > c.Last
}

// Note records a successful cold or continued store, or a disk load, of
// n tokens.
func (c *Continued) Note(n int) { c.Last = n }

// Suppress marks n as stored ahead of a cold save at a continued frontier
// and returns the previous value for Restore.
func (c *Continued) Suppress(n int) (old int) {
	old = c.Last
	if c.Target(n) {
		c.Last = n
	}
	return old
}

// Restore undoes Suppress after a failed cold save.
func (c *Continued) Restore(old int) { c.Last = old }

// Reset forgets the frontier (a request that reused nothing).
func (c *Continued) Reset() { c.Last = 0 }
