package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Chat Completions logprobs over the tiny model, and their 400 cases.

type testLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type testLogprobEntry struct {
	testLogprob
	TopLogprobs []testLogprob `json:"top_logprobs"`
}

func TestChatLogprobs(t *testing.T) {
	ts := tinyServer(t, 1024, nil)
	url := ts.url + "/v1/chat/completions"
	const msgs = `"messages":[{"role":"user","content":"Hello"}],"thinking":{"type":"disabled"}`

	status, _, body := post(t, url, `{"temperature":0,"max_tokens":4,"logprobs":true,"top_logprobs":5,`+msgs+`}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Logprobs *struct {
				Content []testLogprobEntry `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	lp := resp.Choices[0].Logprobs
	if lp == nil {
		t.Fatalf("no logprobs: %s", body)
	}
	if len(lp.Content) == 0 || len(lp.Content) != resp.Usage.CompletionTokens {
		t.Fatalf("%d logprob entries for %d completion tokens", len(lp.Content), resp.Usage.CompletionTokens)
	}
	var text strings.Builder
	for i, c := range lp.Content {
		if len(c.TopLogprobs) != 5 {
			t.Fatalf("entry %d: %d top_logprobs, want 5", i, len(c.TopLogprobs))
		}
		if c.Logprob > 0 || c.Logprob != c.TopLogprobs[0].Logprob {
			t.Errorf("entry %d: logprob %v, top-1 %v (greedy)", i, c.Logprob, c.TopLogprobs[0].Logprob)
		}
		if c.Token != c.TopLogprobs[0].Token || !slices.Equal(c.Bytes, c.TopLogprobs[0].Bytes) {
			t.Errorf("entry %d: token %q, top-1 %q", i, c.Token, c.TopLogprobs[0].Token)
		}
		for j := 1; j < len(c.TopLogprobs); j++ {
			if c.TopLogprobs[j].Logprob > c.TopLogprobs[j-1].Logprob {
				t.Errorf("entry %d: top_logprobs not sorted: %v", i, c.TopLogprobs)
			}
		}
		for _, b := range c.Bytes {
			text.WriteByte(byte(b))
		}
	}
	if got := text.String(); got != resp.Choices[0].Message.Content {
		t.Errorf("bytes spell %q, content %q", got, resp.Choices[0].Message.Content)
	}

	// logprobs without top_logprobs: empty alternatives.
	status, _, body = post(t, url, `{"temperature":0,"max_tokens":2,"logprobs":true,`+msgs+`}`)
	if status != 200 || !strings.Contains(body, `"top_logprobs":[]`) {
		t.Errorf("status %d: %s", status, body)
	}
	// Not requested: null.
	status, _, body = post(t, url, `{"temperature":0,"max_tokens":2,`+msgs+`}`)
	if status != 200 || !strings.Contains(body, `"logprobs":null`) {
		t.Errorf("status %d: %s", status, body)
	}

	for _, c := range []struct{ name, body, want string }{
		{"top_logprobs range", `"logprobs":true,"top_logprobs":21`, `top_logprobs must be between 0 and 20`},
		{"top_logprobs negative", `"logprobs":true,"top_logprobs":-1`, `"param":"top_logprobs"`},
		{"top_logprobs fraction", `"logprobs":true,"top_logprobs":1.5`, `top_logprobs must be an integer`},
		{"top_logprobs without logprobs", `"top_logprobs":3`, `top_logprobs requires logprobs to be true`},
		{"top_logprobs with logprobs false", `"logprobs":false,"top_logprobs":3`, `top_logprobs requires logprobs to be true`},
		{"logprobs type", `"logprobs":1`, `logprobs must be a boolean`},
		{"streamed logprobs", `"logprobs":true,"stream":true`, `logprobs is not supported with stream`},
	} {
		status, _, body := post(t, url, `{`+c.body+`,`+msgs+`}`)
		if status != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: status %d: %s", c.name, status, body)
		}
	}
}
