package vectors

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeOpenAI answers chat completions with the official fixture's tokens,
// as an OpenAI-compatible server with logprobs does.
func fakeOpenAI(t *testing.T, cases []VecCase, logprobs bool) *httptest.Server {
	byPrompt := map[string]VecCase{}
	for _, c := range cases {
		p, err := readPrompt(officialDir, c.PromptPath)
		require.NoError(t, err)
		byPrompt[p] = c
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"bad path or key"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Model       string          `json:"model"`
			Messages    []chatMessage   `json:"messages"`
			Temperature *float64        `json:"temperature"`
			MaxTokens   int             `json:"max_tokens"`
			Logprobs    bool            `json:"logprobs"`
			TopLogprobs int             `json:"top_logprobs"`
			Stream      bool            `json:"stream"`
			Thinking    json.RawMessage `json:"thinking"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c, ok := byPrompt[req.Messages[0].Content]
		if !ok || req.Model != "m" || req.Temperature == nil || *req.Temperature != 0 || !req.Logprobs ||
			req.TopLogprobs != 20 || req.Stream || string(req.Thinking) != `{"type":"disabled"}` || req.MaxTokens != len(c.Steps) {
			http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		type tok struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
			Bytes   []int   `json:"bytes"`
		}
		type content struct {
			tok
			TopLogprobs []tok `json:"top_logprobs"`
		}
		mk := func(b []byte, lp float64) tok {
			t := tok{Token: string(b), Logprob: lp, Bytes: []int{}}
			for _, v := range b {
				t.Bytes = append(t.Bytes, int(v))
			}
			return t
		}
		var out []content
		for _, s := range c.Steps {
			ct := content{tok: mk(s.Selected, 0)}
			ct.TopLogprobs = append(ct.TopLogprobs, mk(s.Selected, -0.25), tok{Token: "zz", Logprob: -3})
			out = append(out, ct)
		}
		choice := map[string]any{"index": 0, "finish_reason": "length", "message": map[string]any{"role": "assistant", "content": ""}}
		if logprobs {
			choice["logprobs"] = map[string]any{"content": out}
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "chat.completion", "choices": []any{choice}})
	}))
}

func TestEndpointSource(t *testing.T) {
	cases, err := ReadVecFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	srv := fakeOpenAI(t, cases, true)
	defer srv.Close()
	ep := &Endpoint{URL: srv.URL, Model: "m", APIKey: "k"}
	res := RunCases(context.Background(), ep, cases, RunOptions{Dir: officialDir, All: true})
	require.Len(t, res, 5)
	for _, r := range res {
		require.True(t, r.Passed(), "%s: %v %v", r.ID, r.Err, r.Failures)
		require.Equal(t, TopToken{ID: -1, Bytes: []byte("zz"), Logprob: -3}, r.Got[0].Top[1])
	}
	// The /v1 suffix is optional.
	ep.URL = srv.URL + "/v1/"
	got, err := ep.Continue(context.Background(), cases[2], mustPrompt(t, cases[2]), 1, 20)
	require.NoError(t, err)
	require.Equal(t, []byte("16"), got[0].Selected.Bytes)

	// Errors: HTTP status, then a server without logprobs.
	ep.APIKey = "wrong"
	_, err = ep.Continue(context.Background(), cases[2], mustPrompt(t, cases[2]), 1, 20)
	require.ErrorContains(t, err, "status 401: bad path or key")
	plain := fakeOpenAI(t, cases, false)
	defer plain.Close()
	ep = &Endpoint{URL: plain.URL, Model: "m", APIKey: "k"}
	_, err = ep.Continue(context.Background(), cases[2], mustPrompt(t, cases[2]), 1, 20)
	require.True(t, errors.Is(err, ErrNoLogprobs), "%v", err)
}

func mustPrompt(t *testing.T, c VecCase) string {
	p, err := readPrompt(officialDir, c.PromptPath)
	require.NoError(t, err)
	return p
}
