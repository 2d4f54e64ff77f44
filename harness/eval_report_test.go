package harness

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reportResults are hand-made results of three cases.
func reportResults() []EvalResult {
	mc := &EvalCase{Source: "GPQA", ID: "rec1", Domain: "Physics", Title: "Light", Question: "Q?", Choices: []string{"red", "blue"}, Answer: "B", Kind: AnswerChoice}
	in := &EvalCase{Source: "AIME", ID: "7", Domain: "Math", Title: "Count", Question: "N?", Answer: "42", Kind: AnswerInteger}
	ln := &EvalCase{Source: "COMPSEC", ID: "c1", Title: "Bug", Question: "Line?", Answer: "4-5,7", Kind: AnswerLines}
	return []EvalResult{
		{Index: 0, Case: mc, Status: StatusPassed, Picked: "B", Prompt: EvalQuestionPrompt(mc), PromptTokens: 90, Generated: 12,
			GenSec: 1.23456, PrefillSec: 0.5, Output: "<think>hm</think>\nAnswer: B", Close: ThinkClose{CloseNatural, 5, 20, 0}, EOS: true},
		{Index: 1, Case: in, Status: StatusFailed, Picked: "41", Prompt: EvalQuestionPrompt(in), PromptTokens: 70, Generated: 16,
			GenSec: 2, Output: "x</think>Answer: 41\n", Close: ThinkClose{CloseHard, 13, 4, 0}},
		{Index: 2, Case: ln, Status: StatusSkipped, Prompt: EvalQuestionPrompt(ln), PromptTokens: 3000, Err: "prompt does not fit context"},
	}
}

func TestWriteEvalReport(t *testing.T) {
	var b strings.Builder
	require.NoError(t, WriteEvalReport(&b, reportResults(), 2*time.Hour+5*time.Minute+59*time.Second))
	require.Equal(t, `ds4-eval: 1/3 passed, 1 failed, runtime 02h:05m
#   state      prompt      gen    total given    correct  test
  1 PASSED         90       12      102 B        B        GPQA/rec1
  2 FAILED         70       16       86 41       42       AIME/7
  3 SKIPPED      3000        0     3000 -        4-5,7    COMPSEC/c1
`, b.String())

	b.Reset()
	rs := reportResults()[:1]
	require.NoError(t, WriteEvalReport(&b, rs, 0))
	require.True(t, strings.HasPrefix(b.String(), "ds4-eval: 1/1 passed, runtime 00h:00m\n"), b.String())
	require.Equal(t, "00h:00m", FormatRuntime(-time.Second))
	require.Equal(t, "100h:00m", FormatRuntime(100*time.Hour+30*time.Second))
}

func TestWriteEvalTrace(t *testing.T) {
	cfg := EvalConfig{Tokens: 16000, Temperature: 0, TopP: 1, MinP: 0.05, Seed: 99, Think: true, SoftBudget: 1024, HardBudget: 512, SoftRank: 3}
	var b strings.Builder
	require.NoError(t, WriteEvalTraceHeader(&b, EvalTraceHeader{Started: time.Unix(1700000000, 0), Model: "builtin:tiny", Backend: "cpu",
		Ctx: 16090, MaxPromptTokens: 90, Questions: 3, QuestionsFile: "q.jsonl", Config: cfg}))
	at := time.Unix(1700000100, 0)
	rs := reportResults()
	for i := range rs {
		require.NoError(t, WriteEvalTraceCase(&b, &rs[i], len(rs), cfg, at))
	}
	require.NoError(t, WriteEvalTraceSummary(&b, rs))
	want := `# ds4-eval trace
started_unix: 1700000000
model: builtin:tiny
backend: cpu
ctx: 16090
max_tokens: 16000
max_prompt_tokens: 90
questions: 3
temperature: 0
top_p: 1
min_p: 0.05
seed: 99
think_mode_requested: high
soft_limit_reply_budget: 1024
hard_limit_reply_budget: 512
soft_limit_think_close_rank: 3
questions_file: q.jsonl
think_close_tokens: plain

===== CASE 1/3 GPQA/rec1 =====
timestamp_unix: 1700000100
source: GPQA
id: rec1
domain: Physics
title: Light
status: PASSED
picked: B
expected: B
prompt_tokens: 90
generated_tokens: 12
elapsed_sec: 1.235
temperature: 0
top_p: 1
min_p: 0.05
think_mode_effective: high
think_close: natural
think_close_token_index: 5
think_close_remaining_budget: 20
think_close_rank: 0
choices:
  A. red
  B. blue
SYSTEM_PROMPT_BEGIN bytes=119
` + EvalSystemPrompt + `
SYSTEM_PROMPT_END
QUESTION_PROMPT_BEGIN bytes=157
Q?

Choices:
A. red
B. blue

Solve the question. At the end, write exactly one final line in this format and do not write anything after it:
Answer: <letter>
QUESTION_PROMPT_END
MODEL_OUTPUT_BEGIN bytes=27
<think>hm</think>
Answer: B
MODEL_OUTPUT_END

===== CASE 2/3 AIME/7 =====
timestamp_unix: 1700000100
source: AIME
id: 7
domain: Math
title: Count
status: FAILED
picked: 41
expected: 42
prompt_tokens: 70
generated_tokens: 16
elapsed_sec: 2.000
temperature: 0
top_p: 1
min_p: 0.05
think_mode_effective: high
think_close: hard_forced
think_close_token_index: 13
think_close_remaining_budget: 4
think_close_rank: 0
answer_kind: exact_integer
SYSTEM_PROMPT_BEGIN bytes=119
` + EvalSystemPrompt + `
SYSTEM_PROMPT_END
QUESTION_PROMPT_BEGIN bytes=132
N?

Solve the problem. At the end, write exactly one final line in this format and do not write anything after it:
Answer: <integer>
QUESTION_PROMPT_END
MODEL_OUTPUT_BEGIN bytes=20
x</think>Answer: 41
MODEL_OUTPUT_END

===== CASE 3/3 COMPSEC/c1 =====
timestamp_unix: 1700000100
source: COMPSEC
id: c1
domain: 
title: Bug
status: SKIPPED
picked: ?
expected: 4-5,7
prompt_tokens: 3000
generated_tokens: 0
elapsed_sec: 0.000
temperature: 0
top_p: 1
min_p: 0.05
think_mode_effective: high
think_close: none
error: prompt does not fit context
answer_kind: exact_integer
SYSTEM_PROMPT_BEGIN bytes=119
` + EvalSystemPrompt + `
SYSTEM_PROMPT_END
QUESTION_PROMPT_BEGIN bytes=152
Line?

At the end, write exactly one final line in this format and do not write anything after it:
Answer: <line number or comma-separated line numbers>
QUESTION_PROMPT_END
MODEL_OUTPUT_BEGIN bytes=0
MODEL_OUTPUT_END

===== SUMMARY =====
passed: 1
failed: 1
total: 3
`
	require.Equal(t, want, b.String())
	// Each framed block's byte count is the length of what it frames.
	for _, r := range rs {
		require.Contains(t, b.String(), "QUESTION_PROMPT_BEGIN bytes="+strconv.Itoa(len(r.Prompt))+"\n"+r.Prompt)
	}
}

func TestWriteEvalRun(t *testing.T) {
	dir := t.TempDir()
	meta, err := CollectMeta(MetaOptions{Tool: "ds4-eval", Backend: "cpu", Threads: 2, Args: []string{"ds4-eval", "-f", "q.jsonl"},
		Now: time.Date(2026, 5, 21, 10, 11, 12, 0, time.UTC)})
	require.NoError(t, err)
	cfg := EvalConfig{Tokens: 64, TopP: 1, MinP: 0.05, Seed: 1<<63 + 5, Think: true, SoftBudget: 32, HardBudget: 16, SoftRank: 3, SpecialClose: true}
	rs := reportResults()
	rs[1].Output = "bad \xff byte"
	path, err := WriteEvalRun(dir, meta, NewEvalSettings("q.jsonl", 3064, cfg), rs)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "eval", "model=builtin_tiny", "date=2026-05-21", meta.RunID+".parquet"), path)
	recs, err := ReadRows[EvalRecord](path)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, EvalSettings{QuestionsFile: "q.jsonl", Ctx: 3064, MaxTokens: 64, Temperature: 0, TopP: 1, MinP: float64(float32(0.05)),
		Seed: 1<<63 + 5, ThinkMode: "high", SoftBudget: 32, HardBudget: 16, SoftRank: 3, CloseTokens: "special"}, recs[0].EvalSettings)
	require.Equal(t, EvalRow{CaseIndex: 0, Source: "GPQA", CaseID: "rec1", Domain: "Physics", Title: "Light", Kind: "multiple_choice",
		Choices: 2, Prompt: rs[0].Prompt, Expected: "B", Picked: "B", Status: "PASSED", Passed: true, PromptTokens: 90, GenTokens: 12,
		StoppedEOS: true, PrefillSeconds: 0.5, GenSeconds: 1.23456, GenTPS: 12 / 1.23456, ThinkClose: "natural", ThinkCloseIndex: 5,
		ThinkCloseRemaining: 20, Output: rs[0].Output}, recs[0].EvalRow)
	require.Equal(t, "bad \uFFFD byte", recs[1].Output)
	require.Equal(t, "hard_forced", recs[1].ThinkClose)
	require.False(t, recs[1].Passed)
	require.Equal(t, "SKIPPED", recs[2].Status)
	require.Equal(t, "prompt does not fit context", recs[2].Error)
	require.Equal(t, "line_set", recs[2].Kind)
	require.Equal(t, meta.RunID, recs[2].RunID)
	kv, err := ReadMetadata(path)
	require.NoError(t, err)
	require.Contains(t, kv["ds4.run"], `"Tool":"ds4-eval"`)
}
