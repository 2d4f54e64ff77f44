package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// fields is a JSON object decoded one level deep: member values keep their
// raw bytes, so tool schemas and arguments are forwarded exactly as sent.
// Keys are matched exactly (encoding/json's struct decoding would match them
// case-insensitively); of duplicate keys the last one wins.
type fields map[string]json.RawMessage

// decodeObject decodes data, which must be a JSON object.
func decodeObject(data []byte) (fields, error) {
	if k := firstByte(data); k != '{' {
		return nil, errInvalidJSON
	}
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, errInvalidJSON
	}
	return f, nil
}

// firstByte returns the first non-space byte of a JSON value, or 0.
func firstByte(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// isNull reports whether raw is absent or the literal null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// get returns the member k unless it is absent or null.
func (f fields) get(k string) (json.RawMessage, bool) {
	v, ok := f[k]
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

// present reports whether k is a member, null included.
func (f fields) present(k string) bool {
	_, ok := f[k]
	return ok
}

// str returns the string member k; null and absence give ok=false, any
// other type is an error.
func (f fields) str(k string) (string, bool, error) {
	v, ok := f.get(k)
	if !ok {
		return "", false, nil
	}
	var s string
	if firstByte(v) != '"' || json.Unmarshal(v, &s) != nil {
		return "", false, fieldError(k, "must be a string")
	}
	return s, true, nil
}

// boolean returns the boolean member k.
func (f fields) boolean(k string) (bool, bool, error) {
	v, ok := f.get(k)
	if !ok {
		return false, false, nil
	}
	switch string(v) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, false, fieldError(k, "must be a boolean")
}

// number returns the numeric member k, which must lie in [lo, hi].
func (f fields) number(k string, lo, hi float64) (float64, bool, error) {
	v, ok := f.get(k)
	if !ok {
		return 0, false, nil
	}
	c := firstByte(v)
	if c != '-' && (c < '0' || c > '9') {
		return 0, false, fieldError(k, "must be a number")
	}
	x, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, false, fieldError(k, "must be a finite number")
	}
	if x < lo || x > hi {
		return 0, false, fieldError(k, fmt.Sprintf("must be between %s and %s", fmtNum(lo), fmtNum(hi)))
	}
	return x, true, nil
}

// integer returns the integral member k, which must lie in [lo, hi].
func (f fields) integer(k string, lo, hi int64) (int64, bool, error) {
	x, ok, err := f.number(k, float64(lo), float64(hi))
	if err != nil || !ok {
		return 0, ok, err
	}
	if x != math.Trunc(x) {
		return 0, false, fieldError(k, "must be an integer")
	}
	return int64(x), true, nil
}

// object returns the object member k.
func (f fields) object(k string) (fields, bool, error) {
	v, ok := f.get(k)
	if !ok {
		return nil, false, nil
	}
	if firstByte(v) != '{' {
		return nil, false, fieldError(k, "must be an object")
	}
	o, err := decodeObject(v)
	if err != nil {
		return nil, false, fieldError(k, "must be an object")
	}
	return o, true, nil
}

// array returns the elements of the array member k.
func (f fields) array(k string) ([]json.RawMessage, bool, error) {
	v, ok := f.get(k)
	if !ok {
		return nil, false, nil
	}
	a, err := decodeArray(v)
	if err != nil {
		return nil, false, fieldError(k, "must be an array")
	}
	return a, true, nil
}

// decodeArray decodes a JSON array into its raw elements.
func decodeArray(raw json.RawMessage) ([]json.RawMessage, error) {
	if firstByte(raw) != '[' {
		return nil, errInvalidJSON
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, errInvalidJSON
	}
	return a, nil
}

// decodeString decodes a JSON string value.
func decodeString(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// lenientText flattens a message content value the lenient upstream way: a
// string is itself, an array concatenates its strings and the "text" members
// of its objects, and anything else (null included) is "".
func lenientText(raw json.RawMessage) string {
	switch firstByte(raw) {
	case '"':
		s, _ := decodeString(raw)
		return s
	case '[':
		a, err := decodeArray(raw)
		if err != nil {
			return ""
		}
		var b []byte
		for _, e := range a {
			switch firstByte(e) {
			case '"':
				s, _ := decodeString(e)
				b = append(b, s...)
			case '{':
				o, err := decodeObject(e)
				if err != nil {
					continue
				}
				if t, ok := decodeString(o["text"]); ok {
					b = append(b, t...)
				}
			}
		}
		return string(b)
	}
	return ""
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// field is one member of an ordered JSON object.
type field struct {
	k string
	v any
}

// ordered is a JSON object whose members are written in slice order.
type ordered []field

// rawJSON is JSON text written verbatim.
type rawJSON string

// byteList is written as an array of byte values (not base64).
type byteList []byte

// float32JSON is a number written with the shortest float32 precision.
type float32JSON float64

// marshal returns the JSON text of v (see appendJSON).
func marshal(v any) []byte { return appendJSON(nil, v) }

// appendJSON appends the JSON text of v. Strings are escaped the way
// upstream's json_escape does (only '"', '\\' and control bytes), except
// that invalid UTF-8 bytes become U+FFFD so that every response is valid
// JSON; HTML characters and non-ASCII text are written raw.
func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case float32JSON:
		return strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	case byteList:
		b = append(b, '[')
		for i, c := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(c), 10)
		}
		return append(b, ']')
	case rawJSON:
		if x == "" {
			return append(b, "null"...)
		}
		return append(b, x...)
	case ordered:
		b = append(b, '{')
		for i, f := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, f.k)
			b = append(b, ':')
			b = appendJSON(b, f.v)
		}
		return append(b, '}')
	case []ordered:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case []string:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, e)
		}
		return append(b, ']')
	}
	panic(fmt.Sprintf("server: appendJSON: unsupported type %T", v))
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// validJSONObject returns s when it is a JSON object and "{}" otherwise.
func validJSONObject(s string) rawJSON {
	if firstByte([]byte(s)) == '{' && json.Valid([]byte(s)) {
		return rawJSON(s)
	}
	return "{}"
}
