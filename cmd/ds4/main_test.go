package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/cli/clitest"
	"github.com/ds4-go/ds4/steering"
)

func runCmd(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestTokenize(t *testing.T) {
	code, out, _ := runCmd("", "tokenize", "Hello world")
	require.Equal(t, 0, code)
	require.Equal(t, "[19923,2058]\n", out)

	// The official short prompts, rendered as the API did (one user
	// message, thinking off), give the API's prompt_tokens.
	for name, want := range map[string]int{"short_italian_fact": 21, "short_reasoning_plain": 18, "short_code_completion": 27} {
		path := filepath.Join("..", "..", "engine", "prompt", "testdata", "prompts", name+".txt")
		code, out, errOut := runCmd("", "tokenize", "--chat", "-f", path)
		require.Equal(t, 0, code, errOut)
		var ids []int
		require.NoError(t, json.Unmarshal([]byte(out), &ids))
		require.Len(t, ids, want, name)
	}

	code, out, _ = runCmd("<think>", "tokenize", "--special")
	require.Equal(t, 0, code)
	require.Equal(t, "[128821]\n", out)
	code, out, _ = runCmd("", "tokenize", "--chat", "--think", "hi")
	require.Equal(t, 0, code)
	require.True(t, strings.HasSuffix(out, ",128804,128821]\n"), out)
	// With --chat the user's text is client text: special-token strings
	// in it are ordinary text, as ds4-server tokenizes them.
	code, out, _ = runCmd("<think>", "tokenize", "--chat")
	require.Equal(t, 0, code)
	require.Equal(t, "[0,128803,30,37947,32,128804,128822]\n", out)
	code, _, _ = runCmd("", "tokenize", "--think", "--nothink", "x")
	require.Equal(t, 2, code)
	code, _, _ = runCmd("", "tokenize", "a", "b")
	require.Equal(t, 2, code)
}

func TestDetokenize(t *testing.T) {
	code, out, _ := runCmd("[19923, 2058]", "detokenize")
	require.Equal(t, 0, code)
	require.Equal(t, "Hello world", out)
	path := filepath.Join(t.TempDir(), "ids.json")
	require.NoError(t, os.WriteFile(path, []byte("[0,128803]"), 0o644))
	code, out, _ = runCmd("", "detokenize", "-f", path)
	require.Equal(t, 0, code)
	require.Equal(t, "<｜begin▁of▁sentence｜><｜User｜>", out)
	code, _, errOut := runCmd("[1, 2", "detokenize")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "JSON array")
	code, _, errOut = runCmd("[999999999]", "detokenize")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "outside the vocabulary")
}

// TestGenerateTiny runs one-shot generation on the built-in tiny model:
// greedy output is deterministic, a seed reproduces a sampled run.
func TestGenerateTiny(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./ds4flash.gguf here
	code, greedy, errOut := runCmd("", "-p", "Hello", "-n", "8", "--temp", "0", "--nothink", "--ctx", "256")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "built-in tiny synthetic model")
	require.Contains(t, errOut, "generation:")
	require.NotEmpty(t, strings.TrimSpace(greedy))
	_, again, _ := runCmd("", "-p", "Hello", "-n", "8", "--temp", "0", "--nothink", "--ctx", "256")
	require.Equal(t, greedy, again)

	_, a, _ := runCmd("", "-p", "Hello", "-n", "8", "--seed", "7", "--ctx", "256")
	_, b, _ := runCmd("", "-p", "Hello", "-n", "8", "--seed", "7", "--ctx", "256")
	require.Equal(t, a, b)

	// Warming the weights first changes nothing but the start.
	code, warm, errOut := runCmd("", "-p", "Hello", "-n", "8", "--temp", "0", "--nothink", "--ctx", "256", "--warm-weights")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "ds4: warming the weights 100.0%")
	require.Equal(t, greedy, warm)
}

func TestGenerateErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-p", "", "--nothink"}, 2, "prompt is empty"},
		{[]string{"-p", "x", "--prompt-file", "f"}, 2, "only one prompt source"},
		{[]string{"-p", "x", "--temp", "-1"}, 2, "--temp -1: must be in [0, 100]"},
		{[]string{"-p", "x", "--think", "--nothink"}, 2, "exclude each other"},
		{[]string{"-p", "x", "-n", "0"}, 2, "--tokens 0: must be at least 1"},
		{[]string{"-p", "x", "-m", "/nonexistent.gguf"}, 2, "--model /nonexistent.gguf: no such file"},
		{[]string{"--bogus"}, 2, "unknown flag"},
	}
	for _, c := range cases {
		code, _, errOut := runCmd("", c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		require.Contains(t, errOut, c.msg, "%v", c.args)
	}
	t.Chdir(t.TempDir())
	code, _, errOut := runCmd("", "-p", strings.Repeat("word ", 40), "--ctx", "16")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "does not fit")
}

// TestUsageBeforeLoading checks that every bad command line fails with
// status 2 and a message naming the flag and its value, before the model
// is loaded (no tiny-model or buffer-estimate line on stderr).
func TestUsageBeforeLoading(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--ctx", "1", "-p", "hi"}, "--ctx 1: must be at least 2"},
		{[]string{"--ctx", "0"}, "--ctx 0: must be at least 2"},
		{[]string{"-t", "-1", "-p", "hi"}, "--threads -1: must be at least 0"},
		{[]string{"-n", "-5", "-p", "hi"}, "--tokens -5: must be at least 1"},
		{[]string{"--ctx", "100000000", "-p", "hi"}, "--ctx 100000000: must be at most 1048576"},
		{[]string{"--ctx", "100000000"}, "--ctx 100000000: must be at most 1048576"}, // the chat too
		{[]string{"-m", dir, "-p", "hi"}, "--model " + dir + ": is a directory, not a file"},
		{[]string{"--prompt-file", "/nope.txt"}, "--prompt-file /nope.txt: no such file"},
		{[]string{"-temp", "-1", "-p", "hi"}, "--temp -1: must be in [0, 100]"},
		{[]string{"--top-p", "2", "-p", "hi"}, "--top-p 2: must be in [0, 1]"},
		{[]string{"--min-p", "NaN", "-p", "hi"}, "--min-p NaN: must be in [0, 1]"},
		{[]string{"-p", "hi", "--trace", "/no/such/dir/t.log"}, "--trace /no/such/dir/t.log: no such directory"},
		{[]string{"-p", "hi", "--dump-logprobs", dir}, "--dump-logprobs " + dir + ": is a directory"},
		{[]string{"-p", "hi", "--dir-steering-file", "none.f32"}, "--dir-steering-file none.f32: no such file"},
		// Upstream's flags for features this build lacks are refused by
		// name, never "unknown flag".
		{[]string{"-p", "hi", "--mtp", "mtp.gguf"}, "--mtp mtp.gguf: not in this build"},
		{[]string{"-p", "hi", "--mtp-draft", "2"}, "--mtp-draft 2: not in this build"},
		{[]string{"-p", "hi", "--mtp-margin", "3"}, "--mtp-margin 3: not in this build"},
		{[]string{"-p", "hi", "--metal"}, "--metal: the Metal backend is not in this build"},
		{[]string{"-p", "hi", "--cuda"}, "--cuda: the CUDA backend is not in this build"},
		{[]string{"-p", "hi", "--backend", "metal"}, "--backend metal: not in this build"},
		{[]string{"--inspect"}, "--inspect: not in this build: ds4-quant inspect"},
		{[]string{"--dump-tokens", "-p", "hi"}, "--dump-tokens: not in this build: ds4 tokenize --special"},
		{[]string{"--server"}, "--server: use ds4-server"},
		{[]string{"--head-test"}, "--head-test: not in this build"},
		{[]string{"--metal-graph-generate"}, "--metal-graph-generate: removed upstream"},
		{[]string{"-p", "hi", "--dump-logits", "l.bin"}, "--dump-logits l.bin: not in this build"},
	} {
		code, out, errOut := runCmd("", c.args...)
		require.Equal(t, 2, code, "%q: %s", c.args, errOut)
		require.Contains(t, errOut, c.msg, "%q", c.args)
		require.NotContains(t, errOut, "unknown flag", "%q", c.args)
		require.NotContains(t, errOut, "tiny synthetic model", "%q loaded the model", c.args)
		require.NotContains(t, errOut, "context buffers", "%q", c.args)
		require.Empty(t, out, "%q", c.args)
	}

	// A context the DS4 shape allows but the model does not is refused
	// once the model is open, before the buffer estimate.
	code, _, errOut := runCmd("", "--ctx", "100000", "-p", "hi")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--ctx 100000: must be at most 65536, the context length of the built-in tiny model")
	require.NotContains(t, errOut, "context buffers")
}

// TestUpstreamSpellings runs command lines written for upstream ds4:
// single-dash long flags and flags that mean nothing on this build.
func TestUpstreamSpellings(t *testing.T) {
	t.Chdir(t.TempDir())
	base := []string{"-p", "Hello", "-n", "4", "--nothink", "--ctx", "128"}
	code, want, errOut := runCmd("", append(base, "--temp", "0")...)
	require.Equal(t, 0, code, errOut)
	for _, c := range []struct {
		args    []string
		notices []string
	}{
		{[]string{"-temp", "0"}, nil},
		{[]string{"-temp=0", "-sys", "You are a helpful assistant"}, nil},
		{[]string{"--temp", "0", "--cpu", "--backend", "cpu"}, nil},
		{[]string{"--temp", "0", "--power", "50", "--quality", "--ssd-streaming-cold", "--prefill-chunk", "512"}, []string{
			"ds4: --power 50: ignored", "ds4: --quality: ignored", "ds4: --ssd-streaming-cold: ignored", "ds4: --prefill-chunk 512: ignored",
		}},
	} {
		code, out, errOut := runCmd("", append(base, c.args...)...)
		require.Equal(t, 0, code, "%q: %s", c.args, errOut)
		require.Equal(t, want, out, "%q", c.args)
		for _, n := range c.notices {
			require.Contains(t, errOut, n+": ", "%q", c.args)
		}
		require.Equal(t, len(c.notices), strings.Count(errOut, ": ignored"), "%q: %s", c.args, errOut)
	}
}

func TestSteeringFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errOut := runCmd("", "-p", "x", "--dir-steering-ffn", "1")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "needs --dir-steering-file")
	code, _, errOut = runCmd("", "-p", "x", "--dir-steering-file", "d.f32", "--dir-steering-attn", "101")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "outside [-100, 100]")

	// A unit direction for the tiny model's 6 layers × 256: steering at
	// the FFN output changes the greedy continuation.
	p := layout.Tiny()
	v := make([]float32, p.Layers*p.Embd)
	for l := range p.Layers {
		v[l*p.Embd+l] = 1
	}
	require.NoError(t, steering.Write("dir.json", &steering.Direction{Layers: p.Layers, Embd: p.Embd, V: v}, steering.Meta{Component: "ffn_out"}))
	args := []string{"-p", "Hello", "-n", "6", "--temp", "0", "--nothink", "--ctx", "128"}
	code, plain, errOut := runCmd("", args...)
	require.Equal(t, 0, code, errOut)
	code, steered, errOut := runCmd("", append(args, "--dir-steering-file", "dir.f32", "--dir-steering-ffn", "-40")...)
	require.Equal(t, 0, code, errOut)
	require.NotEqual(t, plain, steered)
	code, same, errOut := runCmd("", append(args, "--dir-steering-file", "dir.f32", "--dir-steering-ffn", "0")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, plain, same, "zero scales leave the output unchanged")

	require.NoError(t, os.WriteFile("short.f32", make([]byte, 12), 0o644))
	code, _, errOut = runCmd("", append(args, "--dir-steering-file", "short.f32")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "want")
}

// TestDumpLogprobs checks the --dump-logprobs file: upstream's layout,
// greedy steps whose selected token is the top alternative, sorted
// log-probabilities, and the top-k cap.
func TestDumpLogprobs(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errOut := runCmd("", "-p", "Hello", "-n", "3", "--nothink", "--ctx", "64", "--dump-logprobs", "d.json", "--logprobs-top-k", "5")
	require.Equal(t, 0, code, errOut)
	raw, err := os.ReadFile("d.json")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "{\n  \"source\":\"ds4\",\n  \"prompt_tokens\":"), string(raw[:40]))
	require.True(t, strings.HasSuffix(string(raw), "\n  ]\n}\n"))
	type tok struct {
		ID    int    `json:"id"`
		Text  string `json:"text"`
		Bytes []int  `json:"bytes"`
	}
	var d struct {
		Source       string `json:"source"`
		PromptTokens int    `json:"prompt_tokens"`
		Ctx          int    `json:"ctx"`
		TopK         int    `json:"top_k"`
		Steps        []struct {
			Step     int `json:"step"`
			Selected tok `json:"selected"`
			Top      []struct {
				Token   tok     `json:"token"`
				Logit   float64 `json:"logit"`
				Logprob float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	require.Equal(t, 64, d.Ctx)
	require.Equal(t, 5, d.TopK)
	require.Len(t, d.Steps, 3)
	for i, st := range d.Steps {
		require.Equal(t, i, st.Step)
		require.Len(t, st.Top, 5)
		require.Equal(t, st.Top[0].Token.ID, st.Selected.ID)
		var mass float64
		for j, alt := range st.Top {
			require.LessOrEqual(t, alt.Logprob, 0.0)
			mass += math.Exp(alt.Logprob)
			if j > 0 {
				require.LessOrEqual(t, alt.Logprob, st.Top[j-1].Logprob)
				// logprob − logit is the same log-sum-exp for every token.
				require.InDelta(t, st.Top[0].Logit-st.Top[0].Logprob, alt.Logit-alt.Logprob, 1e-5)
			}
		}
		require.LessOrEqual(t, mass, 1.0+1e-6)
	}

	code, _, _ = runCmd("", "-p", "Hello", "-n", "1", "--ctx", "64", "--dump-logprobs", "e.json", "--logprobs-top-k", "500")
	require.Equal(t, 0, code)
	raw, _ = os.ReadFile("e.json")
	require.Contains(t, string(raw), "\"top_k\":128,")

	code, _, errOut = runCmd("", "--dump-logprobs", "x.json")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "needs a prompt")
}

// TestGenerateProgress checks the one-shot stderr: the buffer estimate
// and, for a prompt longer than one prefill step, the progress bar.
func TestGenerateProgress(t *testing.T) {
	t.Chdir(t.TempDir())
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 120)
	code, _, errOut := runCmd("", "-p", long, "-n", "1", "--nothink", "--ctx", "2048")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, fmt.Sprintf(`ds4: context buffers [0-9.]+ MiB \(ctx=2048, backend=cpu, prefill_chunk=%d, raw_kv_rows=16, compressed_kv_rows=514\)`, prefillStep), errOut)
	m := regexp.MustCompile(`ds4: processing (\d+) input tokens`).FindStringSubmatch(errOut)
	require.NotNil(t, m, errOut)
	n, _ := strconv.Atoi(m[1])
	require.Greater(t, n, prefillStep)
	require.Contains(t, errOut, fmt.Sprintf("ds4: prefill 100.0%% %d/%d", n, n))
}

// TestHelpConvention checks --help, -h and bad flags of ds4 and each of
// its commands against the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, func(stdout, stderr io.Writer) cli.Command {
		return command(strings.NewReader(""), stdout, stderr, defaultHooks())
	}, func(args []string, stdout, stderr io.Writer) int {
		return run(args, strings.NewReader(""), stdout, stderr)
	})
}

// TestSSDStreamingFlags runs ds4 with --ssd-streaming: a usage error for
// the built-in tiny model, which has no file, and for a bad size; on a
// model file, the start line with the split and the same greedy output as
// without streaming.
func TestSSDStreamingFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	base := []string{"-p", "Hello", "-n", "4", "--nothink", "--ctx", "128", "--temp", "0"}
	code, _, errOut := runCmd("", append(base, "--ssd-streaming")...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--ssd-streaming reads the experts from the model file: give one with -m")
	code, _, errOut = runCmd("", append(base, "--ssd-streaming-cache-experts", "4GiB")...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--ssd-streaming-cache-experts 4GiB: needs --ssd-streaming")
	code, _, errOut = runCmd("", append(base, "--ssd-streaming", "--ssd-streaming-cache-experts", "lots")...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--ssd-streaming-cache-experts lots: want bytes with a unit")

	p := layout.Tiny()
	_, err := synth.WriteFile("tiny.gguf", synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 5})
	require.NoError(t, err)
	model := append(base, "-m", "tiny.gguf")
	code, want, errOut := runCmd("", model...)
	require.Equal(t, 0, code, errOut)
	for _, size := range []string{"", "2", "1MiB"} {
		args := append(slices.Clone(model), "--ssd-streaming")
		if size != "" {
			args = append(args, "--ssd-streaming-cache-experts", size)
		}
		code, out, errOut := runCmd("", args...)
		require.Equal(t, 0, code, "%s: %s", size, errOut)
		require.Equal(t, want, out, size)
		require.Regexp(t, `ds4: ssd streaming: resident [0-9.]+ MiB \((mlock|populate)\), expert cache [0-9.]+ MiB = [0-9]+ experts of [0-9.]+ MiB`, errOut)
	}
}
