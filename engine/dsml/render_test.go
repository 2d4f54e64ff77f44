package dsml

import (
	"strings"
	"testing"
)

// block wraps invoke lines into a canonical tool_calls block.
func block(invokes ...string) string {
	return "\n\n" + ToolCallsOpen + "\n" + strings.Join(invokes, "") + ToolCallsClose
}

func invoke(name string, params ...string) string {
	return InvokeOpen + ` name="` + name + "\">\n" + strings.Join(params, "") + InvokeClose + "\n"
}

func param(name string, isString bool, body string) string {
	typ := "false"
	if isString {
		typ = "true"
	}
	return ParameterOpen + ` name="` + name + `" string="` + typ + `">` + body + ParameterClose + "\n"
}

func TestRenderSpecExample(t *testing.T) {
	// docs/formats/prompt.md#rendering-a-tool-call-turn.
	calls := []Call{{Name: "bash", Arguments: `{"command": "echo a && b > c", "timeout": 10, "opts": {"x": [1, 2]}, "note": "has </｜DSML｜parameter> inside"}`}}
	want := "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"bash\">\n<｜DSML｜parameter name=\"command\" string=\"true\">echo a && b > c</｜DSML｜parameter>\n<｜DSML｜parameter name=\"timeout\" string=\"false\">10</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">{\"x\":[1,2]}</｜DSML｜parameter>\n<｜DSML｜parameter name=\"note\" string=\"true\">has &lt;/｜DSML｜parameter> inside</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
	if got := Render(calls); got != want {
		t.Fatalf("Render:\n got %q\nwant %q", got, want)
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name  string
		calls []Call
		want  string
	}{
		{"no calls", nil, ""},
		{"weather", []Call{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Rome"}`}},
			block(invoke("get_weather", param("city", true, "Rome")))},
		{"two calls keep order", []Call{
			{Name: "a", Arguments: `{"z":1,"a":2}`},
			{Name: "b", Arguments: `{}`},
		}, block(invoke("a", param("z", false, "1"), param("a", false, "2")), invoke("b"))},
		{"duplicate keys kept", []Call{{Name: "f", Arguments: `{"k":"1","k":"2"}`}},
			block(invoke("f", param("k", true, "1"), param("k", true, "2")))},
		{"attribute escapes", []Call{{Name: `a&b<c>"d`, Arguments: `{"x\"y&":true}`}},
			block(invoke(`a&amp;b&lt;c&gt;&quot;d`, param(`x&quot;y&amp;`, false, "true")))},
		{"tool supplied text is not entity-escaped", []Call{{Name: "bash", Arguments: `{"command":"echo 2>&1 && echo </｜DSML｜tool_calls>","count":1}`}},
			block(invoke("bash", param("command", true, "echo 2>&1 && echo </｜DSML｜tool_calls>"), param("count", false, "1")))},
		{"json body escapes the closer", []Call{{Name: "f", Arguments: `{"v":["</｜DSML｜parameter>", "a b"]}`}},
			block(invoke("f", param("v", false, `["\u003c/｜DSML｜parameter>","a b"]`)))},
		{"string escapes decoded", []Call{{Name: "f", Arguments: `{"s":"line\nnext \"q\" \\ \/ \u00e9 \ud83d\ude00"}`}},
			block(invoke("f", param("s", true, "line\nnext \"q\" \\ / é 😀")))},
		{"lone surrogate keeps 3 bytes", []Call{{Name: "f", Arguments: `{"s":"a\ud800b"}`}},
			block(invoke("f", param("s", true, "a\xed\xa0\x80b")))},
		{"NUL escape truncates", []Call{{Name: "f", Arguments: `{"s":"ab\u0000cd"}`}},
			block(invoke("f", param("s", true, "ab")))},
		{"lenient JSON: no commas, trailing comma, strtod numbers, trailing text", []Call{{Name: "f", Arguments: " {\"a\":0x1F \"b\": -inf, \"c\" : 1e5 ,} tail"}},
			block(invoke("f", param("a", false, "0x1F"), param("b", false, "-inf"), param("c", false, "1e5")))},
		{"not an object", []Call{{Name: "f", Arguments: `[1, 2]`}},
			block(invoke("f", param("arguments", true, "[1, 2]")))},
		{"invalid object", []Call{{Name: "f", Arguments: `{"a": bad, </｜DSML｜parameter>}`}},
			block(invoke("f", param("arguments", true, `{"a": bad, &lt;/｜DSML｜parameter>}`)))},
		{"empty arguments", []Call{{Name: "f"}},
			block(invoke("f", param("arguments", true, "")))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Render(tc.calls); got != tc.want {
				t.Errorf("Render:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCompactArguments(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"city": "Rome"}`, `{"city":"Rome"}`},
		{`{ "a" : [1, 2, {"b": "x y"}], "s": "tab\there" }`, `{"a":[1,2,{"b":"x y"}],"s":"tab\there"}`},
		{`{"u":"\u00e9\u0001<>&"}`, "{\"u\":\"é\\u0001<>&\"}"},
		{`{"k": abc def}`, `{}`},
		{`[1]`, `{}`},
		{``, `{}`},
		{`{}`, `{}`},
		{`{"a":1,"a":2}`, `{"a":1,"a":2}`},
	}
	for _, tc := range tests {
		if got := (Call{Arguments: tc.in}).CompactArguments(); got != tc.want {
			t.Errorf("CompactArguments(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestQuoteJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\n\r\t\x01\x1f\x7f", `"\n\r\t\u0001\u001f` + "\x7f\""},
		{"</script> é \u2028", "\"</script> é \u2028\""},
	}
	for _, tc := range tests {
		if got := QuoteJSON(tc.in); got != tc.want {
			t.Errorf("QuoteJSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEscapes(t *testing.T) {
	if got, want := EscapeParameter("a </｜DSML｜parameter></｜DSML｜parameter> & &lt;"), "a &lt;/｜DSML｜parameter>&lt;/｜DSML｜parameter> & &lt;"; got != want {
		t.Errorf("EscapeParameter = %q, want %q", got, want)
	}
	if got, want := EscapeAttr(`x&<>"y`), "x&amp;&lt;&gt;&quot;y"; got != want {
		t.Errorf("EscapeAttr = %q, want %q", got, want)
	}
	if got, want := Unescape("&amp;&lt;&gt;&quot;&apos;&amp &nbsp; &&lt;"), "&<>\"'&amp &nbsp; &<"; got != want {
		t.Errorf("Unescape = %q, want %q", got, want)
	}
}

func TestMinifyRaw(t *testing.T) {
	// docs/formats/prompt.md#parsing-generated-text examples and strtod corner cases.
	tests := []struct{ in, want string }{
		{"10 extra", "10"},
		{"abc def", "abc def"},
		{"", ""},
		{"  [1, 2] ", "[1,2]"},
		{"  ", "  "},
		{`{"a b": [ true , null ]}`, `{"a b":[true,null]}`},
		{`"x \" y"`, `"x \" y"`},
		{"0x", "0"},
		{"0x.8p1", "0x.8p1"},
		{"5.", "5."},
		{".5e", ".5"},
		{"1e+", "1"},
		{"+NaN(abc)x", "+NaN(abc)"},
		{"-Infinity", "-Infinity"},
		{".", "."},
		{"-", "-"},
		{"truex", "true"},
		{"[1 2]", "[1 2]"},
	}
	for _, tc := range tests {
		if got := minifyRaw(tc.in); got != tc.want {
			t.Errorf("minifyRaw(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNestingLimit(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	if got := minifyRaw(deep(maxNesting)); got != deep(maxNesting) {
		t.Errorf("%d levels rejected", maxNesting)
	}
	if _, ok := skipValue(deep(maxNesting+1), 0, 0); ok {
		t.Errorf("%d levels accepted", maxNesting+1)
	}
}
