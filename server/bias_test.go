package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestChoicesRefused checks the members that a server answering one
// choice per request cannot honour: n other than 1, and malformed
// logit_bias maps, get a 400 naming the member, on both OpenAI endpoints
// that define them.
func TestChoicesRefused(t *testing.T) {
	ts, _ := scriptServer(t, nil)
	oc := openaiClient(ts)
	ctx := context.Background()
	vocab := testTokenizer(t).VocabSize()
	tooMany := map[string]int64{}
	for i := range maxLogitBias + 1 {
		tooMany[strconv.Itoa(i)] = 1
	}
	chat := func(mod func(*openai.ChatCompletionNewParams)) func() error {
		return func() error {
			p := openai.ChatCompletionNewParams{Model: "deepseek-v4-flash", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(2)}
			mod(&p)
			_, err := oc.Chat.Completions.New(ctx, p)
			return err
		}
	}
	completion := func(mod func(*openai.CompletionNewParams)) func() error {
		return func() error {
			p := openai.CompletionNewParams{Model: "deepseek-v4-flash", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(2)}
			mod(&p)
			_, err := oc.Completions.New(ctx, p)
			return err
		}
	}
	for _, c := range []struct {
		name  string
		do    func() error
		param string // "" for success
		msg   string
	}{
		{"chat n=1", chat(func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(1) }), "", ""},
		{"chat n=2", chat(func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(2) }), "n", "n must be 1"},
		{"chat n=0", chat(func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(0) }), "n", "between 1 and"},
		{"completions n=1", completion(func(p *openai.CompletionNewParams) { p.N = openai.Int(1) }), "", ""},
		{"completions n=3", completion(func(p *openai.CompletionNewParams) { p.N = openai.Int(3) }), "n", "n must be 1"},
		{"completions best_of=1", completion(func(p *openai.CompletionNewParams) { p.BestOf = openai.Int(1) }), "", ""},
		{"completions best_of=3", completion(func(p *openai.CompletionNewParams) { p.BestOf = openai.Int(3) }), "best_of", "best_of must be 1"},
		{"chat logit_bias ok", chat(func(p *openai.ChatCompletionNewParams) { p.LogitBias = map[string]int64{"17": -100, "42": 100} }), "", ""},
		{"chat logit_bias key", chat(func(p *openai.ChatCompletionNewParams) { p.LogitBias = map[string]int64{"hello": 1} }), "logit_bias", `key "hello"`},
		{"chat logit_bias padded key", chat(func(p *openai.ChatCompletionNewParams) { p.LogitBias = map[string]int64{"017": 1} }), "logit_bias", `key "017"`},
		{"chat logit_bias id", chat(func(p *openai.ChatCompletionNewParams) { p.LogitBias = map[string]int64{strconv.Itoa(vocab): 1} }), "logit_bias", "outside the vocabulary"},
		{"completions logit_bias value", completion(func(p *openai.CompletionNewParams) { p.LogitBias = map[string]int64{"5": 101} }), "logit_bias", "between -100 and 100"},
		{"completions logit_bias entries", completion(func(p *openai.CompletionNewParams) { p.LogitBias = tooMany }), "logit_bias", "at most 300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if c.param == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != c.param || !strings.Contains(apiErr.Message, c.msg) {
				t.Fatalf("got %v, want a 400 on %s saying %q", err, c.param, c.msg)
			}
		})
	}
}

// TestLogitBiasApplied checks that logit_bias is added to the logits
// before sampling (greedy, so without thinking, whose sampling ignores
// the client's temperature): +100 makes a token the only choice of the tiny model,
// −100 bans the scripted model's only token, and the session's own logits
// are left as they were (the next unbiased request is unchanged).
func TestLogitBiasApplied(t *testing.T) {
	ctx := context.Background()
	tok := testTokenizer(t)

	t.Run("tiny model", func(t *testing.T) {
		ts := tinyServer(t, 1024, nil)
		oc := openaiClient(ts)
		greedy := func(bias map[string]int64) string {
			t.Helper()
			resp, err := oc.Completions.New(ctx, openai.CompletionNewParams{
				Model: "deepseek-chat", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The answer is")},
				MaxTokens: openai.Int(4), Temperature: openai.Float(0), LogitBias: bias,
			})
			if err != nil {
				t.Fatal(err)
			}
			return resp.Choices[0].Text
		}
		plain := greedy(nil)
		x := tok.Encode(" zebra")[0]
		if got, want := greedy(map[string]int64{strconv.Itoa(x): 100}), strings.Repeat(string(tok.TokenBytes(x)), 4); got != want {
			t.Errorf("with +100 on %d: %q, want %q", x, got, want)
		}
		if again := greedy(nil); again != plain {
			t.Errorf("unbiased request after a biased one: %q, first %q", again, plain)
		}
	})

	t.Run("scripted model", func(t *testing.T) {
		ts, sess := scriptServer(t, nil, "Hello", "Hello")
		sess.decoy = tok.Encode("x")[0]
		sess.decoySkip = -1
		oc := openaiClient(ts)
		hello := tok.Encode("Hello")
		if len(hello) != 1 {
			t.Fatalf("%q is %d tokens", "Hello", len(hello))
		}
		for _, c := range []struct {
			bias map[string]int64
			want string
		}{
			{map[string]int64{strconv.Itoa(hello[0]): -100}, "x"},
			{nil, "Hello"},
		} {
			resp, err := oc.Completions.New(ctx, openai.CompletionNewParams{
				Model: "deepseek-chat", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
				MaxTokens: openai.Int(1), Temperature: openai.Float(0), LogitBias: c.bias,
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Text != c.want {
				t.Errorf("bias %v: %q, want %q", c.bias, resp.Choices[0].Text, c.want)
			}
		}
	})
}
