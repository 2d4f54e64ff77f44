package server

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bodies to the request decoders of all
// four protocols: they must never panic, and every failure must be an API
// error with a 4xx status whose body is valid JSON.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stop":["x",1,""]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"text","text":"a"},"b"],"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":[1,{"b":null}]}}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
		`{"prompt":["p",2],"temperature":0.5,"top_p":1,"min_p":0,"top_k":40,"seed":-1,"thinking":{"type":"disabled"}}`,
		`{"system":[{"text":"s"},"t"],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"x"}]}]}],"output_config":{"effort":"max"}}`,
		`{"input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"r"}]},{"type":"function_call","call_id":"c","name":"n","namespace":"ns","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":{"k":1}},{"type":"tool_search_output","tools":[{"type":"namespace","name":"x","tools":[{"name":"y"}]}]}],"reasoning":{"effort":"high","summary":"auto"},"instructions":"i"}`,
		`{"model":"deepseek-reasoner","messages":[],"max_completion_tokens":1e9}`,
		`[]`, `{`, `{"messages":{}}`, `{"input":7}`, `{"seed":18446744073709551615,"messages":[]}`,
	} {
		f.Add(seed)
	}
	ts, _ := scriptServer(f, nil)
	f.Fuzz(func(t *testing.T, body string) {
		for _, a := range []api{apiChat, apiCompletions, apiMessages, apiResponses} {
			r, err := ts.decodeRequest(context.Background(), a, []byte(body))
			if err == nil {
				if len(r.tokens) == 0 || len(r.tokens) >= ts.ctx || r.rendered == "" {
					t.Fatalf("%s: accepted request with %d tokens", a, len(r.tokens))
				}
				continue
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.status < 400 || ae.status >= 500 {
				t.Fatalf("%s: %v is not a client error", a, err)
			}
			if !json.Valid(ae.body(a)) {
				t.Fatalf("%s: invalid error body %q", a, ae.body(a))
			}
		}
	})
}
