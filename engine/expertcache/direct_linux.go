package expertcache

import (
	"os"
	"syscall"
)

// openDirect opens path with O_DIRECT and checks that an aligned read
// works; nil when the file system refuses either (tmpfs, some network
// file systems).
func openDirect(path string) *os.File {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	buf, free, err := allocate(align)
	if err != nil {
		fd.Close()
		return nil
	}
	defer free()
	if _, err := fd.ReadAt(buf, 0); err != nil && !isEOF(err) {
		fd.Close()
		return nil
	}
	return fd
}

// allocate maps n bytes of anonymous, page-aligned memory (O_DIRECT needs
// aligned buffers) outside the Go heap, and returns a function that
// unmaps it.
func allocate(n int64) ([]byte, func() error, error) {
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
