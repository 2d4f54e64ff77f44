package mmap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks the kernel to back the whole pages of b with transparent
// huge pages. It is an optimization only: a kernel without them refuses,
// and b works as before.
func adviseHuge(b []byte) {
	// madvise takes a page-aligned start; a partial first page is left.
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & uintptr(os.Getpagesize()-1))
	if off < len(b) {
		_ = unix.Madvise(b[off:], unix.MADV_HUGEPAGE)
	}
}

// HugeOnRequest reports whether the kernel backs memory that asks for
// transparent huge pages (madvise) with them, and its setting (or why it
// is unknown), for messages.
func HugeOnRequest() (setting string, ok bool) {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return err.Error(), false
	}
	setting = string(bytes.TrimSpace(b))
	return setting, strings.Contains(setting, "[madvise]") || strings.Contains(setting, "[always]")
}

// HugeBytes returns how many bytes of b, a mapping this process made,
// are mapped through huge pages (2 MiB page-table entries), as the
// kernel's /proc/self/smaps counts them.
func HugeBytes(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("mmap: huge pages: %w", err)
	}
	defer f.Close()
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return hugeBytes(f, lo, lo+uintptr(len(b)))
}

// hugeBytes sums, over the areas of the smaps listing r that overlap
// [lo, hi), their bytes mapped by huge pages (FilePmdMapped for files,
// AnonHugePages for anonymous memory, ShmemPmdMapped for shared memory),
// at most hi-lo. Each area's counts cover all of it, so an area reaching
// past the range counts whole, up to that cap.
func hugeBytes(r io.Reader, lo, hi uintptr) (int64, error) {
	return smapsBytes(r, lo, hi, "FilePmdMapped:", "AnonHugePages:", "ShmemPmdMapped:")
}

// smapsBytes sums the kB counts of fields (names with their colon) over
// the areas of the smaps listing r that overlap [lo, hi), at most hi-lo,
// as hugeBytes does for its fields.
func smapsBytes(r io.Reader, lo, hi uintptr, fields ...string) (int64, error) {
	var total int64
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Bytes()
		field, rest, _ := bytes.Cut(line, []byte(" "))
		if start, end, ok := bytes.Cut(field, []byte("-")); ok && len(rest) > 0 {
			// An area's header: "start-end perms offset dev inode path".
			s, err1 := strconv.ParseUint(string(start), 16, 64)
			e, err2 := strconv.ParseUint(string(end), 16, 64)
			if err1 != nil || err2 != nil {
				return 0, fmt.Errorf("mmap: smaps: malformed area %q", line)
			}
			in = uintptr(s) < hi && uintptr(e) > lo
			continue
		}
		if !in {
			continue
		}
		if slices.Contains(fields, string(field)) {
			v := bytes.Fields(rest)
			if len(v) != 2 || string(v[1]) != "kB" {
				return 0, fmt.Errorf("mmap: smaps: malformed line %q", line)
			}
			kb, err := strconv.ParseInt(string(v[0]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("mmap: smaps: malformed line %q: %w", line, err)
			}
			total += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("mmap: smaps: %w", err)
	}
	return min(total, int64(hi-lo)), nil
}
