//go:build !linux

package harness

import (
	"errors"
	"os"
)

// openDirect reports that O_DIRECT is a Linux flag: the probe reads
// through the page cache.
func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// dropCache does nothing where the kernel takes no advice.
func dropCache(*os.File) {}

func isEINVAL(error) bool { return false }
