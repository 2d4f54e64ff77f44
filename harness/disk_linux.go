package harness

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openDirect opens path for reading with O_DIRECT.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
}

// dropCache asks the kernel to drop f's pages from the page cache.
func dropCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }

func isEINVAL(err error) bool { return errors.Is(err, unix.EINVAL) }
