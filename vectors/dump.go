package vectors

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Dump is a saved run of one case in the layout of upstream's
// --dump-logprobs file (docs/formats/harness.md#logprob-dump): the greedy steps with their
// top alternatives. IDs are -1 when the source was an HTTP endpoint.
type Dump struct {
	Source       string     `json:"source"`
	ID           string     `json:"id,omitempty"`
	PromptTokens int        `json:"prompt_tokens"`
	Ctx          int        `json:"ctx"`
	TopK         int        `json:"top_k"`
	Steps        []DumpStep `json:"steps"`
}

// DumpStep is one step of a Dump.
type DumpStep struct {
	Step        int       `json:"step"`
	Selected    DumpToken `json:"selected"`
	TopLogprobs []DumpAlt `json:"top_logprobs"`
}

// DumpToken is a token of a Dump; Bytes is authoritative, Text is for
// people.
type DumpToken struct {
	ID    int    `json:"id"`
	Text  string `json:"text"`
	Bytes []int  `json:"bytes"`
}

// DumpAlt is one alternative of a DumpStep.
type DumpAlt struct {
	Token   DumpToken `json:"token"`
	Logprob float64   `json:"logprob"`
}

func dumpToken(t TopToken) DumpToken {
	d := DumpToken{ID: t.ID, Text: string(t.Bytes), Bytes: make([]int, len(t.Bytes))}
	for i, b := range t.Bytes {
		d.Bytes[i] = int(b)
	}
	return d
}

func (d DumpToken) raw() []byte {
	if d.Bytes == nil {
		return []byte(d.Text)
	}
	b := make([]byte, len(d.Bytes))
	for i, v := range d.Bytes {
		b[i] = byte(v)
	}
	return b
}

// NewDump records the steps of a case.
func NewDump(source string, c VecCase, steps []Step, topK int) Dump {
	d := Dump{Source: source, ID: c.ID, Ctx: c.Ctx, TopK: topK}
	for i, s := range steps {
		ds := DumpStep{Step: i, Selected: dumpToken(s.Selected)}
		for _, t := range s.Top {
			ds.TopLogprobs = append(ds.TopLogprobs, DumpAlt{Token: dumpToken(t), Logprob: t.Logprob})
		}
		d.Steps = append(d.Steps, ds)
	}
	return d
}

// StepList returns the dump's steps; the selected token's log-probability
// is taken from the alternatives when listed there.
func (d Dump) StepList() []Step {
	out := make([]Step, len(d.Steps))
	for i, s := range d.Steps {
		st := Step{Selected: TopToken{ID: s.Selected.ID, Bytes: s.Selected.raw()}}
		for _, a := range s.TopLogprobs {
			st.Top = append(st.Top, TopToken{ID: a.Token.ID, Bytes: a.Token.raw(), Logprob: a.Logprob})
		}
		st.Selected.Logprob = logprobOf(st, st.Selected.Bytes)
		out[i] = st
	}
	return out
}

// WriteDump writes d as indented JSON to path.
func WriteDump(path string, d Dump) error {
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return fmt.Errorf("vectors: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("vectors: %w", err)
	}
	return nil
}

// ReadDump reads a dump file.
func ReadDump(path string) (Dump, error) {
	var d Dump
	if err := readJSON(path, &d); err != nil {
		return d, err
	}
	return d, nil
}

// ReadDumps reads a saved run: a dump file, or a directory of them keyed
// by the file name without ".json".
func ReadDumps(path string) (map[string]Dump, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.json")); err != nil {
			return nil, fmt.Errorf("vectors: %w", err)
		}
		sort.Strings(files)
	}
	out := map[string]Dump{}
	for _, f := range files {
		d, err := ReadDump(f)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = d
	}
	return out, nil
}
