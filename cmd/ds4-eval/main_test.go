package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/cli/clitest"
)

const example = "testdata/questions.jsonl"

// traceCase is one case record of a trace file.
type traceCase struct {
	fields map[string]string
	blocks map[string]string
}

// parseTrace reads a trace file: the header fields, the case records and
// the summary fields, checking every framed block's byte count.
func parseTrace(t *testing.T, raw string) (header map[string]string, cases []traceCase, summary map[string]string) {
	t.Helper()
	header = map[string]string{}
	rest, ok := strings.CutPrefix(raw, "# ds4-eval trace\n")
	require.True(t, ok, "trace header")
	readFields := func(dst map[string]string) {
		for rest != "" && !strings.HasPrefix(rest, "=====") {
			line, tail, _ := strings.Cut(rest, "\n")
			if strings.Contains(line, "_BEGIN bytes=") {
				return
			}
			rest = tail
			if line == "" || strings.HasPrefix(line, "  ") || line == "choices:" {
				continue
			}
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				k, ok = strings.CutSuffix(line, ":")
			}
			require.True(t, ok, "field line %q", line)
			dst[k] = v
		}
	}
	readFields(header)
	caseHead := regexp.MustCompile(`^===== CASE (\d+)/(\d+) (\S+) =====$`)
	for strings.HasPrefix(rest, "===== CASE ") {
		line, tail, _ := strings.Cut(rest, "\n")
		require.Regexp(t, caseHead, line)
		rest = tail
		c := traceCase{fields: map[string]string{"name": caseHead.FindStringSubmatch(line)[3]}, blocks: map[string]string{}}
		readFields(c.fields)
		for _, label := range []string{"SYSTEM_PROMPT", "QUESTION_PROMPT", "MODEL_OUTPUT"} {
			line, tail, _ := strings.Cut(rest, "\n")
			n, err := strconv.Atoi(strings.TrimPrefix(line, label+"_BEGIN bytes="))
			require.NoError(t, err, line)
			text := tail[:n]
			tail = tail[n:]
			if n > 0 && !strings.HasSuffix(text, "\n") {
				tail = strings.TrimPrefix(tail, "\n")
			}
			tail, ok = strings.CutPrefix(tail, label+"_END\n")
			require.True(t, ok, "%s end marker", label)
			c.blocks[label], rest = text, tail
		}
		rest = strings.TrimPrefix(rest, "\n")
		cases = append(cases, c)
	}
	rest, ok = strings.CutPrefix(rest, "===== SUMMARY =====\n")
	require.True(t, ok, "summary")
	summary = map[string]string{}
	readFields(summary)
	require.Empty(t, rest)
	return header, cases, summary
}

// reportRow is one line of the final report table.
type reportRow struct {
	state, given, correct, test string
	prompt, gen, total          int
}

var (
	summaryLine = regexp.MustCompile(`^ds4-eval: (\d+)/(\d+) passed(?:, (\d+) failed)?, runtime \d\dh:\d\dm$`)
	rowLine     = regexp.MustCompile(`^ *(\d+) (\S+) +(\d+) +(\d+) +(\d+) (\S+) +(\S+) +(\S+)$`)
	resultLine  = regexp.MustCompile(`^(PASSED|FAIL) got (\S+) expected (\S+) \(\d+\.\ds, (\d+) tokens\)$`)
)

// parseReport returns the report at the end of stdout.
func parseReport(t *testing.T, stdout string, n int) (passed, failed int, rows []reportRow) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), n+2)
	lines = lines[len(lines)-n-2:]
	m := summaryLine.FindStringSubmatch(lines[0])
	require.NotNil(t, m, lines[0])
	passed, _ = strconv.Atoi(m[1])
	require.Equal(t, strconv.Itoa(n), m[2])
	failed, _ = strconv.Atoi(m[3])
	require.Equal(t, "#   state      prompt      gen    total given    correct  test", lines[1])
	for i, l := range lines[2:] {
		m := rowLine.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		require.Equal(t, strconv.Itoa(i+1), m[1])
		r := reportRow{state: m[2], given: m[6], correct: m[7], test: m[8]}
		r.prompt, _ = strconv.Atoi(m[3])
		r.gen, _ = strconv.Atoi(m[4])
		r.total, _ = strconv.Atoi(m[5])
		require.Equal(t, r.prompt+r.gen, r.total)
		rows = append(rows, r)
	}
	return passed, failed, rows
}

// TestEvalTiny runs the example question file on the built-in tiny model
// and checks that the report, the trace and the Parquet rows agree with
// each other and with the grader applied to the model's outputs.
func TestEvalTiny(t *testing.T) {
	cases, err := harness.LoadEvalCases(example)
	require.NoError(t, err)
	dir := t.TempDir()
	tracePath := filepath.Join(dir, "trace.txt")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-f", example, "-n", "8", "--soft-limit-reply-budget", "6", "--hard-limit-reply-budget", "4",
		"--temp", "0.8", "--seed", "3", "-t", "2", "--trace", tracePath, "--parquet", dir, "--hash", "none", "--warm-weights",
		"--cpu", "--quality", "--power", "80"}, &out, &errOut) // upstream's flags that mean nothing here
	require.Contains(t, errOut.String(), "built-in tiny synthetic model")
	require.Contains(t, errOut.String(), "ds4-eval: --quality: ignored")
	require.Contains(t, errOut.String(), "ds4-eval: --power 80: ignored")
	require.Contains(t, errOut.String(), "ds4-eval: warming the weights 100.0%")
	require.Regexp(t, `context auto-sized to \d+ tokens \(largest prompt=\d+ tokens, case=5, generation budget=8\)`, errOut.String())
	require.Regexp(t, `prefill: [\d.]+ t/s \(\d+ tokens\), generation: [\d.]+ t/s \(\d+ tokens\)`, errOut.String())

	st, err := os.Stat(tracePath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the trace holds the prompts")

	passed, failed, rows := parseReport(t, out.String(), len(cases))
	require.Equal(t, len(cases), passed+failed)
	wantCode := 0
	if failed > 0 {
		wantCode = 1
	}
	require.Equal(t, wantCode, code, errOut.String())

	// The streamed output: one header and one result line per question.
	for i, c := range cases {
		require.Contains(t, out.String(), "\n["+strconv.Itoa(i+1)+"/5] EXAMPLE/"+c.Domain+" "+c.Title+"\n")
	}
	var results [][]string
	for _, l := range strings.Split(out.String(), "\n") {
		if m := resultLine.FindStringSubmatch(l); m != nil {
			results = append(results, m)
		}
	}
	require.Len(t, results, len(cases))

	raw, err := os.ReadFile(tracePath)
	require.NoError(t, err)
	header, traced, summary := parseTrace(t, string(raw))
	require.Equal(t, "builtin:tiny", header["model"])
	require.Equal(t, "8", header["max_tokens"])
	require.Equal(t, "3", header["seed"])
	require.Equal(t, "0.8", header["temperature"])
	require.Equal(t, "high", header["think_mode_requested"])
	require.Equal(t, "plain", header["think_close_tokens"])
	require.Equal(t, map[string]string{"passed": strconv.Itoa(passed), "failed": strconv.Itoa(failed), "total": "5"}, summary)
	require.Len(t, traced, len(cases))

	files, err := filepath.Glob(filepath.Join(dir, "eval", "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	recs, err := harness.ReadRows[harness.EvalRecord](files[0])
	require.NoError(t, err)
	require.Len(t, recs, len(cases))

	for i, c := range cases {
		tc, row, rec, res := traced[i], rows[i], recs[i], results[i]
		output := tc.blocks["MODEL_OUTPUT"]
		// The grader, applied here to the model's output, agrees with
		// what the run decided and reported everywhere.
		picked := harness.ExtractAnswer(c.Kind, len(c.Choices), output)
		pass := harness.Grade(c.Kind, c.Answer, picked)
		status := map[bool]string{true: "PASSED", false: "FAILED"}[pass]
		require.Equal(t, c.Name(), tc.fields["name"])
		require.Equal(t, picked, tc.fields["picked"], "case %d output %q", i+1, output)
		require.Equal(t, status, tc.fields["status"])
		require.Equal(t, c.Answer, tc.fields["expected"])
		require.Equal(t, harness.EvalSystemPrompt, tc.blocks["SYSTEM_PROMPT"])
		require.Equal(t, harness.EvalQuestionPrompt(&c), tc.blocks["QUESTION_PROMPT"])
		if c.Kind == harness.AnswerChoice {
			require.NotContains(t, tc.fields, "answer_kind")
		} else {
			require.Equal(t, "exact_integer", tc.fields["answer_kind"])
		}

		require.Equal(t, reportRow{state: status, given: picked, correct: c.Answer, test: c.Name(),
			prompt: row.prompt, gen: row.gen, total: row.total}, row)
		require.Equal(t, strconv.Itoa(row.prompt), tc.fields["prompt_tokens"])
		require.Equal(t, strconv.Itoa(row.gen), tc.fields["generated_tokens"])
		require.Equal(t, []string{map[bool]string{true: "PASSED", false: "FAIL"}[pass], picked, c.Answer, strconv.Itoa(row.gen)}, res[1:])

		require.Equal(t, status, rec.Status)
		require.Equal(t, pass, rec.Passed)
		require.Equal(t, picked, rec.Picked)
		require.Equal(t, strings.ToValidUTF8(output, "\uFFFD"), rec.Output)
		require.Equal(t, int64(row.prompt), rec.PromptTokens)
		require.Equal(t, int64(row.gen), rec.GenTokens)
		require.Equal(t, string(c.Kind), rec.Kind)
		require.Equal(t, "builtin:tiny", rec.ModelFile)
		require.Equal(t, uint64(3), rec.Seed)

		// The budget controller: 8 tokens with a hard limit of 4 leave
		// thinking closed, by the model or by force at the 5th token.
		if !rec.StoppedEOS {
			require.Equal(t, 8, row.gen)
			require.Contains(t, output, "</think>")
			if tc.fields["think_close"] == "hard_forced" {
				require.Equal(t, "5", tc.fields["think_close_token_index"])
				require.Equal(t, "4", tc.fields["think_close_remaining_budget"])
			} else {
				require.Equal(t, "natural", tc.fields["think_close"])
			}
		}
	}

	// No thinking, the corrected close mode and a question limit.
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"-f", example, "-n", "3", "--soft-limit-reply-budget", "2", "--hard-limit-reply-budget", "1",
		"--nothink", "--think-close-tokens", "special", "--questions", "2", "-t", "2", "--trace", tracePath}, &out, &errOut)
	_, failed, rows = parseReport(t, out.String(), 2)
	require.Equal(t, map[bool]int{true: 1, false: 0}[failed > 0], code, errOut.String())
	require.Equal(t, "EXAMPLE/prime-1", rows[1].test)
	raw, err = os.ReadFile(tracePath)
	require.NoError(t, err)
	header, traced, _ = parseTrace(t, string(raw))
	require.Equal(t, "none", header["think_mode_requested"])
	require.Equal(t, "special", header["think_close_tokens"])
	require.Len(t, traced, 2)
	for _, tc := range traced {
		require.Equal(t, "none", tc.fields["think_close"])
		require.Equal(t, "none", tc.fields["think_mode_effective"])
	}
}

// TestExampleQuestions checks the bundled example: five questions of all
// three kinds, with kinds both given and derived.
func TestExampleQuestions(t *testing.T) {
	cases, err := harness.LoadEvalCases(example)
	require.NoError(t, err)
	require.Len(t, cases, 5)
	kinds := map[harness.AnswerKind]int{}
	for _, c := range cases {
		kinds[c.Kind]++
	}
	require.Equal(t, map[harness.AnswerKind]int{harness.AnswerChoice: 2, harness.AnswerInteger: 2, harness.AnswerLines: 1}, kinds)
	// The keys are right: a correct final line passes, a wrong one fails.
	for _, c := range cases {
		require.True(t, harness.Grade(c.Kind, c.Answer, harness.ExtractAnswer(c.Kind, len(c.Choices), "<think>…</think>\nAnswer: "+c.Answer)), c.Name())
		require.False(t, harness.Grade(c.Kind, c.Answer, harness.ExtractAnswer(c.Kind, len(c.Choices), "Answer: 8")), c.Name())
	}
}

func TestEvalUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"source":"S","id":"a","question":"Q","answer":"x"}`+"\n"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "give the question file with -f/--questions-file"},
		{[]string{"-f", example, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-f", example, "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"-f", example, "--think", "--nothink"}, 2, "exclude each other"},
		{[]string{"-f", example, "--cuda"}, 2, "--cuda: the CUDA backend is not in this build"},
		{[]string{"-f", example, "--metal"}, 2, "--metal: the Metal backend is not in this build"},
		{[]string{"-f", example, "--backend", "metal"}, 2, "--backend metal: not in this build: the only backend is cpu"},
		{[]string{"-f", example, "--mtp", "x.gguf"}, 2, "--mtp x.gguf: not in this build"},
		{[]string{"-f", example, "-n", "0"}, 2, "--tokens 0: must be at least 1"},
		{[]string{"-f", example, "-n", "1000001"}, 2, "--tokens 1000001: exceeds the 1000000 token context cap"},
		{[]string{"-f", example, "-n", "512"}, 2, "--hard-limit-reply-budget 512: must be smaller than --tokens (512)"},
		{[]string{"-f", example, "--soft-limit-reply-budget", "100"}, 2, "--soft-limit-reply-budget 100: must be >= --hard-limit-reply-budget (512)"},
		{[]string{"-f", example, "--soft-limit-think-close-rank", "0"}, 2, "--soft-limit-think-close-rank 0: must be at least 1"},
		{[]string{"-f", example, "--temp", "101"}, 2, "--temp 101: must be in [0, 100]"},
		{[]string{"-f", example, "-temp", "0", "--top-p", "1.5"}, 2, "--top-p 1.5: must be in [0, 1]"},
		{[]string{"-f", example, "-t", "-1"}, 2, "--threads -1: must be at least 0"},
		{[]string{"-f", example, "--questions", "0"}, 2, "--questions 0: must be at least 1"},
		{[]string{"-f", example, "--pause-ms", "0"}, 2, "--pause-ms 0: must be at least 1"},
		{[]string{"-f", example, "--think-close-tokens", "both"}, 2, `--think-close-tokens both: must be plain or special`},
		{[]string{"-f", example, "--questions", "6"}, 2, "holds only 5 questions"},
		{[]string{"-f", example, "--hash", "md5"}, 2, `--hash md5: must be sha256, quick or none`},
		{[]string{"-f", example, "-m", "/nope.gguf"}, 2, "--model /nope.gguf: no such file"},
		{[]string{"-f", example, "--trace", filepath.Join(t.TempDir(), "no", "dir", "t.txt")}, 2, "no such directory"},
		{[]string{"-f", filepath.Join(t.TempDir(), "none.jsonl")}, 2, "none.jsonl: no such file"},
		{[]string{"-f", bad}, 1, `bad.jsonl:1: case S/a: answer "x": want a non-negative integer`},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errOut), "%v: %s", tc.args, errOut.String())
		require.Contains(t, errOut.String(), tc.want, tc.args)
		require.NotContains(t, errOut.String(), "tiny synthetic model", "%v loaded the model", tc.args)
		require.NotContains(t, errOut.String(), "context buffers", tc.args)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errOut))
	require.Contains(t, out.String(), "Usage: ds4-eval -f QUESTIONS.jsonl")
	require.Contains(t, out.String(), "--soft-limit-think-close-rank")
	require.Contains(t, out.String(), "kind         multiple_choice | exact_integer | line_set")
}

// TestPlainColor checks the terminal styling of the plain stream: the
// thinking is dimmed up to the token that closes it.
func TestPlainColor(t *testing.T) {
	var b strings.Builder
	p := &plain{w: &b, color: true}
	c := &harness.EvalCase{Source: "S", ID: "a", Domain: "D", Title: "T", Answer: "B", Kind: harness.AnswerChoice, Choices: []string{"x", "y"}}
	r := &harness.EvalResult{Index: 0, Case: c, Status: harness.StatusPassed, Picked: "B", Generated: 3, GenSec: 0.25, Output: "hm</think> B"}
	p.start(r, 2, true)
	p.token([]byte("hm"), true)
	p.token([]byte("</think>"), false)
	p.token([]byte(" B"), false)
	p.result(r, 2, 100)
	require.Equal(t, "\n\x1b[1m[1/2] \x1b[36mS\x1b[0m/\x1b[36mD\x1b[0m T\x1b[0m\n\x1b[90mhm\x1b[0m</think> B\n"+
		"\x1b[32mPASSED\x1b[0m got B expected B (0.2s, 3 tokens)\n", b.String())

	b.Reset()
	p = &plain{w: &b}
	r.Status, r.Output = harness.StatusStopped, "hm"
	p.start(r, 2, true)
	p.token([]byte("hm"), true)
	p.result(r, 2, 100)
	require.Equal(t, "\n[1/2] S/D T\nhm\nSTOPPED (0.2s, 3 tokens)\n", b.String())

	b.Reset()
	r.Status, r.PromptTokens = harness.StatusSkipped, 120
	p.result(r, 2, 100)
	require.Equal(t, "\n[1/2] SKIPPED S/a prompt=120 ctx=100\n", b.String())
}

// TestHelpConvention checks --help, -h and bad flags of ds4-eval against
// the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, func(stdout, stderr io.Writer) cli.Command {
		return command(context.Background(), stdout, stderr)
	}, func(args []string, stdout, stderr io.Writer) int {
		return run(context.Background(), args, stdout, stderr)
	})
}
