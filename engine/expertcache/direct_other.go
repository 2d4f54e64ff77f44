//go:build !linux

package expertcache

import (
	"os"
	"unsafe"
)

// openDirect returns nil: O_DIRECT is Linux's.
func openDirect(string) *os.File { return nil }

// allocate returns n bytes aligned to align from the Go heap.
func allocate(n int64) ([]byte, func() error, error) {
	b := make([]byte, n+align)
	off := int64(-uintptr(unsafe.Pointer(unsafe.SliceData(b)))) & (align - 1)
	return b[off : off+n : off+n], func() error { return nil }, nil
}
