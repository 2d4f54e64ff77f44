// Package atomicfile writes files so that a reader sees either the old
// content or the complete new one, never a partial file.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates the file at path with permissions perm through write: the
// bytes go to a temporary file in the same directory, which is synced and
// renamed over path; on any error path is left as it was and the
// temporary file is removed.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	// CreateTemp makes the file private; perm is what the caller asked for.
	err = tmp.Chmod(perm)
	if err == nil {
		err = write(tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("atomicfile: %s: %w", path, err)
	}
	return nil
}
