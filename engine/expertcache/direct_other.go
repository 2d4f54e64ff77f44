//go:build !linux

package expertcache

import "os"

// openDirect returns nil: O_DIRECT is Linux's.
func openDirect(string) *os.File { return nil }
