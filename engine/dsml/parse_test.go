package dsml

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	bash := invoke("bash", param("command", true, "pwd"))
	tests := []struct {
		name     string
		text     string
		thinking bool
		want     Result
	}{
		{
			name: "plain answer",
			text: "The capital of France is Paris.",
			want: Result{Content: "The capital of France is Paris."},
		},
		{
			name:     "reasoning then answer",
			text:     "17*23 = 17*20 + 17*3 = 340 + 51 = 391.</think>17 × 23 = 391.",
			thinking: true,
			want:     Result{Reasoning: "17*23 = 17*20 + 17*3 = 340 + 51 = 391.", Content: "17 × 23 = 391."},
		},
		{
			name:     "spec tool call",
			text:     "The user wants the weather in Rome. I will call get_weather.</think>" + block(invoke("get_weather", param("city", true, "Rome"))),
			thinking: true,
			want: Result{
				Reasoning: "The user wants the weather in Rome. I will call get_weather.",
				Calls:     []Call{{Name: "get_weather", Arguments: `{"city": "Rome"}`}},
				RawDSML:   block(invoke("get_weather", param("city", true, "Rome"))),
			},
		},
		{
			name:     "truncated reasoning is content",
			text:     "still thinking about " + ToolCallsOpen,
			thinking: true,
			want:     Result{Content: "still thinking about " + ToolCallsOpen},
		},
		{
			name:     "leading think kept without close",
			text:     "<think>abc",
			thinking: false,
			want:     Result{Content: "<think>abc"},
		},
		{
			name: "think split also without thinking mode",
			text: "<think>a</think>b",
			want: Result{Reasoning: "a", Content: "b"},
		},
		{
			name:     "dsml inside reasoning is not executed",
			text:     "<think>I might mention a tool call here:" + block(bash) + "\nBut it is still reasoning.</think>Final answer.",
			thinking: true,
			want:     Result{Reasoning: "I might mention a tool call here:" + block(bash) + "\nBut it is still reasoning.", Content: "Final answer."},
		},
		{
			name:     "block after think close",
			text:     "<think>need a shell check</think>" + block(bash),
			thinking: true,
			want: Result{Reasoning: "need a shell check", Calls: []Call{{Name: "bash", Arguments: `{"command": "pwd"}`}},
				RawDSML: block(bash)},
		},
		{
			name: "separator whitespace is not content",
			text: "<think>need a tool</think>I will inspect the files.\n\n \t\n" + ToolCallsOpen + "\n" + invoke("bash", param("description", true, "list files"), param("command", true, "ls -la")) + ToolCallsClose,
			want: Result{Reasoning: "need a tool", Content: "I will inspect the files.",
				Calls:   []Call{{Name: "bash", Arguments: `{"description": "list files", "command": "ls -la"}`}},
				RawDSML: ToolCallsOpen + "\n" + invoke("bash", param("description", true, "list files"), param("command", true, "ls -la")) + ToolCallsClose},
		},
		{
			name: "short syntax",
			text: "<think>need a tool</think><DSML｜tool_calls>\n<DSML｜invoke name=\"bash\">\n<DSML｜parameter name=\"description\" string=\"true\">list files</DSML｜parameter>\n</DSML｜invoke>\n</DSML｜tool_calls>",
			want: Result{Reasoning: "need a tool", Calls: []Call{{Name: "bash", Arguments: `{"description": "list files"}`}},
				RawDSML: "<DSML｜tool_calls>\n<DSML｜invoke name=\"bash\">\n<DSML｜parameter name=\"description\" string=\"true\">list files</DSML｜parameter>\n</DSML｜invoke>\n</DSML｜tool_calls>"},
		},
		{
			name: "plain xml syntax",
			text: "ok\n\n<tool_calls><invoke name=\"f\"><parameter name=\"n\" string=\"false\">[1, 2]</parameter></invoke></tool_calls>",
			want: Result{Content: "ok", Calls: []Call{{Name: "f", Arguments: `{"n": [1,2]}`}},
				RawDSML: "\n\n<tool_calls><invoke name=\"f\"><parameter name=\"n\" string=\"false\">[1, 2]</parameter></invoke></tool_calls>"},
		},
		{
			name: "canonical form preferred over an earlier xml opener",
			text: "use <tool_calls> tags" + block(bash),
			want: Result{Content: "use <tool_calls> tags", Calls: []Call{{Name: "bash", Arguments: `{"command": "pwd"}`}}, RawDSML: block(bash)},
		},
		{
			name: "loose nested parameters",
			text: "review done\n\n" + ToolCallsOpen + "\n" + InvokeOpen + " name=\"edit\">\n" +
				ParameterOpen + " name=\"path\">/private/tmp/tetris.c" + ParameterClose + "\n" +
				ParameterOpen + " name=\"edits\">\n" +
				ParameterOpen + " name=\"oldText\" string=\"true\">old &lt;text&gt;" + ParameterClose + "\n" +
				ParameterOpen + " name=\"newText\" string=\"true\">new text" + ParameterClose + "\n" +
				InvokeClose + "\n" + ToolCallsClose,
			want: Result{Content: "review done", Calls: []Call{{Name: "edit",
				Arguments: `{"path": "/private/tmp/tetris.c", "edits": {"oldText":"old <text>","newText":"new text"}}`}},
				RawDSML: "\n\n" + ToolCallsOpen + "\n" + InvokeOpen + " name=\"edit\">\n" +
					ParameterOpen + " name=\"path\">/private/tmp/tetris.c" + ParameterClose + "\n" +
					ParameterOpen + " name=\"edits\">\n" +
					ParameterOpen + " name=\"oldText\" string=\"true\">old &lt;text&gt;" + ParameterClose + "\n" +
					ParameterOpen + " name=\"newText\" string=\"true\">new text" + ParameterClose + "\n" +
					InvokeClose + "\n" + ToolCallsClose},
		},
		{
			name: "json bodies normalized",
			text: block(invoke("f", param("a", false, "10 extra"), param("b", false, "abc def"), param("c", false, ""), param("d", false, "  [1, 2] "), param("e", false, " \n"))),
			want: Result{Calls: []Call{{Name: "f", Arguments: "{\"a\": 10, \"b\": abc def, \"c\": null, \"d\": [1,2], \"e\":  \n}"}},
				RawDSML: block(invoke("f", param("a", false, "10 extra"), param("b", false, "abc def"), param("c", false, ""), param("d", false, "  [1, 2] "), param("e", false, " \n")))},
		},
		{
			name: "entities and attributes",
			text: block(InvokeOpen + ` id="x" name="a&amp;b&quot;" other="1">` + ParameterOpen + ` string="maybe" name="k&lt;">{"x": 1}` + ParameterClose + ParameterOpen + ` name="s">&amp;&amp; &lt;/｜DSML｜parameter> &copy;` + ParameterClose + InvokeClose),
			want: Result{Calls: []Call{{Name: `a&b"`, Arguments: `{"k<": {"x":1}, "s": "&& </｜DSML｜parameter> &copy;"}`}},
				RawDSML: block(InvokeOpen + ` id="x" name="a&amp;b&quot;" other="1">` + ParameterOpen + ` string="maybe" name="k&lt;">{"x": 1}` + ParameterClose + ParameterOpen + ` name="s">&amp;&amp; &lt;/｜DSML｜parameter> &copy;` + ParameterClose + InvokeClose)},
		},
		{
			name: "empty block",
			text: "Hello\n\n" + ToolCallsOpen + ToolCallsClose + " trailing text is dropped",
			want: Result{Content: "Hello", RawDSML: "\n\n" + ToolCallsOpen + ToolCallsClose},
		},
		{
			name: "block without blank line",
			text: "Hi " + ToolCallsOpen + invoke("x") + ToolCallsClose,
			want: Result{Content: "Hi", Calls: []Call{{Name: "x", Arguments: "{}"}}, RawDSML: ToolCallsOpen + invoke("x") + ToolCallsClose},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text, tc.thinking)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	tests := []struct {
		name, text   string
		unterminated bool
	}{
		{"invoke without name", "trying a tool\n\n" + ToolCallsOpen + "\n" + InvokeOpen + ">\n" + ToolCallsClose, false},
		{"parameter without name", block(InvokeOpen + ` name="f">` + ParameterOpen + ` string="true">x` + ParameterClose + InvokeClose), false},
		{"stray text", block("hello" + invoke("f")), false},
		{"stray text in invoke", block(InvokeOpen + ` name="f">oops` + InvokeClose), false},
		{"mixed syntax", "\n\n" + ToolCallsOpen + "<invoke name=\"f\"></invoke></tool_calls>", false},
		{"opener only", "text\n\n" + ToolCallsOpen, true},
		{"unclosed invoke tag", ToolCallsOpen + InvokeOpen + ` name="f"`, true},
		{"unclosed parameter", ToolCallsOpen + InvokeOpen + ` name="f">` + ParameterOpen + ` name="a" string="true">abc`, true},
		{"missing block closer", ToolCallsOpen + invoke("f", param("a", true, "x")), true},
		{"unclosed nested parameter", ToolCallsOpen + InvokeOpen + ` name="f">` + ParameterOpen + ` name="a">` + ParameterOpen + ` name="b" string="true">x`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text, false)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error = %v, want *ParseError", err)
			}
			if want := (Result{Content: tc.text}); !reflect.DeepEqual(got, want) {
				t.Errorf("Parse result = %#v, want the raw text as content", got)
			}
			if u := strings.Contains(err.Error(), "unterminated"); u != tc.unterminated {
				t.Errorf("error %q: unterminated = %v, want %v", err, u, tc.unterminated)
			}
			if !strings.HasPrefix(err.Error(), "dsml: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}
