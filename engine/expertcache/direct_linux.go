package expertcache

import (
	"os"
	"syscall"

	"github.com/ds4-go/ds4/internal/mmap"
)

// openDirect opens path with O_DIRECT and checks that an aligned read
// works; nil when the file system refuses either (tmpfs, some network
// file systems).
func openDirect(path string) *os.File {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	buf, free, err := mmap.Anon(align)
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
