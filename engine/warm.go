package engine

import (
	"io"

	"github.com/ds4-go/ds4/internal/mmap"
	"github.com/ds4-go/ds4/internal/progress"
)

// WarmWeights reads every page of the model's tensor data, so that no
// later step waits on a page fault or a disk read, showing its progress
// on w under label. It is the commands' --warm-weights: without it, the
// first prompt of a process pays for faulting in the pages of every
// weight it touches, and for reading them from disk where the page cache
// does not hold them. A model that streams its routed experts (Stream)
// warms every tensor but those.
func (m *Model) WarmWeights(w io.Writer, label string) {
	if m.File == nil {
		return
	}
	if m.experts == nil {
		bar := progress.New(w, label+": warming the weights", m.File.DataBytes(), "B")
		m.File.Warm(bar.Add)
		bar.Finish()
		return
	}
	data := m.ResidentData()
	var total int64
	for _, b := range data {
		total += int64(len(b))
	}
	bar := progress.New(w, label+": warming the resident weights", total, "B")
	for _, b := range data {
		mmap.Touch(b, bar.Add)
	}
	bar.Finish()
}

// ResidentData returns the bytes, in the model's buffer, of every tensor
// the forward pass reads from it: all of them, or all but the routed
// experts when the model streams them (Stream).
func (m *Model) ResidentData() [][]byte {
	if m.File == nil {
		return nil
	}
	tensors := m.File.Tensors
	if m.experts != nil {
		tensors = ResidentTensors(m)
	}
	out := make([][]byte, 0, len(tensors))
	for _, t := range tensors {
		out = append(out, m.File.TensorData(t))
	}
	return out
}
