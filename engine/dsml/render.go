package dsml

import "strings"

// Call is one tool call of an assistant turn.
type Call struct {
	// ID is the API-level call id ("call_…" or "toolu_…"); it is not part
	// of the rendered DSML.
	ID string
	// Name is the tool name.
	Name string
	// Arguments is the arguments text. Calls from a client carry the JSON
	// object they sent; calls from Parse carry upstream's internal form
	// `{"key": value, …}`, which is not valid JSON when the model wrote an
	// invalid JSON parameter. Use CompactArguments for API output.
	Arguments string
}

// CompactArguments returns the arguments re-serialized compactly as the
// API reports them, `{"key":value,…}` in member order, or "{}" when
// Arguments is not a JSON object.
func (c Call) CompactArguments() string {
	args, ok := parseArgs(c.Arguments)
	if !ok {
		return "{}"
	}
	b := make([]byte, 0, len(c.Arguments)+2)
	b = append(b, '{')
	for i, a := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoteJSON(b, a.key)
		b = append(b, ':')
		if a.isString {
			b = appendQuoteJSON(b, a.value)
		} else {
			b = append(b, a.value...)
		}
	}
	return string(append(b, '}'))
}

// Render returns the canonical DSML block for calls, starting with the
// blank line that separates it from the visible content, or "" when there
// are no calls. Arguments that parse as a JSON object become one parameter
// per member in member order (strings raw, other values minified JSON);
// anything else becomes a single string parameter named "arguments".
func Render(calls []Call) string {
	if len(calls) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n" + ToolCallsOpen + "\n")
	for _, c := range calls {
		b.WriteString(InvokeOpen + ` name="`)
		b.WriteString(EscapeAttr(cString(c.Name)))
		b.WriteString("\">\n")
		args, ok := parseArgs(c.Arguments)
		if !ok {
			b.WriteString(ParameterOpen + ` name="arguments" string="true">`)
			b.WriteString(EscapeParameter(cString(c.Arguments)))
			b.WriteString(ParameterClose + "\n")
		}
		for _, a := range args {
			b.WriteString(ParameterOpen + ` name="`)
			b.WriteString(EscapeAttr(a.key))
			if a.isString {
				b.WriteString(`" string="true">`)
				b.WriteString(EscapeParameter(a.value))
			} else {
				b.WriteString(`" string="false">`)
				b.WriteString(escapeJSONParameter(a.value))
			}
			b.WriteString(ParameterClose + "\n")
		}
		b.WriteString(InvokeClose + "\n")
	}
	b.WriteString(ToolCallsClose)
	return b.String()
}
