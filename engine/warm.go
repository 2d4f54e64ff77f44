package engine

import (
	"io"

	"github.com/ds4-go/ds4/internal/progress"
)

// WarmWeights reads every page of the model's tensor data, so that no
// later step waits on a page fault or a disk read, showing its progress
// on w under label. It is the commands' --warm-weights: without it, the
// first prompt of a process pays for faulting in the pages of every
// weight it touches, and for reading them from disk where the page cache
// does not hold them.
func (m *Model) WarmWeights(w io.Writer, label string) {
	if m.File == nil {
		return
	}
	bar := progress.New(w, label+": warming the weights", m.File.DataBytes(), "B")
	m.File.Warm(bar.Add)
	bar.Finish()
}
