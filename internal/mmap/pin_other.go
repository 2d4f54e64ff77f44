//go:build !unix

package mmap

import "errors"

func lock([]byte) error         { return errors.New("mlock is not supported on this system") }
func unlockRegion([]byte) error { return nil }

// willNeed does nothing: the regions are read by the touch that follows.
func willNeed([]byte) {}
