package synth

import (
	"fmt"

	"github.com/ds4-go/ds4/engine/layout"
)

// PresetNames returns the preset names Preset accepts.
func PresetNames() []string { return []string{"tiny", "flash", "pro"} }

// Preset returns the hyperparameters of the named shape, "tiny", "flash"
// or "pro", with layers layers (0: the preset's) on the released
// compression-ratio schedule of that model; a slice of Flash or Pro is
// named after its layer count.
func Preset(name string, layers int) (layout.Params, error) {
	var p layout.Params
	switch name {
	case "tiny":
		p = layout.Tiny()
	case "flash":
		p = layout.Flash()
	case "pro":
		p = layout.Pro()
	default:
		return p, fmt.Errorf("synth: unknown preset %q (want tiny, flash or pro)", name)
	}
	if layers < 0 {
		return p, fmt.Errorf("synth: %d layers", layers)
	}
	if layers > 0 {
		p.SetLayers(layers)
		if name != "tiny" {
			p.Name = fmt.Sprintf("%s-%dL-slice", p.Name, layers)
		}
	}
	return p, nil
}

// Dimension is a hyperparameter a synthetic model's shape may override.
type Dimension struct {
	Name  string // the override's name, as ds4-quant synth's flag
	Key   string // the GGUF key it sets, after the architecture prefix
	Field func(*layout.Params) *int
}

// Dimensions returns the hyperparameters a shape may override.
func Dimensions() []Dimension {
	return []Dimension{
		{"embd", "embedding_length", func(p *layout.Params) *int { return &p.Embd }},
		{"vocab", "vocab_size", func(p *layout.Params) *int { return &p.Vocab }},
		{"heads", "attention.head_count", func(p *layout.Params) *int { return &p.Heads }},
		{"head-dim", "attention.key_length and value_length", func(p *layout.Params) *int { return &p.HeadDim }},
		{"rope-dim", "rope.dimension_count", func(p *layout.Params) *int { return &p.RopeDim }},
		{"q-lora", "attention.q_lora_rank", func(p *layout.Params) *int { return &p.QLoraRank }},
		{"o-lora", "attention.output_lora_rank", func(p *layout.Params) *int { return &p.OLoraRank }},
		{"o-groups", "attention.output_group_count", func(p *layout.Params) *int { return &p.OGroups }},
		{"experts", "expert_count", func(p *layout.Params) *int { return &p.Experts }},
		{"experts-used", "expert_used_count", func(p *layout.Params) *int { return &p.ExpertsUsed }},
		{"expert-ff", "expert_feed_forward_length", func(p *layout.Params) *int { return &p.ExpertFF }},
		{"hash-layers", "hash_layer_count", func(p *layout.Params) *int { return &p.HashLayers }},
		{"window", "attention.sliding_window", func(p *layout.Params) *int { return &p.Window }},
		{"indexer-heads", "attention.indexer.head_count", func(p *layout.Params) *int { return &p.IndexerHeads }},
		{"indexer-dim", "attention.indexer.key_length", func(p *layout.Params) *int { return &p.IndexerDim }},
		{"indexer-top-k", "attention.indexer.top_k", func(p *layout.Params) *int { return &p.IndexerTopK }},
		{"hc", "hyper_connection.count", func(p *layout.Params) *int { return &p.HC }},
		{"ctx", "context_length", func(p *layout.Params) *int { return &p.ContextLength }},
	}
}

// Set sets the dimension d of p to v; setting head-dim sets the value
// dimension too, as the released shapes have them equal.
func (d Dimension) Set(p *layout.Params, v int) {
	*d.Field(p) = v
	if d.Name == "head-dim" {
		p.ValueDim = v
	}
}

// TensorBytes returns the tensor data bytes of the model opt describes,
// the total its Progress callback reaches.
func TensorBytes(opt Options) int64 {
	var total int64
	for _, t := range opt.Params.Tensors(opt.Recipe) {
		n, _ := t.Type.RowBytes(int(t.Dims[0]))
		total += int64(n) * int64(rowsOf(t))
	}
	return total
}
