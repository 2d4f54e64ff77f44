package dsml

import "testing"

func TestTrackerStates(t *testing.T) {
	// Upstream test_dsml_decode_state_separates_structure_and_payload plus
	// the cases this port handles differently.
	head := ToolCallsOpen + "\n" + InvokeOpen + ` name="edit">` + "\n"
	tests := []struct {
		name     string
		thinking bool
		chunks   []string
		want     []DecodeState
	}{
		{"structure", false, []string{"hi ", head}, []DecodeState{DecodeOutside, DecodeStructural}},
		{"string body", false, []string{head + ParameterOpen + ` name="path" string="true">/tmp/a.py`}, []DecodeState{DecodeString}},
		{"partial closer", false, []string{head + ParameterOpen + ` name="path" string="true">/tmp/a.py</`}, []DecodeState{DecodeStructural}},
		{"one byte of a closer is payload", false, []string{head + ParameterOpen + ` name="p" string="true">x<`}, []DecodeState{DecodeString}},
		{"lone < then rest of closer", false, []string{head + ParameterOpen + ` name="p" string="true">x<`, "/｜DSML｜parameter>\n"},
			[]DecodeState{DecodeString, DecodeStructural}},
		{"json structure", false, []string{head + ParameterOpen + ` name="edits" string="false">[{`}, []DecodeState{DecodeJSONStructural}},
		{"json string", false, []string{head + ParameterOpen + ` name="edits" string="false">[{"newText":"for i in`}, []DecodeState{DecodeJSONString}},
		{"json escaped quote", false, []string{head + ParameterOpen + ` name="e" string="false">["a\"`, `b`}, []DecodeState{DecodeJSONString, DecodeJSONString}},
		{"untyped parameter is json", false, []string{head + ParameterOpen + ` name="e">x`}, []DecodeState{DecodeJSONStructural}},
		{"done", false, []string{head + ParameterOpen + ` name="edits" string="false">[]` + ParameterClose + "\n" + InvokeClose + "\n" + ToolCallsClose, " more"},
			[]DecodeState{DecodeOutside, DecodeOutside}},
		{"short syntax", false, []string{"<DSML｜tool_calls>\n<DSML｜invoke name=\"f\">\n<DSML｜parameter name=\"a\" string=\"true\">x"}, []DecodeState{DecodeString}},
		{"gated by thinking", true, []string{head + ParameterOpen + ` name="p" string="true">x`, "</think>", "ok " + ToolCallsOpen}, []DecodeState{DecodeOutside, DecodeOutside, DecodeStructural}},
		{"stray text waits for the closer", false, []string{ToolCallsOpen + "oops", " more", ToolCallsClose}, []DecodeState{DecodeStructural, DecodeStructural, DecodeOutside}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(tc.thinking)
			for i, c := range tc.chunks {
				if got := tr.Write(c); got != tc.want[i] {
					t.Errorf("after chunk %d (%q): %v, want %v", i, c, got, tc.want[i])
				}
			}
		})
	}
}

func TestTrackerClosed(t *testing.T) {
	tr := NewTracker(false)
	tr.Write(ToolCallsOpen + InvokeOpen + ` name="f">` + ParameterOpen + ` name="a" string="true">` + ToolCallsClose)
	if !tr.Opened() || tr.Closed() {
		t.Fatalf("a block closer inside a string body closed the block")
	}
	tr.Write(ParameterClose + InvokeClose + ToolCallsClose)
	if !tr.Closed() || tr.State() != DecodeOutside {
		t.Fatalf("closed=%v state=%v", tr.Closed(), tr.State())
	}
}

func TestDecodeStatePredicates(t *testing.T) {
	for _, tc := range []struct {
		s                       DecodeState
		inBlock, payload, greed bool
	}{
		{DecodeOutside, false, false, false},
		{DecodeStructural, true, false, true},
		{DecodeString, true, true, false},
		{DecodeJSONStructural, true, false, true},
		{DecodeJSONString, true, true, false},
	} {
		if tc.s.InBlock() != tc.inBlock || tc.s.Payload() != tc.payload || tc.s.Greedy() != tc.greed {
			t.Errorf("%v: InBlock %v Payload %v Greedy %v", tc.s, tc.s.InBlock(), tc.s.Payload(), tc.s.Greedy())
		}
	}
}
