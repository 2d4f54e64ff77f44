package dsml

import (
	"fmt"
	"strings"
)

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Result is a generated assistant turn split into its parts.
type Result struct {
	// Reasoning is the text before the first "</think>" (without a
	// leading "<think>"); it is empty when the turn has no "</think>".
	Reasoning string
	// Content is the visible answer. When a tool-call block follows it,
	// trailing whitespace is removed.
	Content string
	// Calls are the parsed tool calls, without ids.
	Calls []Call
	// RawDSML is the exact text of the tool-call block, from the matched
	// opener (including a leading "\n\n" when present) through the block
	// closer; the server remembers it per call id for exact replay.
	RawDSML string
}

// ParseError describes a malformed tool-call block.
type ParseError struct {
	// Offset is the byte offset in the parsed text where parsing stopped.
	Offset int
	// Reason says what was expected or missing there.
	Reason string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("dsml: %s at byte %d", e.Reason, e.Offset)
}

// Parse splits the generated text of an assistant turn (everything the model
// wrote after the prompt's final "<think>" or "</think>") into reasoning,
// content and tool calls, following upstream parse_generated_message_ex.
// thinking says whether the turn was generated with thinking enabled; then
// only a block after the last "</think>" counts as tool calls, and a turn
// that never closed its reasoning is returned entirely as Content (upstream
// behaviour).
//
// A malformed or unterminated block makes the whole text the Content of the
// returned Result, with no reasoning and no calls, together with a
// *ParseError describing the problem.
func Parse(text string, thinking bool) (Result, error) {
	search := 0
	if thinking {
		i := strings.LastIndex(text, thinkClose)
		if i < 0 {
			return splitReasoning(text), nil
		}
		search = i + len(thinkClose)
	}
	start, syn := findBlock(text, search)
	if syn == nil {
		return splitReasoning(text), nil
	}
	calls, end, err := parseBlock(text, start+strings.Index(text[start:], syn.open)+len(syn.open), syn)
	if err != nil {
		return Result{Content: text}, err
	}
	r := splitReasoning(text[:trimSpaceBack(text, 0, start)])
	r.Calls = calls
	r.RawDSML = text[start:end]
	return r, nil
}

// findBlock finds the block start in text[from:], trying the openers in
// upstream's order of preference (not by position): canonical with and
// without a leading blank line, then the short form, then plain XML.
func findBlock(text string, from int) (int, *syntax) {
	for _, syn := range [...]*syntax{&fullSyntax, &shortSyntax, &xmlSyntax} {
		for _, prefix := range [...]string{"\n\n", ""} {
			if i := strings.Index(text[from:], prefix+syn.open); i >= 0 {
				return from + i, syn
			}
		}
	}
	return -1, nil
}

// splitReasoning splits the text before a block at the first "</think>".
func splitReasoning(s string) Result {
	body := strings.TrimPrefix(s, thinkOpen)
	if i := strings.Index(body, thinkClose); i >= 0 {
		return Result{Reasoning: body[:i], Content: body[i+len(thinkClose):]}
	}
	return Result{Content: s}
}

// parseBlock parses the invokes of a block whose opener ends at p and
// returns the calls and the end of the block closer.
func parseBlock(text string, p int, syn *syntax) ([]Call, int, error) {
	fail := func(at int, reason string) ([]Call, int, error) {
		if at >= len(text) {
			reason = "unterminated tool call block: " + reason
		}
		return nil, 0, &ParseError{Offset: at, Reason: reason}
	}
	var calls []Call
	for {
		p = skipSpace(text, p)
		if strings.HasPrefix(text[p:], syn.close) {
			return calls, p + len(syn.close), nil
		}
		if !strings.HasPrefix(text[p:], syn.invokeOpen) {
			return fail(p, "expected "+syn.invokeOpen+" or "+syn.close)
		}
		gt := strings.IndexByte(text[p:], '>')
		if gt < 0 {
			return fail(len(text), "invoke tag not closed")
		}
		name, ok := attr(text[p:p+gt+1], "name")
		if !ok {
			return fail(p, "invoke tag without name attribute")
		}
		p += gt + 1
		var args []byte
		for {
			p = skipSpace(text, p)
			if strings.HasPrefix(text[p:], syn.invokeClose) {
				p += len(syn.invokeClose)
				break
			}
			if !strings.HasPrefix(text[p:], syn.paramOpen) {
				return fail(p, "expected "+syn.paramOpen+" or "+syn.invokeClose)
			}
			gt := strings.IndexByte(text[p:], '>')
			if gt < 0 {
				return fail(len(text), "parameter tag not closed")
			}
			tag := text[p : p+gt+1]
			pname, ok := attr(tag, "name")
			if !ok {
				return fail(p, "parameter tag without name attribute")
			}
			typ, typed := attr(tag, "string")
			valueStart := p + gt + 1
			if !typed && strings.HasPrefix(text[skipSpace(text, valueStart):], syn.paramOpen) {
				// Recovery: an untyped parameter whose body is more
				// parameters becomes an object of those leaf parameters.
				nested, q, err := parseNested(text, valueStart, syn)
				if err != nil {
					return nil, 0, err
				}
				args = appendArg(args, pname, nested, false)
				p = skipSpace(text, q)
				if strings.HasPrefix(text[p:], syn.paramClose) {
					p += len(syn.paramClose)
				}
				continue
			}
			n := strings.Index(text[valueStart:], syn.paramClose)
			if n < 0 {
				return fail(len(text), "parameter "+QuoteJSON(pname)+" not closed")
			}
			isString := !typed || typ == "true"
			args = appendArg(args, pname, text[valueStart:valueStart+n], isString)
			p = valueStart + n + len(syn.paramClose)
		}
		calls = append(calls, Call{Name: name, Arguments: "{" + string(args) + "}"})
	}
}

// parseNested reads consecutive leaf parameters starting at p and returns
// them as an arguments object text.
func parseNested(text string, p int, syn *syntax) (string, int, error) {
	var members []byte
	for {
		p = skipSpace(text, p)
		if !strings.HasPrefix(text[p:], syn.paramOpen) {
			return "{" + string(members) + "}", p, nil
		}
		gt := strings.IndexByte(text[p:], '>')
		if gt < 0 {
			return "", 0, &ParseError{Offset: len(text), Reason: "unterminated tool call block: nested parameter tag not closed"}
		}
		tag := text[p : p+gt+1]
		name, ok := attr(tag, "name")
		if !ok {
			return "", 0, &ParseError{Offset: p, Reason: "nested parameter tag without name attribute"}
		}
		typ, typed := attr(tag, "string")
		valueStart := p + gt + 1
		n := strings.Index(text[valueStart:], syn.paramClose)
		if n < 0 {
			return "", 0, &ParseError{Offset: len(text), Reason: "unterminated tool call block: nested parameter " + QuoteJSON(name) + " not closed"}
		}
		members = appendArg(members, name, text[valueStart:valueStart+n], !typed || typ == "true")
		p = valueStart + n + len(syn.paramClose)
	}
}

// appendArg appends one `"name": value` member in upstream's internal
// arguments form. String bodies are entity-decoded; other bodies are
// minified JSON, kept verbatim when invalid and "null" when empty.
func appendArg(b []byte, name, raw string, isString bool) []byte {
	if len(b) > 0 {
		b = append(b, ", "...)
	}
	b = appendQuoteJSON(b, name)
	b = append(b, ": "...)
	if isString {
		return appendQuoteJSON(b, Unescape(raw))
	}
	v := minifyRaw(raw)
	if v == "" {
		v = "null"
	}
	return append(b, v...)
}
