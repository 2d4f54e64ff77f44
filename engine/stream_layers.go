package engine

import (
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/mmap"
)

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

// ScratchMemory returns the bytes of a session's scratch buffers for
// chunks of n tokens (n = min(PrefillChunk, context) once a long prompt
// has run): the activations of every sublayer and the routed experts'
// inputs and outputs.
func ScratchMemory(p layout.Params, n int) int64 {
	hcd := p.HC * p.Embd
	w := 2 * p.HeadDim
	slots := n * p.ExpertsUsed
	floats := n*(2*hcd+p.HCMix()+p.HC+p.HC*p.HC+3*p.Embd+p.QLoraRank+2*p.Heads*p.HeadDim+p.HeadDim+
		2*w+4*p.IndexerDim+p.IndexerHeads*p.IndexerDim+p.IndexerHeads+p.OGroups*p.OLoraRank+p.Experts+
		2*p.ExpertFF*p.SharedExperts) +
		p.Embd + w + p.Experts +
		slots*(1+2*p.Embd+3*p.ExpertFF)
	ints := 3*slots + 2*p.Experts + 5*n // the rows' positions, sessions, tokens and lists too
	return 4*int64(floats) + 8*int64(ints)
}
