//go:build unix

package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func lock(b []byte) error         { return unix.Mlock(b) }
func unlockRegion(b []byte) error { return unix.Munlock(b) }

// willNeed asks the kernel to read b's pages ahead (MADV_WILLNEED), from
// the start of the page b starts in, as madvise requires.
func willNeed(b []byte) {
	if len(b) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	off := int(uintptr(p) & uintptr(os.Getpagesize()-1))
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, -off)), len(b)+off), unix.MADV_WILLNEED)
}
