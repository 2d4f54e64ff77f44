package prompt_test

import (
	"fmt"

	"github.com/ds4-go/ds4/engine/dsml"
	"github.com/ds4-go/ds4/engine/prompt"
)

func ExampleRender() {
	msgs := []prompt.Message{
		{Role: prompt.RoleSystem, Content: "You are a helpful assistant."},
		{Role: prompt.RoleUser, Content: "What is the capital of France?"},
	}
	text, err := prompt.Render(msgs, prompt.Options{Think: prompt.ThinkOff})
	if err != nil {
		panic(err)
	}
	fmt.Println(text)
	// Output:
	// <｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is the capital of France?<｜Assistant｜></think>
}

func ExampleRender_toolCall() {
	msgs := []prompt.Message{
		{Role: prompt.RoleUser, Content: "List the files."},
		{Role: prompt.RoleAssistant, ToolCalls: []dsml.Call{{ID: "call_1", Name: "bash", Arguments: `{"command":"ls"}`}}},
		{Role: prompt.RoleTool, ToolCallID: "call_1", Content: "a.txt"},
	}
	text, err := prompt.Render(msgs, prompt.Options{Think: prompt.ThinkOff, Strict: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// "<｜begin▁of▁sentence｜><｜User｜>List the files.<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"bash\">\n<｜DSML｜parameter name=\"command\" string=\"true\">ls</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜><｜User｜><tool_result>a.txt</tool_result><｜Assistant｜></think>"
}
