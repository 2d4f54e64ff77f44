package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/internal/progress"
	"github.com/ds4-go/ds4/quant"
)

// ImatrixPromptMarker starts each prompt's header line in an imatrix
// calibration dataset (docs/formats/harness.md#calibration-prompts).
const ImatrixPromptMarker = "===== DS4_IMATRIX_PROMPT"

// Defaults of imatrix collection (docs/formats/harness.md#collection).
const (
	DefaultImatrixContext = 32768
	DefaultImatrixChunk   = 2048
)

// ImatrixOptions configure CollectImatrix.
type ImatrixOptions struct {
	Context    int       // tokens per prompt (longer prompts are truncated); 0 means DefaultImatrixContext
	Chunk      int       // prefill chunk in tokens; 0 means DefaultImatrixChunk
	MaxPrompts int       // prompts to collect; 0 means all
	MaxTokens  int       // tokens to collect over all prompts; 0 means unlimited
	Dataset    string    // the dataset path stored in the file's trailer
	Log        io.Writer // progress and summary; nil means none
}

// ImatrixStats counts what CollectImatrix evaluated.
type ImatrixStats struct {
	Prompts      int // prompts evaluated (empty ones are not counted)
	Tokens       int // tokens evaluated
	Observations int // routed-expert evaluations seen
}

// SplitImatrixDataset splits a rendered-prompts file into its prompts
// (docs/formats/harness.md#collection): each prompt runs from the line after an
// ImatrixPromptMarker to the next marker, trimmed of ASCII white space;
// empty prompts are dropped, as is a last marker with no line end. Text
// before the first marker is ignored, except that a file with no marker
// at all is one prompt.
func SplitImatrixDataset(text string) []string {
	var out []string
	add := func(s string) {
		if s = strings.Trim(s, " \t\n\v\f\r"); s != "" {
			out = append(out, s)
		}
	}
	i := strings.Index(text, ImatrixPromptMarker)
	if i < 0 {
		add(text)
		return out
	}
	for i >= 0 {
		nl := strings.IndexByte(text[i:], '\n')
		if nl < 0 {
			break
		}
		body := text[i+nl+1:]
		next := strings.Index(body, ImatrixPromptMarker)
		if next < 0 {
			add(body)
			break
		}
		add(body[:next])
		i += nl + 1 + next
	}
	return out
}

// imatrixCollector accumulates the statistics of docs/formats/harness.md#collection from
// the engine's routed-expert evaluations.
type imatrixCollector struct {
	mu              sync.Mutex // the engine may evaluate experts concurrently
	experts         int
	embd, ff        int
	gateUp, down    []float64 // layers × experts × embd, layers × experts × ff
	count           []int64   // layers × experts observations (gate/up and down alike)
	observed, stray int64     // observations counted, and refused (layer, expert or width out of shape)
}

// ObserveExpert adds the squares of one routed-expert evaluation's input
// and route-weighted SwiGLU rows to the sums of expert e of layer il.
func (c *imatrixCollector) ObserveExpert(il, e int, in, mid []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := il*c.experts + e
	if il < 0 || e < 0 || e >= c.experts || k >= len(c.count) || len(in) != c.embd || len(mid) != c.ff {
		c.stray++
		return
	}
	gu := c.gateUp[k*c.embd : (k+1)*c.embd]
	for i, v := range in {
		gu[i] += float64(v) * float64(v)
	}
	dn := c.down[k*c.ff : (k+1)*c.ff]
	for i, v := range mid {
		dn[i] += float64(v) * float64(v)
	}
	c.count[k]++
	c.observed++
}

// means returns layer il's per-expert means of sums (width columns per
// expert), 1.0 for an expert never routed.
func (c *imatrixCollector) means(sums []float64, il, width int) []float32 {
	out := make([]float32, c.experts*width)
	for e := range c.experts {
		k := il*c.experts + e
		dst := out[e*width : (e+1)*width]
		n := c.count[k]
		if n == 0 {
			for i := range dst {
				dst[i] = 1
			}
			continue
		}
		src := sums[k*width : (k+1)*width]
		for i := range dst {
			dst[i] = float32(src[i] / float64(n))
		}
	}
	return out
}

// CollectImatrix runs each prompt (already tokenized) through a fresh
// session state and accumulates the routed-expert statistics of
// docs/formats/harness.md#collection: per layer and expert, the mean squared FFN input
// (for the gate and up matrices) and the mean squared route-weighted
// SwiGLU output (for down). Prompts are truncated to opt.Context tokens
// and to what is left of opt.MaxTokens, and prefilled opt.Chunk tokens at
// a time. The result has the entries of docs/formats/harness.md#the-dat-file in order;
// the gate and up entries of a layer share one values slice. The sums are
// float64 in the order the engine reports evaluations, so the bytes are
// reproducible as long as that order is.
func CollectImatrix(m *engine.Model, be backends.Backend, prompts [][]int, opt ImatrixOptions) (*quant.Imatrix, ImatrixStats, error) {
	var st ImatrixStats
	if opt.Context == 0 {
		opt.Context = DefaultImatrixContext
	}
	if opt.Chunk == 0 {
		opt.Chunk = DefaultImatrixChunk
	}
	switch {
	case opt.Context < 0, opt.Chunk < 0, opt.MaxPrompts < 0, opt.MaxTokens < 0:
		return nil, st, fmt.Errorf("imatrix: negative option in %+v", opt)
	case len(prompts) == 0:
		return nil, st, errors.New("imatrix: no prompts")
	}
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	p := m.Params
	// Plan the truncated lengths first: the session is sized for the
	// longest, and the progress bar knows its total.
	lens := make([]int, len(prompts))
	longest, total, budget, n := 0, 0, opt.MaxTokens, 0
	for i, toks := range prompts {
		if opt.MaxPrompts > 0 && n >= opt.MaxPrompts || opt.MaxTokens > 0 && budget <= 0 {
			break
		}
		k := min(len(toks), opt.Context)
		if opt.MaxTokens > 0 {
			k = min(k, budget)
			budget -= k
		}
		if k > 0 {
			n++
		}
		lens[i], longest, total = k, max(longest, k), total+k
	}
	if total == 0 {
		return nil, st, errors.New("imatrix: every prompt is empty")
	}
	c := &imatrixCollector{
		experts: p.Experts, embd: p.Embd, ff: p.ExpertFF,
		gateUp: make([]float64, p.Layers*p.Experts*p.Embd),
		down:   make([]float64, p.Layers*p.Experts*p.ExpertFF),
		count:  make([]int64, p.Layers*p.Experts),
	}
	s, err := engine.NewSession(m, be, engine.Options{Context: longest, Experts: c})
	if err != nil {
		return nil, st, fmt.Errorf("imatrix: %w", err)
	}
	fmt.Fprintf(log, "imatrix: collecting routed-MoE statistics from %d prompts, %d tokens (ctx=%d, chunk=%d)\n", n, total, opt.Context, opt.Chunk)
	var bar *progress.Bar
	if f, ok := log.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar = progress.New(log, "imatrix", int64(total), " tok")
	}
	chunks := 0
	for i, toks := range prompts {
		toks = toks[:lens[i]]
		if len(toks) == 0 {
			continue
		}
		s.Reset()
		done := 0
		err := s.PrefillChunks(context.Background(), toks, engine.PrefillOptions{Chunk: opt.Chunk, AfterChunk: func(pos int) error {
			chunks += p.Layers
			if bar != nil {
				bar.Add(int64(pos - done))
			}
			done = pos
			return nil
		}})
		if err != nil {
			return nil, st, fmt.Errorf("imatrix: prompt %d: %w", i, err)
		}
		st.Prompts++
		st.Tokens += len(toks)
		st.Observations = int(c.observed)
		if bar == nil && st.Prompts%10 == 0 {
			fmt.Fprintf(log, "imatrix: prompts=%d tokens=%d routes=%d\n", st.Prompts, st.Tokens, st.Observations)
		}
	}
	if bar != nil {
		bar.Finish()
	}
	if c.stray > 0 {
		return nil, st, fmt.Errorf("imatrix: the engine reported %d expert evaluations outside the model's %d layers × %d experts", c.stray, p.Layers, p.Experts)
	}
	fmt.Fprintf(log, "imatrix: %d prompts, %d tokens, %d routed expert observations\n", st.Prompts, st.Tokens, st.Observations)
	out := &quant.Imatrix{Entries: make([]quant.ImatrixEntry, 0, 3*p.Layers), Chunks: chunks, Dataset: opt.Dataset}
	for il := range p.Layers {
		gu := c.means(c.gateUp, il, p.Embd)
		out.Entries = append(out.Entries,
			quant.ImatrixEntry{Name: fmt.Sprintf("blk.%d.ffn_gate_exps.weight", il), NCall: 1, Values: gu},
			quant.ImatrixEntry{Name: fmt.Sprintf("blk.%d.ffn_up_exps.weight", il), NCall: 1, Values: gu},
			quant.ImatrixEntry{Name: fmt.Sprintf("blk.%d.ffn_down_exps.weight", il), NCall: 1, Values: c.means(c.down, il, p.ExpertFF)},
		)
	}
	return out, st, nil
}

// PromptCase is one prompt of a JSON Lines prompt set.
type PromptCase struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
}

// ReadPromptsJSONL reads a prompt set with one {"id","prompt"} object per
// line (upstream gguf-tools/quality-testing/prompts.jsonl), skipping blank
// lines and ignoring other fields; a case without an id gets upstream's
// case_%03d of its index. Render a case as the quality tools do with
// EncodeChat(tok, "", c.Prompt).
func ReadPromptsJSONL(path string) ([]PromptCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	var out []PromptCase
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var c PromptCase
		dec := json.NewDecoder(bytes.NewReader(text))
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("prompts: %s:%d: %w", path, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("prompts: %s:%d: text after the object", path, line)
		}
		if c.Prompt == "" {
			return nil, fmt.Errorf("prompts: %s:%d: no prompt", path, line)
		}
		if c.ID == "" {
			c.ID = fmt.Sprintf("case_%03d", len(out))
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prompts: %s has no prompts", path)
	}
	return out, nil
}
