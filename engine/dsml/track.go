package dsml

import "strings"

// DecodeState says what the next generated token belongs to, so the
// sampler can decode DSML structure greedily and argument payloads with the
// request's sampling settings.
type DecodeState uint8

// Decode states, as upstream dsml_decode_tracker_update reports them.
const (
	// DecodeOutside means the text is not inside a tool-call block.
	DecodeOutside DecodeState = iota
	// DecodeStructural covers tags, attributes, whitespace between
	// elements and closers, including a partial closer of two or more bytes
	// at the end of a body.
	DecodeStructural
	// DecodeString is the body of a string="true" parameter.
	DecodeString
	// DecodeJSONStructural is a JSON parameter body outside string literals.
	DecodeJSONStructural
	// DecodeJSONString is a string literal inside a JSON parameter body.
	DecodeJSONString
)

// InBlock reports whether the state is inside a tool-call block.
func (d DecodeState) InBlock() bool { return d != DecodeOutside }

// Payload reports whether the next token is argument payload, sampled with
// the request's settings; other in-block states are decoded greedily.
func (d DecodeState) Payload() bool { return d == DecodeString || d == DecodeJSONString }

// Greedy reports whether the next token is DSML structure and should be
// decoded at temperature 0.
func (d DecodeState) Greedy() bool { return d.InBlock() && !d.Payload() }

// String returns the state's name.
func (d DecodeState) String() string {
	switch d {
	case DecodeOutside:
		return "outside"
	case DecodeStructural:
		return "structural"
	case DecodeString:
		return "string"
	case DecodeJSONStructural:
		return "json-structural"
	case DecodeJSONString:
		return "json-string"
	}
	return "DecodeState(?)"
}

// Tracker follows generated text and reports the DecodeState before each
// next token. It is the recognizer a Stream uses internally; a server that
// delays writes to its Stream (to hold back possible stop sequences) feeds
// a Tracker with every generated token instead.
type Tracker struct {
	buf strings.Builder
	t   tracker
}

// NewTracker returns a Tracker for a turn generated with or without
// thinking; with thinking, blocks are only recognized after the first
// "</think>".
func NewTracker(thinking bool) *Tracker {
	return &Tracker{t: newTracker(thinking)}
}

// Write appends generated text and returns the state for the next token.
func (t *Tracker) Write(chunk string) DecodeState {
	t.buf.WriteString(chunk)
	t.t.update(t.buf.String())
	return t.t.state
}

// State returns the state for the next token.
func (t *Tracker) State() DecodeState { return t.t.state }

// Opened reports whether a tool-call block opener has been generated.
func (t *Tracker) Opened() bool { return t.t.syn != nil }

// Closed reports whether the opened block's closer has been generated at a
// structural position; generation with tools stops there.
func (t *Tracker) Closed() bool { return t.t.mode == trackDone }

type trackMode uint8

const (
	trackThinking trackMode = iota // waiting for the reasoning to close
	trackSearch                    // looking for a block opener
	trackStructural
	trackString
	trackJSON
	trackStray // unrecognized text in structural position: wait for the closer
	trackDone
)

// tracker is a forgiving incremental recognizer of DSML structure over a
// growing text. It is not a validator: Parse judges the block afterwards.
type tracker struct {
	mode     trackMode
	state    DecodeState
	syn      *syntax
	pos      int
	gtFrom   int // where the search for a tag's '>' resumes
	inString bool
	escaped  bool
}

func newTracker(thinking bool) tracker {
	if thinking {
		return tracker{mode: trackThinking}
	}
	return tracker{mode: trackSearch}
}

// update advances the recognizer over raw, which extends the text of the
// previous call.
func (t *tracker) update(raw string) {
	for {
		switch t.mode {
		case trackThinking:
			if i := strings.Index(raw[t.pos:], thinkClose); i >= 0 {
				t.pos += i + len(thinkClose)
				t.mode = trackSearch
				continue
			}
			t.pos = max(t.pos, len(raw)-len(thinkClose)+1)
			t.state = DecodeOutside
			return

		case trackSearch:
			at, syn := findEarliestOpener(raw, t.pos)
			if syn == nil {
				t.pos = max(t.pos, len(raw)-maxOpenerLen+1)
				t.state = DecodeOutside
				return
			}
			t.syn, t.pos, t.mode = syn, at+len(syn.open), trackStructural

		case trackString:
			closer := t.syn.paramClose
			if i := strings.Index(raw[t.pos:], closer); i >= 0 {
				t.pos += i + len(closer)
				t.mode = trackStructural
				continue
			}
			// Stop at a possible partial closer instead of stepping over
			// it (upstream skips a lone trailing '<' and then misses the
			// closer it starts).
			t.pos = partialAt(raw, t.pos, closer)
			t.state = DecodeString
			if len(raw)-t.pos >= 2 {
				t.state = DecodeStructural
			}
			return

		case trackJSON:
			closer := t.syn.paramClose
			for t.pos < len(raw) {
				if !t.inString {
					rest := raw[t.pos:]
					if strings.HasPrefix(rest, closer) {
						t.pos += len(closer)
						t.mode = trackStructural
						break
					}
					if isProperPrefix(rest, closer) {
						t.state = DecodeJSONStructural
						if len(rest) >= 2 {
							t.state = DecodeStructural
						}
						return
					}
				}
				c := raw[t.pos]
				t.pos++
				switch {
				case !t.inString:
					t.inString = c == '"'
				case t.escaped:
					t.escaped = false
				case c == '\\':
					t.escaped = true
				case c == '"':
					t.inString = false
				}
			}
			if t.mode == trackJSON {
				t.state = DecodeJSONStructural
				if t.inString {
					t.state = DecodeJSONString
				}
				return
			}

		case trackStructural:
			t.pos = skipSpace(raw, t.pos)
			t.state = DecodeStructural
			if t.pos >= len(raw) {
				return
			}
			rest := raw[t.pos:]
			switch {
			case strings.HasPrefix(rest, t.syn.close):
				t.pos += len(t.syn.close)
				t.mode = trackDone
			case strings.HasPrefix(rest, t.syn.invokeClose):
				t.pos += len(t.syn.invokeClose)
			case strings.HasPrefix(rest, t.syn.invokeOpen):
				gt := t.tagEnd(raw)
				if gt < 0 {
					return
				}
				t.pos = gt + 1
			case strings.HasPrefix(rest, t.syn.paramOpen):
				gt := t.tagEnd(raw)
				if gt < 0 {
					return
				}
				typ, ok := attr(raw[t.pos:gt+1], "string")
				t.pos = gt + 1
				if ok && typ == "true" {
					t.mode = trackString
				} else {
					t.mode, t.inString, t.escaped = trackJSON, false, false
				}
			case isProperPrefix(rest, t.syn.close), isProperPrefix(rest, t.syn.invokeOpen),
				isProperPrefix(rest, t.syn.invokeClose), isProperPrefix(rest, t.syn.paramOpen),
				isProperPrefix(rest, t.syn.paramClose):
				return
			default:
				t.mode = trackStray
			}

		case trackStray:
			if i := strings.Index(raw[t.pos:], t.syn.close); i >= 0 {
				t.pos += i + len(t.syn.close)
				t.mode = trackDone
				continue
			}
			t.pos = max(t.pos, len(raw)-len(t.syn.close)+1)
			t.state = DecodeStructural
			return

		case trackDone:
			t.state = DecodeOutside
			return
		}
	}
}

// tagEnd returns the index of the '>' that ends the tag at t.pos, or -1.
func (t *tracker) tagEnd(raw string) int {
	from := max(t.pos, t.gtFrom)
	if i := strings.IndexByte(raw[from:], '>'); i >= 0 {
		return from + i
	}
	t.gtFrom = len(raw)
	return -1
}

// partialAt returns the first position at or after from where the rest of
// s is a proper prefix of lit, or len(s).
func partialAt(s string, from int, lit string) int {
	for i := max(from, len(s)-len(lit)+1); i < len(s); i++ {
		if isProperPrefix(s[i:], lit) {
			return i
		}
	}
	return len(s)
}
