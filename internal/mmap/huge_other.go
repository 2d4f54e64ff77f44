//go:build !linux

package mmap

import "errors"

// adviseHuge does nothing: transparent huge pages are a Linux feature.
func adviseHuge([]byte) {}

// HugeOnRequest reports that transparent huge pages are a Linux feature.
func HugeOnRequest() (setting string, ok bool) { return "not Linux", false }

// HugeBytes reports that huge-page accounting is only known on Linux.
func HugeBytes(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return 0, errors.ErrUnsupported
}
