//go:build !linux

package mmap

import "errors"

// adviseHuge does nothing: transparent huge pages are a Linux feature.
func adviseHuge([]byte) {}

// HugeBytes reports that huge-page accounting is only known on Linux.
func HugeBytes(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return 0, errors.ErrUnsupported
}
