//go:build unix

package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
)

// TestTruncatedModelFile serves the tiny model from a mapped file and
// truncates the file under the server: requests must get a 500 that
// names the size change, /healthz must still answer, and the server must
// serve again once the file is restored.
func TestTruncatedModelFile(t *testing.T) {
	path, orig, m, ts := fileServer(t, 0)
	ac := anthropicClient(ts)
	ctx := context.Background()
	chat := chatter(ts, 3)
	if err := chat("Hello before"); err != nil {
		t.Fatal(err)
	}

	ti, _ := m.File.Tensor("token_embd.weight")
	page := int64(os.Getpagesize())
	size := int64(m.File.DataOffset+ti.Offset) / page * page
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("model file changed size: was %d, now %d", len(orig), size)
	for _, tc := range []struct {
		name string
		call func() (int, string)
	}{
		{"openai chat", func() (int, string) {
			err := chat("Hello after")
			var e *openai.Error
			if !errors.As(err, &e) {
				return 0, fmt.Sprint(err)
			}
			return e.StatusCode, e.Message
		}},
		{"anthropic messages", func() (int, string) {
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
				Model:     "deepseek-v4-flash",
				MaxTokens: 3,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi after"))},
			})
			var e *anthropic.Error
			if !errors.As(err, &e) {
				return 0, fmt.Sprint(err)
			}
			return e.StatusCode, e.Error()
		}},
	} {
		status, msg := tc.call()
		t.Logf("%s: %d %s", tc.name, status, msg)
		if status != 500 || !strings.Contains(msg, want) {
			t.Errorf("%s with the file truncated: status %d, %s; want 500 naming %q", tc.name, status, msg, want)
		}
		if strings.Contains(msg, "0x") {
			t.Errorf("%s: the reply shows an address: %s", tc.name, msg)
		}
		if status, body := get(t, ts.url+"/healthz"); status != 200 || body != "ok\n" {
			t.Fatalf("/healthz after a fault: %d %q", status, body)
		}
	}

	if err := os.WriteFile(path, orig, 0o644); err != nil { // same inode: the mapping sees it
		t.Fatal(err)
	}
	if err := chat("Hello again"); err != nil {
		t.Fatalf("after the file was restored: %v", err)
	}
}

// TestTruncatedModelFileStreaming serves the tiny model with its routed
// experts streamed through a 2-slot cache and cuts the file inside the
// last stack of routed experts (and so the tensors after it): a request
// gets a 500 naming the failed read or the fault, /healthz still answers,
// and the server serves again once the file is restored.
func TestTruncatedModelFileStreaming(t *testing.T) {
	path, orig, m, ts := fileServer(t, 2)
	var last gguf.TensorInfo
	for _, ti := range m.File.Tensors {
		if strings.Contains(ti.Name, "_exps.") && ti.Offset >= last.Offset {
			last = ti
		}
	}
	chat := chatter(ts, 8)
	if err := chat("Hello before"); err != nil {
		t.Fatal(err)
	}

	// Keep the first expert of the last stack, lose the rest.
	page := int64(os.Getpagesize())
	cut := (int64(m.File.DataOffset+last.Offset) + int64(last.Size)/int64(layout.Tiny().Experts) + page) / page * page
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	err := chat("A longer question, so that many experts are routed to and one of the lost ones is needed")
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 500 ||
		!strings.Contains(e.Message, "reading a routed expert") && !strings.Contains(e.Message, "model file changed size") {
		t.Fatalf("with the file cut: %v; want a 500 naming the expert read or the size change", err)
	}
	t.Logf("with the file cut: %s", e.Message)
	if status, body := get(t, ts.url+"/healthz"); status != 200 || body != "ok\n" {
		t.Fatalf("/healthz after a failed read: %d %q", status, body)
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chat("Hello again"); err != nil {
		t.Fatalf("after the file was restored: %v", err)
	}
}

// fileServer serves the tiny model from a file of its own, its routed
// experts streamed through a cache of slots experts when slots > 0; it
// returns the file's path and bytes, the model and the server.
func fileServer(t *testing.T, slots int) (path string, orig []byte, m *engine.Model, ts *testServer) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := synth.WriteFile(path, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: engine.TinySeed}); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = engine.Open(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.File.Close() })
	if slots > 0 {
		if err := m.Stream(path, engine.StreamOptions{Slots: slots, Direct: true}); err != nil {
			t.Fatal(err)
		}
	}
	be := cpu.New(0)
	t.Cleanup(be.Close)
	sess, err := engine.NewSession(m, be, engine.Options{Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	return path, orig, m, startServer(t, Config{Session: sess, Tiny: true, ModelName: "tiny"})
}

// chatter returns a function that sends one user message to ts through
// the OpenAI SDK, asking for at most maxTokens tokens.
func chatter(ts *testServer, maxTokens int64) func(text string) error {
	oc := openaiClient(ts)
	return func(text string) error {
		_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:     "deepseek-v4-flash",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
			MaxTokens: openai.Int(maxTokens),
		})
		return err
	}
}
