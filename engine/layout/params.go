// Package layout defines the DeepSeek V4 GGUF layout: the hyperparameters
// stored in metadata, the tensor catalog they imply, and the checks that a
// file follows both.
package layout

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ds4-go/ds4/gguf"
)

// Arch is the general.architecture of DS4 files and the metadata key prefix.
const Arch = "deepseek4"

// Params are the hyperparameters of a DS4-shaped model, read from and
// written to GGUF metadata; the engine sizes every buffer from them.
type Params struct {
	Name           string
	ContextLength  int
	Layers         int
	Embd           int
	Vocab          int
	Heads          int
	HeadsKV        int
	HeadDim        int // key_length
	ValueDim       int // value_length
	RopeDim        int
	QLoraRank      int
	OLoraRank      int
	OGroups        int
	Experts        int
	ExpertsUsed    int
	ExpertFF       int
	SharedExperts  int
	HashLayers     int
	Window         int
	IndexerHeads   int
	IndexerDim     int
	IndexerTopK    int
	HC             int
	SinkhornIters  int
	RopeOrigCtx    int
	CompressRatios []int     // per layer: 0 window only, 4 overlapped + indexer, other single-lane
	SwigluClamp    []float32 // per layer

	RopeFreqBase         float32
	RopeScale            float32
	YarnBetaFast         float32
	YarnBetaSlow         float32
	CompressRopeFreqBase float32
	ExpertWeightsScale   float32
	RMSEps               float32
	HCEps                float32
	ExpertWeightsNorm    bool
}

// flashRatio is Flash's released per-layer compression schedule: two
// window-only layers, then ratio 4 and 128 alternating.
func flashRatio(il int) int {
	switch {
	case il < 2:
		return 0
	case il%2 == 0:
		return 4
	}
	return 128
}

// proRatio is Pro's released per-layer compression schedule: two ratio-128
// layers, then ratio 4 and 128 alternating; no layer is window only.
func proRatio(il int) int {
	if il < 2 {
		return 128
	}
	return flashRatio(il)
}

// Flash returns the hyperparameters of the real DeepSeek V4 Flash model.
func Flash() Params {
	p := Params{
		Name:          "DeepSeek-V4-Flash",
		ContextLength: 1048576,
		Layers:        43,
		Embd:          4096,
		Vocab:         129280,
		Heads:         64,
		HeadsKV:       1,
		HeadDim:       512,
		ValueDim:      512,
		RopeDim:       64,
		QLoraRank:     1024,
		OLoraRank:     1024,
		OGroups:       8,
		Experts:       256,
		ExpertsUsed:   6,
		ExpertFF:      2048,
		SharedExperts: 1,
		HashLayers:    3,
		Window:        128,
		IndexerHeads:  64,
		IndexerDim:    128,
		IndexerTopK:   512,
		HC:            4,
		SinkhornIters: 20,
		RopeOrigCtx:   65536,

		RopeFreqBase:         10000,
		RopeScale:            16,
		YarnBetaFast:         32,
		YarnBetaSlow:         1,
		CompressRopeFreqBase: 160000,
		ExpertWeightsScale:   1.5,
		RMSEps:               1e-6,
		HCEps:                1e-6,
		ExpertWeightsNorm:    true,
	}
	p.SetLayers(43)
	return p
}

// Pro returns the hyperparameters of the real DeepSeek V4 Pro model: the
// architecture of Flash at a larger shape, with its own compression
// schedule and route scale.
func Pro() Params {
	p := Flash()
	p.Name = "DeepSeek-V4-Pro"
	p.Embd = 7168
	p.Heads = 128
	p.QLoraRank = 1536
	p.OLoraRank = 1024
	p.OGroups = 16
	p.Experts = 384
	p.ExpertFF = 3072
	p.IndexerHeads = 64
	p.IndexerTopK = 1024
	p.ExpertWeightsScale = 2.5
	p.HashLayers = 3
	p.CompressRatios = []int{proRatio(0)} // selects Pro's schedule in SetLayers
	p.SetLayers(61)
	return p
}

// Released returns the hyperparameters of the released models, Flash then
// Pro.
func Released() []Params { return []Params{Flash(), Pro()} }

// MaxContextLength returns the longest context of the released models,
// the bound of a context flag checked before any model is open.
func MaxContextLength() int {
	n := 0
	for _, p := range Released() {
		n = max(n, p.ContextLength)
	}
	return n
}

// Model returns the released model (Flash or Pro, all its layers) whose
// shape p has; a slice of its first layers (block count, hash layers and
// the per-layer schedules cut to match) counts as that model, the context
// length and name are ignored. ok is false for any other shape.
func (p Params) Model() (model Params, ok bool) {
	for _, r := range Released() {
		q := r
		if p.Layers > q.Layers {
			continue
		}
		if p.Layers < q.Layers {
			q.SetLayers(p.Layers)
		}
		if len(p.Diff(q)) == 0 {
			return r, true
		}
	}
	return Params{}, false
}

// Tiny returns a small model with every structural feature of Flash
// (hyper-connections, hash-routed layers, ratio-4 layers with the indexer,
// ratio-128 layers, a shared expert, the sliding window) at dimensions that
// run in milliseconds; block sizes keep every quant type legal.
func Tiny() Params {
	p := Flash()
	p.Name = "DS4-tiny"
	p.ContextLength = 65536
	p.Embd = 256
	p.Heads = 4
	p.HeadDim = 128
	p.ValueDim = 128
	p.QLoraRank = 128
	p.OLoraRank = 64
	p.OGroups = 2
	p.Experts = 8
	p.ExpertsUsed = 3
	p.ExpertFF = 256
	p.Window = 16
	p.IndexerHeads = 8
	p.IndexerTopK = 8
	p.SetLayers(6)
	return p
}

// SetLayers sets the layer count and resizes the per-layer arrays to the
// released schedule p follows (SwiGLU clamp 10): Pro's ratios
// 128,128,4,128,4,… when p's first layer is compressed, Flash's
// 0,0,4,128,4,… otherwise; the hash-layer count is capped at the layer
// count.
func (p *Params) SetLayers(n int) {
	ratio := flashRatio
	if len(p.CompressRatios) > 0 && p.CompressRatios[0] != 0 {
		ratio = proRatio
	}
	p.Layers = n
	p.CompressRatios = make([]int, n)
	p.SwigluClamp = make([]float32, n)
	for il := range n {
		p.CompressRatios[il] = ratio(il)
		p.SwigluClamp[il] = 10
	}
	p.HashLayers = min(p.HashLayers, n)
}

// intRange is the accepted range of one integer hyperparameter: its
// metadata key (without the "deepseek4." prefix), lo..hi inclusive, and
// where Params holds it.
type intRange struct {
	name   string
	lo, hi int
	field  func(*Params) *int
}

// intRanges bounds every integer hyperparameter that sizes a loop or an
// allocation, so that a crafted file cannot make the engine spin or
// allocate without end; the limits leave room far above the released
// models (Flash's and Pro's values in the comments). Relations between
// values (expert_used_count ≤ expert_count, …) are checked in Validate.
//
//	key                                     range       Flash       Pro
//	context_length (0: unknown)             0..2^24     1048576     1048576
//	block_count                             1..1024     43          61
//	embedding_length                        1..65536    4096        7168
//	vocab_size                              1..2^21     129280      129280
//	attention.head_count                    1..1024     64          128
//	attention.head_count_kv                 1..1024     1           1
//	attention.key_length                    1..4096     512         512
//	attention.value_length                  1..4096     512         512
//	rope.dimension_count                    1..4096     64          64
//	attention.q_lora_rank                   1..65536    1024        1536
//	attention.output_lora_rank              1..65536    1024        1024
//	attention.output_group_count            1..1024     8           16
//	expert_count                            1..4096     256         384
//	expert_used_count                       1..256      6           6
//	expert_feed_forward_length              1..65536    2048        3072
//	expert_shared_count                     1..16       1           1
//	hash_layer_count                        0..1024     3           3
//	attention.sliding_window                1..65536    128         128
//	attention.indexer.head_count            1..1024     64          64
//	attention.indexer.key_length            1..4096     128         128
//	attention.indexer.top_k                 1..65536    512         1024
//	hyper_connection.count                  1..16       4           4
//	hyper_connection.sinkhorn_iterations    1..1000     20          20
//	rope.scaling.original_context_length    1..2^24     65536       65536
//	attention.compress_ratios[il]           0, 2..1024  0, 4, 128   128, 4
var intRanges = [...]intRange{
	{"context_length", 0, 1 << 24, func(p *Params) *int { return &p.ContextLength }},
	{"block_count", 1, 1024, func(p *Params) *int { return &p.Layers }},
	{"embedding_length", 1, 1 << 16, func(p *Params) *int { return &p.Embd }},
	{"vocab_size", 1, 1 << 21, func(p *Params) *int { return &p.Vocab }},
	{"attention.head_count", 1, 1024, func(p *Params) *int { return &p.Heads }},
	{"attention.head_count_kv", 1, 1024, func(p *Params) *int { return &p.HeadsKV }},
	{"attention.key_length", 1, 4096, func(p *Params) *int { return &p.HeadDim }},
	{"attention.value_length", 1, 4096, func(p *Params) *int { return &p.ValueDim }},
	{"rope.dimension_count", 1, 4096, func(p *Params) *int { return &p.RopeDim }},
	{"attention.q_lora_rank", 1, 1 << 16, func(p *Params) *int { return &p.QLoraRank }},
	{"attention.output_lora_rank", 1, 1 << 16, func(p *Params) *int { return &p.OLoraRank }},
	{"attention.output_group_count", 1, 1024, func(p *Params) *int { return &p.OGroups }},
	{"expert_count", 1, 4096, func(p *Params) *int { return &p.Experts }},
	{"expert_used_count", 1, 256, func(p *Params) *int { return &p.ExpertsUsed }},
	{"expert_feed_forward_length", 1, 1 << 16, func(p *Params) *int { return &p.ExpertFF }},
	{"expert_shared_count", 1, 16, func(p *Params) *int { return &p.SharedExperts }},
	{"hash_layer_count", 0, 1024, func(p *Params) *int { return &p.HashLayers }},
	{"attention.sliding_window", 1, 1 << 16, func(p *Params) *int { return &p.Window }},
	{"attention.indexer.head_count", 1, 1024, func(p *Params) *int { return &p.IndexerHeads }},
	{"attention.indexer.key_length", 1, 4096, func(p *Params) *int { return &p.IndexerDim }},
	{"attention.indexer.top_k", 1, 1 << 16, func(p *Params) *int { return &p.IndexerTopK }},
	{"hyper_connection.count", 1, 16, func(p *Params) *int { return &p.HC }},
	{"hyper_connection.sinkhorn_iterations", 1, 1000, func(p *Params) *int { return &p.SinkhornIters }},
	{"rope.scaling.original_context_length", 1, 1 << 24, func(p *Params) *int { return &p.RopeOrigCtx }},
}

// MaxCompressRatio is the largest accepted per-layer compression ratio.
const MaxCompressRatio = 1024

// goodRatio reports whether r is an accepted compression ratio.
func goodRatio(r int64) bool { return r == 0 || r >= 2 && r <= MaxCompressRatio }

// HCMix is the width of a hyper-connection mixing projection (2·HC + HC²).
func (p Params) HCMix() int { return 2*p.HC + p.HC*p.HC }

// Ratio returns the compression ratio of layer il.
func (p Params) Ratio(il int) int { return p.CompressRatios[il] }

// HasIndexer reports whether layer il is a ratio-4 layer with an indexer.
func (p Params) HasIndexer(il int) bool { return p.CompressRatios[il] == 4 }

// IsHash reports whether layer il routes experts by token id.
func (p Params) IsHash(il int) bool { return il < p.HashLayers }

// Validate checks that the hyperparameters describe a model the DS4
// architecture can run.
func (p Params) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, r := range intRanges {
		if v := *r.field(&p); v < r.lo || v > r.hi {
			bad("%s = %d, outside %d..%d", r.name, v, r.lo, r.hi)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if p.HeadsKV != 1 {
		bad("attention.head_count_kv = %d, the architecture has one shared KV head", p.HeadsKV)
	}
	if p.ValueDim != p.HeadDim {
		bad("attention.value_length = %d differs from key_length %d", p.ValueDim, p.HeadDim)
	}
	if p.RopeDim%2 != 0 || p.RopeDim >= p.HeadDim {
		bad("rope.dimension_count = %d must be even and below key_length %d", p.RopeDim, p.HeadDim)
	} else if (p.HeadDim-p.RopeDim)%64 != 0 {
		bad("key_length − rope.dimension_count = %d must be a multiple of 64 (FP8 KV blocks)", p.HeadDim-p.RopeDim)
	}
	if p.IndexerDim%32 != 0 || p.IndexerDim&(p.IndexerDim-1) != 0 {
		bad("attention.indexer.key_length = %d must be a power of two ≥ 32 (Hadamard rotation, FP4 blocks)", p.IndexerDim)
	}
	if p.IndexerDim <= p.RopeDim {
		bad("attention.indexer.key_length = %d must exceed rope.dimension_count %d", p.IndexerDim, p.RopeDim)
	}
	if p.Heads%p.OGroups != 0 {
		bad("attention.head_count = %d is not divisible by output_group_count %d", p.Heads, p.OGroups)
	}
	if p.ExpertsUsed > p.Experts {
		bad("expert_used_count = %d exceeds expert_count %d", p.ExpertsUsed, p.Experts)
	}
	if p.SharedExperts != 1 {
		bad("expert_shared_count = %d, the architecture has one shared expert", p.SharedExperts)
	}
	if p.HashLayers < 0 || p.HashLayers > p.Layers {
		bad("hash_layer_count = %d outside 0..%d", p.HashLayers, p.Layers)
	}
	if len(p.CompressRatios) != p.Layers {
		bad("attention.compress_ratios has %d entries for %d layers", len(p.CompressRatios), p.Layers)
	}
	for il, r := range p.CompressRatios {
		if !goodRatio(int64(r)) {
			bad("attention.compress_ratios[%d] = %d, want 0 or 2..%d", il, r, MaxCompressRatio)
		}
	}
	if len(p.SwigluClamp) != p.Layers {
		bad("swiglu_clamp_exp has %d entries for %d layers", len(p.SwigluClamp), p.Layers)
	}
	for il, c := range p.SwigluClamp {
		if !(c > 0) || math.IsInf(float64(c), 0) {
			bad("swiglu_clamp_exp[%d] = %v, want a positive finite clamp", il, c)
		}
	}
	for _, f := range []struct {
		name string
		v    float32
	}{
		{"rope.freq_base", p.RopeFreqBase}, {"rope.scaling.factor", p.RopeScale},
		{"rope.scaling.yarn_beta_fast", p.YarnBetaFast}, {"rope.scaling.yarn_beta_slow", p.YarnBetaSlow},
		{"attention.compress_rope_freq_base", p.CompressRopeFreqBase}, {"expert_weights_scale", p.ExpertWeightsScale},
		{"attention.layer_norm_rms_epsilon", p.RMSEps}, {"hyper_connection.epsilon", p.HCEps},
	} {
		if !(f.v > 0) || math.IsInf(float64(f.v), 0) {
			bad("%s = %v, want positive and finite", f.name, f.v)
		}
	}
	if !p.ExpertWeightsNorm {
		bad("expert_weights_norm = false, the architecture normalizes routed weights")
	}
	return errors.Join(errs...)
}

// FlashDiff lists the hyperparameters in which p differs from Flash; empty
// means p is the real model's shape.
func (p Params) FlashDiff() []string { return p.Diff(Flash()) }

// Diff lists the metadata keys whose values differ between p and q, the
// name and context length aside.
func (p Params) Diff(q Params) []string {
	var diff []string
	a, b := p.KV(), q.KV()
	bv := make(map[string]string, len(b))
	for _, kv := range b {
		bv[kv.Key] = fullString(kv.Value)
	}
	for _, kv := range a {
		if kv.Key == "general.name" || kv.Key == "deepseek4.context_length" {
			continue
		}
		if want, ok := bv[kv.Key]; ok && want != fullString(kv.Value) {
			diff = append(diff, kv.Key)
		}
	}
	return diff
}

func fullString(v gguf.Value) string {
	if a, ok := v.Array(); ok {
		return fmt.Sprint(a.Data)
	}
	return fmt.Sprint(v.Data())
}

func key(name string) string { return Arch + "." + name }

// KV returns the metadata entries that describe p, each with the value
// type upstream ds4 and llama.cpp expect.
func (p Params) KV() []gguf.KV {
	u := func(name string, v int) gguf.KV { return gguf.KV{Key: key(name), Value: gguf.Uint32(uint32(v))} }
	f := func(name string, v float32) gguf.KV { return gguf.KV{Key: key(name), Value: gguf.Float32(v)} }
	ratios := make([]uint32, len(p.CompressRatios))
	for i, r := range p.CompressRatios {
		ratios[i] = uint32(r)
	}
	return []gguf.KV{
		{Key: "general.architecture", Value: gguf.String(Arch)},
		{Key: "general.name", Value: gguf.String(p.Name)},
		u("context_length", p.ContextLength),
		u("block_count", p.Layers),
		u("embedding_length", p.Embd),
		u("vocab_size", p.Vocab),
		u("attention.head_count", p.Heads),
		u("attention.head_count_kv", p.HeadsKV),
		u("attention.key_length", p.HeadDim),
		u("attention.value_length", p.ValueDim),
		u("rope.dimension_count", p.RopeDim),
		u("attention.q_lora_rank", p.QLoraRank),
		u("attention.output_lora_rank", p.OLoraRank),
		u("attention.output_group_count", p.OGroups),
		u("expert_count", p.Experts),
		u("expert_used_count", p.ExpertsUsed),
		u("expert_feed_forward_length", p.ExpertFF),
		u("expert_shared_count", p.SharedExperts),
		u("expert_group_count", 0),
		u("expert_group_used_count", 0),
		u("expert_gating_func", 4), // sqrt-softplus; llama.cpp requires it
		u("hash_layer_count", p.HashLayers),
		u("attention.sliding_window", p.Window),
		u("attention.indexer.head_count", p.IndexerHeads),
		u("attention.indexer.key_length", p.IndexerDim),
		u("attention.indexer.top_k", p.IndexerTopK),
		u("hyper_connection.count", p.HC),
		u("hyper_connection.sinkhorn_iterations", p.SinkhornIters),
		u("rope.scaling.original_context_length", p.RopeOrigCtx),
		{Key: key("rope.scaling.type"), Value: gguf.String("yarn")},
		f("rope.freq_base", p.RopeFreqBase),
		f("rope.scaling.factor", p.RopeScale),
		f("rope.scaling.yarn_beta_fast", p.YarnBetaFast),
		f("rope.scaling.yarn_beta_slow", p.YarnBetaSlow),
		f("attention.compress_rope_freq_base", p.CompressRopeFreqBase),
		f("expert_weights_scale", p.ExpertWeightsScale),
		f("attention.layer_norm_rms_epsilon", p.RMSEps),
		f("hyper_connection.epsilon", p.HCEps),
		{Key: key("attention.compress_ratios"), Value: gguf.Uint32s(ratios)},
		{Key: key("swiglu_clamp_exp"), Value: gguf.Float32s(slices.Clone(p.SwigluClamp))},
		{Key: key("expert_weights_norm"), Value: gguf.Bool(p.ExpertWeightsNorm)},
	}
}

// metaReader reads typed keys from a file, collecting every problem.
type metaReader struct {
	f    *gguf.File
	errs []error
}

func (m *metaReader) fail(k string, format string, a ...any) {
	m.errs = append(m.errs, fmt.Errorf("metadata %s: %s", k, fmt.Sprintf(format, a...)))
}

// outside records that the value under key k is outside its accepted
// range, as a gguf.FormatError naming the key and the value's offset.
func (m *metaReader) outside(k string, v any, lo, hi int) {
	m.limit(k, fmt.Sprintf("metadata %q", k), fmt.Sprintf("%v outside %d..%d", v, lo, hi))
}

// limit records a gguf.FormatError for field, a part of the value under
// key k, that says why with ErrLimit.
func (m *metaReader) limit(k, field, why string) {
	off, _ := m.f.ValueOffset(k)
	m.errs = append(m.errs, &gguf.FormatError{Offset: off, Field: field, Err: fmt.Errorf("%s: %w", why, gguf.ErrLimit)})
}

// bounded reads the integer hyperparameter r into p (u32's type rules)
// and checks it against r's range.
func (m *metaReader) bounded(p *Params, r intRange, also64 bool) {
	k := key(r.name)
	v, ok := m.f.Value(k)
	if !ok {
		m.fail(k, "missing")
		return
	}
	var n uint64
	switch d := v.Data().(type) {
	case uint32:
		n = uint64(d)
	case uint64:
		if !also64 {
			m.fail(k, "type %v, want UINT32", v.Type())
			return
		}
		n = d
	default:
		m.fail(k, "type %v, want UINT32", v.Type())
		return
	}
	if n < uint64(r.lo) || n > uint64(r.hi) {
		m.outside(k, n, r.lo, r.hi)
		return
	}
	*r.field(p) = int(n)
}

// float reads a required float key stored as FLOAT32, FLOAT64, UINT32 or INT32.
func (m *metaReader) float(name string) float32 {
	k := key(name)
	v, ok := m.f.Value(k)
	if !ok {
		m.fail(k, "missing")
		return 0
	}
	switch v.Type() {
	case gguf.TypeFloat32, gguf.TypeFloat64, gguf.TypeUint32, gguf.TypeInt32:
		x, _ := v.Float()
		return float32(x)
	}
	m.fail(k, "type %v, want FLOAT32", v.Type())
	return 0
}

func (m *metaReader) array(name string, n int, elems ...gguf.ValueType) []float64 {
	k := key(name)
	v, ok := m.f.Value(k)
	if !ok {
		m.fail(k, "missing")
		return nil
	}
	a, ok := v.Array()
	if !ok || !slices.Contains(elems, a.Elem) {
		m.fail(k, "type %v, want ARRAY of %v", describe(v), elems[0])
		return nil
	}
	if a.Len() < n {
		m.fail(k, "%d entries for %d layers", a.Len(), n)
		return nil
	}
	xs, _ := a.Floats()
	return xs[:n]
}

func describe(v gguf.Value) string {
	if a, ok := v.Array(); ok {
		return fmt.Sprintf("ARRAY of %v", a.Elem)
	}
	return v.Type().String()
}

// FromGGUF reads the hyperparameters from a file's metadata with upstream's
// type rules and validates them.
func FromGGUF(f *gguf.File) (Params, error) {
	m := &metaReader{f: f}
	var p Params
	if v, ok := f.Value("general.name"); ok {
		p.Name, _ = v.Str()
	}
	for _, r := range intRanges {
		switch r.name {
		case "context_length":
			// Optional and informational: any integer type, in range.
			if v, ok := f.Value(key(r.name)); ok {
				if n, isInt := v.Int(); !isInt {
					if u, isU64 := v.Data().(uint64); isU64 {
						m.outside(key(r.name), u, r.lo, r.hi) // past MaxInt64
					}
				} else if n < int64(r.lo) || n > int64(r.hi) {
					m.outside(key(r.name), n, r.lo, r.hi)
				} else {
					p.ContextLength = int(n)
				}
			}
		case "rope.scaling.original_context_length":
			m.bounded(&p, r, true)
		default:
			m.bounded(&p, r, false)
		}
	}
	for _, g := range []string{"expert_group_count", "expert_group_used_count"} {
		if v, ok := f.Value(key(g)); ok {
			if n, isU32 := v.Data().(uint32); isU32 && n != 0 {
				m.fail(key(g), "= %d, expert groups are not supported", n)
			}
		}
	}
	p.RopeFreqBase = m.float("rope.freq_base")
	p.RopeScale = m.float("rope.scaling.factor")
	p.YarnBetaFast = m.float("rope.scaling.yarn_beta_fast")
	p.YarnBetaSlow = m.float("rope.scaling.yarn_beta_slow")
	p.CompressRopeFreqBase = m.float("attention.compress_rope_freq_base")
	p.ExpertWeightsScale = m.float("expert_weights_scale")
	p.RMSEps = m.float("attention.layer_norm_rms_epsilon")
	p.HCEps = m.float("hyper_connection.epsilon")
	if p.Layers > 0 {
		for il, r := range m.array("attention.compress_ratios", p.Layers, gguf.TypeUint32, gguf.TypeInt32) {
			if !goodRatio(int64(r)) {
				k := key("attention.compress_ratios")
				m.limit(k, fmt.Sprintf("metadata %q[%d]", k, il), fmt.Sprintf("%v, want 0 or 2..%d", r, MaxCompressRatio))
				continue
			}
			p.CompressRatios = append(p.CompressRatios, int(r))
		}
		for _, c := range m.array("swiglu_clamp_exp", p.Layers, gguf.TypeFloat32, gguf.TypeFloat64) {
			p.SwigluClamp = append(p.SwigluClamp, float32(c))
		}
	}
	if v, ok := f.Value(key("expert_weights_norm")); !ok {
		m.fail(key("expert_weights_norm"), "missing")
	} else if b, isBool := v.Bool(); !isBool {
		m.fail(key("expert_weights_norm"), "type %v, want BOOL", v.Type())
	} else {
		p.ExpertWeightsNorm = b
	}
	if len(m.errs) > 0 {
		return p, fmt.Errorf("layout: %w", errors.Join(m.errs...))
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("layout: %w", err)
	}
	return p, nil
}
