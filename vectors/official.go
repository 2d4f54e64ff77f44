package vectors

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Limits of the official.vec format (upstream tests/ds4_test.c).
const (
	MaxVecSteps      = 16
	MaxVecTop        = 32
	MaxVecTokenBytes = 128
)

// VecFormat is the first header line of an official.vec file.
const VecFormat = "# ds4-official-logprob-vectors-v1"

// VecCase is one case of an official.vec fixture: a prompt, the context
// size to run it in, and the expected greedy steps.
type VecCase struct {
	ID         string
	Ctx        int
	PromptPath string // as written in the file, usually repository-relative
	Steps      []VecStep
}

// VecStep is one expected decoding step: the selected token's bytes and
// the official alternatives with their log-probabilities.
type VecStep struct {
	Selected []byte
	Top      []VecTop
}

// VecTop is one official alternative of a step.
type VecTop struct {
	Bytes   []byte
	Logprob float64
}

// VecError is a fixture error in an official.vec file.
type VecError struct {
	Line int // 1-based line number, 0 at end of file
	Msg  string
}

func (e *VecError) Error() string {
	if e.Line == 0 {
		return "vectors: official.vec: " + e.Msg
	}
	return fmt.Sprintf("vectors: official.vec:%d: %s", e.Line, e.Msg)
}

// ParseVec reads an official.vec fixture (docs/formats/harness.md#the-vec-grammar): lines are
// trimmed, blank and # lines ignored, every case is a case line, step and
// top lines in any order, and an end line.
func ParseVec(r io.Reader) ([]VecCase, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var (
		cases  []VecCase
		cur    *VecCase
		seen   []bool
		step   = -1
		lineNo int
	)
	fail := func(format string, args ...any) error {
		return &VecError{Line: lineNo, Msg: fmt.Sprintf(format, args...)}
	}
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if cur == nil {
			if f[0] != "case" || len(f) != 5 {
				return nil, fail("expected a case line, got %q", line)
			}
			ctx, err1 := strconv.Atoi(f[2])
			n, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || ctx <= 0 {
				return nil, fail("bad case line %q", line)
			}
			if n < 1 || n > MaxVecSteps {
				return nil, fail("case %s: %d steps, want 1..%d", f[1], n, MaxVecSteps)
			}
			cases = append(cases, VecCase{ID: f[1], Ctx: ctx, PromptPath: f[4], Steps: make([]VecStep, n)})
			cur, seen, step = &cases[len(cases)-1], make([]bool, n), -1
			continue
		}
		switch f[0] {
		case "end":
			if len(f) != 1 {
				return nil, fail("bad end line %q", line)
			}
			for i, ok := range seen {
				if !ok {
					return nil, fail("case %s: step %d missing", cur.ID, i)
				}
			}
			cur = nil
		case "step":
			if len(f) != 4 {
				return nil, fail("bad step line %q", line)
			}
			i, err1 := strconv.Atoi(f[1])
			n, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || i < 0 || i >= len(cur.Steps) {
				return nil, fail("case %s: bad step line %q", cur.ID, line)
			}
			if n < 0 || n > MaxVecTop {
				return nil, fail("case %s: step %d: top count %d, want 0..%d", cur.ID, i, n, MaxVecTop)
			}
			sel, err := decodeTokenHex(f[2])
			if err != nil {
				return nil, fail("case %s: step %d: %v", cur.ID, i, err)
			}
			cur.Steps[i] = VecStep{Selected: sel, Top: make([]VecTop, 0, n)}
			seen[i], step = true, i
		case "top":
			if len(f) != 3 || step < 0 {
				return nil, fail("case %s: bad top line %q", cur.ID, line)
			}
			st := &cur.Steps[step]
			if len(st.Top) == cap(st.Top) {
				return nil, fail("case %s: step %d: more top lines than its count %d", cur.ID, step, cap(st.Top))
			}
			b, err := decodeTokenHex(f[1])
			if err != nil {
				return nil, fail("case %s: step %d: %v", cur.ID, step, err)
			}
			lp, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return nil, fail("case %s: step %d: bad logprob %q", cur.ID, step, f[2])
			}
			st.Top = append(st.Top, VecTop{Bytes: b, Logprob: lp})
		default:
			return nil, fail("case %s: unexpected line %q", cur.ID, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vectors: official.vec: %w", err)
	}
	if cur != nil {
		lineNo = 0
		return nil, fail("case %s: missing end", cur.ID)
	}
	return cases, nil
}

func decodeTokenHex(s string) ([]byte, error) {
	if len(s) < 2 || len(s) > 2*MaxVecTokenBytes {
		return nil, fmt.Errorf("token hex %q: want 1..%d bytes", s, MaxVecTokenBytes)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("token hex %q: %w", s, err)
	}
	return b, nil
}

// ReadVecFile parses the official.vec file at path.
func ReadVecFile(path string) ([]VecCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	defer f.Close()
	cases, err := ParseVec(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cases, nil
}

// ResolvePrompt finds a case's prompt file: the path as written when it
// exists relative to the working directory, else the shortest suffix of
// it that exists under dir (the fixture's directory), so upstream's
// repository-relative paths work from a copy of the fixture.
func ResolvePrompt(dir, p string) (string, error) {
	if _, err := os.Stat(p); err == nil || filepath.IsAbs(p) {
		return p, err
	}
	parts := strings.Split(path.Clean(filepath.ToSlash(p)), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		cand := filepath.Join(dir, filepath.Join(parts[i:]...))
		if _, err := os.Stat(cand); err == nil {
			return cand, nil
		}
	}
	return "", fmt.Errorf("vectors: prompt %s not found relative to . or %s", p, dir)
}

// Manifest is the index of an official vector directory
// (ds4-test-vector-manifest-v1).
type Manifest struct {
	Schema      string          `json:"schema"`
	Source      string          `json:"source"`
	Model       string          `json:"model"`
	Endpoint    string          `json:"endpoint"`
	TopLogprobs int             `json:"top_logprobs"`
	MaxTokens   int             `json:"max_tokens"`
	Prompts     []ManifestEntry `json:"prompts"`
}

// ManifestEntry describes one vector of a Manifest.
type ManifestEntry struct {
	ID           string `json:"id"`
	Kind         string `json:"kind"`
	PromptFile   string `json:"prompt_file"`
	OfficialFile string `json:"official_file"`
	PromptChars  int    `json:"prompt_chars"`
	Steps        int    `json:"steps"`
}

// ReadManifest reads manifest.json from a vector directory.
func ReadManifest(dir string) (*Manifest, error) {
	var m Manifest
	if err := readJSON(filepath.Join(dir, "manifest.json"), &m); err != nil {
		return nil, err
	}
	if m.Schema != "ds4-test-vector-manifest-v1" {
		return nil, fmt.Errorf("vectors: %s: schema %q", filepath.Join(dir, "manifest.json"), m.Schema)
	}
	return &m, nil
}

// OfficialToken is a token as the official record stores it.
type OfficialToken struct {
	Text  string `json:"text"`
	Bytes []int  `json:"bytes"`
}

// Raw returns the token's bytes: Bytes when present, else Text in UTF-8.
func (t OfficialToken) Raw() []byte {
	if t.Bytes == nil {
		return []byte(t.Text)
	}
	b := make([]byte, len(t.Bytes))
	for i, v := range t.Bytes {
		b[i] = byte(v)
	}
	return b
}

// OfficialAlt is one alternative of an official step.
type OfficialAlt struct {
	Token   OfficialToken `json:"token"`
	Logprob float64       `json:"logprob"`
}

// OfficialStep is one step of an official record.
type OfficialStep struct {
	Step        int           `json:"step"`
	Token       OfficialToken `json:"token"`
	Logprob     float64       `json:"logprob"`
	TopLogprobs []OfficialAlt `json:"top_logprobs"`
}

// Official is a normalized API record (ds4-official-logprobs-v1).
type Official struct {
	Schema       string          `json:"schema"`
	Source       string          `json:"source"`
	Model        string          `json:"model"`
	Endpoint     string          `json:"endpoint"`
	CreatedAt    string          `json:"created_at"`
	ID           string          `json:"id"`
	Kind         string          `json:"kind"`
	Prompt       string          `json:"prompt"`
	Request      json.RawMessage `json:"request"`
	Usage        OfficialUsage   `json:"usage"`
	FinishReason string          `json:"finish_reason"`
	Message      struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	LogitsAvailable bool           `json:"logits_available"`
	Steps           []OfficialStep `json:"steps"`
}

// OfficialUsage holds the token counts of an official record.
type OfficialUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ReadOfficial reads one official JSON record.
func ReadOfficial(path string) (*Official, error) {
	var o Official
	if err := readJSON(path, &o); err != nil {
		return nil, err
	}
	if o.Schema != "ds4-official-logprobs-v1" {
		return nil, fmt.Errorf("vectors: %s: schema %q", path, o.Schema)
	}
	return &o, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("vectors: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("vectors: %s: %w", path, err)
	}
	return nil
}

// OfficialCtx returns the context size upstream's fetcher assigns to a
// vector id from its fixed table (16384 for ids it does not know).
func OfficialCtx(id string) int {
	switch id {
	case "short_code_completion", "short_reasoning_plain":
		return 4096
	}
	return 16384
}

// CaseFromOfficial converts an official record into a VecCase with the
// fetcher's filter: alternatives with logprob <= -1000 or no bytes are
// dropped.
func CaseFromOfficial(o *Official, promptPath string) VecCase {
	c := VecCase{ID: o.ID, Ctx: OfficialCtx(o.ID), PromptPath: promptPath}
	for _, s := range o.Steps {
		st := VecStep{Selected: s.Token.Raw()}
		for _, a := range s.TopLogprobs {
			if b := a.Token.Raw(); a.Logprob > -1000 && len(b) > 0 {
				st.Top = append(st.Top, VecTop{Bytes: b, Logprob: a.Logprob})
			}
		}
		c.Steps = append(c.Steps, st)
	}
	return c
}

// WriteVec writes cases in the compact official.vec form, byte for byte as
// upstream's fetcher writes it.
func WriteVec(w io.Writer, cases []VecCase) error {
	lines := []string{
		VecFormat,
		"# case <id> <ctx> <steps> <prompt-file>",
		"# step <index> <selected-hex> <top-count>",
		"# top <token-hex> <official-logprob>",
		"",
	}
	for _, c := range cases {
		lines = append(lines, fmt.Sprintf("case %s %d %d %s", c.ID, c.Ctx, len(c.Steps), c.PromptPath))
		for i, s := range c.Steps {
			lines = append(lines, fmt.Sprintf("step %d %s %d", i, hex.EncodeToString(s.Selected), len(s.Top)))
			for _, t := range s.Top {
				lines = append(lines, fmt.Sprintf("top %s %s", hex.EncodeToString(t.Bytes), strconv.FormatFloat(t.Logprob, 'g', 9, 64)))
			}
		}
		lines = append(lines, "end", "")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	if err != nil {
		return fmt.Errorf("vectors: write official.vec: %w", err)
	}
	return nil
}

// RegenerateVec rebuilds the compact fixture of the vector directory dir
// from its manifest and official records, with prompt paths under root
// (upstream: tests/test-vectors).
func RegenerateVec(dir, root string) ([]byte, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	var cases []VecCase
	for _, e := range m.Prompts {
		o, err := ReadOfficial(filepath.Join(dir, filepath.FromSlash(e.OfficialFile)))
		if err != nil {
			return nil, err
		}
		if o.ID != e.ID {
			return nil, fmt.Errorf("vectors: %s holds id %q", e.OfficialFile, o.ID)
		}
		cases = append(cases, CaseFromOfficial(o, path.Join(root, e.PromptFile)))
	}
	var buf bytes.Buffer
	if err := WriteVec(&buf, cases); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ErrNoModel is wrapped by errors that ask for a real model.
var ErrNoModel = errors.New("no real model: set DS4_MODEL to a DeepSeek V4 Flash GGUF")
