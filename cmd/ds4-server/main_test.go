package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

func TestUsageErrors(t *testing.T) {
	t.Setenv(apiKeyEnv, "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "--kv-disk-dir"},
		{[]string{"--no-such-flag"}, 2, "unknown flag"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"--ctx", "1"}, 2, "--ctx"},
		{[]string{"--port", "70000"}, 2, "--port"},
		{[]string{"--host", "0.0.0.0", "--port", "0"}, 2, "needs an API key"},
		{[]string{"--dir-steering-ffn", "1"}, 2, "needs --dir-steering-file"},
		{[]string{"--dir-steering-attn", "-0.5"}, 2, "needs --dir-steering-file"},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-ffn", "100.5"}, 2, "outside [-100, 100]"},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-attn", "-101"}, 2, "outside [-100, 100]"},
		{[]string{"--dir-steering-ffn", "x"}, 2, "--dir-steering-ffn"},
	} {
		var stderr syncBuffer
		if code := run(c.args, &stderr, nil); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
}

func TestServeTinyModel(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./ds4flash.gguf here
	ready := make(chan string, 1)
	stop := make(chan struct{})
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--port", "0", "--ctx", "1024", "--kv-disk-dir", "kv", "--warm-weights"}, &stderr, &testHooks{ready: ready, stop: stop})
	}()
	var addr string
	select {
	case addr = <-ready:
	case c := <-code:
		t.Fatalf("exited with %d: %s", c, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("server did not start")
	}
	resp, err := http.Get("http://" + addr + "/v1/models/deepseek-v4-flash")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"tiny":true`) || !strings.Contains(string(b), `"context_length":1024`) {
		t.Errorf("model %s", b)
	}
	resp, err = http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"completion_tokens":2`) {
		t.Errorf("chat %d %s", resp.StatusCode, b)
	}
	close(stop)
	if c := <-code; c != 0 {
		t.Errorf("exit %d", c)
	}
	log := stderr.String()
	for _, want := range []string{"embedded tiny model", "listening on http://127.0.0.1:", "disk KV cache in kv", "ds4-server: warming the weights 100.0%"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestSteeringFlags(t *testing.T) {
	for _, c := range []struct {
		args      []string
		ffn, attn float32
	}{
		{nil, 0, 0},
		{[]string{"--dir-steering-file", "d.f32"}, 1, 0},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-attn", "0.5"}, 0, 0.5},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-ffn", "-2", "--dir-steering-attn", "1"}, -2, 1},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-ffn", "0"}, 0, 0},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if o.steerFFN != c.ffn || o.steerAttn != c.attn {
			t.Errorf("%v: ffn %v attn %v, want %v %v", c.args, o.steerFFN, o.steerAttn, c.ffn, c.attn)
		}
		// Both scales 0: the file is not even loaded.
		if c.ffn == 0 && c.attn == 0 {
			if st, err := loadSteering(o, nil); st != nil || err != nil {
				t.Errorf("%v: loaded steering %v %v", c.args, st, err)
			}
		}
	}
}

func TestSteeringFileMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	var stderr syncBuffer
	if code := run([]string{"--port", "0", "--ctx", "64", "--dir-steering-file", "missing.f32"}, &stderr, nil); code != 1 || !strings.Contains(stderr.String(), "missing.f32") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
