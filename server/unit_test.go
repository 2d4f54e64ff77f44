package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ds4-go/ds4/engine/prompt"
)

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             `"plain"`,
		"q\"b\\n\nr\rt\t":   `"q\"b\\n\nr\rt\t"`,
		"\x00\x1f\x7f":      `"\u0000\u001f` + "\x7f" + `"`,
		"<a>&</a> ü 日本":     `"<a>&</a> ü 日本"`,
		"bad \xff\xfe utf8": `"bad \ufffd\ufffd utf8"`,
		"cut \xe6\x97":      `"cut \ufffd\ufffd"`,
		"｜DSML｜ \u2028 end": "\"｜DSML｜ \u2028 end\"",
	} {
		got := string(appendString(nil, in))
		if got != want {
			t.Errorf("appendString(%q) = %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%s is not valid JSON: %v", got, err)
		}
	}
	o := ordered{{"a", 1}, {"b", []any{nil, true, 1.5, "x"}}, {"c", rawJSON(`{"k":[1]}`)}, {"d", []ordered{}}, {"e", []string{"s"}}}
	if got := string(marshal(o)); got != `{"a":1,"b":[null,true,1.5,"x"],"c":{"k":[1]},"d":[],"e":["s"]}` {
		t.Errorf("marshal = %s", got)
	}
}

func TestUTF8SafeLen(t *testing.T) {
	for in, want := range map[string]int{
		"":                 0,
		"abc":              3,
		"ab\xe6":           2,
		"ab\xe6\x97":       2,
		"ab\xe6\x97\xa5":   5,
		"\xf0\x9f\x98":     0,
		"\xf0\x9f\x98\x80": 4,
		"a\x80":            2,
	} {
		if got := utf8SafeLen([]byte(in)); got != want {
			t.Errorf("utf8SafeLen(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestToolMemory(t *testing.T) {
	m := newToolMemory(3, 1<<20)
	m.put("a", "block1")
	m.put("b", "block1")
	m.put("c", "block2")
	if ids, blocks, _ := m.stats(); ids != 3 || blocks != 2 {
		t.Fatalf("stats %d ids %d blocks", ids, blocks)
	}
	m.get("a") // a is now the most recent; b is the oldest
	m.put("d", "block3")
	if m.has("b") || !m.has("a") || !m.has("c") || !m.has("d") {
		t.Error("LRU evicted the wrong id")
	}
	m.put("a", "block4") // replacing a's block drops block1
	if b, _ := m.get("a"); b != "block4" {
		t.Errorf("a = %q", b)
	}
	if _, blocks, _ := m.stats(); blocks != 3 {
		t.Errorf("%d blocks after replacement", blocks)
	}
	small := newToolMemory(100, 2*toolEntryOverhead+100)
	small.put("x", strings.Repeat("z", 60))
	small.put("y", strings.Repeat("w", 60))
	if small.has("x") || !small.has("y") {
		t.Error("byte bound not enforced")
	}
	if _, _, bytes := small.stats(); bytes > 2*toolEntryOverhead+100 {
		t.Errorf("accounted %d bytes", bytes)
	}
	id := m.newCallID("call_", nil)
	if len(id) != len("call_")+32 || m.has(id) {
		t.Errorf("id %q", id)
	}
	var off *toolMemory
	off.put("q", "b")
	if _, ok := off.get("q"); ok || off.newCallID("toolu_", nil) == "" {
		t.Error("disabled memory misbehaves")
	}
}

func TestThinkResolution(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	big, _ := scriptServer(t, nil)
	big.ctx = prompt.MaxThinkContext
	for _, c := range []struct {
		srv  *testServer
		a    api
		body string
		want prompt.Think
	}{
		{ts, apiChat, `{"messages":[{"content":"x"}]}`, prompt.ThinkHigh},
		{ts, apiChat, `{"messages":[{"content":"x"}],"thinking":{"type":"disabled"}}`, prompt.ThinkOff},
		{ts, apiChat, `{"messages":[{"content":"x"}],"think":false}`, prompt.ThinkOff},
		{ts, apiChat, `{"messages":[{"content":"x"}],"reasoning_effort":"none"}`, prompt.ThinkOff},
		{ts, apiChat, `{"messages":[{"content":"x"}],"reasoning_effort":"max"}`, prompt.ThinkHigh},
		{big, apiChat, `{"messages":[{"content":"x"}],"reasoning_effort":"max"}`, prompt.ThinkMax},
		{ts, apiChat, `{"messages":[{"content":"x"}],"model":"deepseek-chat"}`, prompt.ThinkOff},
		{ts, apiChat, `{"messages":[{"content":"x"}],"model":"deepseek-chat","thinking":null}`, prompt.ThinkHigh},
		{ts, apiChat, `{"messages":[{"content":"x"}],"model":"deepseek-reasoner","think":false}`, prompt.ThinkOff},
		{ts, apiCompletions, `{"prompt":"x"}`, prompt.ThinkHigh},
		{ts, apiMessages, `{"max_tokens":1,"messages":[{"content":"x"}],"thinking":{"type":"enabled","budget_tokens":100}}`, prompt.ThinkHigh},
		{big, apiMessages, `{"max_tokens":1,"messages":[{"content":"x"}],"output_config":{"effort":"max"}}`, prompt.ThinkMax},
		{ts, apiMessages, `{"max_tokens":1,"messages":[{"content":"x"}],"output_config":{"effort":"none"}}`, prompt.ThinkOff},
		{ts, apiResponses, `{"input":"x","reasoning":{"effort":"none"}}`, prompt.ThinkOff},
		{ts, apiResponses, `{"input":"x","reasoning":{"effort":"minimal"}}`, prompt.ThinkHigh},
		{ts, apiResponses, `{"input":"x","model":"deepseek-chat","reasoning":{"effort":null}}`, prompt.ThinkOff},
	} {
		r, err := c.srv.decodeRequest(context.Background(), c.a, []byte(c.body))
		if err != nil {
			t.Errorf("%s %s: %v", c.a, c.body, err)
			continue
		}
		if r.think != c.want {
			t.Errorf("%s %s: think %v, want %v", c.a, c.body, r.think, c.want)
		}
	}
}

func TestDecodeResponsesInput(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	body := `{"instructions":"Be terse.","reasoning":{"effort":"none"},
	 "tools":[{"type":"namespace","name":"fs.","tools":[{"type":"function","name":"read","parameters":{"type":"object"}}]},{"type":"tool_search"}],
	 "input":[
	  {"type":"message","role":"user","content":[{"type":"input_text","text":"Hi "},"there"]},
	  {"type":"reasoning","summary":[{"type":"summary_text","text":"R1"}],"encrypted_content":"zzz"},
	  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
	  {"type":"function_call","call_id":"c1","name":"read","namespace":"fs.","arguments":"{\"path\":\"a\"}","status":"completed"},
	  {"type":"compaction","summary":"ignored"},
	  {"type":"function_call_output","call_id":"c1","output":[{"type":"output_text","text":"file"}]},
	  {"type":"reasoning","content":[{"type":"reasoning_text","text":"R2"}]},
	  {"type":"local_shell_call","call_id":"c2","action":{"cmd":["ls"]}},
	  {"type":"local_shell_call_output","call_id":"c2","output":"a b"},
	  {"type":"reasoning","summary":[{"type":"summary_text","text":"R3"}]}
	 ]}`
	r, err := ts.decodeRequest(context.Background(), apiResponses, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.msgs {
		s := m.Role + ":" + m.Content
		if m.Reasoning != "" {
			s += " [" + m.Reasoning + "]"
		}
		for _, c := range m.ToolCalls {
			s += fmt.Sprintf(" call(%s %s %s)", c.ID, c.Name, c.Arguments)
		}
		got = append(got, s)
	}
	want := []string{
		"system:Be terse.",
		"user:Hi there",
		`assistant:Let me look. [R1] call(c1 fs.read {"path":"a"})`,
		"tool:file",
		`assistant: [R2] call(c2 local_shell {"cmd":["ls"]})`,
		"tool:a b",
		"assistant: [R3]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := r.toolNames["fs.read"]; n.wire != "read" || n.namespace != "fs." || !r.toolNames["tool_search"].toolSearch {
		t.Errorf("tool names %+v", r.toolNames)
	}
	for _, want := range []string{`{"name":"fs.read","description":"","parameters":{"type":"object"}}`,
		`{"name":"tool_search","description":"Search available tools.","parameters":{"type":"object","properties":{}}}`} {
		if !strings.Contains(r.rendered, want) {
			t.Errorf("rendered prompt lacks %s", want)
		}
	}
}

func TestRenderPreservesToolBytes(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	fn := "{ \"name\": \"f\",\n  \"parameters\": {\"b\": 1, \"a\": 2} }"
	body := `{"think":false,"tools":[{"type":"function","function":` + fn + `}],"messages":[
	 {"role":"user","content":"go"},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"x1","type":"function","function":{"name":"f","arguments":"{\"z\": 1, \"a\": \"s\"}"}}]},
	 {"role":"tool","tool_call_id":"x1","content":"done </tool_result> here"}]}`
	r, err := ts.decodeRequest(context.Background(), apiChat, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### Available Tool Schemas\n\n" + fn + "\n\nYou MUST",
		"<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"z\" string=\"false\">1</｜DSML｜parameter>\n<｜DSML｜parameter name=\"a\" string=\"true\">s</｜DSML｜parameter>\n",
		"<tool_result>done &lt;/tool_result> here</tool_result><｜Assistant｜></think>",
	} {
		if !strings.Contains(r.rendered, want) {
			t.Errorf("rendered prompt lacks %q:\n%q", want, r.rendered)
		}
	}
	r, err = ts.decodeRequest(context.Background(), apiChat, []byte(strings.Replace(body, `"think":false`, `"think":false,"tool_choice":"none"`, 1)))
	if err != nil || r.hasTools || strings.Contains(r.rendered, "## Tools") {
		t.Errorf("tool_choice none: %v hasTools=%v", err, r.hasTools)
	}
}

func TestStopSequenceStreaming(t *testing.T) {
	ts, _ := scriptServer(t, nil, "Hello WORLD and more")
	status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"think":false,"stream":true,"stop":["WORLD"]}`)
	if status != 200 {
		t.Fatal(status, body)
	}
	var content strings.Builder
	finish := ""
	for _, ev := range sseEvents(body) {
		if ev == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(ev), &ch); err != nil {
			t.Fatal(err)
		}
		content.WriteString(ch.Choices[0].Delta.Content)
		if f := ch.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if content.String() != "Hello " || finish != "stop" {
		t.Errorf("content %q finish %q", content.String(), finish)
	}
}

func TestThinkingBindingReusesKV(t *testing.T) {
	ts, sess := scriptServer(t, nil, "hidden reasoning</think>Paris.", "Italy.</think>Rome.")
	status, _, body := post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Capital of France?"}]}`)
	if status != 200 || !strings.Contains(body, `"content":"Paris.","reasoning_content":"hidden reasoning"`) {
		t.Fatal(status, body)
	}
	status, _, body = post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."},{"role":"user","content":"Italy?"}]}`)
	if status != 200 || !strings.Contains(body, `"content":"Rome."`) {
		t.Fatal(status, body)
	}
	var resp struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	json.Unmarshal([]byte(body), &resp)
	// The KV keeps the hidden reasoning; the new turn is appended after it,
	// starting with the EOS the first turn ended with.
	want := "<｜User｜>Capital of France?<｜Assistant｜><think>hidden reasoning</think>Paris.<｜end▁of▁sentence｜><｜User｜>Italy?<｜Assistant｜><think>"
	if p := sess.prompt(-1); !strings.HasSuffix(p, want) || resp.Usage.Details.Cached == 0 {
		t.Errorf("cached %d; prompt %q", resp.Usage.Details.Cached, p)
	}
}

func TestAPIErrorShapes(t *testing.T) {
	e := overflowError(apiResponses, 10, 8)
	if got := string(e.body(apiResponses)); got != `{"error":{"message":"Prompt has 10 tokens, but the configured context size is 8 tokens","type":"invalid_request_error","param":"input","code":"context_length_exceeded","n_prompt_tokens":10,"n_ctx":8}}`+"\n" {
		t.Errorf("openai overflow %s", got)
	}
	if got := string(e.body(apiMessages)); got != `{"type":"error","error":{"type":"invalid_request_error","message":"Prompt has 10 tokens, but the configured context size is 8 tokens","n_prompt_tokens":10,"n_ctx":8}}`+"\n" {
		t.Errorf("anthropic overflow %s", got)
	}
	if ae := asAPIError(errors.New("boom")); ae.status != 500 {
		t.Errorf("%+v", ae)
	}
}

func TestTrace(t *testing.T) {
	var buf syncBuffer
	ts, _ := scriptServer(t, func(c *Config) { c.Trace = &buf }, "Hi there.")
	post(t, ts.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}],"think":false}`)
	waitIdle(t, ts.Server)
	got := buf.String()
	for _, want := range []string{"===== request 1 ", "kind=chat", "source=cold", "--- prompt ---\n<｜begin▁of▁sentence｜><｜User｜>hello", "--- generated ---\nHi there.", "finish=stop", "===== end request 1 ====="} {
		if !strings.Contains(got, want) {
			t.Errorf("trace lacks %q:\n%s", want, got)
		}
	}
}

// syncBuffer is a strings.Builder safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDSMLStructureGreedy offers a decoy token next to every scripted
// token of a tool call: payload bytes are sampled (the decoy shows up in
// the arguments) but structural tokens are decoded greedily (the block
// always parses, and the JSON number stays intact).
func TestDSMLStructureGreedy(t *testing.T) {
	ts, sess := scriptServer(t, nil)
	// Offer the decoy everywhere after the block opener except at the
	// token that starts the string parameter's closer: that token is
	// payload until it is written, so a decoy there legitimately breaks
	// the block (upstream behaves the same).
	toks := sess.tok.EncodeSpecial(weatherScript)
	sess.decoy = sess.tok.Encode("x")[0]
	sess.decoyFrom = len(sess.tok.EncodeSpecial("\n\n<｜DSML｜tool_calls>"))
	end := strings.Index(weatherScript, "</｜DSML｜parameter>")
	for i, n := 0, 0; i < len(toks); i++ {
		n += len(sess.tok.TokenBytes(toks[i]))
		if n > end {
			sess.decoySkip = i
			break
		}
	}
	body := `{"messages":[{"role":"user","content":"weather?"}],"think":false,"tools":[{"type":"function","function":{"name":"get_weather"}}]}`
	decoyed := 0
	for range 8 {
		sess.push(weatherScript)
		status, _, b := post(t, ts.url+"/v1/chat/completions", body)
		var resp struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(b), &resp); status != 200 || err != nil {
			t.Fatal(status, b, err)
		}
		ch := resp.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Fatalf("structure broken: %s", b)
		}
		var args struct {
			City string
			Days int
		}
		if err := json.Unmarshal([]byte(ch.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args.Days != 3 {
			t.Fatalf("arguments %s: %v", ch.Message.ToolCalls[0].Function.Arguments, err)
		}
		if args.City != `Rome & "Lazio"` {
			decoyed++
		}
	}
	if decoyed == 0 {
		t.Error("payload tokens were never sampled away from the argmax")
	}
}
