package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The model answers below are written by hand; the expected picks follow
// upstream's extraction rules (docs/formats/harness.md#answer-extraction-and-grading).

func TestExtractChoice(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		n         int
		want      string
	}{
		{"plain final line", "Some reasoning.\nAnswer: B", 4, "B"},
		{"lower case", "answer: d", 4, "D"},
		{"shouting", "FINAL ANSWER: c", 4, "C"},
		{"trailing punctuation", "Answer: C.", 4, "C"},
		{"markdown and parentheses", "**Answer:** (B)", 4, "B"},
		{"no space after colon", "Answer:A", 4, "A"},
		{"thinking is not graded", "<think>Answer: A, surely</think>\nAnswer: D", 4, "D"},
		{"answer in thinking only", "<think>the answer is B</think>", 4, NoAnswer},
		{"answer in thinking only, letters after", "<think>the answer is B</think>\nI cannot decide.", 4, NoAnswer},
		{"no close: the whole text counts", "<think>hmm. Answer: B", 4, "B"},
		{"first candidate in the window wins", "Answer: B or C", 4, "B"},
		{"letter beyond the choices is skipped", "Answer: E, no, D", 4, "D"},
		{"letter beyond the choices, nothing else", "Answer: E", 4, NoAnswer},
		{"the article a is an isolated letter", "The answer is a tough one; it is C", 4, "A"},
		{"letters inside words never count", "Answered carefully, nothing decided", 4, NoAnswer},
		{"boxed, no answer word: last isolated letter", "So we get \\boxed{C}", 4, "C"},
		{"no answer word: last isolated letter", "Option B looks right, but D is better.", 4, "D"},
		{"window of 96 bytes", "Answer" + strings.Repeat(" ", 100) + "B then C", 4, "C"},
		{"inside the window", "Answer" + strings.Repeat(" ", 80) + "B then C", 4, "B"},
		{"second </think> is text", "x</think>Answer: B</think>C", 4, "B"},
		{"NUL ends the text", "Answer: \x00B", 4, NoAnswer},
		{"ten choices", "Answer: J", 10, "J"},
		{"no choices", "Answer: A", 0, NoAnswer},
		{"empty", "", 4, NoAnswer},
		{"non-ASCII neighbours are not letters", "Answer: éBé", 4, "B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ExtractChoice(tc.out, tc.n))
			require.Equal(t, tc.want, ExtractAnswer(AnswerChoice, tc.n, tc.out))
		})
	}
}

func TestExtractInteger(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"plain", "Answer: 24", "24"},
		{"leading zeros", "Answer: 007", "7"},
		{"zero", "Answer: 000", "0"},
		{"trailing punctuation", "Answer: 42.", "42"},
		{"boxed after the answer word", "The answer is $\\boxed{204}$.", "204"},
		{"boxed, no answer word: last number", "We get 3 cases, so \\boxed{17}", "17"},
		{"first number after answer", "Answer: 3 or maybe 4", "3"},
		{"thousands separator keeps the first run", "Answer: 1,024", "1"},
		{"thinking is not graded", "<think>answer 5</think>The result is 6", "6"},
		{"answer in thinking only", "<think>Answer: 5</think>I am not sure.", NoAnswer},
		{"first number in the window, past the answer line", "Answer: unknown.\nSteps 1, 2 and 3", "1"},
		{"window of 160 bytes", "12 Answer" + strings.Repeat(".", 160) + "99", "99"},
		{"window cuts a run", "Answer" + strings.Repeat(".", 153) + "12345", "1"},
		{"run just outside the window", "Answer" + strings.Repeat(".", 154) + "12345", "12345"},
		{"long numbers are cut", "Answer: " + strings.Repeat("9", 40), strings.Repeat("9", MaxAnswerLen)},
		{"no digits", "I do not know", NoAnswer},
		{"NUL ends the text", "Answer: 5\x00 7", "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ExtractInteger(tc.out))
			require.Equal(t, tc.want, ExtractAnswer(AnswerInteger, 0, tc.out))
		})
	}
}

func TestExtractLines(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"one line", "Answer: 7", "7"},
		{"with a word", "Answer: line 9", "9"},
		{"and", "Answer: 9 and 15", "9,15"},
		{"comma", "Answer: 9, 15", "9,15"},
		{"space only (upstream drops the 1)", "Answer: 9 15", "9,15"},
		{"range", "Answer: 20-22", "20-22"},
		{"range with spaces", "Answer: lines 20 - 22", "20-22"},
		{"mixed", "Answer: 3,13-15.", "3,13-15"},
		{"dangling dash", "Answer: 4-", "4"},
		{"dash without digits", "Answer: 4 - none, 6", "4,6"},
		{"safe", "Answer: 0", "0"},
		{"window ends at the newline", "Answer: 12\n13", "12"},
		{"empty line falls back to the integer rule", "Answer: none\nline 12", "12"},
		{"thinking is not graded", "<think>Answer: 3</think>\nAnswer: 5", "5"},
		{"answer in thinking only", "<think>Answer: 3</think>no idea", NoAnswer},
		{"no answer word: last number", "The bug is on line 8.", "8"},
		{"long lists are cut", "Answer: " + strings.Repeat("10, ", 20), "10,10,10,10,10,10,10,10,10,10,1"},
		{"cut after a separator", "Answer: 123456789012345678901234567890, 5", "123456789012345678901234567890"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ExtractLines(tc.out))
			require.Equal(t, tc.want, ExtractAnswer(AnswerLines, 0, tc.out))
		})
	}
}

func TestGrade(t *testing.T) {
	for _, tc := range []struct {
		kind          AnswerKind
		expected, got string
		pass          bool
	}{
		{AnswerChoice, "B", "B", true},
		{AnswerChoice, "B", "C", false},
		{AnswerChoice, "B", NoAnswer, false},
		{AnswerChoice, "B", "", false},
		{AnswerInteger, "24", "24", true},
		{AnswerInteger, "024", "24", true},
		{AnswerInteger, "0", "0", true},
		{AnswerInteger, "24", "240", false},
		{AnswerInteger, "24", NoAnswer, false},
		{AnswerLines, "4-5,7", "4", true},
		{AnswerLines, "4-5,7", "5", true},
		{AnswerLines, "4-5,7", "4,7", true},
		{AnswerLines, "4-5,7", "5-4", true},
		{AnswerLines, "4-5,7", "4-5,7", true},
		{AnswerLines, "4-5,7", "6", false},
		{AnswerLines, "4-5,7", "4,6", false},
		{AnswerLines, "4-5,7", "4-7", false},
		{AnswerLines, "4-5,7", "0", false},
		{AnswerLines, "4-5,7", NoAnswer, false},
		{AnswerLines, "0", "0", true},
		{AnswerLines, "0", "3", false},
		{AnswerLines, "250-255", "250-300", true},
		{AnswerLines, "250-255", "300", false},
		{AnswerLines, "3", "99999999999999999999999", false},
	} {
		require.Equal(t, tc.pass, Grade(tc.kind, tc.expected, tc.got), "%s %q %q", tc.kind, tc.expected, tc.got)
	}
}

func TestParseLines(t *testing.T) {
	set, err := ParseLines("3,13-15,9-7,255,256-300,0")
	require.NoError(t, err)
	var want []int
	for n := 0; n <= MaxLine; n++ {
		if set.Has(n) {
			want = append(want, n)
		}
	}
	require.Equal(t, []int{0, 3, 7, 8, 9, 13, 14, 15, 255}, want)
	require.False(t, set.Has(-1))
	require.False(t, set.Has(256))

	for _, bad := range []string{"", "a", "3-", "-3", "3,,4", "3 4", "1-2-3", "3,", " 3"} {
		_, err := ParseLines(bad)
		require.Error(t, err, "%q", bad)
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{"Answer: B", "<think>x</think>Answer: 3-5, 7", "answer 000", "\x00", "Answer" + strings.Repeat("9", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		c := ExtractChoice(out, 4)
		require.True(t, c == NoAnswer || len(c) == 1 && c[0] >= 'A' && c[0] <= 'D', "%q", c)
		n := ExtractInteger(out)
		require.LessOrEqual(t, len(n), MaxAnswerLen)
		require.True(t, n == NoAnswer || digitRun(n) == len(n) && (n == "0" || n[0] != '0'), "%q", n)
		l := ExtractLines(out)
		require.LessOrEqual(t, len(l), MaxAnswerLen)
		if l != NoAnswer {
			_, err := ParseLines(l)
			require.NoError(t, err, "%q from %q", l, out)
		}
	})
}
