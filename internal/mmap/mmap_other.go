//go:build !unix

package mmap

import (
	"io"
	"os"
	"unsafe"
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

// Anon returns size zeroed bytes from the Go heap, aligned to 4096 bytes.
func Anon(size int) ([]byte, func() error, error) {
	b := make([]byte, size+4096)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 4095)
	return b[off : off+size : off+size], func() error { return nil }, nil
}
