package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// replArgs keep the REPL tests fast on the built-in tiny model.
var replArgs = []string{"-n", "3", "--temp", "0", "--ctx", "512"}

// runREPLCmd runs ds4 with no prompt (the REPL) on the given input lines.
func runREPLCmd(t *testing.T, input string, args ...string) (string, string) {
	t.Helper()
	return runREPLHooks(t, defaultHooks(), input, args...)
}

// runREPLHooks is runREPLCmd with the given interrupt hooks.
func runREPLHooks(t *testing.T, h replHooks, input string, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(append(append([]string{}, replArgs...), args...), strings.NewReader(input), &out, &errOut, h)
	require.Equal(t, 0, code, errOut.String())
	return out.String(), errOut.String()
}

type turnStats struct{ prefill, reused, generated int }

var (
	prefillRE   = regexp.MustCompile(`ds4: prefill (\d+) tokens \(reused (\d+)\)`)
	generatedRE = regexp.MustCompile(`ds4: generated (\d+) tokens`)
)

// prefills returns the prefill line of every turn, in order.
func prefills(t *testing.T, errOut string) []turnStats {
	t.Helper()
	var ts []turnStats
	for _, m := range prefillRE.FindAllStringSubmatch(errOut, -1) {
		n, _ := strconv.Atoi(m[1])
		r, _ := strconv.Atoi(m[2])
		ts = append(ts, turnStats{prefill: n, reused: r})
	}
	for i, m := range generatedRE.FindAllStringSubmatch(errOut, -1) {
		if i < len(ts) {
			ts[i].generated, _ = strconv.Atoi(m[1])
		}
	}
	return ts
}

// bpe returns the number of plain-text tokens of s.
func bpe(t *testing.T, s string) int {
	t.Helper()
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	return len(tok.AppendEncode(nil, s, false))
}

func TestREPLCommands(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("msg.txt", []byte("from a file"), 0o644))
	out, errOut := runREPLCmd(t, strings.Join([]string{
		"", "  /help  ", "/nothink", "/think-max", "/think", "/ctx abc", "/ctx -3",
		"/bogus", "/read missing.txt", "/read msg.txt", "/quit", "never read",
	}, "\n"))
	require.Equal(t, 2, strings.Count(out, "/read FILE"), out) // on start and for /help
	require.Contains(t, out, "Thinking mode: off.")
	require.Contains(t, out, "Thinking mode: high (ctx below 393216).")
	require.Contains(t, out, "Thinking mode: high.")
	require.Equal(t, 2, strings.Count(errOut, "ds4: /ctx needs a positive integer"), errOut)
	require.Contains(t, errOut, "ds4: unknown command: /bogus")
	require.Contains(t, errOut, "ds4: /read: open missing.txt")

	// /read sends the file as the only turn; /quit stops before "never read".
	ts := prefills(t, errOut)
	require.Len(t, ts, 1, errOut)
	want := 1 + bpe(t, prompt.CompletionSystem) + 1 + bpe(t, "from a file") + 2
	require.Equal(t, turnStats{prefill: want, reused: 0, generated: ts[0].generated}, ts[0])
	require.Contains(t, errOut, "prefill:")
	require.Contains(t, errOut, "generation:")
}

func TestREPLCtx(t *testing.T) {
	t.Chdir(t.TempDir())
	_, errOut := runREPLCmd(t, "hello\n/ctx 300\nagain\n", "--nothink")
	ts := prefills(t, errOut)
	require.Len(t, ts, 2, errOut)
	// The new session has lost the cache: the whole transcript is evaluated.
	require.Equal(t, 0, ts[1].reused)
	require.Equal(t, ts[0].prefill+ts[0].generated+1+1+bpe(t, "again")+2, ts[1].prefill)
}

func TestREPLPrefixReuse(t *testing.T) {
	t.Chdir(t.TempDir())
	_, errOut := runREPLCmd(t, "hello\nsecond turn\n")
	ts := prefills(t, errOut)
	require.Len(t, ts, 2, errOut)
	require.Equal(t, 1+bpe(t, prompt.CompletionSystem)+1+bpe(t, "hello")+2, ts[0].prefill)
	require.Equal(t, 0, ts[0].reused)
	require.Equal(t, 3, ts[0].generated)
	// Turn 2 reuses everything the session evaluated in turn 1 and
	// prefills only EOS + USER + text + ASSISTANT + <think>.
	require.Equal(t, ts[0].prefill+ts[0].generated, ts[1].reused)
	require.Equal(t, 1+1+bpe(t, "second turn")+2, ts[1].prefill)
}

// interruptAt returns hooks that make the REPL see Ctrl+C before token at
// of turn turn (both counted from 0).
func interruptAt(turn, at int) replHooks {
	c := make(chan os.Signal, 1)
	cur := -1
	return replHooks{
		interrupts: func() (<-chan os.Signal, func()) { return c, func() {} },
		beforeToken: func(n int) {
			if n == 0 {
				cur++
			}
			if cur == turn && n == at {
				c <- os.Interrupt
			}
		},
	}
}

func TestREPLInterruptKeepsPartialAnswer(t *testing.T) {
	t.Chdir(t.TempDir())
	_, errOut := runREPLHooks(t, interruptAt(0, 1), "hello\nsecond\n")
	require.Contains(t, errOut, "keeping the partial answer")
	ts := prefills(t, errOut)
	require.Len(t, ts, 2, errOut)
	require.Equal(t, 1, ts[0].generated)
	require.Equal(t, ts[0].prefill+1, ts[1].reused)
	require.Equal(t, 1+1+bpe(t, "second")+2, ts[1].prefill) // EOS closes the partial answer
}

func TestREPLInterruptRollsBack(t *testing.T) {
	t.Chdir(t.TempDir())
	_, errOut := runREPLHooks(t, interruptAt(1, 0), "hello\nlost turn\nthird\n", "--nothink")
	require.Contains(t, errOut, "ds4: interrupted\n")
	ts := prefills(t, errOut)
	require.Len(t, ts, 3, errOut)
	// Turn 2 left no trace: the session was invalidated and turn 3 is
	// evaluated from the start after turn 1.
	require.Equal(t, 0, ts[2].reused)
	require.Equal(t, ts[0].prefill+ts[0].generated+1+1+bpe(t, "third")+2, ts[2].prefill)
}

func TestREPLEmptyPrompt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.txt")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	code, _, errOut := runCmd("", "--prompt-file", path)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "prompt is empty")
}
