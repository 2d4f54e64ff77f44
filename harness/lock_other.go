//go:build !unix

package harness

import (
	"errors"

	"github.com/ds4-go/ds4/gguf"
)

// LockWeights is not available on this system: it returns an error.
func LockWeights(f *gguf.File) (unlock func(), err error) {
	return func() {}, errors.New("harness: locking weights in memory is not supported on this system")
}
