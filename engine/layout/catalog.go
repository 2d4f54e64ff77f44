package layout

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ds4-go/ds4/quant"
)

// Recipe names the types of the routed expert tensors; every other tensor
// has the fixed type of the published files.
type Recipe struct {
	Name         string
	GateUp, Down quant.Type
}

// The published routed-expert recipes.
var (
	RecipeQ2 = Recipe{"q2", quant.IQ2_XXS, quant.Q2_K}
	RecipeQ4 = Recipe{"q4", quant.Q4_K, quant.Q4_K}
)

// ParseRecipe returns the published recipe called name ("q2" or "q4").
func ParseRecipe(name string) (Recipe, error) {
	switch name {
	case "q2":
		return RecipeQ2, nil
	case "q4":
		return RecipeQ4, nil
	}
	return Recipe{}, fmt.Errorf("layout: unknown recipe %q (want q2 or q4)", name)
}

// Class groups tensors by role; it decides which types a tensor may have.
type Class int

// Tensor classes.
const (
	ClassNorm      Class = iota // 1-D F32 vectors: norms, HC scale/base, sinks, biases
	ClassF16                    // F16 control matrices: embedding, HC, router, compressor, indexer
	ClassQ8                     // Q8_0 projections: attention, shared expert, output head
	ClassRouted                 // routed expert stacks
	ClassHashTable              // I32 token → expert table
)

// Tensor is one entry of the catalog: its GGUF name, dims in ne order, the
// type the published files use, and the checkpoint name it comes from.
type Tensor struct {
	Name     string
	Dims     []uint64
	Type     quant.Type
	Class    Class
	HF       string // official checkpoint name ("" for stacked experts)
	Optional bool
}

// Allowed lists the types a tensor of this class may have: the published
// type first, then the lossless float types a converted checkpoint may use.
func (t Tensor) Allowed() []quant.Type {
	switch t.Class {
	case ClassNorm:
		return []quant.Type{quant.F32}
	case ClassHashTable:
		return []quant.Type{quant.I32}
	case ClassRouted:
		return []quant.Type{quant.IQ2_XXS, quant.Q2_K, quant.Q4_K, quant.Q8_0, quant.F16, quant.BF16, quant.F32}
	}
	return uniq(t.Type, quant.F16, quant.BF16, quant.F32)
}

func uniq(ts ...quant.Type) []quant.Type {
	var out []quant.Type
	for _, t := range ts {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Tensors returns the catalog of p in file order: the embedding, each
// layer's tensors, then the output head. Routed experts get r's types.
// exp_probs_b.bias is listed (as optional) only for non-hash layers, which
// is where synthetic files carry it.
func (p Params) Tensors(r Recipe) []Tensor {
	u := func(v ...int) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = uint64(x)
		}
		return out
	}
	var ts []Tensor
	add := func(name, hf string, typ quant.Type, c Class, dims ...int) {
		ts = append(ts, Tensor{Name: name, Dims: u(dims...), Type: typ, Class: c, HF: hf})
	}
	hcDim, mix := p.HC*p.Embd, p.HCMix()
	add("token_embd.weight", "embed.weight", quant.F16, ClassF16, p.Embd, p.Vocab)
	for il := range p.Layers {
		b := fmt.Sprintf("blk.%d.", il)
		h := fmt.Sprintf("layers.%d.", il)
		add(b+"hc_attn_fn.weight", h+"hc_attn_fn", quant.F16, ClassF16, hcDim, mix)
		add(b+"hc_attn_scale.weight", h+"hc_attn_scale", quant.F32, ClassNorm, 3)
		add(b+"hc_attn_base.weight", h+"hc_attn_base", quant.F32, ClassNorm, mix)
		add(b+"attn_norm.weight", h+"attn_norm.weight", quant.F32, ClassNorm, p.Embd)
		add(b+"attn_q_a.weight", h+"attn.wq_a.weight", quant.Q8_0, ClassQ8, p.Embd, p.QLoraRank)
		add(b+"attn_q_a_norm.weight", h+"attn.q_norm.weight", quant.F32, ClassNorm, p.QLoraRank)
		add(b+"attn_q_b.weight", h+"attn.wq_b.weight", quant.Q8_0, ClassQ8, p.QLoraRank, p.Heads*p.HeadDim)
		add(b+"attn_kv.weight", h+"attn.wkv.weight", quant.Q8_0, ClassQ8, p.Embd, p.HeadDim)
		add(b+"attn_kv_a_norm.weight", h+"attn.kv_norm.weight", quant.F32, ClassNorm, p.HeadDim)
		add(b+"attn_sinks.weight", h+"attn.attn_sink", quant.F32, ClassNorm, p.Heads)
		add(b+"attn_output_a.weight", h+"attn.wo_a.weight", quant.Q8_0, ClassQ8, p.Heads*p.HeadDim/p.OGroups, p.OGroups*p.OLoraRank)
		add(b+"attn_output_b.weight", h+"attn.wo_b.weight", quant.Q8_0, ClassQ8, p.OGroups*p.OLoraRank, p.Embd)
		if r := p.Ratio(il); r != 0 {
			coff := 1
			if r == 4 {
				coff = 2
			}
			add(b+"attn_compressor_ape.weight", h+"attn.compressor.ape", quant.F16, ClassF16, coff*p.HeadDim, r)
			add(b+"attn_compressor_kv.weight", h+"attn.compressor.wkv.weight", quant.F16, ClassF16, p.Embd, coff*p.HeadDim)
			add(b+"attn_compressor_gate.weight", h+"attn.compressor.wgate.weight", quant.F16, ClassF16, p.Embd, coff*p.HeadDim)
			add(b+"attn_compressor_norm.weight", h+"attn.compressor.norm.weight", quant.F32, ClassNorm, p.HeadDim)
		}
		if p.HasIndexer(il) {
			add(b+"indexer.attn_q_b.weight", h+"attn.indexer.wq_b.weight", quant.F16, ClassF16, p.QLoraRank, p.IndexerHeads*p.IndexerDim)
			add(b+"indexer.proj.weight", h+"attn.indexer.weights_proj.weight", quant.F16, ClassF16, p.Embd, p.IndexerHeads)
			add(b+"indexer_compressor_ape.weight", h+"attn.indexer.compressor.ape", quant.F16, ClassF16, 2*p.IndexerDim, 4)
			add(b+"indexer_compressor_kv.weight", h+"attn.indexer.compressor.wkv.weight", quant.F16, ClassF16, p.Embd, 2*p.IndexerDim)
			add(b+"indexer_compressor_gate.weight", h+"attn.indexer.compressor.wgate.weight", quant.F16, ClassF16, p.Embd, 2*p.IndexerDim)
			add(b+"indexer_compressor_norm.weight", h+"attn.indexer.compressor.norm.weight", quant.F32, ClassNorm, p.IndexerDim)
		}
		add(b+"hc_ffn_fn.weight", h+"hc_ffn_fn", quant.F16, ClassF16, hcDim, mix)
		add(b+"hc_ffn_scale.weight", h+"hc_ffn_scale", quant.F32, ClassNorm, 3)
		add(b+"hc_ffn_base.weight", h+"hc_ffn_base", quant.F32, ClassNorm, mix)
		add(b+"ffn_norm.weight", h+"ffn_norm.weight", quant.F32, ClassNorm, p.Embd)
		add(b+"ffn_gate_inp.weight", h+"ffn.gate.weight", quant.F16, ClassF16, p.Embd, p.Experts)
		if p.IsHash(il) {
			add(b+"ffn_gate_tid2eid.weight", h+"ffn.gate.tid2eid", quant.I32, ClassHashTable, p.ExpertsUsed, p.Vocab)
		} else {
			add(b+"exp_probs_b.bias", h+"ffn.gate.bias", quant.F32, ClassNorm, p.Experts)
			ts[len(ts)-1].Optional = true
		}
		add(b+"ffn_gate_exps.weight", "", r.GateUp, ClassRouted, p.Embd, p.ExpertFF, p.Experts)
		add(b+"ffn_up_exps.weight", "", r.GateUp, ClassRouted, p.Embd, p.ExpertFF, p.Experts)
		add(b+"ffn_down_exps.weight", "", r.Down, ClassRouted, p.ExpertFF, p.Embd, p.Experts)
		shared := p.ExpertFF * p.SharedExperts
		add(b+"ffn_gate_shexp.weight", h+"ffn.shared_experts.w1.weight", quant.Q8_0, ClassQ8, p.Embd, shared)
		add(b+"ffn_up_shexp.weight", h+"ffn.shared_experts.w3.weight", quant.Q8_0, ClassQ8, p.Embd, shared)
		add(b+"ffn_down_shexp.weight", h+"ffn.shared_experts.w2.weight", quant.Q8_0, ClassQ8, shared, p.Embd)
	}
	add("output_hc_base.weight", "hc_head_base", quant.F32, ClassNorm, p.HC)
	add("output_hc_fn.weight", "hc_head_fn", quant.F16, ClassF16, hcDim, p.HC)
	add("output_hc_scale.weight", "hc_head_scale", quant.F32, ClassNorm, 1)
	add("output_norm.weight", "norm.weight", quant.F32, ClassNorm, p.Embd)
	add("output.weight", "head.weight", quant.Q8_0, ClassQ8, p.Embd, p.Vocab)
	return ts
}

// CheckRecipe reports whether every tensor of p's catalog with recipe r
// holds whole blocks of its type along ne[0].
func (p Params) CheckRecipe(r Recipe) error {
	var errs []error
	for _, t := range p.Tensors(r) {
		if _, err := t.Type.RowBytes(int(t.Dims[0])); err != nil {
			errs = append(errs, fmt.Errorf("tensor %s: %w", t.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ExpertHF returns the checkpoint name of expert e's slice of a stacked
// routed tensor of layer il (part is "w1" gate, "w3" up or "w2" down).
func ExpertHF(il, e int, part string) string {
	return fmt.Sprintf("layers.%d.ffn.experts.%d.%s.weight", il, e, part)
}
