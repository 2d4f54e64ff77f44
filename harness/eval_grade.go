package harness

import (
	"errors"
	"fmt"
	"strings"
)

// AnswerKind is how a question's answer is written and graded.
type AnswerKind string

// Answer kinds of ds4-eval (docs/formats/harness.md#answer-extraction-and-grading).
const (
	// AnswerChoice is a multiple-choice letter, A up to the last choice.
	AnswerChoice AnswerKind = "multiple_choice"
	// AnswerInteger is an exact non-negative integer, leading zeros ignored.
	AnswerInteger AnswerKind = "exact_integer"
	// AnswerLines is a set of line numbers such as "9", "20-22" or "3,13-15".
	AnswerLines AnswerKind = "line_set"
)

// MaxAnswerLen is the longest extracted answer in bytes; longer ones are
// cut, as upstream's fixed answer buffer cuts them.
const MaxAnswerLen = 31

// MaxLine is the largest line number a line set holds; larger numbers are
// ignored when a set is built, as upstream ignores them.
const MaxLine = 255

// Extraction windows after the word "answer" (upstream's constants).
const (
	choiceWindow  = 96
	integerWindow = 160
)

// NoAnswer is what extraction returns when the text holds no answer.
const NoAnswer = "?"

// VisibleText returns the part of a model output that is graded: the text
// after the first "</think>", or all of it when there is none. The text
// ends at its first NUL byte, where upstream's C strings end.
func VisibleText(output string) string {
	if i := strings.IndexByte(output, 0); i >= 0 {
		output = output[:i]
	}
	if _, after, ok := strings.Cut(output, "</think>"); ok {
		return after
	}
	return output
}

// ExtractAnswer returns the answer a model output gives for a question of
// the given kind (nchoices is the number of choices of a multiple-choice
// question), or NoAnswer.
func ExtractAnswer(kind AnswerKind, nchoices int, output string) string {
	switch kind {
	case AnswerChoice:
		return ExtractChoice(output, nchoices)
	case AnswerLines:
		return ExtractLines(output)
	}
	return ExtractInteger(output)
}

// Grade reports whether the extracted answer got matches the key expected.
func Grade(kind AnswerKind, expected, got string) bool {
	switch kind {
	case AnswerChoice:
		return got != "" && expected != "" && got[0] == expected[0]
	case AnswerLines:
		return LinesMatch(expected, got)
	}
	return got == NormalizeInteger(expected)
}

// ExtractChoice returns the letter (A.. up to the n-th letter) a model
// output picks, or NoAnswer. The first case-insensitive "answer" in the
// visible text starts a window of 96 bytes in which the first isolated
// candidate letter (no ASCII letter on either side, either case) wins;
// failing that, the last isolated candidate letter of the whole visible
// text does.
func ExtractChoice(output string, n int) string {
	if n <= 0 {
		return NoAnswer
	}
	visible := VisibleText(output)
	last := byte('A' + min(n, 26) - 1)
	isCandidate := func(i int) bool {
		c := asciiUpper(visible[i])
		if c < 'A' || c > last {
			return false
		}
		return (i == 0 || !isASCIILetter(visible[i-1])) && (i+1 == len(visible) || !isASCIILetter(visible[i+1]))
	}
	if at := indexFold(visible, "answer"); at >= 0 {
		for i := at; i < min(len(visible), at+choiceWindow); i++ {
			if isCandidate(i) {
				return string(asciiUpper(visible[i]))
			}
		}
	}
	for i := len(visible) - 1; i >= 0; i-- {
		if isCandidate(i) {
			return string(asciiUpper(visible[i]))
		}
	}
	return NoAnswer
}

// ExtractInteger returns the integer a model output gives, or NoAnswer:
// the first digit run within 160 bytes of the first case-insensitive
// "answer" of the visible text, else its last digit run, with leading
// zeros stripped.
func ExtractInteger(output string) string {
	visible := VisibleText(output)
	if at := indexFold(visible, "answer"); at >= 0 {
		window := visible[at:min(len(visible), at+integerWindow)]
		if i := strings.IndexAny(window, "0123456789"); i >= 0 {
			return NormalizeInteger(window[i : i+digitRun(window[i:])])
		}
	}
	for i := len(visible) - 1; i >= 0; i-- {
		if isASCIIDigit(visible[i]) {
			j := i
			for j > 0 && isASCIIDigit(visible[j-1]) {
				j--
			}
			return NormalizeInteger(visible[j : i+1])
		}
	}
	return NoAnswer
}

// NormalizeInteger strips the leading zeros of a digit string (keeping
// one digit) and cuts it to MaxAnswerLen bytes.
func NormalizeInteger(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return cutAnswer(s)
}

// ExtractLines returns the line set a model output gives, in the compact
// form "N,N-M,…", or NoAnswer. After the first case-insensitive "answer"
// of the visible text, a window of 160 bytes ending at the first newline
// is read: every digit run is a line, and two runs joined by '-' (spaces
// allowed around it) are a range. A window without digits falls back to
// ExtractInteger.
//
// Upstream drops the digit that directly follows a space after a number
// ("Answer: 9 15" gives "9,5" there); this reads every run ("9,15"), as
// the spec describes.
func ExtractLines(output string) string {
	visible := VisibleText(output)
	if at := indexFold(visible, "answer"); at >= 0 {
		window := visible[at:min(len(visible), at+integerWindow)]
		if nl := strings.IndexByte(window, '\n'); nl >= 0 {
			window = window[:nl]
		}
		if spec := lineSpec(window); spec != "" {
			return spec
		}
	}
	return ExtractInteger(output)
}

// lineSpec collects the digit runs and ranges of s as "N,N-M,…", cut to
// MaxAnswerLen bytes without trailing separators.
func lineSpec(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if !isASCIIDigit(s[i]) {
			i++
			continue
		}
		n := digitRun(s[i:])
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+n])
		i += n
		// A range: optional spaces, '-', optional spaces, digits.
		j := skipSpace(s, i)
		if j < len(s) && s[j] == '-' {
			if k := skipSpace(s, j+1); k < len(s) && isASCIIDigit(s[k]) {
				m := digitRun(s[k:])
				b.WriteByte('-')
				b.WriteString(s[k : k+m])
				i = k + m
			}
		}
	}
	return strings.TrimRight(cutAnswer(b.String()), ",-")
}

// LineSet is a set of line numbers 0..MaxLine.
type LineSet [(MaxLine + 1) / 64]uint64

// Add puts line n in the set; numbers outside 0..MaxLine are ignored.
func (s *LineSet) Add(n int) {
	if n >= 0 && n <= MaxLine {
		s[n/64] |= 1 << (n % 64)
	}
}

// Has reports whether line n is in the set.
func (s *LineSet) Has(n int) bool {
	return n >= 0 && n <= MaxLine && s[n/64]&(1<<(n%64)) != 0
}

// Empty reports whether the set holds no line.
func (s *LineSet) Empty() bool { return *s == LineSet{} }

// SubsetOf reports whether every line of s is in t.
func (s *LineSet) SubsetOf(t *LineSet) bool {
	for i := range s {
		if s[i]&^t[i] != 0 {
			return false
		}
	}
	return true
}

// ParseLines parses a line spec: comma-separated line numbers "N" and
// inclusive ranges "N-M" (a reversed range is swapped), without spaces.
// Lines above MaxLine are left out of the set, as upstream leaves them
// out; the spec is still valid.
func ParseLines(spec string) (LineSet, error) {
	var set LineSet
	if spec == "" {
		return set, errors.New("empty line spec")
	}
	for item := range strings.SplitSeq(spec, ",") {
		a, rest, ok := lineNumber(item)
		b := a
		if ok && rest != "" && rest[0] == '-' {
			b, rest, ok = lineNumber(rest[1:])
		}
		if !ok || rest != "" {
			return set, fmt.Errorf("line spec %q: want N, N-M or a comma-separated list of them", spec)
		}
		if a > b {
			a, b = b, a
		}
		for n := a; n <= min(b, MaxLine); n++ {
			set.Add(n)
		}
	}
	return set, nil
}

// lineNumber reads the leading digits of s, saturating above MaxLine+1 so
// that any longer number still counts as out of range.
func lineNumber(s string) (n int, rest string, ok bool) {
	i := digitRun(s)
	if i == 0 {
		return 0, s, false
	}
	for _, c := range s[:i] {
		n = min(10*n+int(c-'0'), MaxLine+1)
	}
	return n, s[i:], true
}

// LinesMatch reports whether the line spec got passes against the key
// expected: got names at least one line and every line it names is in
// the expected set, so one line of an accepted range passes and an extra
// line outside it fails.
func LinesMatch(expected, got string) bool {
	want, err := ParseLines(expected)
	if err != nil || want.Empty() {
		return false
	}
	have, err := ParseLines(got)
	if err != nil || have.Empty() {
		return false
	}
	return have.SubsetOf(&want)
}

// indexFold returns the index of the first ASCII-case-insensitive match of
// the lower-case word in s, or -1.
func indexFold(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for j < len(word) && asciiLower(s[i+j]) == word[j] {
			j++
		}
		if j == len(word) {
			return i
		}
	}
	return -1
}

func cutAnswer(s string) string { return s[:min(len(s), MaxAnswerLen)] }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isASCIIDigit(s[i]) {
		i++
	}
	return i
}

// skipSpace returns the index of the first byte at or after i that is not
// C isspace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	return i
}

func isASCIIDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func asciiUpper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func asciiLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c - 'A' + 'a'
	}
	return c
}
