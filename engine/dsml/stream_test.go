package dsml

import (
	"fmt"
	"strings"
	"testing"
)

// feed writes chunks to a new stream and returns all events, Close included.
func feed(opt StreamOptions, chunks ...string) ([]Event, *Stream) {
	s := NewStream(opt)
	var evs []Event
	for _, c := range chunks {
		evs = append(evs, s.Write(c)...)
	}
	return append(evs, s.Close()...), s
}

// merged joins consecutive text events of the same kind and call.
func merged(evs []Event) []Event {
	var out []Event
	var text strings.Builder
	flush := func() {
		if n := len(out); n > 0 && text.Len() > 0 {
			out[n-1].Text = text.String()
		}
		text.Reset()
	}
	for _, e := range evs {
		joinable := e.Kind == EventReasoning || e.Kind == EventContent || e.Kind == EventCallArgs
		if n := len(out); n > 0 && joinable && out[n-1].Kind == e.Kind && out[n-1].Index == e.Index {
			text.WriteString(e.Text)
			continue
		}
		flush()
		out = append(out, e)
		text.WriteString(e.Text)
	}
	flush()
	return out
}

// describe renders events as one comparable string.
func describe(evs []Event) string {
	var b strings.Builder
	for _, e := range merged(evs) {
		switch e.Kind {
		case EventReasoning, EventContent, EventCallArgs:
			fmt.Fprintf(&b, "%s[%d] %q\n", e.Kind, e.Index, e.Text)
		case EventCallStart:
			fmt.Fprintf(&b, "%s[%d] %q\n", e.Kind, e.Index, e.Name)
		case EventCallEnd:
			fmt.Fprintf(&b, "%s[%d]\n", e.Kind, e.Index)
		case EventError:
			fmt.Fprintf(&b, "%s[%d] %v\n", e.Kind, e.Index, e.Err)
		}
	}
	return b.String()
}

func texts(evs []Event, kind EventKind) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestStreamIncrementalText(t *testing.T) {
	s := NewStream(StreamOptions{Thinking: true, Tools: true})
	var evs []Event
	evs = append(evs, s.Write("<think>need a tool</think>Hello.\n\n")...)
	if got := describe(evs); got != "reasoning[0] \"need a tool\"\ncontent[0] \"Hello.\"\n" {
		t.Fatalf("after first write:\n%s", got)
	}
	evs = append(evs, s.Write(ToolCallsOpen+"\n")...)
	evs = append(evs, s.Close()...)
	want := "reasoning[0] \"need a tool\"\ncontent[0] \"Hello.\"\nerror[0] dsml: unterminated tool call block at byte 57\n"
	if got := describe(evs); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	if !s.BlockOpened() || s.BlockClosed() {
		t.Errorf("opened=%v closed=%v, want true false", s.BlockOpened(), s.BlockClosed())
	}
}

func TestStreamReasoningWithoutTools(t *testing.T) {
	evs, _ := feed(StreamOptions{Thinking: true}, "We need to generate a title", "</think>Free disk space check")
	want := "reasoning[0] \"We need to generate a title\"\ncontent[0] \"Free disk space check\"\n"
	if got := describe(evs); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}

func TestStreamHolds(t *testing.T) {
	tests := []struct {
		name   string
		opt    StreamOptions
		chunks []string
		// want lists the text of the events of each Write, then of Close.
		want [][]string
	}{
		{"partial think close", StreamOptions{Thinking: true}, []string{"abc</th", "ink>x"},
			[][]string{{"abc"}, {"x"}, nil}},
		{"not a think close", StreamOptions{Thinking: true}, []string{"a<", "b"},
			[][]string{{"a"}, {"<b"}, nil}},
		{"leading think tag", StreamOptions{Thinking: true}, []string{"<thi", "nk>r"},
			[][]string{nil, {"r"}, nil}},
		{"utf-8 held", StreamOptions{}, []string{"caf\xc3", "\xa9!"},
			[][]string{{"caf"}, {"é!"}, nil}},
		{"utf-8 flushed at close", StreamOptions{}, []string{"caf\xc3"},
			[][]string{{"caf"}, {"\xc3"}}},
		{"trailing whitespace held with tools", StreamOptions{Tools: true}, []string{"a \n", "b", " "},
			[][]string{{"a"}, {" \nb"}, nil, {" "}}},
		{"whitespace kept without tools", StreamOptions{}, []string{"a \n"},
			[][]string{{"a \n"}, nil}},
		{"partial opener held", StreamOptions{Tools: true}, []string{"x <｜DS", "ML｜to", "p"},
			[][]string{{"x"}, nil, {" <｜DSML｜top"}, nil}},
		{"non-opener angle bracket not held", StreamOptions{Tools: true}, []string{"a <b"},
			[][]string{{"a <b"}, nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(tc.opt)
			for i := 0; i <= len(tc.chunks); i++ {
				var evs []Event
				if i < len(tc.chunks) {
					evs = s.Write(tc.chunks[i])
				} else {
					evs = s.Close()
				}
				var got []string
				for _, e := range evs {
					got = append(got, e.Text)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want[i]) {
					t.Errorf("step %d: texts %q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
}

func TestStreamPartialArguments(t *testing.T) {
	s := NewStream(StreamOptions{Tools: true})
	var evs []Event
	evs = append(evs, s.Write("Before.\n\n"+ToolCallsOpen+"\n"+InvokeOpen+` name="bash">`+"\n"+ParameterOpen+` name="command" string="true">echo partial`)...)
	evs = append(evs, s.Write(" done"+ParameterClose+"\n"+InvokeClose+"\n"+ToolCallsClose)...)
	if !s.BlockClosed() {
		t.Error("block not closed")
	}
	evs = append(evs, s.Close()...)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, fmt.Sprintf("%s %q", e.Kind, e.Text+e.Name))
	}
	want := []string{
		`content "Before."`, `call-start "bash"`, `call-args "{"`, `call-args "\"command\":\""`,
		`call-args "echo partial"`, `call-args " done"`, `call-args "\""`, `call-args "}"`, `call-end ""`,
	}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("events:\n%q\nwant\n%q", kinds, want)
	}
	if s.LiveCalls() != 1 {
		t.Errorf("LiveCalls = %d", s.LiveCalls())
	}
}

func TestStreamArgumentFragments(t *testing.T) {
	head := ToolCallsOpen + "\n" + InvokeOpen + ` name="bash">` + "\n"
	tests := []struct {
		name   string
		chunks []string
		want   []string // argument fragments
	}{
		{"waits for incomplete tags", []string{ToolCallsOpen + "\n" + InvokeOpen, ` name="bash">` + "\n" + ParameterOpen, ` name="a" string="false">1`},
			[]string{"{", `"a":`, "1"}},
		{"raw json forwarded", []string{head + ParameterOpen + ` name="edits" string="false">[1, 2,3`},
			[]string{"{", `"edits":`, "[1, 2,3"}},
		{"entities held", []string{head + ParameterOpen + ` name="command" string="true">echo &amp`, "; done" + ParameterClose},
			[]string{"{", `"command":"`, "echo ", "& done", `"`}},
		{"utf-8 held", []string{head + ParameterOpen + ` name="c" string="true">flag ` + "\xf0\x9f", "\x9a\xa9 done" + ParameterClose},
			[]string{"{", `"c":"`, "flag ", "🚩 done", `"`}},
		{"partial closer held", []string{head + ParameterOpen + ` name="c" string="true">a</｜DS`, "ML｜parameter>"},
			[]string{"{", `"c":"`, "a", `"`}},
		{"string escaped", []string{head + ParameterOpen + ` name="c" string="true">"q"` + "\n\t\\" + ParameterClose},
			[]string{"{", `"c":"`, `\"q\"\n\t\\`, `"`}},
		{"two params", []string{head + ParameterOpen + ` name="command" string="true">ls -la` + ParameterClose + "\n" + ParameterOpen + ` name="timeout" string="false">10` + ParameterClose + "\n" + InvokeClose},
			[]string{"{", `"command":"`, "ls -la", `"`, `,"timeout":`, "10", "}"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStream(StreamOptions{Tools: true})
			var evs []Event
			for _, c := range tc.chunks {
				evs = append(evs, s.Write(c)...)
			}
			if got := texts(evs, EventCallArgs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("fragments %q, want %q", got, tc.want)
			}
			if len(texts(evs, EventContent)) != 0 {
				t.Errorf("content leaked: %q", texts(evs, EventContent))
			}
		})
	}
}

func TestStreamMultipleCalls(t *testing.T) {
	text := "\n\n" + ToolCallsOpen + "\n" +
		InvokeOpen + ` name="a">` + "\n" + ParameterOpen + ` name="x" string="true">1` + ParameterClose + "\n" + InvokeClose + "\n" +
		InvokeOpen + ` name="b">` + "\n" + ParameterOpen + ` name="y" string="false">{"k": [1]}` + ParameterClose + "\n" + InvokeClose + "\n" +
		ToolCallsClose
	evs, s := feed(StreamOptions{Tools: true}, text)
	want := "call-start[0] \"a\"\ncall-args[0] \"{\\\"x\\\":\\\"1\\\"}\"\ncall-end[0]\n" +
		"call-start[1] \"b\"\ncall-args[1] \"{\\\"y\\\":{\\\"k\\\": [1]}}\"\ncall-end[1]\n"
	if got := describe(evs); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	r, err := s.Result()
	if err != nil || len(r.Calls) != 2 || r.Calls[1].CompactArguments() != `{"y":{"k":[1]}}` {
		t.Errorf("Result = %+v, %v", r, err)
	}
}

func TestStreamMalformed(t *testing.T) {
	tests := []struct {
		name, text string
		want       string
	}{
		{"parameter without string attribute", ToolCallsOpen + InvokeOpen + ` name="f">` + ParameterOpen + ` name="p">x` + ParameterClose + InvokeClose + ToolCallsClose,
			"call-start[0] \"f\"\ncall-args[0] \"{\"\nerror[0] dsml: parameter tag without name or string attribute at byte 49\n"},
		{"stray text", ToolCallsOpen + "oops", "error[0] dsml: expected <｜DSML｜invoke or </｜DSML｜tool_calls> at byte 22\n"},
		{"text after the block is suppressed", "a" + ToolCallsOpen + ToolCallsClose + "b", "content[0] \"a\"\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, _ := feed(StreamOptions{Tools: true}, tc.text)
			if got := describe(evs); got != tc.want {
				t.Errorf("events:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestStreamTruncatedReasoning(t *testing.T) {
	// The stream shows an unfinished reasoning as reasoning while Parse
	// returns it as content (both upstream behaviour).
	evs, s := feed(StreamOptions{Thinking: true, Tools: true}, "<think>still thinking</thi")
	if got, want := describe(evs), "reasoning[0] \"still thinking</thi\"\n"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	if r, err := s.Result(); err != nil || r.Content != "<think>still thinking</thi" || r.Reasoning != "" {
		t.Errorf("Result = %+v, %v", r, err)
	}
}

func TestStreamIgnoresDSMLInReasoning(t *testing.T) {
	text := "I could call " + ToolCallsOpen + "\n" + InvokeOpen + ` name="x">` + "</think>answer"
	evs, s := feed(StreamOptions{Thinking: true, Tools: true}, text)
	want := "reasoning[0] " + fmt.Sprintf("%q", "I could call "+ToolCallsOpen+"\n"+InvokeOpen+` name="x">`) + "\ncontent[0] \"answer\"\n"
	if got := describe(evs); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	if s.BlockOpened() || s.DecodeState() != DecodeOutside {
		t.Errorf("opened=%v state=%v", s.BlockOpened(), s.DecodeState())
	}
}

func TestStreamWriteAfterClose(t *testing.T) {
	s := NewStream(StreamOptions{})
	s.Write("a")
	s.Close()
	if evs := s.Write("b"); evs != nil || s.Text() != "a" {
		t.Errorf("Write after Close: %v, text %q", evs, s.Text())
	}
	if evs := s.Close(); evs != nil {
		t.Errorf("second Close: %v", evs)
	}
}

// BenchmarkStream feeds a tool-call turn token-sized piece by piece.
func BenchmarkStream(b *testing.B) {
	text := "<think>" + strings.Repeat("reasoning ", 200) + "</think>Sure." +
		Render([]Call{{Name: "write", Arguments: `{"path":"a.txt","content":` + fmt.Sprintf("%q", strings.Repeat("line &amp; more\n", 500)) + `}`}})
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s := NewStream(StreamOptions{Thinking: true, Tools: true})
		for i := 0; i < len(text); i += 4 {
			s.Write(text[i:min(i+4, len(text))])
			_ = s.DecodeState()
		}
		s.Close()
	}
}

// TestStreamLongWhitespace guards against rescanning held whitespace on
// every write (quadratic time).
func TestStreamLongWhitespace(t *testing.T) {
	s := NewStream(StreamOptions{Tools: true})
	for i := 0; i < 1<<17; i++ {
		if evs := s.Write(" "); len(evs) != 0 {
			t.Fatalf("whitespace emitted early: %v", evs)
		}
	}
	if evs := s.Write("x"); len(evs) != 1 || len(evs[0].Text) != 1<<17+1 {
		t.Fatalf("whitespace not released")
	}
}
