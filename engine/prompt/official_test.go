package prompt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// officialVector is the part of an upstream official API vector the
// prompt tests use.
type officialVector struct {
	ID      string `json:"id"`
	Prompt  string `json:"prompt"`
	Request struct {
		Thinking struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	} `json:"request"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// official is one official prompt with what the API rendered for it.
type official struct {
	vec      officialVector
	rendered string
	tokens   int
}

// loadOfficial reads the five official vectors and renders their requests.
func loadOfficial(t *testing.T) []official {
	t.Helper()
	files, err := filepath.Glob("testdata/official/*.official.json")
	if err != nil || len(files) != 5 {
		t.Fatalf("official vectors: %v, %d files", err, len(files))
	}
	var out []official
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var v officialVector
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		txt, err := os.ReadFile(filepath.Join("testdata/prompts", v.ID+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		if string(txt) != v.Prompt || len(v.Request.Messages) != 1 || v.Request.Messages[0].Content != v.Prompt {
			t.Fatalf("%s: prompt file and request disagree", v.ID)
		}
		opt := Options{Think: ThinkHigh, Strict: true}
		if v.Request.Thinking.Type == "disabled" {
			opt.Think = ThinkOff
		}
		msgs := []Message{{Role: v.Request.Messages[0].Role, Content: v.Request.Messages[0].Content}}
		rendered, err := Render(msgs, opt)
		if err != nil {
			t.Fatalf("%s: %v", v.ID, err)
		}
		out = append(out, official{vec: v, rendered: rendered, tokens: v.Usage.PromptTokens})
	}
	return out
}

func TestOfficialPrompts(t *testing.T) {
	want := map[string]int{
		"short_reasoning_plain": 18, "short_italian_fact": 21, "short_code_completion": 27,
		"long_memory_archive": 3353, "long_code_audit": 3844,
	}
	for _, o := range loadOfficial(t) {
		// The API rendered each request as one user turn without a system
		// prompt, thinking disabled (docs/formats/prompt.md#worked-examples).
		if exp := BOS + User + o.vec.Prompt + Assistant + ThinkClose; o.rendered != exp {
			t.Errorf("%s: rendered %q, want %q", o.vec.ID, o.rendered, exp)
		}
		if o.tokens != want[o.vec.ID] {
			t.Errorf("%s: usage says %d prompt tokens, want %d", o.vec.ID, o.tokens, want[o.vec.ID])
		}
		if strings.Contains(o.vec.Prompt, "｜") {
			t.Errorf("%s: prompt contains special-token text", o.vec.ID)
		}
	}
}
