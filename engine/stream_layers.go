package engine

import (
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
)

// ExpertLayers returns where each layer's routed experts lie in the model
// file: for ffn_gate_exps, ffn_up_exps and ffn_down_exps, the absolute
// file offset of expert 0's slice and the bytes of one expert's slice
// (expert e's slice starts e slices further on, as backends.Matrix.Expert
// cuts it).
func ExpertLayers(m *Model) []expertcache.Layer {
	out := make([]expertcache.Layer, len(m.Layers))
	for il := range m.Layers {
		l := &m.Layers[il]
		out[il] = expertcache.Layer{
			Gate:    expertSpan(m.File, l.GateExps.Name, int64(l.GateExps.Rows*l.GateExps.RowBytes)),
			Up:      expertSpan(m.File, l.UpExps.Name, int64(l.UpExps.Rows*l.UpExps.RowBytes)),
			Down:    expertSpan(m.File, l.DownExps.Name, int64(l.DownExps.Rows*l.DownExps.RowBytes)),
			Experts: l.GateExps.Experts,
		}
	}
	return out
}

// expertSpan returns the span of expert 0 of the stacked tensor name,
// whose experts' slices are slice bytes each.
func expertSpan(f *gguf.File, name string, slice int64) expertcache.Span {
	t, _ := f.Tensor(name)
	return expertcache.Span{Offset: int64(f.DataOffset + t.Offset), Bytes: slice}
}

// ResidentTensors returns the tensors of the model file other than the
// routed experts' stacks: the weights every token reads, which SSD
// streaming keeps in memory.
func ResidentTensors(m *Model) []gguf.TensorInfo {
	routed := map[string]bool{}
	for _, t := range m.Params.Tensors(m.Recipe) {
		if t.Class == layout.ClassRouted {
			routed[t.Name] = true
		}
	}
	var out []gguf.TensorInfo
	for _, t := range m.File.Tensors {
		if !routed[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// ResidentBytes returns the bytes of ResidentTensors.
func ResidentBytes(m *Model) int64 {
	var n int64
	for _, t := range ResidentTensors(m) {
		n += int64(t.Size)
	}
	return n
}
