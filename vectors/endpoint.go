package vectors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrNoLogprobs is returned when an endpoint answers without logprobs.
var ErrNoLogprobs = errors.New("vectors: the endpoint returned no logprobs")

// Endpoint is an OpenAI-compatible server (upstream ds4-server,
// llama-server, vLLM, the hosted API) queried through
// /v1/chat/completions with logprobs and top_logprobs, so other engines
// are measured with the same rule and metrics.
type Endpoint struct {
	// URL is the server's base URL, with or without the /v1 suffix.
	URL string
	// Model is the model id sent in requests.
	Model string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
}

// chatURL returns the chat completions URL.
func (e *Endpoint) chatURL() string {
	u := strings.TrimRight(e.URL, "/")
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	return u + "/chat/completions"
}

type chatRequest struct {
	Model        string         `json:"model"`
	Messages     []chatMessage  `json:"messages"`
	Temperature  float64        `json:"temperature"`
	MaxTokens    int            `json:"max_tokens"`
	Logprobs     bool           `json:"logprobs"`
	TopLogprobs  int            `json:"top_logprobs"`
	Stream       bool           `json:"stream"`
	Thinking     map[string]any `json:"thinking"`
	TemplateArgs map[string]any `json:"chat_template_kwargs"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type apiToken struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type apiContent struct {
	apiToken
	TopLogprobs []apiToken `json:"top_logprobs"`
}

type chatResponse struct {
	Choices []struct {
		Logprobs *struct {
			Content []apiContent `json:"content"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (t apiToken) topToken() TopToken {
	b := []byte(t.Token)
	if t.Bytes != nil {
		b = make([]byte, len(t.Bytes))
		for i, v := range t.Bytes {
			b[i] = byte(v)
		}
	}
	return TopToken{ID: -1, Bytes: b, Logprob: t.Logprob}
}

// Continue implements Source: one greedy request (temperature 0, thinking
// disabled both the DeepSeek way and through chat_template_kwargs) for
// steps tokens with k alternatives each. Fewer steps come back when the
// server stops early (EOS).
func (e *Endpoint) Continue(ctx context.Context, c VecCase, prompt string, steps, k int) ([]Step, error) {
	body, err := json.Marshal(chatRequest{
		Model:        e.Model,
		Messages:     []chatMessage{{Role: "user", Content: prompt}},
		MaxTokens:    steps,
		Logprobs:     true,
		TopLogprobs:  k,
		Thinking:     map[string]any{"type": "disabled"},
		TemplateArgs: map[string]any{"thinking": false, "enable_thinking": false},
	})
	if err != nil {
		return nil, fmt.Errorf("vectors: %s: %w", c.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.chatURL(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("vectors: %s: %w", c.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	client := e.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("vectors: %s: %w", c.ID, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("vectors: %s: %s: %w", c.ID, e.chatURL(), err)
	}
	var r chatResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("vectors: %s: %s: status %d: %w", c.ID, e.chatURL(), resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || r.Error != nil {
		msg := strings.TrimSpace(string(raw))
		if r.Error != nil {
			msg = r.Error.Message
		}
		return nil, fmt.Errorf("vectors: %s: %s: status %d: %s", c.ID, e.chatURL(), resp.StatusCode, msg)
	}
	if len(r.Choices) == 0 || r.Choices[0].Logprobs == nil {
		return nil, fmt.Errorf("%w (%s, case %s)", ErrNoLogprobs, e.chatURL(), c.ID)
	}
	var out []Step
	for _, ct := range r.Choices[0].Logprobs.Content {
		st := Step{Selected: ct.topToken()}
		for _, t := range ct.TopLogprobs {
			st.Top = append(st.Top, t.topToken())
		}
		out = append(out, st)
	}
	return out, nil
}
