package layout

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// TestFlashCatalogMatchesSpec checks the Flash catalog against the counts
// and sizes listed in docs/formats/gguf.md#tensor-catalog (written out there by hand).
func TestFlashCatalogMatchesSpec(t *testing.T) {
	p := Flash()
	require.NoError(t, p.Validate())
	require.Empty(t, p.FlashDiff())
	ts := p.Tensors(RecipeQ2)
	// 6 global + 43×23 + 41×4 compressor + 21×6 indexer + 3 tid2eid = 1288,
	// plus exp_probs_b on the 40 score-routed layers.
	require.Len(t, ts, 1328)
	byName := map[string]Tensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	size := func(name string) uint64 {
		x := byName[name]
		rb, err := x.Type.RowBytes(int(x.Dims[0]))
		require.NoError(t, err)
		n := uint64(rb)
		for _, d := range x.Dims[1:] {
			n *= d
		}
		return n
	}
	cases := []struct {
		name string
		dims []uint64
		typ  quant.Type
		size uint64
	}{
		{"output.weight", []uint64{4096, 129280}, quant.Q8_0, 562626560},
		{"token_embd.weight", []uint64{4096, 129280}, quant.F16, 1059061760},
		{"blk.0.attn_q_b.weight", []uint64{1024, 32768}, quant.Q8_0, 35651584},
		{"blk.5.ffn_gate_exps.weight", []uint64{4096, 2048, 256}, quant.IQ2_XXS, 553648128},
		{"blk.5.ffn_down_exps.weight", []uint64{2048, 4096, 256}, quant.Q2_K, 704643072},
		{"blk.2.attn_compressor_ape.weight", []uint64{1024, 4}, quant.F16, 8192},
		{"blk.3.attn_compressor_ape.weight", []uint64{512, 128}, quant.F16, 131072},
		{"blk.42.indexer.attn_q_b.weight", []uint64{1024, 8192}, quant.F16, 16777216},
		{"blk.2.indexer_compressor_kv.weight", []uint64{4096, 256}, quant.F16, 2097152},
		{"blk.1.ffn_gate_tid2eid.weight", []uint64{6, 129280}, quant.I32, 3102720},
		{"blk.0.hc_attn_fn.weight", []uint64{16384, 24}, quant.F16, 786432},
		{"blk.0.attn_output_a.weight", []uint64{4096, 8192}, quant.Q8_0, 35651584},
		{"blk.0.attn_output_b.weight", []uint64{8192, 4096}, quant.Q8_0, 35651584},
		{"output_hc_fn.weight", []uint64{16384, 4}, quant.F16, 131072},
		{"blk.0.ffn_down_shexp.weight", []uint64{2048, 4096}, quant.Q8_0, 8912896},
	}
	for _, c := range cases {
		x, ok := byName[c.name]
		require.True(t, ok, c.name)
		require.Equal(t, c.dims, x.Dims, c.name)
		require.Equal(t, c.typ, x.Type, c.name)
		require.Equal(t, c.size, size(c.name), c.name)
	}
	for _, absent := range []string{"blk.0.attn_compressor_kv.weight", "blk.3.indexer.proj.weight", "blk.3.ffn_gate_tid2eid.weight", "blk.2.exp_probs_b.bias"} {
		_, ok := byName[absent]
		require.False(t, ok, absent)
	}
	q4 := p.Tensors(RecipeQ4)
	for _, x := range q4 {
		if x.Class == ClassRouted {
			require.Equal(t, quant.Q4_K, x.Type)
		}
	}
}

func TestFlashMetadataSchedule(t *testing.T) {
	p := Flash()
	want := []int{0, 0, 4, 128, 4, 128}
	require.Equal(t, want, p.CompressRatios[:6])
	require.Equal(t, 4, p.CompressRatios[42])
	require.Equal(t, 128, p.CompressRatios[41])
	require.Equal(t, 24, p.HCMix())
	for _, kv := range p.KV() {
		if kv.Key == "deepseek4.rope.scaling.original_context_length" {
			require.Equal(t, gguf.TypeUint32, kv.Value.Type())
		}
	}
	s := Flash()
	s.SetLayers(2)
	require.Equal(t, 2, s.HashLayers)
	require.ElementsMatch(t, []string{"deepseek4.block_count", "deepseek4.hash_layer_count", "deepseek4.attention.compress_ratios", "deepseek4.swiglu_clamp_exp"}, s.FlashDiff())
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Params)
		msg  string
	}{
		{"zero embd", func(p *Params) { p.Embd = 0 }, "embedding_length = 0"},
		{"two kv heads", func(p *Params) { p.HeadsKV = 2 }, "head_count_kv"},
		{"value dim", func(p *Params) { p.ValueDim = 64 }, "value_length"},
		{"rope too wide", func(p *Params) { p.RopeDim = 512 }, "rope.dimension_count"},
		{"nope not 64-aligned", func(p *Params) { p.RopeDim = 32 }, "multiple of 64"},
		{"indexer dim", func(p *Params) { p.IndexerDim = 96 }, "power of two"},
		{"groups", func(p *Params) { p.OGroups = 3 }, "not divisible"},
		{"too many used", func(p *Params) { p.Experts, p.ExpertsUsed = 8, 9 }, "exceeds expert_count"},
		{"sinkhorn 2^31", func(p *Params) { p.SinkhornIters = 1 << 31 }, "sinkhorn_iterations = 2147483648, outside 1..1000"},
		{"huge window", func(p *Params) { p.Window = 1 << 20 }, "sliding_window = 1048576, outside"},
		{"huge ratio", func(p *Params) { p.CompressRatios[3] = 1 << 20 }, "compress_ratios[3] = 1048576"},
		{"shared", func(p *Params) { p.SharedExperts = 2 }, "one shared expert"},
		{"hash layers", func(p *Params) { p.HashLayers = 50 }, "hash_layer_count"},
		{"ratios length", func(p *Params) { p.CompressRatios = p.CompressRatios[:3] }, "compress_ratios has 3 entries"},
		{"ratio one", func(p *Params) { p.CompressRatios[5] = 1 }, "compress_ratios[5] = 1"},
		{"clamp", func(p *Params) { p.SwigluClamp[0] = 0 }, "swiglu_clamp_exp[0]"},
		{"eps", func(p *Params) { p.RMSEps = 0 }, "layer_norm_rms_epsilon"},
		{"norm", func(p *Params) { p.ExpertWeightsNorm = false }, "expert_weights_norm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Flash()
			c.mod(&p)
			require.ErrorContains(t, p.Validate(), c.msg)
		})
	}
	require.NoError(t, Tiny().Validate())
}

// metaFile writes kv (and no tensors) and parses it back.
func metaFile(t *testing.T, kv []gguf.KV) *gguf.File {
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, kv, nil)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

func replaceKV(kv []gguf.KV, k string, v *gguf.Value) []gguf.KV {
	out := slices.Clone(kv)
	for i := range out {
		if out[i].Key == k {
			if v == nil {
				return slices.Delete(out, i, i+1)
			}
			out[i].Value = *v
			return out
		}
	}
	if v != nil {
		out = append(out, gguf.KV{Key: k, Value: *v})
	}
	return out
}

func TestFromGGUFTypeRules(t *testing.T) {
	tiny := Tiny()
	p, err := FromGGUF(metaFile(t, tiny.KV()))
	require.NoError(t, err)
	require.Equal(t, tiny, p)

	v := func(x gguf.Value) *gguf.Value { return &x }
	accept := []struct {
		key string
		val *gguf.Value
	}{
		{"deepseek4.rope.scaling.original_context_length", v(gguf.Uint64(65536))},
		{"deepseek4.rope.freq_base", v(gguf.Float64(10000))},
		{"deepseek4.rope.freq_base", v(gguf.Uint32(10000))},
		{"deepseek4.expert_weights_scale", v(gguf.Float32(1.5))},
		{"deepseek4.attention.compress_ratios", v(gguf.Int32s([]int32{0, 0, 4, 128, 4, 128, 7}))},
		{"deepseek4.expert_group_count", nil},
		{"deepseek4.expert_group_count", v(gguf.Uint64(3))}, // another type is ignored, as upstream
	}
	for _, c := range accept {
		_, err := FromGGUF(metaFile(t, replaceKV(tiny.KV(), c.key, c.val)))
		require.NoError(t, err, "%s = %v", c.key, c.val)
	}
	reject := []struct {
		key string
		val *gguf.Value
		msg string
	}{
		{"deepseek4.block_count", nil, "block_count: missing"},
		{"deepseek4.embedding_length", v(gguf.Int32(256)), "embedding_length: type INT32, want UINT32"},
		{"deepseek4.vocab_size", v(gguf.Uint64(129280)), "vocab_size: type UINT64"},
		{"deepseek4.rope.freq_base", v(gguf.String("x")), "rope.freq_base: type STRING"},
		{"deepseek4.attention.compress_ratios", v(gguf.Uint32s([]uint32{0, 0})), "2 entries for 6 layers"},
		{"deepseek4.attention.compress_ratios", v(gguf.Int32s([]int32{0, 0, -4, 128, 4, 128})), "[2] at offset"},
		{"deepseek4.swiglu_clamp_exp", v(gguf.Uint32s([]uint32{10, 10, 10, 10, 10, 10})), "want ARRAY of FLOAT32"},
		{"deepseek4.expert_weights_norm", v(gguf.Uint8(1)), "type UINT8, want BOOL"},
		{"deepseek4.expert_group_count", v(gguf.Uint32(2)), "expert groups are not supported"},
		{"deepseek4.attention.head_count_kv", v(gguf.Uint32(4)), "head_count_kv"},
	}
	for _, c := range reject {
		_, err := FromGGUF(metaFile(t, replaceKV(tiny.KV(), c.key, c.val)))
		require.ErrorContains(t, err, c.msg, "%s", c.key)
	}
}

// TestFromGGUFBounds writes files with one integer key out of its range
// (below, above, 2^31, 2^32−1) and checks that the error is a
// gguf.FormatError naming that key, and nothing else.
func TestFromGGUFBounds(t *testing.T) {
	tiny := Tiny()
	type tc struct {
		key string
		val gguf.Value
	}
	var cases []tc
	for _, r := range intRanges {
		k := key(r.name)
		if r.lo > 0 {
			cases = append(cases, tc{k, gguf.Uint32(uint32(r.lo - 1))})
		}
		cases = append(cases, tc{k, gguf.Uint32(uint32(r.hi + 1))}, tc{k, gguf.Uint32(1 << 31)}, tc{k, gguf.Uint32(math.MaxUint32)})
	}
	cases = append(cases,
		tc{"deepseek4.rope.scaling.original_context_length", gguf.Uint64(1 << 40)},
		tc{"deepseek4.context_length", gguf.Uint64(math.MaxUint64)},
		tc{"deepseek4.context_length", gguf.Int32(-1)},
		tc{"deepseek4.attention.compress_ratios", gguf.Uint32s([]uint32{0, 0, 4, 128, 4, 1 << 31})},
		tc{"deepseek4.attention.compress_ratios", gguf.Uint32s([]uint32{0, 1, 4, 128, 4, 128})},
		tc{"deepseek4.attention.compress_ratios", gguf.Uint32s([]uint32{0, 0, 4, 128, 4, MaxCompressRatio + 1})},
	)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s=%v", strings.TrimPrefix(c.key, "deepseek4."), c.val), func(t *testing.T) {
			_, err := FromGGUF(metaFile(t, replaceKV(tiny.KV(), c.key, &c.val)))
			var fe *gguf.FormatError
			require.ErrorAs(t, err, &fe)
			require.Contains(t, fe.Field, fmt.Sprintf("%q", c.key))
			require.ErrorIs(t, err, gguf.ErrLimit)
			require.Positive(t, fe.Offset)
			require.Len(t, unjoin(err), 1, "%v", err)
		})
	}
	// The limits themselves are accepted where the rest allows.
	for _, c := range []tc{
		{"deepseek4.hyper_connection.sinkhorn_iterations", gguf.Uint32(1000)},
		{"deepseek4.attention.sliding_window", gguf.Uint32(1 << 16)},
		{"deepseek4.context_length", gguf.Uint32(0)},
		{"deepseek4.attention.compress_ratios", gguf.Uint32s([]uint32{0, 0, 4, 128, 4, MaxCompressRatio})},
	} {
		_, err := FromGGUF(metaFile(t, replaceKV(tiny.KV(), c.key, &c.val)))
		require.NoError(t, err, "%s = %v", c.key, c.val)
	}
}

// tables decodes the embedded tokenizer once for all tests.
var tables = sync.OnceValues(tokenizer.DeepSeekV4)

// tinyFile writes a tiny-shaped file with small vocab, zero tensor bytes
// and the given edits to the catalog.
func tinyFile(t *testing.T, edit func([]gguf.TensorInfo) []gguf.TensorInfo, kvEdit func([]gguf.KV) []gguf.KV) *gguf.File {
	p := Tiny()
	p.Vocab = 1024
	tab, err := tables()
	require.NoError(t, err)
	kv := append(p.KV(), gguf.KV{Key: "tokenizer.ggml.tokens", Value: gguf.Strings(tab.Tokens)},
		gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.Strings(tab.Merges[:10])})
	if kvEdit != nil {
		kv = kvEdit(kv)
	}
	var infos []gguf.TensorInfo
	for _, x := range p.Tensors(RecipeQ2) {
		infos = append(infos, gguf.TensorInfo{Name: x.Name, Type: x.Type, Dims: x.Dims})
	}
	if edit != nil {
		infos = edit(infos)
	}
	var buf bytes.Buffer
	w, err := gguf.NewWriter(&buf, kv, infos)
	require.NoError(t, err)
	for _, ti := range w.Tensors() {
		_, err := w.Write(make([]byte, ti.Size))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

func setTensor(name string, fn func(*gguf.TensorInfo)) func([]gguf.TensorInfo) []gguf.TensorInfo {
	return func(ts []gguf.TensorInfo) []gguf.TensorInfo {
		for i := range ts {
			if ts[i].Name == name {
				fn(&ts[i])
			}
		}
		return ts
	}
}

func TestCheck(t *testing.T) {
	rep := Check(tinyFile(t, nil, nil))
	require.NoError(t, rep.Err())
	require.True(t, rep.Published)
	require.Equal(t, RecipeQ2, rep.Recipe)

	drop := func(name string) func([]gguf.TensorInfo) []gguf.TensorInfo {
		return func(ts []gguf.TensorInfo) []gguf.TensorInfo {
			return slices.DeleteFunc(ts, func(x gguf.TensorInfo) bool { return x.Name == name })
		}
	}
	cases := []struct {
		name string
		edit func([]gguf.TensorInfo) []gguf.TensorInfo
		msg  string
	}{
		{"missing", drop("blk.3.attn_compressor_kv.weight"), "blk.3.attn_compressor_kv.weight: missing"},
		{"missing indexer", drop("blk.4.indexer.proj.weight"), "blk.4.indexer.proj.weight: missing"},
		{"missing hash table", drop("blk.1.ffn_gate_tid2eid.weight"), "blk.1.ffn_gate_tid2eid.weight: missing"},
		{"wrong dims", setTensor("blk.0.attn_q_a.weight", func(x *gguf.TensorInfo) { x.Dims = []uint64{256, 64} }), "dims [256 64], want [256 128]"},
		{"wrong rank", setTensor("blk.0.attn_norm.weight", func(x *gguf.TensorInfo) { x.Dims = []uint64{256, 1} }), "dims [256 1], want [256]"},
		{"wrong type", setTensor("blk.0.attn_norm.weight", func(x *gguf.TensorInfo) { x.Type = quant.F16 }), "type F16, want one of [F32]"},
		{"quantized control", setTensor("blk.0.ffn_gate_inp.weight", func(x *gguf.TensorInfo) { x.Type = quant.Q8_0 }), "type Q8_0"},
		{"gate up mismatch", setTensor("blk.1.ffn_up_exps.weight", func(x *gguf.TensorInfo) { x.Type = quant.Q4_K }), "routed gate is IQ2_XXS but up is Q4_K"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Check(tinyFile(t, c.edit, nil))
			require.ErrorContains(t, rep.Err(), c.msg)
		})
	}

	// Lossless float types are accepted but not published.
	rep = Check(tinyFile(t, setTensor("blk.0.attn_q_a.weight", func(x *gguf.TensorInfo) { x.Type = quant.BF16 }), nil))
	require.NoError(t, rep.Err())
	require.False(t, rep.Published)

	// Optional selection bias missing is fine; on a hash layer it is a warning.
	rep = Check(tinyFile(t, func(ts []gguf.TensorInfo) []gguf.TensorInfo {
		ts = drop("blk.4.exp_probs_b.bias")(ts)
		return append(ts, gguf.TensorInfo{Name: "blk.0.exp_probs_b.bias", Type: quant.F32, Dims: []uint64{8}}, gguf.TensorInfo{Name: "extra", Type: quant.F32, Dims: []uint64{1}})
	}, nil))
	require.NoError(t, rep.Err())
	require.Len(t, rep.Warnings, 2)
	require.Contains(t, strings.Join(rep.Warnings, "\n"), "hash-routed layer")

	// Tokenizer problems.
	rep = Check(tinyFile(t, nil, func(kv []gguf.KV) []gguf.KV {
		return slices.DeleteFunc(kv, func(e gguf.KV) bool { return e.Key == "tokenizer.ggml.merges" })
	}))
	require.ErrorContains(t, rep.Err(), "tokenizer.ggml.merges: missing")
	rep = Check(tinyFile(t, nil, func(kv []gguf.KV) []gguf.KV {
		for i := range kv {
			if kv[i].Key == "tokenizer.ggml.tokens" {
				kv[i].Value = gguf.Strings([]string{"a", tokenizer.BOS})
			}
		}
		return kv
	}))
	require.ErrorContains(t, rep.Err(), fmt.Sprintf("special token %q missing", tokenizer.DSML))

	// Bad metadata stops before the tensor checks but reports everything.
	rep = Check(tinyFile(t, nil, func(kv []gguf.KV) []gguf.KV {
		return replaceKV(replaceKV(kv, "deepseek4.vocab_size", nil), "deepseek4.expert_count", nil)
	}))
	require.Len(t, rep.Problems, 2)
}

// TestProCatalog checks the Pro catalog: Pro's shape from issue 33 and
// the released config, its schedule (no window-only layer) and the sizes
// of the tensors where it differs from Flash, with both published
// recipes.
func TestProCatalog(t *testing.T) {
	p := Pro()
	require.NoError(t, p.Validate())
	require.Equal(t, 61, p.Layers)
	require.Equal(t, []int{128, 128, 4, 128, 4, 128}, p.CompressRatios[:6])
	require.Equal(t, 4, p.CompressRatios[60])
	require.Equal(t, float32(2.5), p.ExpertWeightsScale)
	ts := p.Tensors(RecipeQ2)
	// 6 global + 61×23 + 61×4 compressor + 30×6 indexer + 3 tid2eid = 1836,
	// plus exp_probs_b on the 58 score-routed layers.
	require.Len(t, ts, 1894)
	byName := map[string]Tensor{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	for _, c := range []struct {
		name string
		dims []uint64
		typ  quant.Type
	}{
		{"token_embd.weight", []uint64{7168, 129280}, quant.F16},
		{"output.weight", []uint64{7168, 129280}, quant.Q8_0},
		{"blk.0.attn_q_a.weight", []uint64{7168, 1536}, quant.Q8_0},
		{"blk.0.attn_q_b.weight", []uint64{1536, 65536}, quant.Q8_0},
		{"blk.0.attn_output_a.weight", []uint64{4096, 16384}, quant.Q8_0},
		{"blk.0.attn_output_b.weight", []uint64{16384, 7168}, quant.Q8_0},
		{"blk.0.attn_compressor_ape.weight", []uint64{512, 128}, quant.F16},
		{"blk.2.attn_compressor_ape.weight", []uint64{1024, 4}, quant.F16},
		{"blk.2.indexer.attn_q_b.weight", []uint64{1536, 8192}, quant.F16},
		{"blk.2.indexer.proj.weight", []uint64{7168, 64}, quant.F16},
		{"blk.0.ffn_gate_inp.weight", []uint64{7168, 384}, quant.F16},
		{"blk.5.ffn_gate_exps.weight", []uint64{7168, 3072, 384}, quant.IQ2_XXS},
		{"blk.5.ffn_down_exps.weight", []uint64{3072, 7168, 384}, quant.Q2_K},
		{"blk.5.ffn_down_shexp.weight", []uint64{3072, 7168}, quant.Q8_0},
		{"blk.0.hc_attn_fn.weight", []uint64{28672, 24}, quant.F16},
	} {
		x, ok := byName[c.name]
		require.True(t, ok, c.name)
		require.Equal(t, c.dims, x.Dims, c.name)
		require.Equal(t, c.typ, x.Type, c.name)
	}
	for _, absent := range []string{"blk.0.indexer.proj.weight", "blk.3.ffn_gate_tid2eid.weight", "blk.2.exp_probs_b.bias"} {
		_, ok := byName[absent]
		require.False(t, ok, absent)
	}
	require.NoError(t, p.CheckRecipe(RecipeQ2))
	require.NoError(t, p.CheckRecipe(RecipeQ4))
}

// TestSetLayersAndModel checks that a slice keeps its model's schedule
// and is recognized as that model, and that other shapes are not.
func TestSetLayersAndModel(t *testing.T) {
	cases := []struct {
		name   string
		p      func() Params
		ratios []int
		hash   int
		model  string // "" for none
	}{
		{"flash", Flash, nil, 3, "DeepSeek-V4-Flash"},
		{"pro", Pro, nil, 3, "DeepSeek-V4-Pro"},
		{"flash 2", func() Params { p := Flash(); p.SetLayers(2); return p }, []int{0, 0}, 2, "DeepSeek-V4-Flash"},
		{"pro 2", func() Params { p := Pro(); p.SetLayers(2); return p }, []int{128, 128}, 2, "DeepSeek-V4-Pro"},
		{"pro 4", func() Params { p := Pro(); p.SetLayers(4); return p }, []int{128, 128, 4, 128}, 3, "DeepSeek-V4-Pro"},
		{"pro 4 back to 61", func() Params { p := Pro(); p.SetLayers(4); p.SetLayers(61); return p }, nil, 3, "DeepSeek-V4-Pro"},
		{"tiny", Tiny, []int{0, 0, 4, 128, 4, 128}, 3, ""},
		{"pro of 62 layers", func() Params { p := Pro(); p.SetLayers(62); return p }, nil, 3, ""},
		{"pro with Flash's ratios", func() Params { p := Pro(); p.CompressRatios[0], p.CompressRatios[1] = 0, 0; return p }, nil, 3, ""},
		{"flash with Pro's route scale", func() Params { p := Flash(); p.ExpertWeightsScale = 2.5; return p }, nil, 3, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.p()
			if c.ratios != nil {
				require.Equal(t, c.ratios, p.CompressRatios)
			}
			require.Equal(t, c.hash, p.HashLayers)
			m, ok := p.Model()
			require.Equal(t, c.model != "", ok)
			require.Equal(t, c.model, m.Name)
		})
	}
}

// TestMaxContextLength checks the pre-open bound of context flags
// against every released model.
func TestMaxContextLength(t *testing.T) {
	for _, p := range Released() {
		require.LessOrEqual(t, p.ContextLength, MaxContextLength(), p.Name)
	}
	require.Equal(t, 1048576, MaxContextLength())
}
