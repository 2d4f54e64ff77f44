package harness

import (
	"errors"
	"fmt"

	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/internal/mmap"
)

// LockWeights pins every tensor of a mapped GGUF in memory (mlock) so that
// no page of it is evicted while a measurement runs, and returns the
// function that unpins them. Pinning reads the whole file first.
func LockWeights(f *gguf.File) (unlock func(), err error) {
	regions := make([][]byte, len(f.Tensors))
	for i, t := range f.Tensors {
		regions[i] = f.TensorData(t)
	}
	unlock, err = mmap.LockRegions(regions)
	if le := (*mmap.LockError)(nil); errors.As(err, &le) {
		return unlock, fmt.Errorf("harness: lock tensor %s (%d bytes): %w", f.Tensors[le.Index].Name, le.Bytes, le.Err)
	}
	return unlock, err
}
