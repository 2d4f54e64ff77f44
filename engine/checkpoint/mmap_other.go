//go:build !unix

package checkpoint

import (
	"io"
	"os"
)

// mapFile reads the whole file where memory mapping is unavailable.
func mapFile(fd *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fd, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
