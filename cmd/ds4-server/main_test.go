package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/cli/clitest"
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
		{[]string{"--ctx", "1"}, 2, "--ctx 1: must be at least 2"},
		{[]string{"--port", "70000"}, 2, "--port 70000: must be in [0, 65535]"},
		{[]string{"--read-timeout", "0s"}, 2, "--read-timeout 0s: must be positive"},
		{[]string{"--max-connections", "0"}, 2, "--max-connections 0: must be at least 1"},
		{[]string{"--parallel", "0"}, 2, "--parallel 0: must be at least 1"},
		{[]string{"-np", "-1"}, 2, "must be at least 1"},
		{[]string{"--host", "0.0.0.0", "--port", "0"}, 2, "--host 0.0.0.0: listening on \"0.0.0.0\" needs an API key"},
		{[]string{"--dir-steering-ffn", "1"}, 2, "needs --dir-steering-file"},
		{[]string{"--dir-steering-attn", "-0.5"}, 2, "needs --dir-steering-file"},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-ffn", "100.5"}, 2, "outside [-100, 100]"},
		{[]string{"--dir-steering-file", "d.f32", "--dir-steering-attn", "-101"}, 2, "outside [-100, 100]"},
		{[]string{"--dir-steering-ffn", "x"}, 2, "--dir-steering-ffn"},
	} {
		var stderr syncBuffer
		if code := run(c.args, &stderr, &stderr, nil); code != c.code || !strings.Contains(stderr.String(), c.want) {
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
		code <- run([]string{"--port", "0", "--ctx", "1024", "--kv-disk-dir", "kv", "--warm-weights", "--trace", "requests.trace"}, &stderr, &stderr, &testHooks{ready: ready, stop: stop})
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
	st, err := os.Stat("requests.trace")
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("trace mode %v, want 0600: it holds whole prompts", st.Mode().Perm())
	}
	log := stderr.String()
	for _, want := range []string{"embedded tiny model", "listening on http://127.0.0.1:", "disk KV cache in kv", "ds4-server: warming the weights 100.0%"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestServeParallel serves the tiny model with two slots (upstream's
// -np spelling) and a disk KV cache: the start-up log gives the slots'
// memory and /metrics lists both slots.
func TestServeParallel(t *testing.T) {
	t.Chdir(t.TempDir())
	ready := make(chan string, 1)
	stop := make(chan struct{})
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--port", "0", "--ctx", "512", "-np", "2", "--kv-disk-dir", "kv"}, &stderr, &stderr, &testHooks{ready: ready, stop: stop})
	}()
	var addr string
	select {
	case addr = <-ready:
	case c := <-code:
		t.Fatalf("exited with %d: %s", c, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("server did not start")
	}
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"completion_tokens":2`) {
		t.Errorf("chat %d %s", resp.StatusCode, b)
	}
	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "ds4_slots 2\n") {
		t.Errorf("metrics lack ds4_slots 2:\n%s", b)
	}
	close(stop)
	if c := <-code; c != 0 {
		t.Errorf("exit %d", c)
	}
	if log := stderr.String(); !strings.Contains(log, "2 slots of 512 tokens") || !strings.Contains(log, "MiB in all with the") {
		t.Errorf("log lacks the slots' memory:\n%s", log)
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
	if code := run([]string{"--port", "0", "--ctx", "64", "--dir-steering-file", "missing.f32"}, &stderr, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "--dir-steering-file missing.f32: no such file") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestUsageBeforeLoading checks that bad command lines fail with status 2
// and a message naming the flag and its value before the model is loaded.
func TestUsageBeforeLoading(t *testing.T) {
	t.Setenv(apiKeyEnv, "")
	dir := t.TempDir()
	t.Chdir(dir)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ctx", "0"}, "--ctx 0: must be at least 2"},
		{[]string{"--ctx", "100000000"}, "--ctx 100000000: must be at most 1048576"},
		{[]string{"-t", "-1"}, "--threads -1: must be at least 0"},
		{[]string{"-n", "0"}, "--tokens 0: must be at least 1"},
		{[]string{"--kv-disk-space-mb", "-5"}, "--kv-disk-space-mb -5: must be at least 1"},
		{[]string{"--kv-cache-min-tokens", "0"}, "--kv-cache-min-tokens 0: must be at least 1"},
		{[]string{"--kv-cache-boundary-trim-tokens", "-1"}, "--kv-cache-boundary-trim-tokens -1: must be at least 0"},
		{[]string{"--kv-cache-cold-max-tokens", "100"}, "--kv-cache-cold-max-tokens 100: must be 0 or at least --kv-cache-min-tokens (512)"},
		{[]string{"--queue", "0"}, "--queue 0: must be at least 1"},
		{[]string{"--keep-alive", "-1s"}, "--keep-alive -1s: must be positive"},
		{[]string{"--port", "0", "-m", dir}, "--model " + dir + ": is a directory, not a file"},
		{[]string{"--port", "0", "-m", "none.gguf"}, "--model none.gguf: no such file"},
		{[]string{"--port", "0", "--trace", "no/dir/t.log"}, "--trace no/dir/t.log: no such directory no/dir"},
		{[]string{"--port", "0", "--kv-disk-dir", file}, "--kv-disk-dir " + file + ": is a file"},
		{[]string{"--port", "0", "--chdir", "nowhere"}, "--chdir nowhere: "},
		{[]string{"--port", "0", "--ctx", "100000"}, "--ctx 100000: must be at most 65536, the context length of DS4 tiny"},
		// Upstream's flags for features this build lacks are refused by
		// name, never "unknown flag".
		{[]string{"--mtp", "mtp.gguf"}, "--mtp mtp.gguf: not in this build"},
		{[]string{"--mtp-draft", "2"}, "--mtp-draft 2: not in this build"},
		{[]string{"--mtp-margin", "3"}, "--mtp-margin 3: not in this build"},
		{[]string{"--metal"}, "--metal: the Metal backend is not in this build"},
		{[]string{"--cuda"}, "--cuda: the CUDA backend is not in this build"},
		{[]string{"--backend", "cuda"}, "--backend cuda: not in this build"},
	} {
		var stderr syncBuffer
		code := run(c.args, &stderr, &stderr, nil)
		log := stderr.String()
		if code != 2 || !strings.Contains(log, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, log, c.want)
		}
		if strings.Contains(log, "unknown flag") || strings.Contains(log, "serving") || strings.Contains(log, "warming") {
			t.Errorf("%q: %q", c.args, log)
		}
	}
}

// TestUpstreamLaunchLine serves with the deployment command line of
// upstream's notes: its flags that mean nothing here get a notice each.
func TestUpstreamLaunchLine(t *testing.T) {
	t.Setenv(apiKeyEnv, "")
	dir := t.TempDir()
	t.Chdir(dir)
	// The tiny model's shape with upstream's Think Max context.
	p := layout.Tiny()
	p.ContextLength = 393216
	var gguf bytes.Buffer
	if _, err := synth.Write(&gguf, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: engine.TinySeed}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("tiny.gguf", gguf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// Port 0 stands for upstream's 8000, which a test cannot count on.
	args := []string{"-m", "tiny.gguf", "--ctx", "393216", "--host", "127.0.0.1", "--port", "0", "--power", "100",
		"--kv-disk-dir", filepath.Join(dir, "kv"), "--kv-disk-space-mb", "8192", "--quality", "--cpu"}
	ready := make(chan string, 1)
	stop := make(chan struct{})
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(args, &stderr, &stderr, &testHooks{ready: ready, stop: stop}) }()
	select {
	case <-ready:
	case c := <-code:
		t.Fatalf("exited with %d: %s", c, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("server did not start")
	}
	close(stop)
	if c := <-code; c != 0 {
		t.Errorf("exit %d", c)
	}
	log := stderr.String()
	for _, want := range []string{
		"ds4-server: --power 100: ignored: it sets upstream's GPU duty cycle",
		"ds4-server: --quality: ignored",
		"context 393216 tokens",
		"disk KV cache in " + filepath.Join(dir, "kv"),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, ": ignored"); n != 2 {
		t.Errorf("%d notices, want 2:\n%s", n, log)
	}
}

// TestHelpConvention checks --help, -h and bad flags of ds4-server against
// the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, func(stdout, stderr io.Writer) cli.Command {
		return command(stderr, nil)
	}, func(args []string, stdout, stderr io.Writer) int {
		return run(args, stdout, stderr, nil)
	})
}
