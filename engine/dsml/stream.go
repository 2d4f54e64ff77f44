package dsml

import "strings"

// EventKind says what an Event carries.
type EventKind uint8

// Event kinds, in the order a turn produces them.
const (
	// EventReasoning carries a reasoning delta in Text.
	EventReasoning EventKind = iota + 1
	// EventContent carries a visible content delta in Text.
	EventContent
	// EventCallStart announces call Index, whose invoke tag is complete,
	// with its tool Name.
	EventCallStart
	// EventCallArgs carries a fragment of the JSON arguments of call Index
	// in Text.
	EventCallArgs
	// EventCallEnd reports that the invoke closer of call Index was
	// generated.
	EventCallEnd
	// EventError reports a malformed or unterminated block in Err; live
	// tool streaming stops and the rest of the turn is suppressed.
	EventError
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventReasoning:
		return "reasoning"
	case EventContent:
		return "content"
	case EventCallStart:
		return "call-start"
	case EventCallArgs:
		return "call-args"
	case EventCallEnd:
		return "call-end"
	case EventError:
		return "error"
	}
	return "EventKind(?)"
}

// Event is one piece of streamed output.
type Event struct {
	// Kind says which fields are set.
	Kind EventKind
	// Text is the delta of a reasoning, content or arguments event.
	Text string
	// Index numbers the calls of the turn from 0.
	Index int
	// Name is the tool name of an EventCallStart.
	Name string
	// Err describes an EventError; it is a *ParseError.
	Err error
}

// StreamOptions configures a Stream.
type StreamOptions struct {
	// Thinking says the prompt ended with "<think>": the text starts as
	// reasoning until the first "</think>".
	Thinking bool
	// Tools says tools were offered: visible text is scanned for a
	// tool-call block, which is streamed as call events instead of text.
	Tools bool
}

type streamPhase uint8

const (
	phaseThinking streamPhase = iota
	phaseText
	phaseTool
	phaseSuppress
)

type toolState uint8

const (
	betweenInvokes toolState = iota
	betweenParams
	paramValue
)

// Stream splits generated text into events while it is being generated,
// the way upstream's live OpenAI and Anthropic streams do: reasoning up to
// the first "</think>" (a repeated leading "<think>" is skipped), then
// content, then, with tools, one call per invoke with its arguments
// translated to JSON fragments as they arrive ("{", `"name":"` …, "}").
//
// Bytes that might still turn out to be markup are held back: an
// incomplete UTF-8 character, a possible partial "</think>", trailing
// whitespace and a partial block opener in text (whitespace right before a
// block is never sent), and a partial parameter closer or entity in
// arguments. Everything held is released by Close, except inside a block.
//
// The concatenated events do not depend on how the text is chunked. The
// final word on the turn is Result (Parse of the whole text), which can
// differ from what was streamed for malformed blocks and in the upstream
// corner cases that the streaming and final parsers treat differently
// (see Parse). A Stream is not safe for concurrent use.
type Stream struct {
	opt    StreamOptions
	buf    strings.Builder
	closed bool
	phase  streamPhase
	out    []Event

	emit         int  // end of the text already emitted
	thinkChecked bool // the leading "<think>" check is done
	scan         int  // where the next "</think>" or opener search starts
	wsStart      int  // start of the run of space bytes ending at wsEnd
	wsEnd        int

	syn        *syntax
	state      toolState
	pos        int // tool-phase parse position
	gtFrom     int
	index      int
	argsOpen   bool
	firstParam bool
	strParam   bool
	live       int

	track tracker
}

// NewStream returns a Stream for one generated turn.
func NewStream(opt StreamOptions) *Stream {
	s := &Stream{opt: opt, track: newTracker(opt.Thinking)}
	if !opt.Thinking {
		s.phase = phaseText
	}
	if !opt.Tools {
		s.track.mode = trackDone
	}
	return s
}

// Write appends generated text and returns the events it completes. Writes
// after Close are ignored.
func (s *Stream) Write(chunk string) []Event {
	if s.closed {
		return nil
	}
	s.buf.WriteString(chunk)
	raw := s.buf.String()
	if s.opt.Tools {
		s.track.update(raw)
	}
	s.update(raw[:utf8Safe(raw, 0, len(raw))], false)
	return s.flush()
}

// Close ends the turn and returns the events for the text still held back.
// A tool-call block that is still open yields an EventError.
func (s *Stream) Close() []Event {
	if s.closed {
		return nil
	}
	s.closed = true
	s.update(s.buf.String(), true)
	if s.phase == phaseTool {
		s.fail(len(s.buf.String()), "unterminated tool call block")
	}
	return s.flush()
}

// Text returns all text written so far.
func (s *Stream) Text() string { return s.buf.String() }

// Result parses all text written so far as a finished turn.
func (s *Stream) Result() (Result, error) { return Parse(s.buf.String(), s.opt.Thinking) }

// DecodeState returns what the next generated token belongs to; it is
// always DecodeOutside without tools.
func (s *Stream) DecodeState() DecodeState { return s.track.state }

// BlockOpened reports whether a tool-call block opener has been generated
// after the reasoning (tools only).
func (s *Stream) BlockOpened() bool { return s.track.syn != nil }

// BlockClosed reports whether the block's closer has been generated at a
// structural position; generation with tools stops there, before EOS.
func (s *Stream) BlockClosed() bool { return s.track.syn != nil && s.track.mode == trackDone }

// LiveCalls returns how many calls have been announced by EventCallStart.
func (s *Stream) LiveCalls() int { return s.live }

func (s *Stream) flush() []Event {
	out := s.out
	s.out = nil
	return out
}

func (s *Stream) add(e Event) {
	if e.Text == "" && (e.Kind == EventReasoning || e.Kind == EventContent || e.Kind == EventCallArgs) {
		return
	}
	s.out = append(s.out, e)
}

func (s *Stream) args(text string) {
	s.add(Event{Kind: EventCallArgs, Index: s.index, Text: text})
}

func (s *Stream) fail(at int, reason string) {
	s.add(Event{Kind: EventError, Index: s.index, Err: &ParseError{Offset: at, Reason: reason}})
	s.phase = phaseSuppress
}

// update advances over view, the part of the text that is safe to look at
// (whole UTF-8 characters unless final).
func (s *Stream) update(view string, final bool) {
	if s.phase == phaseThinking {
		if !s.thinkChecked {
			if len(view) < len(thinkOpen) && strings.HasPrefix(thinkOpen, view) && !final {
				return
			}
			if strings.HasPrefix(view, thinkOpen) {
				s.emit = len(thinkOpen)
			}
			s.thinkChecked = true
			s.scan = s.emit
		}
		end := strings.Index(view[s.scan:], thinkClose)
		limit := len(view)
		if end >= 0 {
			end += s.scan
			limit = end
		} else if !final {
			limit = utf8Safe(view, s.emit, partialAt(view, s.emit, thinkClose))
			s.scan = max(s.emit, len(view)-len(thinkClose)+1)
		}
		s.text(EventReasoning, view, limit)
		if end < 0 {
			if final {
				s.phase = phaseSuppress
			}
			return
		}
		s.emit = end + len(thinkClose)
		s.scan = s.emit
		s.phase = phaseText
	}

	if s.phase == phaseText {
		at, syn := -1, (*syntax)(nil)
		if s.opt.Tools {
			at, syn = findEarliestOpener(view, max(s.scan, s.emit))
		}
		s.text(EventContent, view, s.textLimit(view, at, final))
		switch {
		case syn != nil:
			s.syn, s.emit, s.pos = syn, at, at+len(syn.open)
			s.state, s.phase = betweenInvokes, phaseTool
		case final:
			s.phase = phaseSuppress
		default:
			s.scan = max(s.emit, len(view)-maxOpenerLen+1)
		}
	}

	if s.phase == phaseTool {
		s.tools(view)
	}
}

func (s *Stream) text(kind EventKind, view string, limit int) {
	if limit > s.emit {
		s.add(Event{Kind: kind, Text: view[s.emit:limit]})
		s.emit = limit
	}
}

// textLimit returns how much visible text can be emitted.
func (s *Stream) textLimit(view string, opener int, final bool) int {
	start := s.emit
	switch {
	case len(view) <= start:
		return len(view)
	case opener >= 0:
		return trimSpaceBack(view, start, opener)
	case final:
		return len(view)
	case !s.opt.Tools:
		return utf8Safe(view, start, len(view))
	}
	limit := s.spaceFrom(view, start)
	if i := partialOpenerAt(view, start); i >= 0 && i < limit {
		limit = trimSpaceBack(view, start, i)
	}
	return utf8Safe(view, start, limit)
}

// spaceFrom returns where the run of space bytes that ends view begins,
// not before start, scanning only the bytes added since the last call.
func (s *Stream) spaceFrom(view string, start int) int {
	from := max(s.wsEnd, start)
	s.wsStart = max(s.wsStart, start)
	for i := from; i < len(view); i++ {
		if !isSpace(view[i]) {
			s.wsStart = i + 1
		}
	}
	s.wsEnd = len(view)
	return s.wsStart
}

// tools advances the live tool-call parser (upstream
// openai_tool_stream_update): the invoke header is announced once its tag
// is complete, parameter bodies are forwarded as they arrive.
func (s *Stream) tools(view string) {
	for s.phase == phaseTool && s.pos < len(view) {
		switch s.state {
		case betweenInvokes:
			s.pos = skipSpace(view, s.pos)
			if s.pos >= len(view) {
				return
			}
			rest := view[s.pos:]
			if strings.HasPrefix(rest, s.syn.close) {
				s.pos += len(s.syn.close)
				s.phase = phaseSuppress
				return
			}
			if isProperPrefix(rest, s.syn.close) || isProperPrefix(rest, s.syn.invokeOpen) {
				return
			}
			if !strings.HasPrefix(rest, s.syn.invokeOpen) {
				s.fail(s.pos, "expected "+s.syn.invokeOpen+" or "+s.syn.close)
				return
			}
			gt := s.tagEnd(view)
			if gt < 0 {
				return
			}
			name, ok := attr(view[s.pos:gt+1], "name")
			if !ok {
				s.fail(s.pos, "invoke tag without name attribute")
				return
			}
			s.add(Event{Kind: EventCallStart, Index: s.index, Name: name})
			s.live++
			s.args("{")
			s.argsOpen, s.firstParam = true, true
			s.pos, s.state = gt+1, betweenParams

		case betweenParams:
			s.pos = skipSpace(view, s.pos)
			if s.pos >= len(view) {
				return
			}
			rest := view[s.pos:]
			if strings.HasPrefix(rest, s.syn.invokeClose) {
				if s.argsOpen {
					s.args("}")
				}
				s.add(Event{Kind: EventCallEnd, Index: s.index})
				s.argsOpen = false
				s.pos += len(s.syn.invokeClose)
				s.index++
				s.state = betweenInvokes
				continue
			}
			if isProperPrefix(rest, s.syn.invokeClose) || isProperPrefix(rest, s.syn.paramOpen) {
				return
			}
			if !strings.HasPrefix(rest, s.syn.paramOpen) {
				s.fail(s.pos, "expected "+s.syn.paramOpen+" or "+s.syn.invokeClose)
				return
			}
			gt := s.tagEnd(view)
			if gt < 0 {
				return
			}
			tag := view[s.pos : gt+1]
			name, ok := attr(tag, "name")
			typ, typed := attr(tag, "string")
			if !ok || !typed {
				s.fail(s.pos, "parameter tag without name or string attribute")
				return
			}
			s.strParam = typ == "true"
			prefix := make([]byte, 0, len(name)+5)
			if !s.firstParam {
				prefix = append(prefix, ',')
			}
			s.firstParam = false
			prefix = appendQuoteJSON(prefix, name)
			prefix = append(prefix, ':')
			if s.strParam {
				prefix = append(prefix, '"')
			}
			s.args(string(prefix))
			s.pos, s.state = gt+1, paramValue

		case paramValue:
			rest := view[s.pos:]
			if n := strings.Index(rest, s.syn.paramClose); n >= 0 {
				s.value(rest[:n])
				if s.strParam {
					s.args(`"`)
				}
				s.pos += n + len(s.syn.paramClose)
				s.state = betweenParams
				continue
			}
			limit := partialAt(view, max(s.pos, len(view)-len(s.syn.paramClose)), s.syn.paramClose)
			if s.strParam {
				limit = partialEntityAt(view[:limit], s.pos)
			}
			limit = utf8Safe(view, s.pos, limit)
			if limit > s.pos {
				s.value(view[s.pos:limit])
				s.pos = limit
			}
			return
		}
	}
}

// value emits a piece of a parameter body: string bodies entity-decoded
// and JSON-escaped, JSON bodies verbatim.
func (s *Stream) value(v string) {
	if s.strParam {
		v = string(appendEscapedJSON(nil, Unescape(v)))
	}
	s.args(v)
}

// tagEnd returns the index of the '>' ending the tag at s.pos, or -1.
func (s *Stream) tagEnd(view string) int {
	from := max(s.pos, s.gtFrom)
	if i := strings.IndexByte(view[from:], '>'); i >= 0 {
		return from + i
	}
	s.gtFrom = len(view)
	return -1
}

// utf8Safe moves limit back so that s[start:limit] does not end inside a
// UTF-8 character (upstream utf8_stream_safe_len).
func utf8Safe(s string, start, limit int) int {
	if limit <= start {
		return limit
	}
	p, cont := limit, 0
	for p > start && cont < 4 && s[p-1]&0xc0 == 0x80 {
		p--
		cont++
	}
	if p == limit {
		if utf8Len(s[limit-1]) > 1 {
			return limit - 1
		}
		return limit
	}
	if p == start && s[p]&0xc0 == 0x80 {
		return start
	}
	lead := p - 1
	if limit-lead < utf8Len(s[lead]) {
		return lead
	}
	return limit
}

// utf8Len returns the sequence length a UTF-8 lead byte announces.
func utf8Len(c byte) int {
	switch {
	case c >= 0xc2 && c <= 0xdf:
		return 2
	case c >= 0xe0 && c <= 0xef:
		return 3
	case c >= 0xf0 && c <= 0xf4:
		return 4
	}
	return 1
}
