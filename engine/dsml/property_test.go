package dsml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"
)

var pieces = []string{
	"a", "b", "Z", "0", "42", " ", "  ", "\n", "\t", "\r\n", "\"", "'", "\\", "/", "{", "}", "[", "]", ",", ":",
	"<", ">", "&", "&&", "a && b > c", "é", "中文", "😀", "\u2028", "\x7f",
	ParameterClose, InvokeClose, ToolCallsClose, ParameterOpen, InvokeOpen, ToolCallsOpen,
	"</parameter>", "<DSML｜invoke", "&lt", "&amp", `name="x"`, `string="true"`,
}

var entities = []string{"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}

// randString returns text that survives a DSML round trip: any characters
// except literal entities (string bodies are not entity-escaped by the
// renderer but are decoded by the parser) and, when noThink is set,
// "</think>" (which would move the tool search of a thinking turn).
func randString(rng *rand.Rand, noThink bool) string {
	var b strings.Builder
	for n := rng.Intn(6); n > 0; n-- {
		b.WriteString(pieces[rng.Intn(len(pieces))])
		if rng.Intn(8) == 0 && !noThink {
			b.WriteString(thinkClose)
		}
	}
	s := b.String()
	for _, e := range entities {
		if strings.Contains(s, e) {
			s = strings.ReplaceAll(s, "&", "+")
		}
	}
	return s
}

func ws(rng *rand.Rand) string {
	return [...]string{"", "", "", " ", "\n  ", "\t"}[rng.Intn(6)]
}

// randJSON returns a JSON value with random formatting.
func randJSON(rng *rand.Rand, depth int, noThink bool) string {
	k := rng.Intn(7)
	if depth > 2 && k >= 5 {
		k = 0
	}
	switch k {
	case 0, 1:
		if rng.Intn(2) == 0 {
			q, _ := json.Marshal(randString(rng, noThink))
			return string(q)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(randString(rng, noThink))
		return strings.TrimSuffix(b.String(), "\n")
	case 2:
		return [...]string{"0", "-1", "3.25", "1e-7", "123456789012345678901234567890", "-0.5E+3"}[rng.Intn(6)]
	case 3:
		return [...]string{"true", "false", "null"}[rng.Intn(3)]
	case 4:
		return randObject(rng, depth+1, noThink)
	default:
		var b strings.Builder
		b.WriteString("[" + ws(rng))
		for i := rng.Intn(4); i > 0; i-- {
			b.WriteString(randJSON(rng, depth+1, noThink) + ws(rng))
			if i > 1 {
				b.WriteString("," + ws(rng))
			}
		}
		b.WriteString("]")
		return b.String()
	}
}

func randObject(rng *rand.Rand, depth int, noThink bool) string {
	var b strings.Builder
	b.WriteString("{" + ws(rng))
	for i := rng.Intn(5); i > 0; i-- {
		key, _ := json.Marshal(randString(rng, noThink))
		b.WriteString(string(key) + ws(rng) + ":" + ws(rng) + randJSON(rng, depth, noThink) + ws(rng))
		if i > 1 {
			b.WriteString("," + ws(rng))
		}
	}
	b.WriteString("}")
	return b.String()
}

func randCalls(rng *rand.Rand, noThink bool) []Call {
	calls := make([]Call, 1+rng.Intn(3))
	for i := range calls {
		calls[i] = Call{Name: randString(rng, noThink), Arguments: randObject(rng, 0, noThink)}
	}
	return calls
}

// randProse returns visible text or reasoning that contains no block
// opener and no think tag.
func randProse(rng *rand.Rand) string {
	prose := []string{"Hello", " ", "\n", "\n\n", "a < b", "<b>", "x > y", "&", "&amp;", "é", "😀", "\t", "tool_calls", "｜DSML｜", "<DSML", "<tool", "call"}
	var b strings.Builder
	for n := rng.Intn(6); n > 0; n-- {
		b.WriteString(prose[rng.Intn(len(prose))])
	}
	s := b.String()
	for _, bad := range []string{ToolCallsOpen, shortSyntax.open, xmlSyntax.open, thinkOpen, thinkClose} {
		if strings.Contains(s, bad) {
			return "plain"
		}
	}
	return s
}

// normJSON re-encodes a JSON text token by token, keeping member order and
// duplicates, so that equivalent spellings compare equal.
func normJSON(t *testing.T, s string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var b bytes.Buffer
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			t.Fatalf("invalid JSON %q: %v", s, err)
		}
		enc, _ := json.Marshal(tok)
		if d, ok := tok.(json.Delim); ok {
			enc = []byte(d.String())
		}
		fmt.Fprintf(&b, "%s ", enc)
	}
}

// randomChunks splits s at random byte offsets (also inside characters).
func randomChunks(rng *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + rng.Intn(min(len(s), 1+rng.Intn(12)))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// turn is a generated assistant turn built from known parts.
type turn struct {
	thinking  bool
	reasoning string
	content   string
	calls     []Call
	text      string
}

func randTurn(rng *rand.Rand) turn {
	tr := turn{thinking: rng.Intn(2) == 0, content: randProse(rng)}
	tr.calls = randCalls(rng, tr.thinking)
	if tr.thinking {
		tr.reasoning = randProse(rng)
		tr.text = tr.reasoning + thinkClose
	}
	tr.text += tr.content + Render(tr.calls)
	return tr
}

func TestRenderParseRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		tr := randTurn(rng)
		r, err := Parse(tr.text, tr.thinking)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tr.text, err)
		}
		if r.Reasoning != tr.reasoning || r.Content != strings.TrimRight(tr.content, " \t\n\v\f\r") {
			t.Fatalf("Parse(%q): reasoning %q content %q", tr.text, r.Reasoning, r.Content)
		}
		if r.RawDSML != Render(tr.calls) {
			t.Fatalf("RawDSML %q, want %q", r.RawDSML, Render(tr.calls))
		}
		if len(r.Calls) != len(tr.calls) {
			t.Fatalf("Parse(%q): %d calls, want %d", tr.text, len(r.Calls), len(tr.calls))
		}
		for j, c := range r.Calls {
			want := tr.calls[j]
			if c.Name != want.Name {
				t.Fatalf("call %d name %q, want %q", j, c.Name, want.Name)
			}
			if got, w := normJSON(t, c.CompactArguments()), normJSON(t, want.CompactArguments()); got != w {
				t.Fatalf("call %d of %q:\narguments %s\n     want %s", j, tr.text, got, w)
			}
		}
		if got := Render(r.Calls); got != r.RawDSML {
			t.Fatalf("re-rendering the parsed calls changed the block:\n got %q\nwant %q", got, r.RawDSML)
		}
	}
}

func TestStreamMatchesParse(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 3000; i++ {
		tr := randTurn(rng)
		want, err := Parse(tr.text, tr.thinking)
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream(StreamOptions{Thinking: tr.thinking, Tools: true})
		var evs []Event
		for _, c := range randomChunks(rng, tr.text) {
			evs = append(evs, s.Write(c)...)
			if s.BlockClosed() != (len(s.Text()) == len(tr.text)) {
				t.Fatalf("BlockClosed %v after %q", s.BlockClosed(), s.Text())
			}
		}
		evs = append(evs, s.Close()...)
		var reasoning, content string
		var calls []Call
		for _, e := range evs {
			switch e.Kind {
			case EventReasoning:
				reasoning += e.Text
			case EventContent:
				content += e.Text
			case EventCallStart:
				if e.Index != len(calls) {
					t.Fatalf("call index %d, want %d", e.Index, len(calls))
				}
				calls = append(calls, Call{Name: e.Name})
			case EventCallArgs:
				calls[e.Index].Arguments += e.Text
			case EventError:
				t.Fatalf("%q: %v", tr.text, e.Err)
			}
		}
		if reasoning != want.Reasoning || content != want.Content {
			t.Fatalf("%q: streamed reasoning %q content %q, parsed %q %q", tr.text, reasoning, content, want.Reasoning, want.Content)
		}
		if len(calls) != len(want.Calls) {
			t.Fatalf("%q: streamed %d calls, parsed %d", tr.text, len(calls), len(want.Calls))
		}
		for j, c := range calls {
			if c.Name != want.Calls[j].Name || c.Arguments != want.Calls[j].CompactArguments() {
				t.Fatalf("%q: streamed call %q %s, parsed %q %s", tr.text, c.Name, c.Arguments, want.Calls[j].Name, want.Calls[j].CompactArguments())
			}
		}
		if s.DecodeState() != DecodeOutside || !s.BlockClosed() {
			t.Fatalf("%q: end state %v closed %v", tr.text, s.DecodeState(), s.BlockClosed())
		}
	}
}

// checkChunking fails when feeding text in the given chunks yields other
// events or end state than feeding it whole.
func checkChunking(t *testing.T, text string, chunks []string) {
	t.Helper()
	for _, opt := range []StreamOptions{{}, {Tools: true}, {Thinking: true}, {Thinking: true, Tools: true}} {
		whole, ws := feed(opt, text)
		parts, ps := feed(opt, chunks...)
		if w, p := describe(whole), describe(parts); w != p {
			t.Fatalf("%+v %q in chunks %q:\n%s\nwhole:\n%s", opt, text, chunks, p, w)
		}
		if ws.DecodeState() != ps.DecodeState() || ws.BlockOpened() != ps.BlockOpened() || ws.BlockClosed() != ps.BlockClosed() || ws.LiveCalls() != ps.LiveCalls() {
			t.Fatalf("%+v %q in chunks %q: end state differs", opt, text, chunks)
		}
		r1, e1 := ps.Result()
		r2, e2 := Parse(text, opt.Thinking)
		if fmt.Sprint(r1, e1) != fmt.Sprint(r2, e2) {
			t.Fatalf("Result differs from Parse")
		}
	}
}

var streamVocabulary = []string{
	"\n\n", "\n", " ", "x", "hello", "é", "😀", "\xe2\x96", "</think>", "<think>", "<", "</", "&", "&amp;", "&am", `"`, `\`,
	ToolCallsOpen, ToolCallsClose, InvokeOpen, InvokeClose, ParameterOpen, ParameterClose,
	"<DSML｜tool_calls>", "</DSML｜invoke>", "<tool_calls>", "</tool_calls>", "<invoke", "</invoke>", "<parameter", "</parameter>",
	` name="f">`, ` name="k" string="true">`, ` name="k" string="false">`, ` name="n">`, `>`, `{"a": "b\"c"}`, `[1, 2`,
}

func TestStreamChunkingInvariance(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 2000; i++ {
		var text string
		if i%2 == 0 {
			text = randTurn(rng).text
		} else {
			var b strings.Builder
			for n := rng.Intn(25); n > 0; n-- {
				b.WriteString(streamVocabulary[rng.Intn(len(streamVocabulary))])
			}
			text = b.String()
		}
		checkChunking(t, text, randomChunks(rng, text))
	}
}
