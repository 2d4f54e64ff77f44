package mmap

import "os"

// touchChunk is how many bytes Touch reads between two progress reports.
const touchChunk = 64 << 20

// Touch reads one byte of every page of b, front to back, so that no later
// read of b waits on a page fault or a disk read, and returns the sum of
// the bytes it read; add, when not nil, is told the bytes done chunk by
// chunk.
//
// One sequential pass is the fastest way in: from a cold page cache it
// read the 5.2 GiB 2-layer Flash slice in 1.33 s, where two goroutines
// taking alternate 64 MiB chunks took 1.85–1.94 s and four 1.68–1.72 s
// (the kernel's readahead follows one stream best). Upstream also asks
// for readahead (MADV_WILLNEED); the faults alone already read the file
// into 2 MiB folios through File's mapping, so nothing more is asked.
func Touch(b []byte, add func(int64)) uint64 { return touch(b, touchChunk, add) }

// touch is Touch with chunks of chunk bytes, a whole number of pages.
func touch(b []byte, chunk int, add func(int64)) uint64 {
	if len(b) == 0 {
		return 0
	}
	page := os.Getpagesize()
	var sum uint64
	for lo := 0; lo < len(b); lo += chunk {
		hi := min(lo+chunk, len(b))
		// Every chunk starts a whole number of pages from b[0], so these
		// steps land in every page b spans but perhaps the last, whose
		// last byte is read below.
		for i := lo; i < hi; i += page {
			sum += uint64(b[i])
		}
		if add != nil {
			add(int64(hi - lo))
		}
	}
	return sum + uint64(b[len(b)-1])
}
