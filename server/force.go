package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/sample"
)

// This file implements forced tool choice ("required" or a named function
// in the OpenAI APIs, "any" or a named tool in the Anthropic API) by
// constrained decoding. The turn may reason freely first; after "</think>"
// (or at once without thinking) the text is held to this grammar, byte by
// byte:
//
//	"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"" NAME "\">\n"
//	( PARAM-TAG VALUE "</｜DSML｜parameter>" "\n" )*
//	"</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
//
// NAME is one of the forced tools; PARAM-TAG is the canonical tag of one of
// the tool's schema properties, each at most once, string="true" for
// properties of type "string" and string="false" otherwise; the invoke may
// close only once the schema's required properties are present. A
// string="true" VALUE is any text without the parameter closer; a
// string="false" VALUE is compact JSON of the property's schema type (no
// whitespace outside strings, nesting up to maxForceDepth, numbers that fit
// a float64, no parameter closer inside strings), so the arguments always
// form a JSON object. One call per block: parallel calls are not forced. Where the grammar allows one
// continuation only, its canonical tokens are forced (fed as if sampled);
// elsewhere the logits of the tokens whose bytes leave the grammar are
// masked, and EOS is masked throughout. Each step also keeps enough tokens
// (max_tokens or the context left) for the shortest completion of the
// call, which is forced when the budget runs out, so a random model too
// returns a complete call.

// maxForceDepth bounds the JSON nesting of a forced string="false" value.
const maxForceDepth = 16

// maxForceParams bounds the schema properties a forced call may use (the
// first ones by name).
const maxForceParams = 64

// forceOpen is the text every forced call starts with, up to the name.
const forceOpen = "\n\n" + dsml.ToolCallsOpen + "\n" + dsml.InvokeOpen + ` name="`

// forceClose is the text that closes a forced call's invoke and block.
const forceClose = dsml.InvokeClose + "\n" + dsml.ToolCallsClose

// toolForce is a request's forced tool choice: the tools a call may name.
type toolForce struct {
	tools []forceTool
}

// forceTool is a tool a forced call may name, with its grammar.
type forceTool struct {
	name     string // model-side name
	params   []forceParam
	required uint64 // bit i: params[i] is required
	cands    []string
	acts     []int // per cand: the param index, or -1 for forceClose
}

// forceParam is a schema property of a forced tool.
type forceParam struct {
	name string
	json bool // string="false"
	// kind is the schema type of a JSON value: 'i' integer, 'n' number,
	// 'b' boolean, 'o' object, 'a' array, 'z' null, 0 any.
	kind byte
}

// jsonKinds maps schema types to forceParam kinds.
var jsonKinds = map[string]byte{"integer": 'i', "number": 'n', "boolean": 'b', "object": 'o', "array": 'a', "null": 'z'}

// emptyJSON returns the shortest value of a kind.
func emptyJSON(kind byte) string {
	switch kind {
	case 'i', 'n':
		return "0"
	case 'b':
		return "false"
	case 'o':
		return "{}"
	case 'a':
		return "[]"
	}
	return "null"
}

// decodeToolChoice reads the forced tool choice of a request whose tools
// are decoded; it returns nil for "auto", "none" and the choices that
// upstream treats as auto.
func decodeToolChoice(r *request, raw json.RawMessage) (*toolForce, error) {
	forced, name := false, ""
	switch firstByte(raw) {
	case '"':
		s, _ := decodeString(raw)
		switch {
		case s == "required" && r.api != apiMessages:
			forced = true
		case r.api == apiResponses && s != "auto" && s != "none":
			return nil, &apiError{status: http.StatusBadRequest, message: "tool_choice=" + s + " not supported", param: "tool_choice"}
		}
	case '{':
		o, err := decodeObject(raw)
		if err != nil {
			return nil, errInvalidJSON
		}
		typ, _ := decodeString(o["type"])
		switch {
		case r.api == apiChat && typ == "function":
			fn, _ := decodeObject(o["function"])
			name, _ = decodeString(fn["name"])
			forced = true
		case r.api == apiMessages && typ == "any":
			forced = true
		case r.api == apiMessages && typ == "tool", r.api == apiResponses && typ == "function":
			name, _ = decodeString(o["name"])
			forced = true
		case r.api == apiResponses && typ != "auto" && typ != "none":
			return nil, &apiError{status: http.StatusBadRequest, message: "forced tool_choice of type " + dsml.QuoteJSON(typ) + " not supported", param: "tool_choice"}
		}
		if forced && name == "" && typ != "any" {
			return nil, fieldError("tool_choice", "must name a tool")
		}
	}
	if !forced {
		return nil, nil
	}
	f := &toolForce{}
	for _, t := range forceTools(r.tools) {
		if name == "" || t.name == name || r.toolNames[t.name].wire == name {
			f.tools = append(f.tools, t)
		}
	}
	switch {
	case len(f.tools) == 0 && name != "":
		return nil, fieldError("tool_choice", "names "+dsml.QuoteJSON(name)+", which is not an offered tool")
	case len(f.tools) == 0:
		return nil, fieldError("tool_choice", "requires tools to be offered")
	case name != "":
		f.tools = f.tools[:1]
	}
	return f, nil
}

// forceTools returns the named tools among the schemas, with their
// grammars.
func forceTools(tools []prompt.Tool) []forceTool {
	var out []forceTool
	seen := map[string]bool{}
	for _, t := range tools {
		var s struct {
			Name        string          `json:"name"`
			Parameters  json.RawMessage `json:"parameters"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal([]byte(t.Schema), &s) != nil || s.Name == "" || seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		schema := s.Parameters
		if len(schema) == 0 {
			schema = s.InputSchema
		}
		var p struct {
			Properties map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		_ = json.Unmarshal(schema, &p) // a schema without properties takes no arguments
		ft := forceTool{name: s.Name}
		for name, prop := range p.Properties {
			var typ string
			_ = json.Unmarshal(prop.Type, &typ)
			ft.params = append(ft.params, forceParam{name: name, json: typ != "string", kind: jsonKinds[typ]})
		}
		slices.SortFunc(ft.params, func(a, b forceParam) int { return strings.Compare(a.name, b.name) })
		ft.params = ft.params[:min(len(ft.params), maxForceParams)]
		for i, prm := range ft.params {
			if slices.Contains(p.Required, prm.name) {
				ft.required |= 1 << i
			}
			str := "true"
			if prm.json {
				str = "false"
			}
			ft.cands = append(ft.cands, dsml.ParameterOpen+` name="`+dsml.EscapeAttr(prm.name)+`" string="`+str+`">`)
			ft.acts = append(ft.acts, i)
		}
		ft.cands = append(ft.cands, forceClose)
		ft.acts = append(ft.acts, -1)
		sortCands(ft.cands, ft.acts)
		out = append(out, ft)
	}
	return out
}

// sortCands sorts candidate literals with their actions.
func sortCands(cands []string, acts []int) {
	sort.Sort(candSorter{cands, acts})
}

type candSorter struct {
	c []string
	a []int
}

func (s candSorter) Len() int           { return len(s.c) }
func (s candSorter) Less(i, j int) bool { return s.c[i] < s.c[j] }
func (s candSorter) Swap(i, j int) {
	s.c[i], s.c[j] = s.c[j], s.c[i]
	s.a[i], s.a[j] = s.a[j], s.a[i]
}

// Phases of a forced turn.
const (
	phThink uint8 = iota // reasoning, until "</think>"
	phOpen               // forceOpen
	phName               // choice of the tool name
	phParam              // choice of the next parameter tag or forceClose
	phRaw                // string="true" value
	phJSON               // string="false" value
	phSep                // the newline after a parameter closer
	phDone               // the block is closed
)

// JSON value states.
const (
	jValue    uint8 = iota // a value must start
	jArrFirst              // after '[': a value or ']'
	jObjFirst              // after '{': a key or '}'
	jObjKey                // after ',' in an object: a key
	jColon                 // after a key
	jAfter                 // after a value: ',' or the container's end; at top level the closer
	jStr                   // inside a string
	jLit                   // inside true, false or null
	jNum                   // inside a number
	jCloser                // inside the parameter closer
)

// Number states; numOK marks those where the number may end.
const (
	nMinus uint8 = iota
	nZero
	nInt
	nDot
	nFrac
	nE
	nESign
	nExp
)

func numOK(n uint8) bool { return n == nZero || n == nInt || n == nFrac || n == nExp }

var jsonLits = [3]string{"true", "false", "null"}

const paramClose = dsml.ParameterClose

// fstate is the position of a forced turn in its grammar. It is a value:
// the mask copies it per candidate token.
type fstate struct {
	tools   []forceTool
	ph      uint8
	closing bool // completing the call: the required properties are waived
	k       int  // progress in "</think>", forceOpen or the parameter closer
	tool    int  // the chosen tool
	used    uint64

	// Choice phases: the candidates cands[lo:hi] share the n bytes read.
	cands  []string
	acts   []int
	lo, hi int
	n      int

	// phJSON.
	stack  [maxForceDepth]byte
	depth  uint8
	js     uint8
	key    bool  // jStr: an object key
	esc    uint8 // jStr: 1 after '\', 2..5 hex digits of \u read + 2
	lit    uint8
	lk     uint8 // jLit progress
	kind   byte  // the value's forceParam kind
	num    uint8
	nd     uint8 // digits in the number's current part
	strK   uint8 // jStr: progress of a parameter closer inside the string
	closeK uint8 // jCloser progress
}

// nameCands returns the name choice literals of tools and their indices.
func nameCands(tools []forceTool) ([]string, []int) {
	var c []string
	var a []int
	for i, t := range tools {
		c = append(c, dsml.EscapeAttr(t.name)+"\">\n")
		a = append(a, i)
	}
	sortCands(c, a)
	return c, a
}

// newFState returns the start state of a forced turn.
func newFState(f *toolForce, names []string, acts []int, thinking bool) fstate {
	st := fstate{tools: f.tools, ph: phOpen, cands: names, acts: acts}
	if thinking {
		st.ph = phThink
	}
	return st
}

// allowed reports whether candidate i may still be chosen.
func (st *fstate) allowed(i int) bool {
	if st.ph != phParam {
		return true
	}
	a := st.acts[i]
	if a < 0 {
		return st.closing || st.tools[st.tool].required&^st.used == 0
	}
	return st.used&(1<<a) == 0
}

// startChoice enters a choice phase over cands.
func (st *fstate) startChoice(ph uint8, cands []string, acts []int) {
	st.ph, st.cands, st.acts, st.lo, st.hi, st.n = ph, cands, acts, 0, len(cands), 0
}

// feed advances the state by one byte and reports whether the grammar
// allows it.
func (st *fstate) feed(b byte) bool {
	switch st.ph {
	case phThink:
		st.k = progress(st.k, b, prompt.ThinkClose)
		if st.k == len(prompt.ThinkClose) {
			st.ph, st.k = phOpen, 0
		}
		return true
	case phOpen:
		if forceOpen[st.k] != b {
			return false
		}
		if st.k++; st.k == len(forceOpen) {
			st.startChoice(phName, st.cands, st.acts)
		}
		return true
	case phName, phParam:
		lo, hi := -1, -1
		for i := st.lo; i < st.hi; i++ {
			if c := st.cands[i]; len(c) > st.n && c[st.n] == b {
				if lo < 0 {
					lo = i
				}
				hi = i + 1
			}
		}
		if lo < 0 {
			return false
		}
		ok := false
		for i := lo; i < hi && !ok; i++ {
			ok = st.allowed(i)
		}
		if !ok {
			return false
		}
		st.lo, st.hi, st.n = lo, hi, st.n+1
		if hi-lo == 1 && len(st.cands[lo]) == st.n {
			st.choose(st.acts[lo])
		}
		return true
	case phRaw:
		st.k = progress(st.k, b, paramClose)
		if st.k == len(paramClose) {
			st.ph = phSep
		}
		return true
	case phJSON:
		return st.feedJSON(b)
	case phSep:
		if b != '\n' {
			return false
		}
		t := &st.tools[st.tool]
		st.startChoice(phParam, t.cands, t.acts)
		return true
	}
	return false
}

// choose completes a choice with action a.
func (st *fstate) choose(a int) {
	if st.ph == phName {
		st.tool = a
		t := &st.tools[a]
		st.startChoice(phParam, t.cands, t.acts)
		return
	}
	if a < 0 {
		st.ph = phDone
		return
	}
	st.used |= 1 << a
	st.k = 0
	if !st.tools[st.tool].params[a].json {
		st.ph = phRaw
		return
	}
	st.ph, st.depth, st.js, st.kind = phJSON, 0, jValue, st.tools[st.tool].params[a].kind
}

// progress returns the progress in matching lit after byte b, given k bytes
// matched; lit's first byte occurs nowhere else in it.
func progress(k int, b byte, lit string) int {
	switch {
	case b == lit[k]:
		return k + 1
	case b == lit[0]:
		return 1
	}
	return 0
}

// feedJSON advances a string="false" value by one byte.
func (st *fstate) feedJSON(b byte) bool {
	switch st.js {
	case jValue, jArrFirst:
		if st.depth == 0 && !kindStarts(st.kind, b) {
			return false
		}
		if st.js == jArrFirst && b == ']' {
			st.depth--
			st.valueDone()
			return true
		}
		switch {
		case b == '"':
			st.js, st.key, st.esc, st.strK = jStr, false, 0, 0
		case b == '{' || b == '[':
			if int(st.depth) == maxForceDepth {
				return false
			}
			st.stack[st.depth] = b
			st.depth++
			st.js = jObjFirst
			if b == '[' {
				st.js = jArrFirst
			}
		case b == 't' || b == 'f' || b == 'n':
			st.js, st.lk, st.lit = jLit, 1, 0
			if b == 'f' {
				st.lit = 1
			} else if b == 'n' {
				st.lit = 2
			}
		case b == '-':
			st.js, st.num, st.nd = jNum, nMinus, 0
		case b == '0':
			st.js, st.num, st.nd = jNum, nZero, 1
		case b >= '1' && b <= '9':
			st.js, st.num, st.nd = jNum, nInt, 1
		default:
			return false
		}
	case jObjFirst, jObjKey:
		switch {
		case b == '"':
			st.js, st.key, st.esc, st.strK = jStr, true, 0, 0
		case b == '}' && st.js == jObjFirst:
			st.depth--
			st.valueDone()
		default:
			return false
		}
	case jColon:
		if b != ':' {
			return false
		}
		st.js = jValue
	case jAfter:
		switch {
		case st.depth == 0:
			if b != paramClose[0] {
				return false
			}
			st.js, st.closeK = jCloser, 1
		case b == ',':
			st.js = jValue
			if st.stack[st.depth-1] == '{' {
				st.js = jObjKey
			}
		case b == '}' && st.stack[st.depth-1] == '{', b == ']' && st.stack[st.depth-1] == '[':
			st.depth--
			st.valueDone()
		default:
			return false
		}
	case jStr:
		if k := progress(int(st.strK), b, paramClose); k == len(paramClose) {
			return false
		} else {
			st.strK = uint8(k)
		}
		switch {
		case st.esc == 1:
			switch b {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				st.esc = 0
			case 'u':
				st.esc = 2
			default:
				return false
			}
		case st.esc >= 2:
			if !isHex(b) {
				return false
			}
			if st.esc++; st.esc == 6 {
				st.esc = 0
			}
		case b < 0x20:
			return false
		case b == '\\':
			st.esc = 1
		case b == '"':
			if st.key {
				st.js = jColon
			} else {
				st.valueDone()
			}
		}
	case jLit:
		lit := jsonLits[st.lit]
		if lit[st.lk] != b {
			return false
		}
		if st.lk++; int(st.lk) == len(lit) {
			st.valueDone()
		}
	case jNum:
		next := uint8(255)
		digit := b >= '0' && b <= '9'
		switch st.num {
		case nMinus:
			if b == '0' {
				next = nZero
			} else if digit {
				next = nInt
			}
		case nZero, nInt:
			switch {
			case st.kind == 'i' && st.depth == 0 && !digit:
			case digit && st.num == nInt:
				next = nInt
			case b == '.':
				next = nDot
			case b == 'e' || b == 'E':
				next = nE
			}
		case nDot, nFrac:
			if digit {
				next = nFrac
			} else if st.num == nFrac && (b == 'e' || b == 'E') {
				next = nE
			}
		case nE:
			if b == '+' || b == '-' {
				next = nESign
			} else if digit {
				next = nExp
			}
		case nESign, nExp:
			if digit {
				next = nExp
			}
		}
		if next != 255 {
			// Bound the digits so that the number fits a float64.
			if next != st.num {
				st.nd = 0
			}
			if digit {
				st.nd++
			}
			if st.nd > 15 || next == nExp && st.nd > 2 {
				return false
			}
			st.num = next
			return true
		}
		if !numOK(st.num) {
			return false
		}
		st.valueDone()
		return st.feedJSON(b)
	case jCloser:
		if paramClose[st.closeK] != b {
			return false
		}
		if st.closeK++; int(st.closeK) == len(paramClose) {
			st.ph = phSep
		}
	}
	return true
}

// kindStarts reports whether a value of kind may start with b.
func kindStarts(kind, b byte) bool {
	switch kind {
	case 'i', 'n':
		return b == '-' || b >= '0' && b <= '9'
	case 'b':
		return b == 't' || b == 'f'
	case 'o':
		return b == '{'
	case 'a':
		return b == '['
	case 'z':
		return b == 'n'
	}
	return true
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

// valueDone ends a JSON value.
func (st *fstate) valueDone() { st.js = jAfter }

// literal returns the only continuation the grammar allows, if it allows
// one only, or "".
func (st *fstate) literal() string {
	switch st.ph {
	case phOpen:
		return forceOpen[st.k:]
	case phName, phParam:
		only := -1
		for i := st.lo; i < st.hi; i++ {
			if st.allowed(i) {
				if only >= 0 {
					return ""
				}
				only = i
			}
		}
		return st.cands[only][st.n:]
	case phJSON:
		if st.js == jCloser {
			return paramClose[st.closeK:]
		}
	case phSep:
		return "\n"
	}
	return ""
}

// appendClosing appends the shortest text that completes the call from
// st: the rest of the reasoning and opening, the shortest tool name,
// the rest of a started parameter (a started JSON value completed, an
// unstarted one null), then forceClose.
func appendClosing(dst []byte, st fstate) []byte {
	st.closing = true
	for st.ph != phDone {
		var s string
		switch st.ph {
		case phThink:
			s = prompt.ThinkClose[st.k:]
		case phName, phParam:
			// forceClose when it may come, else the shortest candidate.
			best := -1
			for i := st.lo; i < st.hi; i++ {
				if !st.allowed(i) {
					continue
				}
				if st.acts[i] < 0 && st.ph == phParam {
					best = i
					break
				}
				if best < 0 || len(st.cands[i]) < len(st.cands[best]) {
					best = i
				}
			}
			empty := ""
			if a := st.acts[best]; st.ph == phParam && a >= 0 && st.tools[st.tool].params[a].json {
				empty = emptyJSON(st.tools[st.tool].params[a].kind)
			}
			s = st.cands[best][st.n:]
			dst = append(dst, s...)
			for i := 0; i < len(s); i++ {
				st.feed(s[i])
			}
			s = empty
		case phRaw:
			s = paramClose[st.k:]
		case phJSON:
			n := len(dst)
			dst = st.appendJSONClosing(dst)
			for _, b := range dst[n:] {
				st.feed(b)
			}
			continue
		default:
			s = st.literal()
		}
		dst = append(dst, s...)
		for i := 0; i < len(s); i++ {
			st.feed(s[i])
		}
	}
	return dst
}

// appendJSONClosing appends the completion of a JSON value and its closer.
func (st *fstate) appendJSONClosing(dst []byte) []byte {
	switch st.js {
	case jCloser:
		return append(dst, paramClose[st.closeK:]...)
	case jValue:
		if st.depth == 0 {
			dst = append(dst, emptyJSON(st.kind)...)
		} else {
			dst = append(dst, "null"...)
		}
	case jObjKey:
		dst = append(dst, `"":null`...)
	case jColon:
		dst = append(dst, ":null"...)
	case jStr:
		switch {
		case st.esc == 1:
			dst = append(dst, 'n')
		case st.esc >= 2:
			for i := st.esc; i < 6; i++ {
				dst = append(dst, '0')
			}
		}
		dst = append(dst, '"')
		if st.key {
			dst = append(dst, ":null"...)
		}
	case jLit:
		dst = append(dst, jsonLits[st.lit][st.lk:]...)
	case jNum:
		if !numOK(st.num) {
			dst = append(dst, '0')
		}
	}
	for i := int(st.depth) - 1; i >= 0; i-- {
		if st.stack[i] == '{' {
			dst = append(dst, '}')
		} else {
			dst = append(dst, ']')
		}
	}
	return append(dst, paramClose...)
}

// forcer drives the decoding of a forced turn.
type forcer struct {
	s      *Server
	st     fstate
	queue  []int // forced tokens still to emit
	masked []float32
	buf    []byte
	seg    map[string]int // exact token counts of fixed segments
	failed bool
}

// newForcer returns the forcer of g's request, or nil when it has none.
func newForcer(g *gen) *forcer {
	f := g.r.force
	if f == nil {
		return nil
	}
	names, acts := nameCands(f.tools)
	fc := &forcer{s: g.s, st: newFState(f, names, acts, g.thinking), seg: map[string]int{}}
	// The segments of closings between special tokens whose exact counts
	// tighten the budget bound.
	segs := []string{"\n\n<", "tool_calls>\n<", "</", "null</", "0</", "false</", "{}</", "[]</", "parameter>\n</", "invoke>\n</", "tool_calls>"}
	for _, t := range f.tools {
		segs = append(segs, `invoke name="`+dsml.EscapeAttr(t.name)+"\">\n<", `invoke name="`+dsml.EscapeAttr(t.name)+"\">\n</")
		for i, c := range t.cands {
			if c != forceClose {
				rest := c[len(dsml.ParameterOpen)-len("parameter"):]
				segs = append(segs, rest+"</")
				if a := t.acts[i]; a >= 0 {
					segs = append(segs, rest+emptyJSON(t.params[a].kind)+"</")
				}
			}
		}
	}
	for _, s := range segs {
		fc.seg[s] = len(g.s.tok.EncodeSpecial(s))
	}
	return fc
}

// bound returns an upper bound of the tokens of text: special tokens
// count one, segments between them their exact count when known, else
// their length (a token holds at least one byte).
func (f *forcer) bound(text []byte) int {
	n := 0
	for len(text) > 0 {
		i, l := bytes.Index(text, []byte(dsml.Marker)), len(dsml.Marker)
		if j := bytes.Index(text, []byte(prompt.ThinkClose)); j >= 0 && (i < 0 || j < i) {
			i, l = j, len(prompt.ThinkClose)
		}
		seg := text
		if i >= 0 {
			seg = text[:i]
		}
		if len(seg) > 0 {
			if c, ok := f.seg[string(seg)]; ok {
				n += c
			} else {
				n += len(seg)
			}
		}
		if i < 0 {
			break
		}
		n++
		text = text[i+l:]
	}
	return n
}

// closingBound returns the bound of the closing from st.
func (f *forcer) closingBound(st fstate) int {
	f.buf = appendClosing(f.buf[:0], st)
	return f.bound(f.buf)
}

// minTokens returns the fewest tokens a forced call can take from the
// start.
func (f *forcer) minTokens() int { return f.closingBound(f.st) }

// next returns the next token of a forced turn with remaining tokens of
// budget, sampling from logits with p where the grammar leaves a choice.
func (f *forcer) next(sampler *sample.Sampler, logits []float32, p sample.Params, remaining int) int {
	if len(f.queue) == 0 {
		f.plan(logits, sampler, p, remaining)
	}
	if len(f.queue) == 0 { // the call is complete: nothing is forced
		f.failed = true
		return sampler.SampleWith(logits, p)
	}
	tok := f.queue[0]
	f.queue = f.queue[1:]
	return tok
}

// plan queues the next token(s): a forced literal, the closing when the
// budget requires it, or a sampled token the grammar and budget allow.
func (f *forcer) plan(logits []float32, sampler *sample.Sampler, p sample.Params, remaining int) {
	tok := f.s.tok
	closing := f.closingBound(f.st)
	forceClosing := func() {
		f.queue = tok.EncodeSpecial(string(appendClosing(nil, f.st)))
		f.st.closing = true
	}
	if remaining <= closing {
		forceClosing()
		return
	}
	if lit := f.st.literal(); lit != "" {
		after := f.st
		for i := 0; i < len(lit); i++ {
			after.feed(lit[i])
		}
		q := tok.EncodeSpecial(lit)
		if len(q)+f.closingBound(after) > remaining {
			forceClosing()
			return
		}
		f.queue = q
		return
	}
	f.mask(logits)
	for try := 0; try < 32; try++ {
		id := sampler.SampleWith(f.masked, p)
		if id < 0 || id >= len(f.masked) || math.IsInf(float64(f.masked[id]), -1) {
			break
		}
		after := f.st
		if f.feedToken(&after, id) && f.closingBound(after) <= remaining-1 {
			f.queue = append(f.queue[:0], id)
			return
		}
		f.masked[id] = float32(math.Inf(-1))
	}
	forceClosing()
}

// feedToken feeds the bytes of token id to st; it reports false for a
// token the grammar does not allow.
func (f *forcer) feedToken(st *fstate, id int) bool {
	if id == f.s.eos {
		return false
	}
	b := f.s.tok.TokenText(id)
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !st.feed(c) {
			return false
		}
	}
	return true
}

// mask copies logits to f.masked with the tokens the grammar rejects at
// -Inf.
func (f *forcer) mask(logits []float32) {
	f.masked = append(f.masked[:0], logits...)
	inf := float32(math.Inf(-1))
	if f.st.ph == phThink {
		if f.s.eos >= 0 && f.s.eos < len(f.masked) {
			f.masked[f.s.eos] = inf
		}
		return
	}
	var first [256]bool
	for b := range first {
		st := f.st
		first[b] = st.feed(byte(b))
	}
	// Outside a partial closer, a string value takes any token without a
	// '<' unchanged.
	plain := f.st.ph == phRaw && f.st.k == 0
	for id := range f.masked {
		b := f.s.tok.TokenText(id)
		if len(b) == 0 || !first[b[0]] || id == f.s.eos {
			f.masked[id] = inf
			continue
		}
		if len(b) == 1 || plain && bytes.IndexByte(b, '<') < 0 {
			continue
		}
		st := f.st
		for _, c := range b {
			if !st.feed(c) {
				f.masked[id] = inf
				break
			}
		}
	}
}

// advance feeds an emitted token's text to the grammar.
func (f *forcer) advance(text []byte) {
	if f.failed {
		return
	}
	for _, c := range text {
		if !f.st.feed(c) {
			f.failed = true
			f.queue = nil
			f.s.log.Printf("ds4-server: forced tool call left its grammar at %q", text)
			return
		}
	}
}

// forceCheck prepares g's forced tool choice for a budget of limit tokens;
// it returns a 400 error when limit cannot hold the shortest call.
func (g *gen) forceCheck(limit int) *apiError {
	g.force = newForcer(g)
	if g.force == nil {
		return nil
	}
	g.maxStop = 0 // stop sequences do not apply to a forced turn
	if need := g.force.minTokens(); limit < need {
		return &apiError{status: http.StatusBadRequest, param: "max_tokens",
			message: "max_tokens (or the context left) allows " + strconv.Itoa(limit) + " tokens; a forced tool call needs at least " + strconv.Itoa(need)}
	}
	return nil
}
