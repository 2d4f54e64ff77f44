package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ds4-go/ds4/engine/layout"
)

// ConfigFiles are the files LoadConfig looks for in a directory, in order:
// the reference config (or the released Hugging Face config.json), then
// the Hugging Face config the oracle cases store beside it.
var ConfigFiles = []string{"config.json", "hf_config.json"}

// LoadConfig reads the model hyperparameters from path: a config file, or a
// directory holding one of ConfigFiles. Both key conventions are accepted
// (see ParseConfig); the model is named after the directory.
func LoadConfig(path string) (layout.Params, error) {
	file := path
	if st, err := os.Stat(path); err != nil {
		return layout.Params{}, fmt.Errorf("checkpoint: %w", err)
	} else if st.IsDir() {
		file = ""
		for _, name := range ConfigFiles {
			if _, err := os.Stat(filepath.Join(path, name)); err == nil {
				file = filepath.Join(path, name)
				break
			}
		}
		if file == "" {
			return layout.Params{}, fmt.Errorf("checkpoint: %s: none of %v", path, ConfigFiles)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return layout.Params{}, fmt.Errorf("checkpoint: %w", err)
	}
	p, err := ParseConfig(data)
	if err != nil {
		return p, fmt.Errorf("%s: %w", file, err)
	}
	if abs, err := filepath.Abs(filepath.Dir(file)); err == nil && filepath.Base(abs) != string(filepath.Separator) {
		p.Name = filepath.Base(abs)
	}
	return p, nil
}

// ParseConfig maps a model config to DS4 hyperparameters and validates
// them. It reads either the reference inference/config.json key names
// (dim, n_layers, moe_inter_dim, …) or the Hugging Face ones (hidden_size,
// num_hidden_layers, moe_intermediate_size, rope_scaling, …), chosen by
// which of "dim" and "hidden_size" is present. compress_ratios may carry
// extra trailing entries for the MTP layers; the first n_layers are used.
// Settings the DS4 architecture cannot run (a routing score other than
// sqrtsoftplus, several shared experts, tied embeddings, non-E8M0 weight
// scales, …) are errors.
func ParseConfig(data []byte) (layout.Params, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return layout.Params{}, fmt.Errorf("checkpoint: config: %w", err)
	}
	_, ref := m["dim"]
	_, hf := m["hidden_size"]
	if ref == hf {
		return layout.Params{}, errors.New(`checkpoint: config: want exactly one of "dim" (reference keys) and "hidden_size" (Hugging Face keys)`)
	}
	c := &config{m: m}
	p := c.params(hf)
	if len(c.errs) > 0 {
		return p, fmt.Errorf("checkpoint: config: %w", errors.Join(c.errs...))
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("checkpoint: config: %w", err)
	}
	return p, nil
}

// config reads typed values from a decoded JSON object, collecting errors.
type config struct {
	m    map[string]any
	errs []error
}

func (c *config) fail(key, format string, a ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
}

// lookup finds a key, descending into objects for dotted paths.
func (c *config) lookup(key string) (any, bool) {
	m := c.m
	parts := strings.Split(key, ".")
	for i, k := range parts {
		v, ok := m[k]
		if !ok || v == nil {
			return nil, false
		}
		if i == len(parts)-1 {
			return v, true
		}
		if m, ok = v.(map[string]any); !ok {
			return nil, false
		}
	}
	return nil, false
}

func (c *config) num(key string) (float64, bool) {
	v, ok := c.lookup(key)
	if !ok {
		c.fail(key, "missing")
		return 0, false
	}
	n, isNum := v.(json.Number)
	if !isNum {
		c.fail(key, "%v is not a number", v)
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		c.fail(key, "%s is out of range", n)
		return 0, false
	}
	return f, true
}

// int reads a required non-negative integer key.
func (c *config) int(key string) int {
	f, ok := c.num(key)
	if !ok {
		return 0
	}
	if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		c.fail(key, "%v is not a non-negative integer", f)
		return 0
	}
	return int(f)
}

// intOr reads an optional non-negative integer key.
func (c *config) intOr(key string, def int) int {
	if _, ok := c.lookup(key); !ok {
		return def
	}
	return c.int(key)
}

func (c *config) float(key string) float32 {
	f, _ := c.num(key)
	return float32(f)
}

func (c *config) str(key string) (string, bool) {
	v, ok := c.lookup(key)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		c.fail(key, "%v is not a string", v)
	}
	return s, isStr
}

// want checks that a string key, if present, has one of the given values.
func (c *config) want(key, why string, allowed ...string) {
	if s, ok := c.str(key); ok && !slices.Contains(allowed, s) {
		c.fail(key, "%q is not supported: %s", s, why)
	}
}

// wantRequired is want for a key that must be present.
func (c *config) wantRequired(key, why string, allowed ...string) {
	if _, ok := c.lookup(key); !ok {
		c.fail(key, "missing")
		return
	}
	c.want(key, why, allowed...)
}

// ints reads a required array of non-negative integers.
func (c *config) ints(key string) []int {
	v, ok := c.lookup(key)
	if !ok {
		c.fail(key, "missing")
		return nil
	}
	a, isArr := v.([]any)
	if !isArr {
		c.fail(key, "%v is not an array", v)
		return nil
	}
	out := make([]int, len(a))
	for i, e := range a {
		n, isNum := e.(json.Number)
		f, err := n.Float64()
		if !isNum || err != nil || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			c.fail(key, "entry %d = %v is not a non-negative integer", i, e)
			return nil
		}
		out[i] = int(f)
	}
	return out
}

// keys names a hyperparameter in the reference and Hugging Face configs.
type keys struct{ ref, hf string }

func (k keys) pick(hf bool) string {
	if hf {
		return k.hf
	}
	return k.ref
}

// params maps the config to Params; hf selects the key convention.
func (c *config) params(hf bool) layout.Params {
	k := func(ref, hfKey string) string { return keys{ref, hfKey}.pick(hf) }
	p := layout.Params{
		Name:          "DeepSeek-V4",
		Vocab:         c.int("vocab_size"),
		Embd:          c.int(k("dim", "hidden_size")),
		ExpertFF:      c.int(k("moe_inter_dim", "moe_intermediate_size")),
		Layers:        c.int(k("n_layers", "num_hidden_layers")),
		HashLayers:    c.int(k("n_hash_layers", "num_hash_layers")),
		Heads:         c.int(k("n_heads", "num_attention_heads")),
		HeadsKV:       1,
		Experts:       c.int("n_routed_experts"),
		SharedExperts: c.int("n_shared_experts"),
		ExpertsUsed:   c.int(k("n_activated_experts", "num_experts_per_tok")),
		QLoraRank:     c.int("q_lora_rank"),
		HeadDim:       c.int("head_dim"),
		RopeDim:       c.int(k("rope_head_dim", "qk_rope_head_dim")),
		OGroups:       c.int("o_groups"),
		OLoraRank:     c.int("o_lora_rank"),
		Window:        c.int(k("window_size", "sliding_window")),
		IndexerHeads:  c.int("index_n_heads"),
		IndexerDim:    c.int("index_head_dim"),
		IndexerTopK:   c.int("index_topk"),
		HC:            c.int("hc_mult"),
		SinkhornIters: c.int("hc_sinkhorn_iters"),
		RopeOrigCtx:   c.int(k("original_seq_len", "rope_scaling.original_max_position_embeddings")),

		RopeFreqBase:         c.float("rope_theta"),
		RopeScale:            c.float(k("rope_factor", "rope_scaling.factor")),
		YarnBetaFast:         c.float(k("beta_fast", "rope_scaling.beta_fast")),
		YarnBetaSlow:         c.float(k("beta_slow", "rope_scaling.beta_slow")),
		CompressRopeFreqBase: c.float("compress_rope_theta"),
		ExpertWeightsScale:   c.float(k("route_scale", "routed_scaling_factor")),
		RMSEps:               c.float(k("norm_eps", "rms_norm_eps")),
		HCEps:                c.float("hc_eps"),
		ExpertWeightsNorm:    true,
	}
	p.ValueDim = p.HeadDim
	mtp := c.intOr(k("n_mtp_layers", "num_nextn_predict_layers"), 0)

	ratios := c.ints("compress_ratios")
	switch {
	case ratios == nil:
	case len(ratios) < p.Layers:
		c.fail("compress_ratios", "%d entries for %d layers", len(ratios), p.Layers)
	case len(ratios) > p.Layers+mtp:
		c.fail("compress_ratios", "%d entries for %d layers and %d MTP layers", len(ratios), p.Layers, mtp)
	default:
		p.CompressRatios = ratios[:p.Layers]
	}
	clamp := c.float("swiglu_limit")
	if !(clamp > 0) {
		c.fail("swiglu_limit", "%v: an unclamped SwiGLU is not supported (DS4 clamps every layer)", clamp)
	}
	p.SwigluClamp = make([]float32, p.Layers)
	for i := range p.SwigluClamp {
		p.SwigluClamp[i] = clamp
	}

	c.wantRequired(k("score_func", "scoring_func"), "DS4 routes with sqrtsoftplus scores", "sqrtsoftplus")
	if p.SharedExperts != 1 {
		c.fail("n_shared_experts", "%d: DS4 has exactly one shared expert", p.SharedExperts)
	}
	if !hf {
		c.want("scale_dtype", "weight block scales must be F8_E8M0", "fp8")
		c.want("dtype", "weights must be fp8 or bf16", "fp8", "bf16")
		c.want("expert_dtype", "routed experts must be fp4 or fp8", "fp4", "fp8")
		p.ContextLength = defaultContext(p)
		return p
	}

	// Hugging Face keys: the context length is declared, and a few keys
	// describe choices the architecture fixes.
	p.ContextLength = c.intOr("max_position_embeddings", defaultContext(p))
	if n := c.intOr("num_key_value_heads", 1); n != 1 {
		c.fail("num_key_value_heads", "%d: DS4 attention has one shared KV head", n)
	}
	for _, g := range []string{"n_group", "topk_group"} {
		if n := c.intOr(g, 1); n > 1 {
			c.fail(g, "%d: expert groups are not supported", n)
		}
	}
	if v, ok := c.lookup("tie_word_embeddings"); ok && v != false {
		c.fail("tie_word_embeddings", "%v: DS4 has a separate output head", v)
	}
	if v, ok := c.lookup("norm_topk_prob"); ok && v != true {
		c.fail("norm_topk_prob", "%v: DS4 normalizes the routed weights", v)
	}
	c.want("hidden_act", "DS4 experts use SwiGLU", "silu")
	c.want("rope_scaling.type", "DS4 uses YaRN", "yarn")
	c.want("rope_scaling.rope_type", "DS4 uses YaRN", "yarn")
	c.want("quantization_config.fmt", "FP8 weights must be e4m3", "e4m3")
	if v, ok := c.lookup("quantization_config.weight_block_size"); ok {
		if a, isArr := v.([]any); !isArr || len(a) != 2 || a[0] != json.Number("128") || a[1] != json.Number("128") {
			c.fail("quantization_config.weight_block_size", "%v: FP8 scale tiles must be [128, 128]", v)
		}
	}
	return p
}

// defaultContext is the context length YaRN extends the model to,
// original_seq_len × rope_factor, for configs that do not declare one.
func defaultContext(p layout.Params) int {
	n := float64(p.RopeOrigCtx) * max(float64(p.RopeScale), 1)
	return int(min(n, math.MaxInt32))
}
