//go:build !unix

package mmap

import (
	"io"
	"os"
)

// File reads the whole file where memory mapping is unavailable.
func File(fd *os.File, size int) ([]byte, func() error, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(fd, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// Read reads the whole file into memory.
func Read(fd *os.File, size int) ([]byte, func() error, error) { return File(fd, size) }
