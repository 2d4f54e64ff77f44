package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadEvalCases(t *testing.T) {
	const file = `{"source":"GPQA","id":"q1","domain":"Physics","title":"Short","question":"Which?","choices":["x","y","z"],"answer":"C"}

{"source":"AIME","id":"q2","question":"How many?\nCount them.","answer":"042"}
{"source":"COMPSEC","id":"q3","question":"` + "Analyze this reduced C/C++ function, which is long enough that its title is cut at sixty bytes" + `","answer":"3,13-15"}
{"source":"MINE","id":"q4","question":"Which lines?","answer":"0","kind":"line_set"}
`
	cases, err := ReadEvalCases(strings.NewReader(file), "q.jsonl")
	require.NoError(t, err)
	require.Len(t, cases, 4)
	require.Equal(t, EvalCase{Source: "GPQA", ID: "q1", Domain: "Physics", Title: "Short", Question: "Which?",
		Choices: []string{"x", "y", "z"}, Answer: "C", Kind: AnswerChoice}, cases[0])
	require.Equal(t, AnswerInteger, cases[1].Kind)
	require.Equal(t, "How many?", cases[1].Title)
	require.Equal(t, AnswerLines, cases[2].Kind)
	require.Equal(t, "Analyze this reduced C/C++ function, which is long enough th", cases[2].Title)
	require.Equal(t, AnswerLines, cases[3].Kind)
	require.Equal(t, "COMPSEC/q3", cases[2].Name())

	// The file on disk, with no final newline.
	path := filepath.Join(t.TempDir(), "q.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.TrimSuffix(file, "\n")), 0o644))
	again, err := LoadEvalCases(path)
	require.NoError(t, err)
	require.Equal(t, cases, again)
	_, err = LoadEvalCases(filepath.Join(t.TempDir(), "none.jsonl"))
	require.ErrorContains(t, err, "no such file")
}

func TestReadEvalCasesErrors(t *testing.T) {
	ok := `{"source":"S","id":"a","question":"Q","answer":"1"}` + "\n"
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "", "q.jsonl: no questions"},
		{"blank", "\n  \n", "no questions"},
		{"not JSON", "answer: 1\n", "q.jsonl:1: invalid character"},
		{"unknown field", `{"source":"S","id":"a","question":"Q","answer":"1","choice":["x"]}`, `q.jsonl:1: json: unknown field "choice"`},
		{"two values", ok[:len(ok)-1] + " {}\n", "more than one JSON value"},
		{"trailing brace", ok[:len(ok)-1] + "}\n", "more than one JSON value"},
		{"missing source", `{"id":"a","question":"Q","answer":"1"}`, `"source" is missing`},
		{"missing id", `{"source":"S","question":"Q","answer":"1"}`, `"id" is missing`},
		{"missing question", `{"source":"S","id":"a","question":" ","answer":"1"}`, `"question" is missing`},
		{"missing answer", `{"source":"S","id":"a","question":"Q"}`, `"answer" is missing`},
		{"duplicate", ok + ok, "q.jsonl:2: case S/a repeats line 1"},
		{"second line", ok + "{\n", "q.jsonl:2: unexpected EOF"},
		{"eleven choices", `{"source":"S","id":"a","question":"Q","answer":"A","choices":["1","2","3","4","5","6","7","8","9","10","11"]}`, "11 choices, at most 10"},
		{"one choice", `{"source":"S","id":"a","question":"Q","answer":"A","choices":["1"]}`, "needs 2 to 10 choices"},
		{"empty choice", `{"source":"S","id":"a","question":"Q","answer":"A","choices":["1",""]}`, "choice B is empty"},
		{"key past the choices", `{"source":"S","id":"a","question":"Q","answer":"C","choices":["1","2"]}`, `answer "C": want one capital letter A-B`},
		{"lower-case key", `{"source":"S","id":"a","question":"Q","answer":"a","choices":["1","2"]}`, "want one capital letter"},
		{"choices without multiple choice", `{"source":"S","id":"a","question":"Q","answer":"1","choices":["1","2"],"kind":"exact_integer"}`, "has no choices"},
		{"multiple choice without choices", `{"source":"S","id":"a","question":"Q","answer":"A","kind":"multiple_choice"}`, "needs 2 to 10 choices, has 0"},
		{"integer key", `{"source":"S","id":"a","question":"Q","answer":"-4"}`, `answer "-4": want a non-negative integer`},
		{"line key", `{"source":"COMPSEC","id":"a","question":"Q","answer":"3 - 5"}`, `line spec "3 - 5"`},
		{"line key out of range", `{"source":"COMPSEC","id":"a","question":"Q","answer":"300"}`, "no line in 0..255"},
		{"unknown kind", `{"source":"S","id":"a","question":"Q","answer":"1","kind":"free_text"}`, `unknown kind "free_text"`},
		{"title on two lines", `{"source":"S","id":"a","title":"x\ny","question":"Q","answer":"1"}`, "spans lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadEvalCases(strings.NewReader(tc.file), "q.jsonl")
			require.ErrorContains(t, err, tc.want)
		})
	}
	long := `{"source":"S","id":"a","question":"` + strings.Repeat("x", maxQuestionLine) + `","answer":"1"}`
	_, err := ReadEvalCases(strings.NewReader(long), "q.jsonl")
	require.ErrorContains(t, err, "line longer than")
}

func FuzzReadEvalCases(f *testing.F) {
	for _, s := range []string{
		`{"source":"S","id":"a","question":"Q","answer":"1"}`,
		`{"source":"S","id":"a","question":"Q","choices":["x","y"],"answer":"B"}` + "\n" + `{"source":"COMPSEC","id":"b","question":"Q","answer":"3,4-5"}`,
		`{"source":"S","id":"a","question":"Q","answer":"0-9","kind":"line_set","title":"ééééé"}`,
		"\n\n{}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		cases, err := ReadEvalCases(strings.NewReader(file), "fuzz")
		if err != nil {
			return
		}
		// What was accepted writes back and reads again unchanged.
		var b strings.Builder
		for i := range cases {
			line, err := json.Marshal(&cases[i])
			require.NoError(t, err)
			b.Write(line)
			b.WriteByte('\n')
		}
		again, err := ReadEvalCases(strings.NewReader(b.String()), "again")
		require.NoError(t, err)
		require.Equal(t, cases, again)
	})
}
