//go:build unix

package harness

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/ds4-go/ds4/gguf"
)

// LockWeights pins every tensor of a mapped GGUF in memory (mlock) so that
// no page of it is evicted while a measurement runs, and returns the
// function that unpins them. Pinning reads the whole file first.
func LockWeights(f *gguf.File) (unlock func(), err error) {
	var locked [][]byte
	unlock = func() {
		for _, b := range locked {
			unix.Munlock(b)
		}
	}
	for _, t := range f.Tensors {
		b := f.TensorData(t)
		if len(b) == 0 {
			continue
		}
		if err := unix.Mlock(b); err != nil {
			unlock()
			return func() {}, fmt.Errorf("harness: lock tensor %s (%d bytes): %w", t.Name, len(b), err)
		}
		locked = append(locked, b)
	}
	return unlock, nil
}
