//go:build unix

package mmap

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// File maps size bytes of fd read-only and shared, so that many
// processes serving one model share the page cache; unmap releases it.
//
// The mapping asks for transparent huge pages before any page of it is
// touched. Where the kernel caches files in large folios (Linux 6.x on
// ext4, xfs and others), pages read in through such a mapping land in the
// page cache as 2 MiB folios and are mapped with one page-table entry
// each, for this process and every later one, which spares the weights'
// TLB misses (docs/performance.md#huge-pages). A file already cached in
// small pages (as
// a file just written or copied is) stays so until the cache drops it;
// HugeBytes tells how much of a mapping got huge pages.
func File(fd *os.File, size int) ([]byte, func() error, error) {
	data, err := unix.Mmap(int(fd.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	adviseHuge(data)
	return data, func() error { return unix.Munmap(data) }, nil
}

// Read reads size bytes of fd into memory of its own from Anon; free
// releases it. Weights streamed from 2 MiB pages take far fewer TLB
// misses than from the page cache's 4 KiB ones
// (docs/performance.md#huge-pages). The cost is a private copy of the
// file, read in full up front.
func Read(fd *os.File, size int) ([]byte, func() error, error) {
	data, free, err := Anon(size)
	if err != nil {
		return nil, nil, err
	}
	if _, err := io.ReadFull(io.NewSectionReader(fd, 0, int64(size)), data); err != nil {
		free()
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, free, nil
}

// Anon returns size bytes of zeroed, page-aligned private memory outside
// the Go heap that asks the kernel for transparent huge pages (madvise;
// refused silently where the kernel has none), every page faulted in;
// free releases it. Faulting in up front keeps the cost of zeroing (and,
// under a memory limit, of compacting memory for) huge pages out of the
// first use, and a process short of memory meets that at once. Besides
// the TLB, huge pages matter to O_DIRECT reads into the memory: a read's
// buffer goes to the device as a list of physically contiguous segments,
// one per page, and a device takes a bounded number of segments a request
// (254 on virtio disks), so a 7 MiB read into small pages takes several
// times the requests of one into huge pages (docs/streaming.md#huge-pages).
func Anon(size int) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	data, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	adviseHuge(data)
	for i, page := 0, os.Getpagesize(); i < len(data); i += page {
		data[i] = 0
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
