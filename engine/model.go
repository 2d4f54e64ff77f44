// Package engine runs DeepSeek V4 models: it binds a DS4 GGUF, keeps the
// per-sequence inference state and computes the forward pass.
package engine

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// Layer holds one transformer block's weights.
type Layer struct {
	Index int
	Ratio int // compression ratio: 0 window only, 4 with indexer, other single-lane

	HCAttnFn                backends.Matrix
	HCAttnScale, HCAttnBase []float32
	AttnNorm                []float32
	QA                      backends.Matrix
	QANorm                  []float32
	QB                      backends.Matrix
	KV                      backends.Matrix
	KVNorm                  []float32
	Sinks                   []float32
	OutA, OutB              backends.Matrix

	CompKV, CompGate backends.Matrix
	CompAPE          []float32 // Ratio rows of coff·HeadDim
	CompNorm         []float32

	IdxQB, IdxProj         backends.Matrix
	IdxCompKV, IdxCompGate backends.Matrix
	IdxCompAPE             []float32 // 4 rows of 2·IndexerDim
	IdxCompNorm            []float32

	HCFFNFn               backends.Matrix
	HCFFNScale, HCFFNBase []float32
	FFNNorm               []float32
	GateInp               backends.Matrix
	ExpBias               []float32 // nil when absent
	Tid2Eid               []int32   // hash layers: ExpertsUsed ids per token
	GateExps, UpExps      backends.Matrix
	DownExps              backends.Matrix
	ShGate, ShUp, ShDown  backends.Matrix

	Rope backends.RoPE
}

// Model is a bound DS4 model: hyperparameters from metadata and weights
// that point into the file mapping.
type Model struct {
	Params layout.Params
	Recipe layout.Recipe
	File   *gguf.File

	Embd       backends.Matrix
	Layers     []Layer
	OutHCFn    backends.Matrix
	OutHCBase  []float32
	OutHCScale []float32
	OutNorm    []float32
	Output     backends.Matrix

	experts     *expertcache.Cache // the routed experts' cache when streaming (Stream), else nil
	expertSlots int                // its slots
	prefetch    bool               // whether to read the hash layers' experts ahead
}

// Load binds a parsed GGUF as a DS4 model after validating its layout; it
// reads nothing but small vectors, the weights stay in the mapping.
func Load(f *gguf.File) (*Model, error) {
	rep := layout.Check(f)
	if err := rep.Err(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	p := rep.Params
	for _, t := range p.Tensors(rep.Recipe) {
		if t.Class != layout.ClassRouted {
			continue
		}
		ti, _ := f.Tensor(t.Name)
		if !matVecType(ti.Type) {
			return nil, fmt.Errorf("engine: tensor %s: no CPU kernel for %v", t.Name, ti.Type)
		}
	}
	m := &Model{Params: p, Recipe: rep.Recipe, File: f}
	b := &binder{f: f}
	m.Embd = b.matrix("token_embd.weight")
	m.OutHCFn = b.matrix("output_hc_fn.weight")
	m.OutHCBase = b.vector("output_hc_base.weight")
	m.OutHCScale = b.vector("output_hc_scale.weight")
	m.OutNorm = b.vector("output_norm.weight")
	m.Output = b.matrix("output.weight")
	m.Layers = make([]Layer, p.Layers)
	for il := range m.Layers {
		l := &m.Layers[il]
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", il, s) }
		l.Index, l.Ratio = il, p.Ratio(il)
		l.HCAttnFn = b.matrix(n("hc_attn_fn.weight"))
		l.HCAttnScale = b.vector(n("hc_attn_scale.weight"))
		l.HCAttnBase = b.vector(n("hc_attn_base.weight"))
		l.AttnNorm = b.vector(n("attn_norm.weight"))
		l.QA = b.matrix(n("attn_q_a.weight"))
		l.QANorm = b.vector(n("attn_q_a_norm.weight"))
		l.QB = b.matrix(n("attn_q_b.weight"))
		l.KV = b.matrix(n("attn_kv.weight"))
		l.KVNorm = b.vector(n("attn_kv_a_norm.weight"))
		l.Sinks = b.vector(n("attn_sinks.weight"))
		l.OutA = b.matrix(n("attn_output_a.weight"))
		l.OutB = b.matrix(n("attn_output_b.weight"))
		if l.Ratio != 0 {
			l.CompKV = b.matrix(n("attn_compressor_kv.weight"))
			l.CompGate = b.matrix(n("attn_compressor_gate.weight"))
			l.CompAPE = b.vector(n("attn_compressor_ape.weight"))
			l.CompNorm = b.vector(n("attn_compressor_norm.weight"))
		}
		if p.HasIndexer(il) {
			l.IdxQB = b.matrix(n("indexer.attn_q_b.weight"))
			l.IdxProj = b.matrix(n("indexer.proj.weight"))
			l.IdxCompKV = b.matrix(n("indexer_compressor_kv.weight"))
			l.IdxCompGate = b.matrix(n("indexer_compressor_gate.weight"))
			l.IdxCompAPE = b.vector(n("indexer_compressor_ape.weight"))
			l.IdxCompNorm = b.vector(n("indexer_compressor_norm.weight"))
		}
		l.HCFFNFn = b.matrix(n("hc_ffn_fn.weight"))
		l.HCFFNScale = b.vector(n("hc_ffn_scale.weight"))
		l.HCFFNBase = b.vector(n("hc_ffn_base.weight"))
		l.FFNNorm = b.vector(n("ffn_norm.weight"))
		l.GateInp = b.matrix(n("ffn_gate_inp.weight"))
		if p.IsHash(il) {
			l.Tid2Eid = b.ints(n("ffn_gate_tid2eid.weight"), p.Experts)
		} else if _, ok := f.Tensor(n("exp_probs_b.bias")); ok {
			l.ExpBias = b.vector(n("exp_probs_b.bias"))
		}
		l.GateExps = b.matrix(n("ffn_gate_exps.weight"))
		l.UpExps = b.matrix(n("ffn_up_exps.weight"))
		l.DownExps = b.matrix(n("ffn_down_exps.weight"))
		l.ShGate = b.matrix(n("ffn_gate_shexp.weight"))
		l.ShUp = b.matrix(n("ffn_up_shexp.weight"))
		l.ShDown = b.matrix(n("ffn_down_shexp.weight"))
		if l.Ratio == 0 {
			l.Rope = backends.NewRoPE(p.RopeDim, p.RopeFreqBase, false, 1, 0, 0, 0)
		} else {
			l.Rope = backends.NewRoPE(p.RopeDim, p.CompressRopeFreqBase, true, p.RopeScale, p.RopeOrigCtx, p.YarnBetaFast, p.YarnBetaSlow)
		}
	}
	if b.err != nil {
		return nil, fmt.Errorf("engine: %w", b.err)
	}
	return m, nil
}

// matVecType reports whether the CPU backend multiplies weights of type t.
func matVecType(t quant.Type) bool {
	switch t {
	case quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		return true
	}
	return false
}

// binder binds tensors by name, keeping the first error.
type binder struct {
	f   *gguf.File
	err error
}

func (b *binder) info(name string) (gguf.TensorInfo, bool) {
	t, ok := b.f.Tensor(name)
	if !ok && b.err == nil {
		b.err = fmt.Errorf("tensor %s: missing", name)
	}
	return t, ok
}

func (b *binder) matrix(name string) backends.Matrix {
	t, ok := b.info(name)
	if !ok {
		return backends.Matrix{}
	}
	m, err := backends.NewMatrix(name, t.Type, t.Dims, b.f.TensorData(t))
	if err != nil && b.err == nil {
		b.err = err
	}
	return m
}

// vector decodes a small float tensor (norms, biases, APE tables) to float32.
func (b *binder) vector(name string) []float32 {
	t, ok := b.info(name)
	if !ok {
		return nil
	}
	out := make([]float32, t.Elements())
	if err := quant.DequantizeRow(t.Type, b.f.TensorData(t), out); err != nil && b.err == nil {
		b.err = fmt.Errorf("tensor %s: %w", name, err)
	}
	return out
}

// ints decodes an I32 expert table, checking every id is below experts.
func (b *binder) ints(name string, experts int) []int32 {
	t, ok := b.info(name)
	if !ok {
		return nil
	}
	data := b.f.TensorData(t)
	out := make([]int32, t.Elements())
	for i := range out {
		v := int32(binary.LittleEndian.Uint32(data[4*i:]))
		if (v < 0 || int(v) >= experts) && b.err == nil {
			b.err = fmt.Errorf("tensor %s: entry %d = %d is not an expert id below %d", name, i, v, experts)
		}
		out[i] = v
	}
	return out
}

// embed writes the embedding row of token into dst.
func (m *Model) embed(dst []float32, token int) error {
	if token < 0 || token >= m.Embd.Rows {
		return fmt.Errorf("engine: token %d outside the embedding table (%d rows)", token, m.Embd.Rows)
	}
	row := m.Embd.Data[token*m.Embd.RowBytes : (token+1)*m.Embd.RowBytes]
	return quant.DequantizeRow(m.Embd.Type, row, dst)
}

// kqScale is the attention logit scale 1/sqrt(head_dim).
func (m *Model) kqScale() float32 { return float32(1 / math.Sqrt(float64(m.Params.HeadDim))) }

func expf32(x float32) float32  { return float32(math.Exp(float64(x))) }
func sqrtf32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
func sqrt64(x float64) float64  { return math.Sqrt(x) }
