package checkpoint

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// TestTensorType checks the type each recipe gives each tensor class
// against the mix of docs/formats/harness.md#recipes, written out here by hand for
// Flash's tensors, then the block-size fallbacks and the overrides.
func TestTensorType(t *testing.T) {
	byName := map[string]layout.Tensor{}
	for _, x := range layout.Flash().Tensors(layout.RecipeQ2) {
		byName[x.Name] = x
	}
	// The fixed non-expert mix, identical for q2 and q4.
	fixed := map[string]quant.Type{
		"token_embd.weight":                    quant.F16,
		"output.weight":                        quant.Q8_0,
		"output_norm.weight":                   quant.F32,
		"output_hc_base.weight":                quant.F32,
		"output_hc_fn.weight":                  quant.F16,
		"output_hc_scale.weight":               quant.F32,
		"blk.7.hc_attn_fn.weight":              quant.F16,
		"blk.7.hc_ffn_fn.weight":               quant.F16,
		"blk.7.hc_attn_base.weight":            quant.F32,
		"blk.7.hc_ffn_scale.weight":            quant.F32,
		"blk.7.attn_norm.weight":               quant.F32,
		"blk.7.ffn_norm.weight":                quant.F32,
		"blk.7.attn_q_a.weight":                quant.Q8_0,
		"blk.7.attn_q_a_norm.weight":           quant.F32,
		"blk.7.attn_q_b.weight":                quant.Q8_0,
		"blk.7.attn_kv.weight":                 quant.Q8_0,
		"blk.7.attn_kv_a_norm.weight":          quant.F32,
		"blk.7.attn_sinks.weight":              quant.F32,
		"blk.7.attn_output_a.weight":           quant.Q8_0,
		"blk.7.attn_output_b.weight":           quant.Q8_0,
		"blk.7.attn_compressor_ape.weight":     quant.F16,
		"blk.7.attn_compressor_kv.weight":      quant.F16,
		"blk.7.attn_compressor_gate.weight":    quant.F16,
		"blk.7.attn_compressor_norm.weight":    quant.F32,
		"blk.8.indexer.attn_q_b.weight":        quant.F16,
		"blk.8.indexer.proj.weight":            quant.F16,
		"blk.8.indexer_compressor_ape.weight":  quant.F16,
		"blk.8.indexer_compressor_kv.weight":   quant.F16,
		"blk.8.indexer_compressor_gate.weight": quant.F16,
		"blk.8.indexer_compressor_norm.weight": quant.F32,
		"blk.7.ffn_gate_inp.weight":            quant.F16,
		"blk.7.exp_probs_b.bias":               quant.F32,
		"blk.1.ffn_gate_tid2eid.weight":        quant.I32,
		"blk.7.ffn_gate_shexp.weight":          quant.Q8_0,
		"blk.7.ffn_up_shexp.weight":            quant.Q8_0,
		"blk.7.ffn_down_shexp.weight":          quant.Q8_0,
	}
	routed := map[Mode][3]quant.Type{ // gate, up, down
		ModeQ2: {quant.IQ2_XXS, quant.IQ2_XXS, quant.Q2_K},
		ModeQ4: {quant.Q4_K, quant.Q4_K, quant.Q4_K},
	}
	for mode, want := range routed {
		cat := map[string]layout.Tensor{}
		for _, x := range layout.Flash().Tensors(mode.recipe()) {
			cat[x.Name] = x
		}
		for name, typ := range fixed {
			got, err := tensorType(Options{Mode: mode}, cat[name], nil)
			require.NoError(t, err, name)
			require.Equal(t, typ, got, "%s %s", mode, name)
		}
		for i, part := range []string{"gate", "up", "down"} {
			name := fmt.Sprintf("blk.42.ffn_%s_exps.weight", part)
			got, err := tensorType(Options{Mode: mode}, cat[name], nil)
			require.NoError(t, err)
			require.Equal(t, want[i], got, "%s %s", mode, name)
			_, fb := fallback(cat[name], got)
			require.False(t, fb, name)
		}
	}

	// Lossless keeps the exact source type; mixed expert types widen to F32.
	gate := byName["blk.3.ffn_gate_exps.weight"]
	bf, f16 := &ggufRows{typ: quant.BF16}, &ggufRows{typ: quant.F16}
	for _, tc := range []struct {
		src  []rowSource
		want quant.Type
	}{
		{[]rowSource{bf, bf}, quant.BF16},
		{[]rowSource{f16}, quant.F16},
		{[]rowSource{bf, f16}, quant.F32},
	} {
		got, err := tensorType(Options{Mode: ModeLossless}, gate, tc.src)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	got, err := tensorType(Options{Mode: ModeF32}, byName["output.weight"], nil)
	require.NoError(t, err)
	require.Equal(t, quant.F32, got)

	// Block-size fallbacks: Q8_0 when 32 divides the row, else F16.
	for _, tc := range []struct {
		cols uint64
		typ  quant.Type
		want quant.Type // 0: no fallback
	}{
		{256, quant.Q2_K, 0},
		{128, quant.Q2_K, quant.Q8_0},
		{128, quant.IQ2_XXS, quant.Q8_0},
		{192, quant.Q4_K, quant.Q8_0},
		{48, quant.Q4_K, quant.F16},
		{48, quant.Q8_0, quant.F16},
		{48, quant.F16, 0},
	} {
		x := layout.Tensor{Name: "x", Dims: []uint64{tc.cols, 4}}
		fb, ok := fallback(x, tc.typ)
		require.Equal(t, tc.want != 0, ok, "%d %v", tc.cols, tc.typ)
		if ok {
			require.Equal(t, Fallback{Tensor: "x", Want: tc.typ, Got: tc.want}, fb)
		}
	}

	// Overrides: checked first, in order, by prefix; refused when the
	// engine would refuse the type or the row is not whole blocks.
	o := func(s ...string) []Override {
		var out []Override
		for _, x := range s {
			ov, err := ParseOverride(x)
			require.NoError(t, err)
			out = append(out, ov)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		overrides []Override
		want      quant.Type
		err       string
	}{
		{"blk.7.ffn_down_exps.weight", o("blk.7.ffn_down_exps.weight=q4_k"), quant.Q4_K, ""},
		{"blk.7.ffn_down_exps.weight", o("blk.7.=Q8_0", "blk.7.ffn_down_exps.weight=q4k"), quant.Q8_0, ""},
		{"blk.7.ffn_down_exps.weight", o("blk.70=Q8_0"), quant.Q2_K, ""},
		{"blk.7.attn_q_a.weight", o("blk.7.attn=f16"), quant.F16, ""},
		{"token_embd.weight", o("token_embd.weight=bf16"), quant.BF16, ""},
		{"blk.7.attn_norm.weight", o("blk.7.attn=Q8_0"), 0, "the engine accepts only [F32] for this tensor"},
		{"blk.7.attn_q_a.weight", o("blk.7.attn_q_a=Q2_K"), 0, "the engine accepts only [Q8_0 F16 BF16 F32]"},
		{"blk.1.ffn_gate_tid2eid.weight", o("blk.1.=F32"), 0, "the engine accepts only [I32]"},
		{"blk.7.attn_sinks.weight", o("blk.7.attn_sinks.weight=F32"), quant.F32, ""},
	} {
		got, err := tensorType(Options{Mode: ModeQ2, Overrides: tc.overrides}, byName[tc.name], nil)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
	x := layout.Tensor{Name: "blk.0.ffn_down_exps.weight", Dims: []uint64{128, 256, 8}, Class: layout.ClassRouted, Type: quant.Q2_K}
	_, err = tensorType(Options{Mode: ModeQ2, Overrides: o("blk.0.ffn_down=Q4_K")}, x, nil)
	require.ErrorContains(t, err, "not a multiple of the block size 256")

	for _, tc := range []struct{ in, err string }{
		{"x", "want NAME=TYPE"},
		{"=Q8_0", "want NAME=TYPE"},
		{"x=", "want NAME=TYPE"},
		{"x=Q5_K", "Q5_K cannot be written"},
		{"x=Q9", `unknown type name "Q9"`},
	} {
		_, err := ParseOverride(tc.in)
		require.ErrorContains(t, err, tc.err, tc.in)
	}
}

// testImatrix builds an importance matrix with non-uniform values for the
// routed tensors of the given layers of p, whole (experts × columns) as the
// collector writes them, plus any extra entries.
func testImatrix(p layout.Params, layers []int, extra ...quant.ImatrixEntry) *quant.Imatrix {
	m := &quant.Imatrix{Chunks: 12, Dataset: "calibration.txt"}
	for _, il := range layers {
		for k, part := range []string{"gate", "up", "down"} {
			cols := p.Embd
			if part == "down" {
				cols = p.ExpertFF
			}
			v := make([]float32, p.Experts*cols)
			for i := range v {
				// Spiky, column- and expert-dependent importances.
				v[i] = 0.01 + float32((i*7919+il*31+k*17)%101)/10
				if i%13 == 0 {
					v[i] *= 40
				}
			}
			m.Entries = append(m.Entries, quant.ImatrixEntry{Name: fmt.Sprintf("blk.%d.ffn_%s_exps.weight", il, part), NCall: 1, Values: v})
		}
	}
	m.Entries = append(m.Entries, extra...)
	return m
}

// expertBytes returns expert e's bytes of a stacked routed tensor.
func expertBytes(t *testing.T, f *gguf.File, name string, e int) []byte {
	t.Helper()
	ti, ok := f.Tensor(name)
	require.True(t, ok, name)
	data := f.TensorData(ti)
	n := len(data) / int(ti.Dims[2])
	return data[e*n : (e+1)*n]
}

// runTokens loads a GGUF with the engine and runs a few tokens through
// prefill and decode; the logits must be finite.
func runTokens(t *testing.T, path string) {
	t.Helper()
	m, err := engine.Open(path)
	require.NoError(t, err)
	defer m.File.Close()
	s, err := engine.NewSession(m, cpu.New(2), engine.Options{Context: 64})
	require.NoError(t, err)
	toks := []int{1, 5, 9, 2, 7, 3}
	for i := range toks {
		toks[i] %= m.Params.Vocab
	}
	require.NoError(t, s.Prefill(toks))
	require.NoError(t, s.Decode(4))
	require.NoError(t, s.Decode(6))
	for i, v := range s.Logits() {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "logit %d = %v", i, v)
	}
}

func metaString(f *gguf.File, key string) (string, bool) {
	v, ok := f.Value(key)
	if !ok {
		return "", false
	}
	return v.Str()
}

func metaUint(t *testing.T, f *gguf.File, key string) uint64 {
	v, ok := f.Value(key)
	require.True(t, ok, key)
	require.Equal(t, gguf.TypeUint64, v.Type(), key)
	n, _ := v.Int()
	return uint64(n)
}

// TestConvertImatrix converts the tiny oracle checkpoint to q2 and q4 with
// and without an imatrix covering layers 0 and 1 (and one expert of layer
// 2 by its checkpoint name), then checks that exactly the tensors with
// entries change, that each weighted expert equals quantizing the decoded
// expert with its slice of the imatrix, the metadata, and that the engine
// runs the files.
func TestConvertImatrix(t *testing.T) {
	const name = "tiny_w16_r16"
	p, err := LoadConfig(oracle(name))
	require.NoError(t, err)
	src, err := Open(oracle(name))
	require.NoError(t, err)
	defer src.Close()
	hfOnly := make([]float32, p.Embd)
	for i := range hfOnly {
		hfOnly[i] = float32(1 + (i*i)%29)
	}
	im := testImatrix(p, []int{0, 1}, quant.ImatrixEntry{Name: "layers.2.ffn.experts.5.w3.weight", NCall: 1, Values: hfOnly})

	for _, mode := range []Mode{ModeQ2, ModeQ4} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			convert := func(opt Options, file string) (*gguf.File, *Report) {
				opt.Mode, opt.Tables, opt.Workers = mode, tables(t), 2
				path := filepath.Join(dir, file)
				r, err := ConvertFile(path, src, p, opt)
				require.NoError(t, err)
				f, err := gguf.Open(path)
				require.NoError(t, err)
				t.Cleanup(func() { f.Close() })
				require.NoError(t, layout.Check(f).Err())
				require.Equal(t, r.DataOffset, int64(f.DataOffset))
				require.Equal(t, r.FileBytes, f.Size())
				runTokens(t, path)
				return f, r
			}
			plain, _ := convert(Options{}, "plain.gguf")
			weighted, r := convert(Options{Imatrix: im, ImatrixPath: "/data/ds4.imatrix"}, "imatrix.gguf")
			gateUp := layout.RecipeQ2.GateUp
			if mode == ModeQ4 {
				gateUp = quant.Q4_K
			}

			// (a) Only routed gate/up of layers 0 and 1 and expert 5 of
			// layer 2's up change; down projections of 128 columns fall
			// back to Q8_0, which ignores importance.
			for i, ti := range weighted.Tensors {
				pti := plain.Tensors[i]
				require.Equal(t, pti.Name, ti.Name)
				require.Equal(t, pti.Type, ti.Type)
				a, b := plain.TensorData(pti), weighted.TensorData(ti)
				changed := slices.Contains([]string{
					"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight",
					"blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight",
					"blk.2.ffn_up_exps.weight",
				}, ti.Name)
				require.Equal(t, changed, !bytes.Equal(a, b), ti.Name)
			}
			for e := range p.Experts {
				same := bytes.Equal(expertBytes(t, plain, "blk.2.ffn_up_exps.weight", e), expertBytes(t, weighted, "blk.2.ffn_up_exps.weight", e))
				require.Equal(t, e != 5, same, "expert %d", e)
			}
			imatrixCount := map[string]int{}
			for _, pt := range r.Tensors {
				if pt.Imatrix > 0 {
					imatrixCount[pt.Name] = pt.Imatrix
				}
			}
			require.Equal(t, map[string]int{
				"blk.0.ffn_gate_exps.weight": 8, "blk.0.ffn_up_exps.weight": 8,
				"blk.1.ffn_gate_exps.weight": 8, "blk.1.ffn_up_exps.weight": 8,
				"blk.2.ffn_up_exps.weight": 1,
			}, imatrixCount)

			// (b) A weighted expert equals quantizing the decoded expert
			// with its own slice of the entry, cut here by hand.
			for _, tc := range []struct {
				tensor, hf string
				il, e      int
				entry      int // index in im.Entries
			}{
				{"blk.0.ffn_gate_exps.weight", "w1", 0, 3, 0},
				{"blk.1.ffn_up_exps.weight", "w3", 1, 7, 4},
			} {
				w, err := src.Weight(layout.ExpertHF(tc.il, tc.e, tc.hf))
				require.NoError(t, err)
				x, err := w.Float32s()
				require.NoError(t, err)
				vals := im.Entries[tc.entry].Values
				require.Equal(t, tc.tensor, im.Entries[tc.entry].Name)
				want, err := quant.Quantize(gateUp, x, p.Embd, vals[tc.e*p.Embd:(tc.e+1)*p.Embd])
				require.NoError(t, err)
				require.Equal(t, want, expertBytes(t, weighted, tc.tensor, tc.e), tc.tensor)
			}
			w, err := src.Weight(layout.ExpertHF(2, 5, "w3"))
			require.NoError(t, err)
			x, err := w.Float32s()
			require.NoError(t, err)
			want, err := quant.Quantize(gateUp, x, p.Embd, hfOnly)
			require.NoError(t, err)
			require.Equal(t, want, expertBytes(t, weighted, "blk.2.ffn_up_exps.weight", 5))
			// Without an entry: IQ2_XXS uses the expert's own weight
			// energy, Q4_K the unweighted quantizer (both nil here).
			w, err = src.Weight(layout.ExpertHF(3, 2, "w1"))
			require.NoError(t, err)
			x, err = w.Float32s()
			require.NoError(t, err)
			want, err = quant.Quantize(gateUp, x, p.Embd, nil)
			require.NoError(t, err)
			require.Equal(t, want, expertBytes(t, weighted, "blk.3.ffn_gate_exps.weight", 2))

			// (c) Metadata.
			file, _ := metaString(weighted, "quantize.imatrix.file")
			require.Equal(t, "/data/ds4.imatrix", file)
			require.Equal(t, uint64(len(im.Entries)), metaUint(t, weighted, "quantize.imatrix.entries_count"))
			require.Equal(t, uint64(12), metaUint(t, weighted, "quantize.imatrix.chunks_count"))
			ds, _ := metaString(weighted, "quantize.imatrix.dataset")
			require.Equal(t, "calibration.txt", ds)
			for _, kv := range plain.KV {
				require.False(t, strings.HasPrefix(kv.Key, "quantize."), kv.Key)
			}
		})
	}
}

// TestConvertImatrixErrors: strictness applies to the tensors whose type
// uses importance; a wrongly sized entry is an error.
func TestConvertImatrixErrors(t *testing.T) {
	p, err := LoadConfig(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	src, err := Open(oracle("tiny_w16_r16"))
	require.NoError(t, err)
	defer src.Close()
	all := []int{0, 1, 2, 3, 4}

	// Every routed tensor has an entry, non-expert tensors none: strict
	// passes (Q8_0, F16 and F32 tensors are not consulted).
	_, err = Plan(src, p, Options{Mode: ModeQ2, Imatrix: testImatrix(p, all), ImatrixStrict: true})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		opt  Options
		err  string
	}{
		{"strict miss", Options{Mode: ModeQ2, Imatrix: testImatrix(p, []int{0, 1, 2}), ImatrixStrict: true},
			`tensor blk.3.ffn_gate_exps.weight expert 0: no imatrix entry for "blk.3.ffn_gate_exps.weight" or "layers.3.ffn.experts.0.w1.weight" (--imatrix-strict)`},
		{"override refused", Options{Mode: ModeQ4, Imatrix: testImatrix(p, all), ImatrixStrict: true, Overrides: []Override{{"blk.0.attn_q_a.weight", quant.Q8_0}, {"token_embd", quant.Q4_K}}},
			`token_embd.weight: --tensor-type token_embd=Q4_K: the engine accepts only`},
		{"size", Options{Mode: ModeQ4, Imatrix: &quant.Imatrix{Entries: []quant.ImatrixEntry{{Name: "blk.2.ffn_gate_exps.weight", NCall: 1, Values: make([]float32, 100)}}}},
			`tensor blk.2.ffn_gate_exps.weight: imatrix: entry "blk.2.ffn_gate_exps.weight" has 100 values, want 256`},
		{"gate up differ", Options{Mode: ModeQ4, Overrides: []Override{{"blk.1.ffn_gate", quant.Q8_0}}},
			`blk.1: routed gate is Q8_0 but up is Q4_K; the engine needs them equal`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(src, p, tc.opt)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// synthFile writes the tiny synthetic model (short vocabulary) with
// recipe r to a file.
func synthFile(t *testing.T, r layout.Recipe) (string, layout.Params) {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = 1024
	p.SetLayers(4) // hash, window-only, ratio-4 and ratio-128 layers
	path := filepath.Join(t.TempDir(), r.Name+".gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: p, Recipe: r, Seed: 3, Tables: tables(t)})
	require.NoError(t, err)
	return path, p
}

// TestRequantize requantizes a synthetic q4 GGUF to q2 with an imatrix
// for some layers: Q4_K experts are decoded and quantized again (down to
// Q2_K with importance, which the oracle's 128-wide down projections
// cannot exercise), every other tensor is copied, the metadata is the
// input's plus the imatrix keys, and the engine runs the result.
// Requantizing that output again without an imatrix copies everything
// and drops the imatrix keys.
func TestRequantize(t *testing.T) {
	in, p := synthFile(t, layout.RecipeQ4)
	src, err := gguf.Open(in)
	require.NoError(t, err)
	defer src.Close()
	im := testImatrix(p, []int{1, 3})
	dir := t.TempDir()
	out := filepath.Join(dir, "q2.gguf")
	opt := Options{Mode: ModeQ2, Imatrix: im, ImatrixPath: "im.dat", Workers: 3, Source: "requantized"}
	plan, err := PlanRequantize(src, opt)
	require.NoError(t, err)
	r, err := RequantizeFile(out, src, opt)
	require.NoError(t, err)
	require.Equal(t, plan.Tensors, r.Tensors)
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	check := layout.Check(f)
	require.NoError(t, check.Err())
	require.Equal(t, layout.RecipeQ2, check.Recipe)
	require.Equal(t, plan.DataOffset, int64(f.DataOffset))
	require.Equal(t, plan.FileBytes, f.Size())
	runTokens(t, out)

	dequant := func(name string, e int) []float32 {
		ti, _ := src.Tensor(name)
		b := expertBytes(t, src, name, e)
		x := make([]float32, int(ti.Dims[0]*ti.Dims[1]))
		require.NoError(t, quant.DequantizeRow(ti.Type, b, x))
		return x
	}
	for _, ti := range f.Tensors {
		in, _ := src.Tensor(ti.Name)
		if !strings.Contains(ti.Name, "_exps.") {
			require.Equal(t, in.Type, ti.Type, ti.Name)
			require.Equal(t, src.TensorData(in), f.TensorData(ti), ti.Name)
			continue
		}
		il, part, err := routedLayer(ti.Name)
		require.NoError(t, err)
		weighted := il == 1 || il == 3
		for _, e := range []int{0, p.Experts - 1} {
			cols := int(ti.Dims[0])
			var imp []float32
			if weighted {
				k := map[string]int{"w1": 0, "w3": 1, "w2": 2}[part]
				entry := im.Entries[3*slices.Index([]int{1, 3}, il)+k]
				require.Equal(t, ti.Name, entry.Name)
				imp = entry.Values[e*cols : (e+1)*cols]
			}
			want, err := quant.Quantize(ti.Type, dequant(ti.Name, e), cols, imp)
			require.NoError(t, err)
			require.Equal(t, want, expertBytes(t, f, ti.Name, e), "%s expert %d", ti.Name, e)
		}
	}

	// Metadata: the input's keys in order, the mode and source replaced,
	// then the imatrix keys.
	var keys []string
	for _, kv := range src.KV {
		keys = append(keys, kv.Key)
		if kv.Key == keyMode || kv.Key == keySource {
			continue
		}
		got, ok := f.Value(kv.Key)
		require.True(t, ok, kv.Key)
		require.Equal(t, kv.Value, got, kv.Key)
	}
	keys = append(keys, keySource, keyMode, "quantize.imatrix.file", "quantize.imatrix.entries_count", "quantize.imatrix.dataset", "quantize.imatrix.chunks_count")
	var gotKeys []string
	for _, kv := range f.KV {
		gotKeys = append(gotKeys, kv.Key)
	}
	require.Equal(t, keys, gotKeys)
	mode, _ := metaString(f, keyMode)
	require.Equal(t, "q2", mode)

	// Again, without an imatrix: every tensor is already q2, so copied;
	// the stale imatrix keys go.
	again := filepath.Join(dir, "again.gguf")
	r, err = RequantizeFile(again, f, Options{Mode: ModeQ2})
	require.NoError(t, err)
	for _, pt := range r.Tensors {
		require.True(t, pt.Copy, pt.Name)
	}
	g, err := gguf.Open(again)
	require.NoError(t, err)
	defer g.Close()
	for i, ti := range g.Tensors {
		require.Equal(t, f.TensorData(f.Tensors[i]), g.TensorData(ti), ti.Name)
	}
	for _, kv := range g.KV {
		require.False(t, strings.HasPrefix(kv.Key, "quantize.imatrix."), kv.Key)
	}
	source, _ := metaString(g, keySource)
	require.Equal(t, "requantized", source)

	// Q4 from the q4 input copies the experts: the imatrix cannot apply,
	// and the report says so.
	r, err = Requantize(&bytes.Buffer{}, src, Options{Mode: ModeQ4, Imatrix: im})
	require.NoError(t, err)
	require.Contains(t, r.Warnings, "tensor blk.1.ffn_down_exps.weight: copied as stored in Q4_K, so the imatrix was not applied (requantize a lossless file to apply it)")
}

// TestRequantizeMatchesConvert: requantizing a lossless conversion gives
// the same tensors as converting the checkpoint directly, since the
// lossless file holds the decoded values exactly.
func TestRequantizeMatchesConvert(t *testing.T) {
	const name = "hd192_w8_r32"
	p, err := LoadConfig(oracle(name))
	require.NoError(t, err)
	src, err := Open(oracle(name))
	require.NoError(t, err)
	defer src.Close()
	dir := t.TempDir()
	lossless := filepath.Join(dir, "lossless.gguf")
	_, err = ConvertFile(lossless, src, p, Options{Mode: ModeLossless, Tables: tables(t)})
	require.NoError(t, err)
	lf, err := gguf.Open(lossless)
	require.NoError(t, err)
	defer lf.Close()

	im := testImatrix(p, []int{0, 3, 5})
	for _, mode := range []Mode{ModeQ2, ModeQ4} {
		opt := Options{Mode: mode, Imatrix: im, Tables: tables(t)}
		var a, b bytes.Buffer
		ra, err := Convert(&a, src, p, opt)
		require.NoError(t, err)
		rb, err := Requantize(&b, lf, opt)
		require.NoError(t, err)
		require.Equal(t, ra.Fallbacks, rb.Fallbacks)
		fa, err := gguf.Parse(a.Bytes())
		require.NoError(t, err)
		fb, err := gguf.Parse(b.Bytes())
		require.NoError(t, err)
		require.Len(t, fb.Tensors, len(fa.Tensors))
		for i, ti := range fa.Tensors {
			require.Equal(t, ti.Type, fb.Tensors[i].Type, ti.Name)
			require.True(t, bytes.Equal(fa.TensorData(ti), fb.TensorData(fb.Tensors[i])), "%s %s", mode, ti.Name)
		}
	}

	// Lossless of a lossless file copies everything.
	var c bytes.Buffer
	r, err := Requantize(&c, lf, Options{Mode: ModeLossless})
	require.NoError(t, err)
	fc, err := gguf.Parse(c.Bytes())
	require.NoError(t, err)
	for i, ti := range fc.Tensors {
		require.True(t, r.Tensors[i].Copy)
		require.Equal(t, lf.TensorData(lf.Tensors[i]), fc.TensorData(ti), ti.Name)
	}
}

// TestRequantizeErrors: inputs that are not DS4 files, and tensors that
// cannot be decoded, are refused with clear errors.
func TestRequantizeErrors(t *testing.T) {
	in, _ := synthFile(t, layout.RecipeQ2)
	src, err := gguf.Open(in)
	require.NoError(t, err)
	defer src.Close()

	// Drop a tensor: the layout check names it.
	var kept []gguf.TensorInfo
	var data [][]byte
	for _, ti := range src.Tensors {
		if ti.Name == "blk.2.attn_kv.weight" {
			continue
		}
		kept = append(kept, gguf.TensorInfo{Name: ti.Name, Type: ti.Type, Dims: ti.Dims})
		data = append(data, src.TensorData(ti))
	}
	var buf bytes.Buffer
	gw, err := gguf.NewWriter(&buf, src.KV, kept)
	require.NoError(t, err)
	for _, d := range data {
		_, err := gw.Write(d)
		require.NoError(t, err)
	}
	require.NoError(t, gw.Close())
	broken, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	_, err = PlanRequantize(broken, Options{Mode: ModeQ4})
	require.ErrorContains(t, err, "input is not a valid DS4 file")
	require.ErrorContains(t, err, "tensor blk.2.attn_kv.weight: missing")

	_, err = PlanRequantize(src, Options{Mode: "q8"})
	require.ErrorContains(t, err, `unknown mode "q8"`)

	// A non-finite value in a tensor to requantize.
	nan := &ggufRows{name: "x", typ: quant.F32, data: []byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x3f}, rows: 1, cols: 2}
	require.ErrorContains(t, nan.decodeRows(0, make([]float32, 2)), "element 0 (row 0, column 0) decodes to NaN")
	require.ErrorContains(t, nan.decodeRows(1, make([]float32, 2)), "out of range")
}
