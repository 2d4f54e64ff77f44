package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
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
	t.Setenv("HOME", t.TempDir()) // the chat saves ~/.ds4_history
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
		"/bogus", "/read", "/read missing.txt", "/read msg.txt", "/quit", "never read",
	}, "\n"))
	require.Equal(t, 2, strings.Count(out, "/read FILE"), out) // on start and for /help
	require.Contains(t, out, "Thinking mode: none.")
	require.Contains(t, out, "Thinking mode: high (ctx below 393216).")
	require.Contains(t, out, "Thinking mode: high.")
	require.Equal(t, 2, strings.Count(errOut, "ds4: /ctx needs a positive integer"), errOut)
	require.Contains(t, errOut, "ds4: unknown command: /bogus\nds4: type /help for commands\n")
	require.Contains(t, errOut, "ds4: /read needs a file path\n")
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
	_, errOut := runREPLCmd(t, "hello\n/ctx\t300\nagain\n", "--nothink")
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
	// Turn 2 left no trace: the session went back to where turn 1 left
	// it, and turn 3 prefills only its own message after turn 1's EOS.
	require.Equal(t, ts[0].prefill+ts[0].generated, ts[2].reused)
	require.Equal(t, 1+1+bpe(t, "third")+2, ts[2].prefill)
}

// TestREPLRejectedTurnKeepsPrefix sends a turn the chat refuses between
// two turns: the refused turn must leave the session as it was, so the
// next turn reuses everything turn 1 evaluated, and the engine evaluates
// no token of turn 1 again.
func TestREPLRejectedTurnKeepsPrefix(t *testing.T) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 60) // over 512 tokens
	for _, tc := range []struct {
		name, input, wantErr string
	}{
		{"/read too large", "/read long.txt", "does not fit in the 512-token context"},
		{"message too large", long, "does not fit in the 512-token context"},
		{"/ctx refused", "/ctx 100000000", "ds4: /ctx 100000000: must be at most 65536, the model's context length"},
		{"/ctx too small", "/ctx 1", "ds4: /ctx 1: must be at least 2"},
		{"/ctx malformed", "/ctx 12x", "ds4: /ctx needs a positive integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			require.NoError(t, os.WriteFile("long.txt", []byte(long), 0o644))
			c := &evalCounter{}
			h := defaultHooks()
			h.experts = c
			_, errOut := runREPLHooks(t, h, "hello\n"+tc.input+"\nafter\n", "--nothink")
			require.Contains(t, errOut, tc.wantErr)
			// The start's estimate only: a refused /ctx prints none.
			require.Equal(t, 1, strings.Count(errOut, "context buffers"), errOut)
			ts := prefills(t, errOut)
			require.Len(t, ts, 2, errOut)
			require.Equal(t, ts[0].prefill+ts[0].generated, ts[1].reused, errOut)
			require.Equal(t, 1+1+bpe(t, "after")+2, ts[1].prefill)
			require.Equal(t, ts[0].prefill+ts[1].prefill+ts[0].generated+ts[1].generated, c.tokens(), "tokens evaluated")
		})
	}
}

func TestREPLEmptyPrompt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.txt")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	code, _, errOut := runCmd("", "--prompt-file", path)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "prompt is empty")
}

// evalCounter counts the tokens the engine evaluates, independently of
// what the chat reports: every token meets ExpertsUsed routed experts in
// layer 0.
type evalCounter struct {
	calls atomic.Int64
	// at, when set, is called with the number of tokens evaluated so
	// far each time a token enters layer 0.
	at func(tokens int)
}

func (c *evalCounter) ObserveExpert(il, e int, in, mid []float32) {
	if il != 0 {
		return
	}
	n := c.calls.Add(1)
	if c.at != nil && n%int64(layout.Tiny().ExpertsUsed) == 0 {
		c.at(c.tokens())
	}
}

func (c *evalCounter) tokens() int { return int(c.calls.Load()) / layout.Tiny().ExpertsUsed }

// TestREPLNoRePrefill counts the tokens the engine really evaluates in a
// three-turn chat: each turn evaluates only its own message (and the EOS
// closing the previous answer) plus the tokens it generates, never the
// earlier turns again.
func TestREPLNoRePrefill(t *testing.T) {
	t.Chdir(t.TempDir())
	c := &evalCounter{}
	var atFirstToken []int // tokens evaluated when each turn samples its first token
	h := defaultHooks()
	h.experts = c
	h.beforeToken = func(n int) {
		if n == 0 {
			atFirstToken = append(atFirstToken, c.tokens())
		}
	}
	msgs := []string{"hello", "second turn", "and a third one"}
	_, errOut := runREPLHooks(t, h, strings.Join(msgs, "\n")+"\n", "--nothink")
	require.Len(t, atFirstToken, 3, errOut)
	// -n 3; the tiny model does not reach EOS so early.
	const gen = 3
	// USER + text + ASSISTANT + </think>
	frame := func(msg string) int { return 1 + bpe(t, msg) + 2 }
	want := 1 + bpe(t, prompt.CompletionSystem) + frame(msgs[0])
	require.Equal(t, want, atFirstToken[0])
	for i := 1; i < 3; i++ {
		// the previous answer's decodes, then EOS + this message
		require.Equal(t, gen+1+frame(msgs[i]), atFirstToken[i]-atFirstToken[i-1], "turn %d", i+1)
	}
	require.Equal(t, atFirstToken[2]+gen, c.tokens(), "the last answer's decodes")
	ts := prefills(t, errOut)
	require.Len(t, ts, 3)
	for i, st := range ts {
		require.Equal(t, gen, st.generated)
		if i > 0 {
			require.Equal(t, atFirstToken[i]-atFirstToken[i-1]-gen, st.prefill, "reported prefill of turn %d", i+1)
		}
	}
}

// TestREPLInterruptDuringPrefill presses Ctrl+C while a long message is
// being prefilled: the prefill stops at the next step, the turn is
// forgotten, and the next turn goes on from where turn 1 left the session.
func TestREPLInterruptDuringPrefill(t *testing.T) {
	t.Chdir(t.TempDir())
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 360)
	require.NoError(t, os.WriteFile("long.txt", []byte(long), 0o644))
	intr := make(chan os.Signal, 1)
	c := &evalCounter{}
	first := 0 // tokens evaluated by turn 1
	c.at = func(n int) {
		if n == first+prefillStep+10 {
			intr <- os.Interrupt // inside the second step of turn 2
		}
	}
	h := replHooks{
		interrupts: func() (<-chan os.Signal, func()) { return intr, func() {} },
		experts:    c,
		beforeToken: func(n int) {
			if first == 0 {
				first = c.tokens() + 3 // with the three decodes of -n 3
			}
		},
	}
	_, errOut := runREPLHooks(t, h, "hello\n/read long.txt\nafter\n", "--nothink", "--ctx", "8192")
	require.Contains(t, errOut, "ds4: interrupted\n")
	ts := prefills(t, errOut)
	require.Len(t, ts, 3, errOut)
	require.Greater(t, ts[1].prefill, 3*prefillStep, "the long turn spans several steps")
	// Turn 2 stopped after its second step; turn 3 reuses all of turn 1
	// and prefills only its own message.
	require.Equal(t, ts[0].prefill+ts[0].generated, ts[2].reused)
	require.Equal(t, 1+1+bpe(t, "after")+2, ts[2].prefill)
	require.Equal(t, first+2*prefillStep+ts[2].prefill+3, c.tokens())
}

func TestREPLBlocks(t *testing.T) {
	t.Chdir(t.TempDir())
	body := "first line\n  /indented, not a command\n\nlast line"
	_, errOut := runREPLCmd(t, "\"\"\"\n"+body+"\n  \"\"\"  \n\"\"\"\n\n\"\"\"\n", "--nothink")
	ts := prefills(t, errOut)
	require.Len(t, ts, 1, errOut) // the empty block is skipped
	require.Equal(t, 1+bpe(t, prompt.CompletionSystem)+1+bpe(t, body)+2, ts[0].prefill)
	require.NotContains(t, errOut, "unknown command")

	_, errOut = runREPLCmd(t, "hi\n\"\"\"\nnever sent\n")
	require.Len(t, prefills(t, errOut), 1, errOut)
	require.Contains(t, errOut, `ds4: the input ended inside a """ block; its text was not sent`)
}

// TestREPLProgressAndMemory checks the context-buffer line at start and
// after /ctx (the tiny model keeps a 16-row window and ctx/4+2 rows in a
// ratio-4 layer) and the prefill bar, shown only for a prefill longer
// than one step.
func TestREPLProgressAndMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 120)
	require.NoError(t, os.WriteFile("long.txt", []byte(long), 0o644))
	out, errOut := runREPLCmd(t, "hi\n/ctx 2000\n/read long.txt\n", "--nothink")
	require.Regexp(t, fmt.Sprintf(`ds4: context buffers [0-9.]+ MiB \(ctx=512, backend=cpu, prefill_chunk=%d, raw_kv_rows=16, compressed_kv_rows=130\)`, prefillStep), errOut)
	require.Regexp(t, fmt.Sprintf(`ds4: context buffers [0-9.]+ MiB \(ctx=2000, backend=cpu, prefill_chunk=%d, raw_kv_rows=16, compressed_kv_rows=502\)`, prefillStep), errOut)
	require.Contains(t, out, "Context: 2000 tokens.")
	ts := prefills(t, errOut)
	require.Len(t, ts, 2, errOut)
	require.LessOrEqual(t, ts[0].prefill, prefillStep)
	// Only the long turn, prefilled again whole after /ctx, has a bar.
	require.Equal(t, 1, strings.Count(errOut, "100.0%"), errOut)
	require.Contains(t, errOut, fmt.Sprintf("ds4: prefill 100.0%% %d/%d", ts[1].prefill, ts[1].prefill))
}

func TestREPLCtxThinkMaxWarning(t *testing.T) {
	t.Chdir(t.TempDir())
	_, errOut := runREPLCmd(t, "/think-max\n/ctx 256\n")
	require.Contains(t, errOut, "ds4: warning: /ctx needs --ctx >= 393216")
}
