package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// MaxChoices is the largest number of choices a question may have.
const MaxChoices = 10

// LinesSource is the source whose questions are line sets when their kind
// is not given (upstream's COMPSEC set).
const LinesSource = "COMPSEC"

// maxQuestionLine bounds one JSONL line of a question file.
const maxQuestionLine = 4 << 20

// titleLen is the length of a title made from the question.
const titleLen = 60

// EvalCase is one question of a ds4-eval question file (one JSON object
// per line).
type EvalCase struct {
	Source   string     `json:"source"`
	ID       string     `json:"id"`
	Domain   string     `json:"domain,omitempty"`
	Title    string     `json:"title,omitempty"`
	Question string     `json:"question"`
	Choices  []string   `json:"choices,omitempty"`
	Answer   string     `json:"answer"`
	Kind     AnswerKind `json:"kind,omitempty"`
}

// Name returns the case's "source/id".
func (c *EvalCase) Name() string { return c.Source + "/" + c.ID }

// normalize derives the omitted fields (kind as upstream derives it:
// choices make a multiple-choice question, the COMPSEC source a line set,
// anything else an exact integer; the title from the question) and checks
// the case.
func (c *EvalCase) normalize() error {
	switch {
	case c.Source == "":
		return errors.New(`"source" is missing`)
	case c.ID == "":
		return errors.New(`"id" is missing`)
	case strings.TrimSpace(c.Question) == "":
		return errors.New(`"question" is missing`)
	case c.Answer == "":
		return errors.New(`"answer" is missing`)
	case len(c.Choices) > MaxChoices:
		return fmt.Errorf("%d choices, at most %d", len(c.Choices), MaxChoices)
	}
	for _, f := range []string{c.Source, c.ID, c.Domain, c.Title} {
		if strings.ContainsAny(f, "\r\n") {
			return fmt.Errorf("field %q spans lines", f)
		}
	}
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	if c.Kind == "" {
		switch {
		case len(c.Choices) > 0:
			c.Kind = AnswerChoice
		case c.Source == LinesSource:
			c.Kind = AnswerLines
		default:
			c.Kind = AnswerInteger
		}
	}
	if c.Title == "" {
		c.Title = defaultTitle(c.Question)
	}
	switch c.Kind {
	case AnswerChoice:
		if len(c.Choices) < 2 {
			return fmt.Errorf("a %s question needs 2 to %d choices, has %d", c.Kind, MaxChoices, len(c.Choices))
		}
		for i, ch := range c.Choices {
			if strings.TrimSpace(ch) == "" {
				return fmt.Errorf("choice %c is empty", 'A'+i)
			}
		}
		last := byte('A' + len(c.Choices) - 1)
		if len(c.Answer) != 1 || c.Answer[0] < 'A' || c.Answer[0] > last {
			return fmt.Errorf("answer %q: want one capital letter A-%c", c.Answer, last)
		}
	case AnswerInteger, AnswerLines:
		if len(c.Choices) > 0 {
			return fmt.Errorf("a %s question has no choices", c.Kind)
		}
		if c.Kind == AnswerInteger {
			if digitRun(c.Answer) != len(c.Answer) {
				return fmt.Errorf("answer %q: want a non-negative integer", c.Answer)
			}
			break
		}
		set, err := ParseLines(c.Answer)
		if err != nil {
			return err
		}
		if set.Empty() {
			return fmt.Errorf("answer %q: no line in 0..%d", c.Answer, MaxLine)
		}
	default:
		return fmt.Errorf("unknown kind %q (want %s, %s or %s)", c.Kind, AnswerChoice, AnswerInteger, AnswerLines)
	}
	return nil
}

// defaultTitle is the question's first line cut to titleLen bytes at a
// character boundary.
func defaultTitle(q string) string {
	q, _, _ = strings.Cut(strings.TrimSpace(q), "\n")
	if len(q) <= titleLen {
		return q
	}
	n := titleLen
	for n > 0 && !utf8.RuneStart(q[n]) {
		n--
	}
	return strings.TrimSpace(q[:n])
}

// ReadEvalCases reads a question file: one JSON object per line (blank
// lines are skipped) with the fields of EvalCase, unknown fields refused.
// name labels the errors.
func ReadEvalCases(r io.Reader, name string) ([]EvalCase, error) {
	br := bufio.NewReader(r)
	var cases []EvalCase
	seen := map[string]int{}
	for line := 1; ; line++ {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			raw, err = readLongLine(br, raw)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("eval: %s:%d: %w", name, line, err)
		}
		if text := bytes.TrimSpace(raw); len(text) > 0 {
			c, perr := parseEvalCase(text)
			if perr != nil {
				return nil, fmt.Errorf("eval: %s:%d: %w", name, line, perr)
			}
			if first, dup := seen[c.Name()]; dup {
				return nil, fmt.Errorf("eval: %s:%d: case %s repeats line %d", name, line, c.Name(), first)
			}
			seen[c.Name()] = line
			cases = append(cases, c)
		}
		if err != nil {
			break
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("eval: %s: no questions", name)
	}
	return cases, nil
}

// readLongLine finishes a line longer than the reader's buffer, up to
// maxQuestionLine bytes.
func readLongLine(br *bufio.Reader, first []byte) ([]byte, error) {
	buf := append([]byte(nil), first...)
	for {
		more, err := br.ReadSlice('\n')
		buf = append(buf, more...)
		if len(buf) > maxQuestionLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxQuestionLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

func parseEvalCase(text []byte) (EvalCase, error) {
	var c EvalCase
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, err
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return c, errors.New("more than one JSON value on the line")
	}
	if err := c.normalize(); err != nil {
		return c, fmt.Errorf("case %s: %w", c.Name(), err)
	}
	return c, nil
}

// LoadEvalCases reads the question file at path.
func LoadEvalCases(path string) ([]EvalCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return ReadEvalCases(f, path)
}
