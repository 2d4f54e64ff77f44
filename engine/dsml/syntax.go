package dsml

import "strings"

// Marker is the DSML special-token text that every DSML tag contains.
const Marker = "｜DSML｜"

// Tags of the canonical DSML syntax; the invoke and parameter openers are
// followed by attributes and a closing '>'.
const (
	ToolCallsOpen  = "<" + Marker + "tool_calls>"
	ToolCallsClose = "</" + Marker + "tool_calls>"
	InvokeOpen     = "<" + Marker + "invoke"
	InvokeClose    = "</" + Marker + "invoke>"
	ParameterOpen  = "<" + Marker + "parameter"
	ParameterClose = "</" + Marker + "parameter>"
)

// syntax is one spelling of the tag set. Besides the canonical form the
// model occasionally writes a short form without the first bar and plain
// XML; upstream accepts both.
type syntax struct {
	open, close             string
	invokeOpen, invokeClose string
	paramOpen, paramClose   string
}

var (
	fullSyntax  = syntax{ToolCallsOpen, ToolCallsClose, InvokeOpen, InvokeClose, ParameterOpen, ParameterClose}
	shortSyntax = syntax{
		"<DSML｜tool_calls>", "</DSML｜tool_calls>",
		"<DSML｜invoke", "</DSML｜invoke>",
		"<DSML｜parameter", "</DSML｜parameter>",
	}
	xmlSyntax = syntax{"<tool_calls>", "</tool_calls>", "<invoke", "</invoke>", "<parameter", "</parameter>"}
)

// maxOpenerLen is the length of the longest block opener.
const maxOpenerLen = len(ToolCallsOpen)

// findEarliestOpener returns the position of the earliest block opener of
// any syntax in s at or after from, the way the streaming paths look for
// one (upstream find_any_tool_start).
func findEarliestOpener(s string, from int) (int, *syntax) {
	best, syn := -1, (*syntax)(nil)
	for _, cand := range [...]*syntax{&fullSyntax, &shortSyntax, &xmlSyntax} {
		i := strings.Index(s[from:], cand.open)
		if i >= 0 && (best < 0 || from+i < best) {
			best, syn = from+i, cand
		}
	}
	return best, syn
}

// partialOpenerAt returns the first position at or after from where the
// rest of s is a proper prefix of some block opener, or -1.
func partialOpenerAt(s string, from int) int {
	lo := max(from, len(s)-maxOpenerLen+1)
	for i := lo; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		for _, syn := range [...]*syntax{&fullSyntax, &shortSyntax, &xmlSyntax} {
			if isProperPrefix(s[i:], syn.open) {
				return i
			}
		}
	}
	return -1
}

// isProperPrefix reports whether s is a non-empty proper prefix of lit.
func isProperPrefix(s, lit string) bool {
	return len(s) > 0 && len(s) < len(lit) && strings.HasPrefix(lit, s)
}

// attr returns the entity-decoded value of attribute name in tag: upstream
// searches `name="` anywhere in the tag and reads up to the next quote.
func attr(tag, name string) (string, bool) {
	pat := name + `="`
	i := strings.Index(tag, pat)
	if i < 0 {
		return "", false
	}
	rest := tag[i+len(pat):]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return Unescape(rest[:j]), true
}

// Unescape decodes the entities &amp; &lt; &gt; &quot; and &apos; in s;
// any other '&' is kept literally.
func Unescape(s string) string {
	if strings.IndexByte(s, '&') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '&' {
			b.WriteByte(s[i])
			continue
		}
		switch rest := s[i:]; {
		case strings.HasPrefix(rest, "&amp;"):
			b.WriteByte('&')
			i += 4
		case strings.HasPrefix(rest, "&lt;"):
			b.WriteByte('<')
			i += 3
		case strings.HasPrefix(rest, "&gt;"):
			b.WriteByte('>')
			i += 3
		case strings.HasPrefix(rest, "&quot;"):
			b.WriteByte('"')
			i += 5
		case strings.HasPrefix(rest, "&apos;"):
			b.WriteByte('\'')
			i += 5
		default:
			b.WriteByte('&')
		}
	}
	return b.String()
}

// partialEntityAt returns the position of a trailing '&' in s[start:]
// whose rest is a proper prefix of a decodable entity, or len(s).
func partialEntityAt(s string, start int) int {
	for i := len(s) - 1; i >= start && i >= len(s)-6; i-- {
		if s[i] != '&' {
			continue
		}
		for _, ent := range [...]string{"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"} {
			if isProperPrefix(s[i:], ent) {
				return i
			}
		}
		break
	}
	return len(s)
}

// EscapeAttr escapes an attribute value (a tool or parameter name) for
// canonical rendering: & < > and " become entities.
func EscapeAttr(s string) string {
	if !strings.ContainsAny(s, `&<>"`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// EscapeParameter escapes the body of a string="true" parameter: the only
// change is writing each literal parameter closer as
// "&lt;/｜DSML｜parameter>".
func EscapeParameter(s string) string {
	return strings.ReplaceAll(s, ParameterClose, "&lt;"+ParameterClose[1:])
}

// escapeJSONParameter escapes the body of a string="false" parameter: each
// literal parameter closer becomes "\u003c/｜DSML｜parameter>".
func escapeJSONParameter(s string) string {
	return strings.ReplaceAll(s, ParameterClose, `\u003c`+ParameterClose[1:])
}
