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

// Read reads size bytes of fd into private anonymous memory that asks the
// kernel for transparent huge pages (madvise; refused silently where the
// kernel has none); free releases it. Weights streamed from 2 MiB pages
// take far fewer TLB misses than from the page cache's 4 KiB ones
// (docs/performance.md#huge-pages). The cost is a private copy of the
// file, read in full up front.
func Read(fd *os.File, size int) ([]byte, func() error, error) {
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	data, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	free := func() error { return unix.Munmap(data) }
	adviseHuge(data)
	if _, err := io.ReadFull(io.NewSectionReader(fd, 0, int64(size)), data); err != nil {
		free()
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, free, nil
}
