package dsml

import "strings"

// This file reproduces the small, lenient JSON reader of upstream
// ds4_server.c. It decides whether tool-call arguments "parse as a JSON
// object" and how their values are minified, so its leniencies are part of
// the rendered bytes: numbers are whatever C strtod accepts (including hex,
// inf and nan), commas between object members are optional, text after the
// closing brace is ignored, raw control characters inside strings are kept,
// a lone surrogate escape becomes its 3-byte encoding and a NUL (raw or
// \u0000) ends a value, as it ends a C string.

// maxNesting bounds the depth of skipped JSON containers, as upstream does.
const maxNesting = 256

// isSpace reports whether c is a byte C isspace accepts in the C locale.
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// skipSpace returns the index of the first non-space byte of s at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// trimSpaceBack moves end back over space bytes, never below start.
func trimSpaceBack(s string, start, end int) int {
	for end > start && isSpace(s[end-1]) {
		end--
	}
	return end
}

// cString returns s up to its first NUL byte, the string C code sees.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// arg is one member of a JSON arguments object.
type arg struct {
	key      string
	value    string // decoded text for strings, minified JSON otherwise
	isString bool
}

// parseArgs reads text as a JSON object the way upstream json_args_parse
// does, keeping member order and duplicate keys.
func parseArgs(text string) ([]arg, bool) {
	s := cString(text)
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return nil, false
	}
	i = skipSpace(s, i+1)
	var args []arg
	for i < len(s) && s[i] != '}' {
		key, j, ok := scanString(s, i, true)
		if !ok {
			return nil, false
		}
		i = skipSpace(s, j)
		if i >= len(s) || s[i] != ':' {
			return nil, false
		}
		i = skipSpace(s, i+1)
		a := arg{key: cString(key)}
		if i < len(s) && s[i] == '"' {
			v, j, ok := scanString(s, i, true)
			if !ok {
				return nil, false
			}
			a.value, a.isString, i = cString(v), true, j
		} else {
			end, ok := skipValue(s, i, 0)
			if !ok {
				return nil, false
			}
			a.value, i = minify(s[i:end]), end
		}
		args = append(args, a)
		i = skipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i++
		}
		i = skipSpace(s, i)
	}
	if i >= len(s) {
		return nil, false
	}
	return args, true
}

// minifyRaw returns the first JSON value of v with all whitespace outside
// string literals removed, or v unchanged when it does not start with a
// valid value (upstream json_minify_raw_value).
func minifyRaw(v string) string {
	v = cString(v)
	i := skipSpace(v, 0)
	end, ok := skipValue(v, i, 0)
	if !ok {
		return v
	}
	return minify(v[i:end])
}

// minify removes whitespace outside string literals from a JSON text.
func minify(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }) < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			b = append(b, c)
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			b = append(b, c)
		case !isSpace(c):
			b = append(b, c)
		}
	}
	return string(b)
}

// skipValue returns the end of the JSON value that starts at s[i] after
// optional whitespace.
func skipValue(s string, i, depth int) (int, bool) {
	i = skipSpace(s, i)
	if i >= len(s) {
		return i, false
	}
	switch s[i] {
	case '"':
		_, end, ok := scanString(s, i, false)
		return end, ok
	case '{':
		return skipObject(s, i, depth)
	case '[':
		return skipArray(s, i, depth)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if strings.HasPrefix(s[i:], lit) {
			return i + len(lit), true
		}
	}
	return scanNumber(s, i)
}

func skipArray(s string, i, depth int) (int, bool) {
	if depth >= maxNesting {
		return i, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return i + 1, true
	}
	for {
		end, ok := skipValue(s, i, depth+1)
		if !ok {
			return end, false
		}
		i = skipSpace(s, end)
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case ']':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

func skipObject(s string, i, depth int) (int, bool) {
	if depth >= maxNesting {
		return i, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, true
	}
	for {
		_, end, ok := scanString(s, i, false)
		if !ok {
			return end, false
		}
		i = skipSpace(s, end)
		if i >= len(s) || s[i] != ':' {
			return i, false
		}
		end, ok = skipValue(s, i+1, depth+1)
		if !ok {
			return end, false
		}
		i = skipSpace(s, end)
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case '}':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// scanString reads the JSON string literal at s[i] (after optional
// whitespace) and returns its decoded text when decode is set.
func scanString(s string, i int, decode bool) (string, int, bool) {
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	i++
	var b []byte
	for i < len(s) && s[i] != '"' {
		c := s[i]
		if c == 0 {
			return "", i, false
		}
		if c != '\\' {
			if decode {
				b = append(b, c)
			}
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", i, false
		}
		e := s[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			cp, ok := hex4(s, i)
			if !ok {
				return "", i, false
			}
			i += 4
			if cp >= 0xd800 && cp <= 0xdbff && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if lo, ok := hex4(s, i+2); ok && lo >= 0xdc00 && lo <= 0xdfff {
					cp = 0x10000 + (cp-0xd800)<<10 + (lo - 0xdc00)
					i += 6
				}
			}
			b = appendCodePoint(b, cp)
		default:
			return "", i, false
		}
	}
	if i >= len(s) {
		return "", i, false
	}
	return string(b), i + 1, true
}

// hex4 decodes four hex digits at s[i].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var cp rune
	for _, c := range []byte(s[i : i+4]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		cp = cp<<4 | rune(d)
	}
	return cp, true
}

// appendCodePoint appends the UTF-8 style encoding of cp without rejecting
// surrogates, so a lone surrogate escape keeps its 3-byte form.
func appendCodePoint(b []byte, cp rune) []byte {
	switch {
	case cp <= 0x7f:
		return append(b, byte(cp))
	case cp <= 0x7ff:
		return append(b, 0xc0|byte(cp>>6), 0x80|byte(cp&0x3f))
	case cp <= 0xffff:
		return append(b, 0xe0|byte(cp>>12), 0x80|byte(cp>>6&0x3f), 0x80|byte(cp&0x3f))
	default:
		return append(b, 0xf0|byte(cp>>18), 0x80|byte(cp>>12&0x3f), 0x80|byte(cp>>6&0x3f), 0x80|byte(cp&0x3f))
	}
}

// scanNumber accepts the longest prefix of s[i:] that C strtod would read
// in the C locale: decimal and hexadecimal floats, inf, infinity and nan.
func scanNumber(s string, i int) (int, bool) {
	j := i
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	switch {
	case hasPrefixFold(s[j:], "infinity"):
		return j + 8, true
	case hasPrefixFold(s[j:], "inf"):
		return j + 3, true
	case hasPrefixFold(s[j:], "nan"):
		k := j + 3
		if k < len(s) && s[k] == '(' {
			m := k + 1
			for m < len(s) && (isAlnum(s[m]) || s[m] == '_') {
				m++
			}
			if m < len(s) && s[m] == ')' {
				return m + 1, true
			}
		}
		return k, true
	}
	if j+1 < len(s) && s[j] == '0' && (s[j+1] == 'x' || s[j+1] == 'X') {
		k, digits := j+2, 0
		for k < len(s) && isHex(s[k]) {
			k, digits = k+1, digits+1
		}
		if k < len(s) && s[k] == '.' {
			k++
			for k < len(s) && isHex(s[k]) {
				k, digits = k+1, digits+1
			}
		}
		if digits == 0 {
			return j + 1, true // just the "0"
		}
		return exponent(s, k, 'p', 'P'), true
	}
	k, digits := j, 0
	for k < len(s) && isDigit(s[k]) {
		k, digits = k+1, digits+1
	}
	if k < len(s) && s[k] == '.' {
		k++
		for k < len(s) && isDigit(s[k]) {
			k, digits = k+1, digits+1
		}
	}
	if digits == 0 {
		return i, false
	}
	return exponent(s, k, 'e', 'E'), true
}

// exponent extends a number ending at k by an exponent part when one with
// at least one digit follows.
func exponent(s string, k int, lower, upper byte) int {
	if k >= len(s) || (s[k] != lower && s[k] != upper) {
		return k
	}
	m := k + 1
	if m < len(s) && (s[m] == '+' || s[m] == '-') {
		m++
	}
	if m >= len(s) || !isDigit(s[m]) {
		return k
	}
	for m < len(s) && isDigit(s[m]) {
		m++
	}
	return m
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
func isAlnum(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z') }

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix,
// ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if s[i]|0x20 != prefix[i] {
			return false
		}
	}
	return true
}

// QuoteJSON returns s as a JSON string literal escaped the way upstream
// json_escape does: only '"', '\\', '\n', '\r', '\t' and other bytes below
// 0x20 (as lower-case \u00xx) are escaped; everything else, including
// non-ASCII text and '<', is written raw.
func QuoteJSON(s string) string {
	return string(appendQuoteJSON(make([]byte, 0, len(s)+2), s))
}

const hexDigits = "0123456789abcdef"

func appendQuoteJSON(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscapedJSON(b, s)
	return append(b, '"')
}

// appendEscapedJSON appends s escaped as the inside of a JSON string.
func appendEscapedJSON(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return b
}
