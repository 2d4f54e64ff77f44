//go:build unix

package mmap

import (
	"os"

	"golang.org/x/sys/unix"
)

// File maps size bytes of fd read-only and shared, so that many
// processes serving one model share the page cache; unmap releases it.
func File(fd *os.File, size int) ([]byte, func() error, error) {
	data, err := unix.Mmap(int(fd.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
