package harness

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

func TestSplitImatrixDataset(t *testing.T) {
	const mk = ImatrixPromptMarker
	for _, tc := range []struct {
		name string
		text string
		want []string
	}{
		{"empty", "", nil},
		{"blank", " \n\t\r\n", nil},
		{"no marker is one prompt", "  <｜begin▁of▁sentence｜>hello\n\n", []string{"<｜begin▁of▁sentence｜>hello"}},
		{"records", "\n\n" + mk + " a-1 cat nothink src =====\nfirst\nline\n\n" + mk + " b-2 cat think src =====\n  second  \n",
			[]string{"first\nline", "second"}},
		{"text before the first marker is ignored", "preamble\n" + mk + " x =====\nbody", []string{"body"}},
		{"empty blocks are dropped", mk + " a =====\n \n\n" + mk + " b =====\nb\n" + mk + " c =====\n", []string{"b"}},
		{"last marker without a line end", mk + " a =====\na\n" + mk + " b =====", []string{"a"}},
		{"marker inside a line", mk + " a =====\nx " + mk + " b\ny", []string{"x", "y"}},
		{"CRLF", mk + " a =====\r\nbody\r\n\r\n", []string{"body"}},
		{"only ASCII space is trimmed", mk + " a =====\n\u00a0x\u00a0\n", []string{"\u00a0x\u00a0"}},
		{"marker line is not part of the prompt", mk + "\nz", []string{"z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SplitImatrixDataset(tc.text))
		})
	}
}

// rowRecorder keeps a copy of every routed-expert evaluation, to recompute
// the statistic independently of the collector.
type rowRecorder struct {
	mu   sync.Mutex
	obs  map[[2]int][][2][]float32 // (layer, expert) → [in, mid] rows
	list [][2]int                  // (layer, expert) of each call, in order
}

func (r *rowRecorder) ObserveExpert(il, e int, in, mid []float32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs[[2]int{il, e}] = append(r.obs[[2]int{il, e}], [2][]float32{append([]float32(nil), in...), append([]float32(nil), mid...)})
	r.list = append(r.list, [2]int{il, e})
}

// record runs each prompt through its own new session in one prefill and
// records the expert evaluations.
func record(t *testing.T, m *engine.Model, prompts [][]int) *rowRecorder {
	t.Helper()
	be := cpu.New(2)
	defer be.Close()
	r := &rowRecorder{obs: map[[2]int][][2][]float32{}}
	for _, p := range prompts {
		s, err := engine.NewSession(m, be, engine.Options{Context: 64, Experts: r})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(p))
	}
	return r
}

// meanSquares is the expected entry values of one (layer, expert): the mean
// of the squared rows, column by column, or 1 when there is no row.
func meanSquares(rows [][2][]float32, which, width int) []float32 {
	out := make([]float32, width)
	for c := range out {
		if len(rows) == 0 {
			out[c] = 1
			continue
		}
		var s float64
		for _, r := range rows {
			v := float64(r[which][c])
			s += v * v
		}
		out[c] = float32(s / float64(len(rows)))
	}
	return out
}

var tinyModel = sync.OnceValues(engine.OpenTiny)

func tinyPrompts(t *testing.T) [][]int {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	a := tok.EncodeSpecial("<｜begin▁of▁sentence｜><｜User｜>Why is the sky blue?<｜Assistant｜></think>")
	b := tok.EncodeSpecial("<｜begin▁of▁sentence｜>Hi there")
	require.Len(t, a, 10)
	require.Len(t, b, 3)
	return [][]int{a, b}
}

func TestCollectImatrixMatchesRecomputation(t *testing.T) {
	m, err := tinyModel()
	require.NoError(t, err)
	p := m.Params
	prompts := tinyPrompts(t)
	be := cpu.New(2)
	defer be.Close()
	var log bytes.Buffer
	im, st, err := CollectImatrix(m, be, prompts, ImatrixOptions{Chunk: 4, Dataset: "data/x.txt", Log: &log})
	require.NoError(t, err)
	assert.Equal(t, ImatrixStats{Prompts: 2, Tokens: 13, Observations: 13 * p.Layers * p.ExpertsUsed}, st)
	assert.Equal(t, p.Layers*(3+1), im.Chunks, "one per layer per prefill chunk: 10 tokens in 3 chunks, 3 in 1")
	assert.Equal(t, "data/x.txt", im.Dataset)
	assert.Contains(t, log.String(), "imatrix: 2 prompts, 13 tokens, 234 routed expert observations")
	checkRecomputed(t, m, im, prompts)

	// Two tokens route 2·ExpertsUsed < Experts times per layer, so some
	// experts of every layer are never routed and must read 1.0.
	short := [][]int{prompts[1][:2]}
	im, _, err = CollectImatrix(m, be, short, ImatrixOptions{Chunk: 1})
	require.NoError(t, err)
	require.Less(t, 2*p.ExpertsUsed, p.Experts)
	assert.GreaterOrEqual(t, checkRecomputed(t, m, im, short), p.Layers*(p.Experts-2*p.ExpertsUsed))
}

// checkRecomputed compares im with the statistic recomputed from recorded
// rows of a separate run of prompts, checks the routing of the hash layers
// against the model's table and the normalization of the recorded inputs,
// and returns the number of (layer, expert) pairs never routed.
func checkRecomputed(t *testing.T, m *engine.Model, im *quant.Imatrix, prompts [][]int) int {
	t.Helper()
	p := m.Params
	rec := record(t, m, prompts)
	require.Len(t, im.Entries, 3*p.Layers)
	unrouted := 0
	for il := range p.Layers {
		gate, up, down := im.Entries[3*il], im.Entries[3*il+1], im.Entries[3*il+2]
		assert.Equal(t, fmt.Sprintf("blk.%d.ffn_gate_exps.weight", il), gate.Name)
		assert.Equal(t, fmt.Sprintf("blk.%d.ffn_up_exps.weight", il), up.Name)
		assert.Equal(t, fmt.Sprintf("blk.%d.ffn_down_exps.weight", il), down.Name)
		require.Len(t, gate.Values, p.Experts*p.Embd)
		require.Len(t, down.Values, p.Experts*p.ExpertFF)
		assert.Equal(t, gate.Values, up.Values, "layer %d: gate and up see the same input", il)
		for e := range p.Experts {
			rows := rec.obs[[2]int{il, e}]
			if len(rows) == 0 {
				unrouted++
				for _, v := range append(gate.Values[e*p.Embd:(e+1)*p.Embd:(e+1)*p.Embd], down.Values[e*p.ExpertFF:(e+1)*p.ExpertFF]...) {
					require.Equal(t, float32(1), v, "layer %d: unrouted expert %d", il, e)
				}
			}
			assertClose(t, meanSquares(rows, 0, p.Embd), gate.Values[e*p.Embd:(e+1)*p.Embd], "layer %d expert %d gate", il, e)
			assertClose(t, meanSquares(rows, 1, p.ExpertFF), down.Values[e*p.ExpertFF:(e+1)*p.ExpertFF], "layer %d expert %d down", il, e)
		}
	}
	// Hash layers route by token id: the observed experts must be exactly
	// the model's table entries for the prompt tokens.
	for il := range p.HashLayers {
		want := map[int]int{}
		for _, pr := range prompts {
			for _, tk := range pr {
				for _, e := range m.Layers[il].Tid2Eid[tk*p.ExpertsUsed : (tk+1)*p.ExpertsUsed] {
					want[int(e)]++
				}
			}
		}
		got := map[int]int{}
		for e := range p.Experts {
			if n := len(rec.obs[[2]int{il, e}]); n > 0 {
				got[e] = n
			}
		}
		assert.Equal(t, want, got, "hash layer %d", il)
	}
	// The gate/up statistic is of the FFN-normalized input: divided by the
	// ffn_norm weight, each row has a mean square of 1.
	for k, rows := range rec.obs {
		w := m.Layers[k[0]].FFNNorm
		for _, r := range rows {
			var s float64
			for c, v := range r[0] {
				x := float64(v) / float64(w[c])
				s += x * x
			}
			assert.InDelta(t, 1, s/float64(len(w)), 1e-3, "layer %d expert %d", k[0], k[1])
		}
	}
	return unrouted
}

// assertClose checks two float32 vectors agree to a relative 1e-6.
func assertClose(t *testing.T, want, got []float32, msg string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want), msg, args)
	for i := range want {
		if d := math.Abs(float64(want[i] - got[i])); d > 1e-6*math.Abs(float64(want[i]))+1e-30 {
			t.Fatalf("%s: value %d: got %g, want %g", fmt.Sprintf(msg, args...), i, got[i], want[i])
		}
	}
}

func TestCollectImatrixDeterministic(t *testing.T) {
	m, err := tinyModel()
	require.NoError(t, err)
	prompts := tinyPrompts(t)
	dat := func(chunk int) (*quant.Imatrix, []byte) {
		be := cpu.New(2)
		defer be.Close()
		im, _, err := CollectImatrix(m, be, prompts, ImatrixOptions{Chunk: chunk})
		require.NoError(t, err)
		var b bytes.Buffer
		_, err = im.WriteTo(&b)
		require.NoError(t, err)
		return im, b.Bytes()
	}
	a, ab := dat(4)
	_, bb := dat(4)
	assert.Equal(t, ab, bb, "same inputs, same bytes")
	c, _ := dat(0)
	assert.Equal(t, m.Params.Layers*2, c.Chunks)
	for i := range a.Entries {
		assert.Equal(t, a.Entries[i].Values, c.Entries[i].Values, "prefill chunking does not change %s", a.Entries[i].Name)
	}
}

func TestCollectImatrixLimits(t *testing.T) {
	m, err := tinyModel()
	require.NoError(t, err)
	L := m.Params.Layers
	prompts := tinyPrompts(t) // 10 and 3 tokens
	for _, tc := range []struct {
		name    string
		prompts [][]int
		opt     ImatrixOptions
		want    ImatrixStats
		chunks  int // prefill calls
	}{
		{"context truncates", prompts, ImatrixOptions{Context: 4, Chunk: 2}, ImatrixStats{2, 7, 7}, 2 + 2},
		{"max prompts", prompts, ImatrixOptions{MaxPrompts: 1}, ImatrixStats{1, 10, 10}, 1},
		{"max tokens cuts the last prompt", prompts, ImatrixOptions{MaxTokens: 11}, ImatrixStats{2, 11, 11}, 2},
		{"max tokens stops", prompts, ImatrixOptions{MaxTokens: 10}, ImatrixStats{1, 10, 10}, 1},
		{"empty prompts are not counted", [][]int{{}, prompts[1], nil}, ImatrixOptions{MaxPrompts: 1}, ImatrixStats{1, 3, 3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := cpu.New(2)
			defer be.Close()
			im, st, err := CollectImatrix(m, be, tc.prompts, tc.opt)
			require.NoError(t, err)
			tc.want.Observations *= L * m.Params.ExpertsUsed
			assert.Equal(t, tc.want, st)
			assert.Equal(t, tc.chunks*L, im.Chunks)
		})
	}
}

func TestCollectImatrixErrors(t *testing.T) {
	m, err := tinyModel()
	require.NoError(t, err)
	be := cpu.New(1)
	defer be.Close()
	for _, tc := range []struct {
		name    string
		prompts [][]int
		opt     ImatrixOptions
		want    string
	}{
		{"no prompts", nil, ImatrixOptions{}, "imatrix: no prompts"},
		{"all empty", [][]int{{}, {}}, ImatrixOptions{}, "imatrix: every prompt is empty"},
		{"negative", [][]int{{1}}, ImatrixOptions{MaxTokens: -1}, "imatrix: negative option"},
		{"bad token", [][]int{{1, 2}, {3, m.Params.Vocab}}, ImatrixOptions{}, "imatrix: prompt 1: engine: token"},
		{"context beyond the model", [][]int{make([]int, m.Params.ContextLength+1)}, ImatrixOptions{Context: m.Params.ContextLength + 1}, "imatrix: engine: context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, _, err := CollectImatrix(m, be, tc.prompts, tc.opt)
			require.Error(t, err)
			assert.Nil(t, im)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestCollectImatrixShape checks the entry widths on a model whose expert
// FFN width differs from its embedding width.
func TestCollectImatrixShape(t *testing.T) {
	p := layout.Tiny()
	p.ExpertFF = 512
	p.Experts = 4
	p.ExpertsUsed = 2
	p.SetLayers(3)
	var buf bytes.Buffer
	_, err := synth.Write(&buf, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 7})
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	m, err := engine.Load(f)
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	im, st, err := CollectImatrix(m, be, [][]int{{0, 1, 2, 3, 4}}, ImatrixOptions{})
	require.NoError(t, err)
	assert.Equal(t, 5*3*2, st.Observations)
	require.Len(t, im.Entries, 9)
	for i, e := range im.Entries {
		want := 4 * 256
		if i%3 == 2 {
			want = 4 * 512
		}
		assert.Len(t, e.Values, want, e.Name)
		// The file round-trips and the quantizer finds every expert.
		v, err := im.Importance([]string{e.Name}, 3, 4, want/4)
		require.NoError(t, err)
		assert.Equal(t, e.Values[3*want/4:], v)
	}
}

func TestReadPromptsJSONL(t *testing.T) {
	cases, err := ReadPromptsJSONL("testdata/quality/prompts.jsonl")
	require.NoError(t, err)
	require.Len(t, cases, 100)
	assert.Equal(t, PromptCase{ID: "case_000", Prompt: "Explain B-tree insertion, including splits and the root special case."}, cases[0])
	for i, c := range cases {
		assert.Equal(t, fmt.Sprintf("case_%03d", i), c.ID)
	}
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	ids := EncodeChat(tok, "", cases[0].Prompt)
	assert.Equal(t, tok.Special(tokenizer.BOS), ids[0])
	assert.Equal(t, tok.Special(tokenizer.User), ids[1])
	assert.Equal(t, tok.Special(tokenizer.ThinkEnd), ids[len(ids)-1])

	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       []PromptCase
		err        string
	}{
		{"blank lines and extra fields", "\n{\"id\":\"a\",\"prompt\":\"p\",\"x\":1}\r\n\n{\"prompt\":\"q\"}\n", []PromptCase{{"a", "p"}, {"case_001", "q"}}, ""},
		{"bad json", "{\"id\":\"a\",\"prompt\":\"p\"}\n{\"id\":\n", nil, "bad json.jsonl:2: "},
		{"two objects", "{\"prompt\":\"p\"} {\"prompt\":\"q\"}\n", nil, ":1: text after the object"},
		{"no prompt", "{\"id\":\"a\"}\n", nil, ":1: no prompt"},
		{"empty", "\n\n", nil, "has no prompts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
			got, err := ReadPromptsJSONL(path)
			if tc.err != "" {
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), "prompts: "), err.Error())
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err = ReadPromptsJSONL(filepath.Join(dir, "missing.jsonl"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// BenchmarkImatrixObserve measures the collector on Flash-width rows
// (4096 inputs, 2048 SwiGLU outputs, 256 experts); the baseline is the
// bare float64 accumulation of the same rows into one fixed pair of sum
// rows, so the ratio is the cost of the lock and the per-expert indexing.
func BenchmarkImatrixObserve(b *testing.B) {
	const embd, ff, experts = 4096, 2048, 256
	in, mid := make([]float32, embd), make([]float32, ff)
	for i := range in {
		in[i] = float32(i%17) * 0.1
	}
	for i := range mid {
		mid[i] = float32(i%13) * 0.2
	}
	b.Run("baseline", func(b *testing.B) {
		gu, dn := make([]float64, embd), make([]float64, ff)
		b.SetBytes(4 * (embd + ff))
		for b.Loop() {
			for i, v := range in {
				gu[i] += float64(v) * float64(v)
			}
			for i, v := range mid {
				dn[i] += float64(v) * float64(v)
			}
		}
	})
	b.Run("observe", func(b *testing.B) {
		c := &imatrixCollector{experts: experts, embd: embd, ff: ff,
			gateUp: make([]float64, experts*embd), down: make([]float64, experts*ff), count: make([]int64, experts)}
		b.SetBytes(4 * (embd + ff))
		b.ReportAllocs()
		e := 0
		for b.Loop() {
			c.ObserveExpert(0, e, in, mid)
			e = (e + 7) % experts
		}
	})
}
