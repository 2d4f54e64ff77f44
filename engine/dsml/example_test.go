package dsml_test

import (
	"fmt"

	"github.com/ds4-go/ds4/engine/dsml"
)

func ExampleParse() {
	text := "The user wants the weather in Rome.</think>\n\n" +
		"<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"get_weather\">\n" +
		"<｜DSML｜parameter name=\"city\" string=\"true\">Rome</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n" +
		"</｜DSML｜tool_calls>"
	r, err := dsml.Parse(text, true)
	if err != nil {
		panic(err)
	}
	fmt.Printf("reasoning: %s\n", r.Reasoning)
	for _, c := range r.Calls {
		fmt.Printf("call: %s %s\n", c.Name, c.CompactArguments())
	}
	fmt.Println(dsml.Render(r.Calls) == r.RawDSML)
	// Output:
	// reasoning: The user wants the weather in Rome.
	// call: get_weather {"city":"Rome"}
	// true
}

func ExampleStream() {
	s := dsml.NewStream(dsml.StreamOptions{Thinking: true, Tools: true})
	for _, token := range []string{"Need ", "a shell.</think>", "\n\n<｜DSML｜tool_calls>\n", "<｜DSML｜invoke name=\"bash\">\n",
		"<｜DSML｜parameter name=\"command\" string=\"true\">", "ls -la", "</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>"} {
		for _, e := range s.Write(token) {
			fmt.Printf("%s %q\n", e.Kind, e.Text+e.Name)
		}
		if s.BlockClosed() {
			break // stop generating: the EOS is not sampled
		}
	}
	for _, e := range s.Close() {
		fmt.Printf("%s %q\n", e.Kind, e.Text)
	}
	// Output:
	// reasoning "Need "
	// reasoning "a shell."
	// call-start "bash"
	// call-args "{"
	// call-args "\"command\":\""
	// call-args "ls -la"
	// call-args "\""
	// call-args "}"
	// call-end ""
}
