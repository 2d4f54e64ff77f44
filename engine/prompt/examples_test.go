package prompt

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ds4-go/ds4/engine/dsml"
)

// example is one entry of testdata/prompt-examples.json.
type example struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Kind        string `json:"kind"`
	Text        string `json:"text"`
	Bytes       int    `json:"bytes"`
	TokenCount  int    `json:"token_count"`
	IDs         []int  `json:"ids"`
}

type exampleFile struct {
	Format         string    `json:"format"`
	ToolSchemaLine string    `json:"tool_schema_line"`
	Examples       []example `json:"examples"`
}

func loadExamples(t *testing.T) (exampleFile, map[string]example) {
	t.Helper()
	data, err := os.ReadFile("testdata/prompt-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	var f exampleFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if f.Format != "ds4-go-prompt-examples-v1" {
		t.Fatalf("unknown format %q", f.Format)
	}
	byID := make(map[string]example)
	for _, e := range f.Examples {
		if len(e.Text) != e.Bytes {
			t.Fatalf("%s: text has %d bytes, file says %d", e.ID, len(e.Text), e.Bytes)
		}
		byID[e.ID] = e
	}
	return f, byID
}

// The conversations of docs/formats/prompt.md#worked-examples, built the way a server would build
// them from the requests described there.
const (
	ex1System = "You are a helpful assistant."
	ex1User1  = "What is the capital of France?"
	ex1User2  = "And of Italy?"
	ex2User1  = "What is 17*23?"
	ex2User2  = "Now divide it by 17."
	ex3User1  = "What's the weather in Rome?"
	ex3Result = `{"temp_c":21,"sky":"clear"}`
	ex3User3  = "Thanks!"
	ex3CallID = "call_0123456789abcdef0123456789abcdef"
)

// assistantFrom turns a parsed generation into the assistant message a
// client sends back: the parsed parts, call ids, and compact arguments.
func assistantFrom(t *testing.T, generated string, thinking bool, ids ...string) (Message, dsml.Result) {
	t.Helper()
	r, err := dsml.Parse(generated, thinking)
	if err != nil {
		t.Fatalf("Parse(%q): %v", generated, err)
	}
	m := Message{Role: RoleAssistant, Content: r.Content, Reasoning: r.Reasoning}
	for i, c := range r.Calls {
		m.ToolCalls = append(m.ToolCalls, dsml.Call{ID: ids[i], Name: c.Name, Arguments: c.CompactArguments()})
	}
	return m, r
}

// renderings maps each rendered_prompt example to the request that yields
// it. Every rendered prompt of the file must have an entry.
func renderings(t *testing.T, f exampleFile, ex map[string]example) map[string]func() (Rendered, error) {
	tools := []Tool{{Schema: f.ToolSchemaLine}}
	ex1Answer, _ := assistantFrom(t, ex["ex1_turn1_generated"].Text, false)
	ex2Answer, _ := assistantFrom(t, ex["ex2_turn1_generated"].Text, true)
	ex3Call, r := assistantFrom(t, ex["ex3_turn1_generated"].Text, true, ex3CallID)
	ex3Call.RawDSML = r.RawDSML // from the exact-replay memory
	ex3Answer, _ := assistantFrom(t, ex["ex3_turn2_generated"].Text, true)
	ex3NoThinkCall := Message{Role: RoleAssistant, ToolCalls: []dsml.Call{{ID: ex3CallID, Name: "get_weather", Arguments: `{"city":"Rome"}`}}}
	result := Message{Role: RoleTool, Content: ex3Result, ToolCallID: ex3CallID}

	return map[string]func() (Rendered, error){
		"ex1_turn1_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleSystem, Content: ex1System}, {Role: RoleUser, Content: ex1User1}}, Options{Think: ThinkOff, Strict: true})
		},
		"ex1_turn2_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleSystem, Content: ex1System}, {Role: RoleUser, Content: ex1User1}, ex1Answer, {Role: RoleUser, Content: ex1User2}}, Options{Think: ThinkOff, Strict: true})
		},
		"ex2_turn1_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex2User1}}, Options{Think: ThinkHigh, Strict: true})
		},
		"ex2_turn2_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex2User1}, ex2Answer, {Role: RoleUser, Content: ex2User2}}, Options{Think: ThinkHigh, Strict: true})
		},
		"ex2_max_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex2User1}}, Options{Think: ThinkMax, ContextSize: MaxThinkContext, Strict: true})
		},
		"ex3_turn1_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex3User1}}, Options{Think: ThinkHigh, Tools: tools, Strict: true})
		},
		"ex3_turn2_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex3User1}, ex3Call, result}, Options{Think: ThinkHigh, Tools: tools, Strict: true})
		},
		"ex3_turn3_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex3User1}, ex3Call, result, ex3Answer, {Role: RoleUser, Content: ex3User3}}, Options{Think: ThinkHigh, Tools: tools, Strict: true})
		},
		"ex3_nothink_turn2_prompt": func() (Rendered, error) {
			return RenderSpans([]Message{{Role: RoleUser, Content: ex3User1}, ex3NoThinkCall, result}, Options{Think: ThinkOff, Tools: tools, Strict: true})
		},
	}
}

func TestRenderedExamples(t *testing.T) {
	f, ex := loadExamples(t)
	render := renderings(t, f, ex)
	n := 0
	for _, e := range f.Examples {
		if e.Kind != "rendered_prompt" {
			continue
		}
		n++
		t.Run(e.ID, func(t *testing.T) {
			fn, ok := render[e.ID]
			if !ok {
				t.Fatalf("no request builds example %s (%s)", e.ID, e.Description)
			}
			got, err := fn()
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != e.Text {
				t.Errorf("rendered:\n%q\nwant:\n%q", got.Text, e.Text)
			}
		})
	}
	if n != len(render) {
		t.Errorf("%d rendered examples in the file, %d built", n, len(render))
	}
}

func TestGeneratedExamples(t *testing.T) {
	f, _ := loadExamples(t)
	type parsed struct {
		thinking bool
		want     dsml.Result
		compact  []string
	}
	raw := "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Rome</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
	cases := map[string]parsed{
		"ex1_turn1_generated": {false, dsml.Result{Content: "The capital of France is Paris."}, nil},
		"ex2_turn1_generated": {true, dsml.Result{Reasoning: "17*23 = 17*20 + 17*3 = 340 + 51 = 391.", Content: "17 × 23 = 391."}, nil},
		"ex3_turn1_generated": {true, dsml.Result{
			Reasoning: "The user wants the weather in Rome. I will call get_weather.",
			Calls:     []dsml.Call{{Name: "get_weather", Arguments: `{"city": "Rome"}`}},
			RawDSML:   raw,
		}, []string{`{"city":"Rome"}`}},
		"ex3_turn2_generated": {true, dsml.Result{Reasoning: "The tool says 21 C and clear.", Content: "It is currently 21 C and clear in Rome."}, nil},
	}
	n := 0
	for _, e := range f.Examples {
		if e.Kind != "generated_text" {
			continue
		}
		n++
		t.Run(e.ID, func(t *testing.T) {
			c, ok := cases[e.ID]
			if !ok {
				t.Fatalf("no expectation for example %s", e.ID)
			}
			got, err := dsml.Parse(e.Text, c.thinking)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse:\n got %#v\nwant %#v", got, c.want)
			}
			for i, call := range got.Calls {
				if a := call.CompactArguments(); a != c.compact[i] {
					t.Errorf("call %d arguments %s, want %s", i, a, c.compact[i])
				}
			}
			if len(got.Calls) > 0 && dsml.Render(got.Calls) != got.RawDSML {
				t.Errorf("canonical rendering differs from the sampled block")
			}
			// The stream reports the same parts.
			s := dsml.NewStream(dsml.StreamOptions{Thinking: c.thinking, Tools: len(got.Calls) > 0})
			var reasoning, content, args strings.Builder
			evs := s.Write(e.Text)
			if len(got.Calls) > 0 && !s.BlockClosed() {
				t.Errorf("block not reported closed")
			}
			for _, ev := range append(evs, s.Close()...) {
				switch ev.Kind {
				case dsml.EventReasoning:
					reasoning.WriteString(ev.Text)
				case dsml.EventContent:
					content.WriteString(ev.Text)
				case dsml.EventCallArgs:
					args.WriteString(ev.Text)
				}
			}
			if reasoning.String() != got.Reasoning || content.String() != got.Content || args.String() != strings.Join(c.compact, "") {
				t.Errorf("stream: reasoning %q content %q args %q", reasoning.String(), content.String(), args.String())
			}
		})
	}
	if n != len(cases) {
		t.Errorf("%d generated examples in the file, %d expected", n, len(cases))
	}
}

// TestExampleContinuations checks that each next request's prompt extends
// the previous prompt with the generated text and EOS, except when thinking
// drops the old reasoning.
func TestExampleContinuations(t *testing.T) {
	_, ex := loadExamples(t)
	for _, c := range []struct{ prev, gen, next string }{
		{"ex1_turn1_prompt", "ex1_turn1_generated", "ex1_turn2_prompt"},
		{"ex3_turn1_prompt", "ex3_turn1_generated", "ex3_turn2_prompt"},
		{"ex3_turn2_prompt", "ex3_turn2_generated", "ex3_turn3_prompt"},
	} {
		if !strings.HasPrefix(ex[c.next].Text, ex[c.prev].Text+ex[c.gen].Text+EOS) {
			t.Errorf("%s does not extend %s + %s + EOS", c.next, c.prev, c.gen)
		}
	}
	// ex2: the reasoning is dropped, so the old prompt minus its "<think>"
	// plus "</think>" and the answer is the prefix (the thinking binding of
	// docs/formats/server.md#thinking-binding).
	prev := strings.TrimSuffix(ex["ex2_turn1_prompt"].Text, ThinkOpen)
	answer := ex["ex2_turn1_generated"].Text[strings.Index(ex["ex2_turn1_generated"].Text, ThinkClose):]
	if !strings.HasPrefix(ex["ex2_turn2_prompt"].Text, prev+answer+EOS) {
		t.Errorf("ex2_turn2_prompt does not extend the visible first turn")
	}
	// AssistantSuffix reproduces what the next request renders for a
	// tool-call turn.
	m, r := assistantFrom(t, ex["ex3_turn1_generated"].Text, true, ex3CallID)
	for _, raw := range []string{"", r.RawDSML} {
		m.RawDSML = raw
		if !strings.HasPrefix(ex["ex3_turn2_prompt"].Text, ex["ex3_turn1_prompt"].Text+AssistantSuffix(m, true)) {
			t.Errorf("AssistantSuffix (raw %v) is not what the next prompt renders", raw != "")
		}
	}
}

func TestExampleSizes(t *testing.T) {
	f, ex := loadExamples(t)
	// docs/formats/prompt.md#byte-constants, docs/formats/prompt.md#tool-schemas-in-the-system-prompt, docs/formats/prompt.md#token-level-facts.
	for _, c := range []struct {
		name string
		s    string
		n    int
	}{
		{"ThinkMaxPrefix", ThinkMaxPrefix, 476},
		{"ToolsPrefix", ToolsPrefix, 1183},
		{"ToolsSuffix", ToolsSuffix, 146},
		{"schema line", f.ToolSchemaLine, 164},
		{"tools block", ToolsBlock([]Tool{{Schema: f.ToolSchemaLine}}), 1493},
	} {
		if len(c.s) != c.n {
			t.Errorf("%s: %d bytes, want %d", c.name, len(c.s), c.n)
		}
	}
	if !strings.Contains(ex["ex3_turn1_prompt"].Text, ToolsBlock([]Tool{{Schema: f.ToolSchemaLine}})) {
		t.Errorf("tools block not in ex3_turn1_prompt")
	}
}
