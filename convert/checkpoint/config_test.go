package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
)

func TestLoadConfigOracle(t *testing.T) {
	for _, name := range oracleCases {
		ref, err := LoadConfig(oracle(name))
		require.NoError(t, err, name)
		hf, err := LoadConfig(filepath.Join(oracle(name), "hf_config.json"))
		require.NoError(t, err, name)
		require.Equal(t, ref, hf, "%s: reference and Hugging Face configs disagree", name)
		require.Equal(t, name, ref.Name)
		require.Equal(t, 1048576, ref.ContextLength)
	}
	p, err := LoadConfig(oracle("hd192_w8_r32"))
	require.NoError(t, err)
	want := layout.Params{
		Name: "hd192_w8_r32", ContextLength: 1048576, Layers: 6, Embd: 256, Vocab: 384,
		Heads: 4, HeadsKV: 1, HeadDim: 192, ValueDim: 192, RopeDim: 64, QLoraRank: 128,
		OLoraRank: 64, OGroups: 2, Experts: 4, ExpertsUsed: 2, ExpertFF: 128, SharedExperts: 1,
		HashLayers: 3, Window: 8, IndexerHeads: 16, IndexerDim: 128, IndexerTopK: 12, HC: 4,
		SinkhornIters: 20, RopeOrigCtx: 65536,
		CompressRatios: []int{0, 0, 4, 32, 4, 32},
		SwigluClamp:    []float32{10, 10, 10, 10, 10, 10},
		RopeFreqBase:   10000, RopeScale: 16, YarnBetaFast: 32, YarnBetaSlow: 1,
		CompressRopeFreqBase: 160000, ExpertWeightsScale: 1.5, RMSEps: 1e-6, HCEps: 1e-6,
		ExpertWeightsNorm: true,
	}
	require.Equal(t, want, p)

	_, err = LoadConfig(t.TempDir())
	require.ErrorContains(t, err, "none of [config.json hf_config.json]")
}

// TestParseConfigFlash maps a config with the released model's values to
// exactly layout.Flash.
func TestParseConfigFlash(t *testing.T) {
	m := readJSON(t, filepath.Join(oracle("flash_ratios_s300"), "config.json"))
	f := layout.Flash()
	for k, v := range map[string]any{
		"vocab_size": f.Vocab, "dim": f.Embd, "moe_inter_dim": f.ExpertFF, "n_layers": f.Layers,
		"n_heads": f.Heads, "n_routed_experts": f.Experts, "n_activated_experts": f.ExpertsUsed,
		"q_lora_rank": f.QLoraRank, "head_dim": f.HeadDim, "o_groups": f.OGroups, "o_lora_rank": f.OLoraRank,
		"window_size": f.Window, "index_n_heads": f.IndexerHeads, "index_topk": f.IndexerTopK,
		"compress_ratios": append(f.CompressRatios, 0), // + the MTP layer
	} {
		m[k] = v
	}
	p, err := ParseConfig(marshal(t, m))
	require.NoError(t, err)
	require.Empty(t, p.FlashDiff())
	p.Name = f.Name
	require.Equal(t, f, p)
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func marshal(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestParseConfigErrors(t *testing.T) {
	ref := readJSON(t, filepath.Join(oracle("tiny_w16_r16"), "config.json"))
	hf := readJSON(t, filepath.Join(oracle("tiny_w16_r16"), "hf_config.json"))
	for _, tc := range []struct {
		name string
		base map[string]any
		key  string
		val  any // nil deletes the key
		err  string
	}{
		{"score func", ref, "score_func", "softmax", `score_func: "softmax" is not supported: DS4 routes with sqrtsoftplus scores`},
		{"no score func", ref, "score_func", nil, "score_func: missing"},
		{"shared experts", ref, "n_shared_experts", 2, "n_shared_experts: 2: DS4 has exactly one shared expert"},
		{"missing key", ref, "n_heads", nil, "n_heads: missing"},
		{"fractional", ref, "n_heads", 4.5, "n_heads: 4.5 is not a non-negative integer"},
		{"negative", ref, "vocab_size", -3, "vocab_size: -3 is not a non-negative integer"},
		{"string", ref, "dim", "256", "dim: 256 is not a number"},
		{"few ratios", ref, "compress_ratios", []int{0, 0, 4}, "compress_ratios: 3 entries for 5 layers"},
		{"many ratios", ref, "compress_ratios", []int{0, 0, 4, 16, 4, 0, 0}, "compress_ratios: 7 entries for 5 layers and 1 MTP layers"},
		{"bad ratio", ref, "compress_ratios", []any{0, 0, "x", 16, 4, 0}, "compress_ratios: entry 2 = x is not a non-negative integer"},
		{"ratio 1", ref, "compress_ratios", []int{0, 1, 4, 16, 4, 0}, "attention.compress_ratios[1] = 1"},
		{"no clamp", ref, "swiglu_limit", 0, "swiglu_limit: 0: an unclamped SwiGLU is not supported"},
		{"scales", ref, "scale_dtype", "fp32", `scale_dtype: "fp32" is not supported`},
		{"validate", ref, "head_dim", 96, "key_length − rope.dimension_count = 32 must be a multiple of 64"},
		{"both formats", ref, "hidden_size", 256, `want exactly one of "dim"`},
		{"kv heads", hf, "num_key_value_heads", 2, "num_key_value_heads: 2: DS4 attention has one shared KV head"},
		{"tied", hf, "tie_word_embeddings", true, "tie_word_embeddings: true"},
		{"block size", hf, "quantization_config", map[string]any{"weight_block_size": []int{64, 64}}, "quantization_config.weight_block_size: [64 64]"},
		{"hf score", hf, "scoring_func", "sigmoid", `scoring_func: "sigmoid" is not supported`},
		{"rope type", hf, "rope_scaling", map[string]any{"type": "linear", "factor": 16, "beta_fast": 32, "beta_slow": 1, "original_max_position_embeddings": 65536}, `rope_scaling.type: "linear" is not supported`},
		{"no rope scaling", hf, "rope_scaling", nil, "rope_scaling.factor: missing"},
		{"groups", hf, "n_group", 8, "n_group: 8: expert groups are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := make(map[string]any, len(tc.base))
			for k, v := range tc.base {
				m[k] = v
			}
			if tc.val == nil {
				delete(m, tc.key)
			} else {
				m[tc.key] = tc.val
			}
			_, err := ParseConfig(marshal(t, m))
			require.ErrorContains(t, err, tc.err)
		})
	}
	_, err := ParseConfig([]byte(`[1]`))
	require.ErrorContains(t, err, "checkpoint: config:")
}

// TestParseConfigPro reads the Pro-shaped oracle case in both key
// conventions and maps configs with the released models' values, in the
// Hugging Face key names of the official releases, to exactly
// layout.Flash and layout.Pro: every hyperparameter that sets Pro apart
// (o_groups, the compression schedule, index heads and top-k, route
// scale, …) comes from the config.
func TestParseConfigPro(t *testing.T) {
	p, err := LoadConfig(filepath.Join(oracle("pro_tiny_s320"), "hf_config.json"))
	require.NoError(t, err)
	require.Equal(t, layout.Params{
		Name: "pro_tiny_s320", ContextLength: 1048576, Layers: 6, Embd: 256, Vocab: 512,
		Heads: 16, HeadsKV: 1, HeadDim: 128, ValueDim: 128, RopeDim: 64, QLoraRank: 384,
		OLoraRank: 256, OGroups: 2, Experts: 12, ExpertsUsed: 6, ExpertFF: 256, SharedExperts: 1,
		HashLayers: 3, Window: 128, IndexerHeads: 8, IndexerDim: 128, IndexerTopK: 32, HC: 4,
		SinkhornIters: 20, RopeOrigCtx: 65536,
		CompressRatios: []int{128, 128, 4, 128, 4, 128},
		SwigluClamp:    []float32{10, 10, 10, 10, 10, 10},
		RopeFreqBase:   10000, RopeScale: 16, YarnBetaFast: 32, YarnBetaSlow: 1,
		CompressRopeFreqBase: 160000, ExpertWeightsScale: 2.5, RMSEps: 1e-6, HCEps: 1e-6,
		ExpertWeightsNorm: true,
	}, p)

	for _, want := range layout.Released() {
		t.Run(want.Name, func(t *testing.T) {
			m := readJSON(t, filepath.Join(oracle("pro_tiny_s320"), "hf_config.json"))
			for k, v := range map[string]any{
				"vocab_size": want.Vocab, "hidden_size": want.Embd, "moe_intermediate_size": want.ExpertFF,
				"num_hidden_layers": want.Layers, "num_attention_heads": want.Heads,
				"n_routed_experts": want.Experts, "num_experts_per_tok": want.ExpertsUsed,
				"q_lora_rank": want.QLoraRank, "head_dim": want.HeadDim, "o_groups": want.OGroups,
				"o_lora_rank": want.OLoraRank, "sliding_window": want.Window,
				"index_n_heads": want.IndexerHeads, "index_topk": want.IndexerTopK,
				"routed_scaling_factor": want.ExpertWeightsScale,
				"compress_ratios":       append(slices.Clone(want.CompressRatios), 0), // + the MTP layer
			} {
				m[k] = v
			}
			p, err := ParseConfig(marshal(t, m))
			require.NoError(t, err)
			got, ok := p.Model()
			require.True(t, ok, "differs from %s in %v", want.Name, p.Diff(want))
			require.Equal(t, want.Name, got.Name)
			p.Name = want.Name
			require.Equal(t, want, p)
		})
	}
}
