package engine

import (
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/mmap"
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

// PinResident keeps the resident tensors of ResidentTensors in memory so
// that expert reads never evict them: it locks them (mlock), or, where
// RLIMIT_MEMLOCK or the system refuses, reads them in with MADV_WILLNEED
// and a touch of every page (mmap.PinRegions). The embedding is left out:
// a token reads one row of it, which the mapping faults in on demand, and
// on Flash it is a gigabyte better spent on the expert cache.
func PinResident(m *Model) *mmap.Pin { return mmap.PinRegions(residentRegions(m)) }

// residentRegions returns the mapped bytes of the tensors PinResident
// holds.
func residentRegions(m *Model) [][]byte {
	var out [][]byte
	for _, t := range ResidentTensors(m) {
		if t.Name != embeddingTensor {
			out = append(out, m.File.TensorData(t))
		}
	}
	return out
}

// embeddingTensor is the token embedding's name, which PinResident leaves
// to the mapping.
const embeddingTensor = "token_embd.weight"

// PinnedBytes returns the bytes PinResident holds: the resident tensors
// but the embedding.
func PinnedBytes(m *Model) int64 {
	var n int64
	for _, t := range ResidentTensors(m) {
		if t.Name != embeddingTensor {
			n += int64(t.Size)
		}
	}
	return n
}
