package splice

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

func TestParseLayers(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []int
		err  string
	}{
		{"37-42", []int{37, 38, 39, 40, 41, 42}, ""},
		{"0-2,40-42", []int{0, 1, 2, 40, 41, 42}, ""},
		{"5", []int{5}, ""},
		{"3, 1,2-3 ,7-7", []int{1, 2, 3, 7}, ""},
		{"", nil, "empty layer list"},
		{"  ", nil, "empty layer list"},
		{"1,,2", nil, `item "": empty layer id`},
		{"4-2", nil, `range "4-2" is descending`},
		{"-3", nil, `item "-3": empty layer id`},
		{"3-", nil, `item "3-": empty layer id`},
		{"a", nil, `layer id "a" is not a number`},
		{"1-2-3", nil, `layer id "2-3" is not a number`},
		{"70000", nil, "not a number in 0..65535"},
	} {
		got, err := ParseLayers(tc.spec)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.spec)
			continue
		}
		require.NoError(t, err, tc.spec)
		require.Equal(t, tc.want, got, tc.spec)
	}
}

var tables = sync.OnceValues(tokenizer.DeepSeekV4)

// model writes the tiny synthetic model (4 layers, short vocabulary) with
// recipe r into dir and opens it.
func model(t *testing.T, dir string, r layout.Recipe, edit func(*layout.Params)) (*gguf.File, string) {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = 1024
	p.SetLayers(4)
	if edit != nil {
		edit(&p)
	}
	tab, err := tables()
	require.NoError(t, err)
	path := filepath.Join(dir, r.Name+".gguf")
	_, err = synth.WriteFile(path, synth.Options{Params: p, Recipe: r, Seed: 9, Tables: tab})
	require.NoError(t, err)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, path
}

// TestSplice takes the routed experts of layers 2 and 3 from a q4 donor
// into a q2 base: the output reads back, passes the layout check, holds
// the donor's bytes for exactly those tensors and the base's for every
// other tensor and the metadata, and runs in the engine.
func TestSplice(t *testing.T) {
	dir := t.TempDir()
	base, basePath := model(t, dir, layout.RecipeQ2, nil)
	donor, _ := model(t, dir, layout.RecipeQ4, nil)
	layers, err := ParseLayers("2-3")
	require.NoError(t, err)
	p, err := NewPlan(base, donor, layers)
	require.NoError(t, err)
	require.Equal(t, 6, p.Donors)
	require.Equal(t, map[quant.Type]int{quant.Q4_K: 6}, p.DonorTypes)

	out := filepath.Join(dir, "mixed.gguf")
	var copied int64
	require.NoError(t, p.WriteFile(out, false, func(n int64) { copied += n }))
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, p.DataOffset, int64(f.DataOffset))
	require.Equal(t, p.DataOffset+p.MixedBytes, f.Size())
	require.Equal(t, base.KV, f.KV)
	require.Len(t, f.Tensors, len(base.Tensors))

	var want, baseBytes, mixedBytes int64
	for i, ti := range f.Tensors {
		bt := base.Tensors[i]
		require.Equal(t, bt.Name, ti.Name)
		require.Equal(t, bt.Dims, ti.Dims)
		from := base
		switch ti.Name {
		case "blk.2.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight", "blk.2.ffn_down_exps.weight",
			"blk.3.ffn_gate_exps.weight", "blk.3.ffn_up_exps.weight", "blk.3.ffn_down_exps.weight":
			from = donor
			require.Equal(t, quant.Q4_K, ti.Type, ti.Name)
			require.True(t, p.Tensors[i].Donor)
		default:
			require.Equal(t, bt.Type, ti.Type, ti.Name)
			require.False(t, p.Tensors[i].Donor)
		}
		src, _ := from.Tensor(ti.Name)
		require.True(t, bytes.Equal(from.TensorData(src), f.TensorData(ti)), ti.Name)
		want += int64(ti.Size)
		baseBytes += int64((bt.Size + 31) / 32 * 32)
		mixedBytes += int64((ti.Size + 31) / 32 * 32)
	}
	require.Equal(t, want, copied)
	require.Equal(t, want, p.TensorBytes())
	var sum bytes.Buffer
	p.WriteSummary(&sum)
	require.Equal(t, fmt.Sprintf("layers from the donor: [2 3]\ndonor tensors: 6, 6 Q4_K\n"+
		"base payload: %d bytes (%.3f GiB)\nmixed payload: %d bytes (%.3f GiB)\ndelta: %+d bytes (%+.3f GiB)\nfile: %d bytes\n",
		p.BaseBytes, float64(p.BaseBytes)/(1<<30), p.MixedBytes, float64(p.MixedBytes)/(1<<30),
		p.MixedBytes-p.BaseBytes, float64(p.MixedBytes-p.BaseBytes)/(1<<30), f.Size()), sum.String())
	require.Equal(t, baseBytes, p.BaseBytes)
	require.Equal(t, mixedBytes, p.MixedBytes)

	check := layout.Check(f)
	require.NoError(t, check.Err())
	require.Contains(t, check.Warnings, "layer 2: routed types Q4_K/Q4_K differ from layer 0's")

	m, err := engine.Open(out)
	require.NoError(t, err)
	defer m.File.Close()
	s, err := engine.NewSession(m, cpu.New(2), engine.Options{Context: 32})
	require.NoError(t, err)
	require.NoError(t, s.Prefill([]int{3, 1, 4, 1, 5}))
	require.NoError(t, s.Decode(9))
	for i, v := range s.Logits() {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "logit %d", i)
	}

	// Refusals: an existing output without force, a leftover temporary.
	require.ErrorContains(t, p.WriteFile(out, false, nil), "exists (use --force to replace it)")
	require.NoError(t, os.WriteFile(out+".tmp", nil, 0o644))
	require.ErrorContains(t, p.WriteFile(out, true, nil), "mixed.gguf.tmp exists")
	require.NoError(t, os.Remove(out+".tmp"))

	// A donor equal to the base reproduces the base byte for byte.
	self, err := NewPlan(base, base, []int{0, 1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, self.WriteFile(out, true, nil))
	a, err := os.ReadFile(basePath)
	require.NoError(t, err)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3) // base, donor, output: no temporary left
}

func TestSpliceErrors(t *testing.T) {
	dir := t.TempDir()
	base, _ := model(t, dir, layout.RecipeQ2, nil)
	wide, _ := model(t, t.TempDir(), layout.RecipeQ4, func(p *layout.Params) { p.ExpertFF = 512 })
	short, _ := model(t, t.TempDir(), layout.RecipeQ4, func(p *layout.Params) { p.SetLayers(3) })
	for _, tc := range []struct {
		name   string
		donor  *gguf.File
		layers []int
		err    string
	}{
		{"dims", wide, []int{3}, "tensor blk.0.ffn_gate_exps.weight: dims [256 256 8] in the base, [256 512 8] in the donor"},
		{"count", short, []int{1}, "base has"},
		{"layer", base, []int{2, 4, 9}, "layer 4: no routed expert tensors in the base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan(base, tc.donor, tc.layers)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// FuzzParseLayers: any accepted list is sorted, without repeats, and
// every id is in range.
func FuzzParseLayers(f *testing.F) {
	for _, s := range []string{"37-42", "0-2,40-42", "3, 1,2-3 ,7-7", "", "4-2", "1-2-3", "70000", "0-65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		layers, err := ParseLayers(spec)
		if err != nil {
			return
		}
		require.NotEmpty(t, layers)
		for i, l := range layers {
			require.True(t, l >= 0 && l <= 65535, "layer %d", l)
			if i > 0 {
				require.Less(t, layers[i-1], l)
			}
		}
	})
}
