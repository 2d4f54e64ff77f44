package dsml

import (
	"errors"
	"reflect"
	"testing"
)

// fuzzSeeds are inputs for both fuzz targets; they also run as regular
// test cases.
var fuzzSeeds = []string{
	"",
	"The capital of France is Paris.",
	"17*23 = 391.</think>17 × 23 = 391.",
	"The user wants the weather in Rome. I will call get_weather.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Rome</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
	"<think>r</think>x\n\n<DSML｜tool_calls><DSML｜invoke name=\"a\"><DSML｜parameter name=\"p\">1</DSML｜parameter></DSML｜invoke></DSML｜tool_calls>",
	"<tool_calls><invoke name=\"f\"><parameter name=\"o\"><parameter name=\"l\" string=\"false\">[1, 2]</parameter></parameter></invoke></tool_calls>",
	"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"s\" string=\"true\">a &amp; b &lt;/｜DSML｜parameter> é\xf0\x9f</｜DSML｜parameter>\n<｜DSML｜parameter name=\"j\" string=\"false\">{\"k\": \"</｜DSML｜tool_calls>\"}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
	"<｜DSML｜tool_calls><｜DSML｜invoke>",
	"<｜DSML｜tool_calls>oops</｜DSML｜tool_calls>",
	"<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\" string=\"true\">x<",
	"a <｜DS",
	"\xff\xfe<think>\x00</think>",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, thinking bool) {
		r, err := Parse(text, thinking)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(text) {
				t.Fatalf("error %v", err)
			}
			if !reflect.DeepEqual(r, Result{Content: text}) {
				t.Fatalf("failed parse returned %#v", r)
			}
			return
		}
		if len(r.Calls) > 0 && r.RawDSML == "" {
			t.Fatalf("calls without raw DSML")
		}
		for _, c := range r.Calls {
			_ = c.CompactArguments()
		}
		// The canonical rendering of whatever was parsed parses again.
		again, err := Parse(Render(r.Calls), false)
		if err != nil {
			t.Fatalf("canonical rendering of %q does not parse: %v", r.Calls, err)
		}
		if len(again.Calls) != len(r.Calls) {
			t.Fatalf("canonical rendering has %d calls, want %d", len(again.Calls), len(r.Calls))
		}
		for i, c := range again.Calls {
			if c.Name != cString(r.Calls[i].Name) {
				t.Fatalf("call %d name %q, want %q", i, c.Name, r.Calls[i].Name)
			}
		}
	})
}

func FuzzStream(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, []byte{1, 3, 7, byte(i)})
	}
	f.Fuzz(func(t *testing.T, text string, cuts []byte) {
		var chunks []string
		rest := text
		for _, c := range cuts {
			if rest == "" {
				break
			}
			n := 1 + int(c)%len(rest)
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		if rest != "" {
			chunks = append(chunks, rest)
		}
		checkChunking(t, text, chunks)
	})
}
