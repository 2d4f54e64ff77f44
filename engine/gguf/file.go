package gguf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic creates the file at path through write: the bytes go to
// a temporary file in the same directory, which is synced and then renamed
// over path, so path holds either its old content or the complete new one.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	err = write(tmp)
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
		return fmt.Errorf("gguf: %s: %w", path, err)
	}
	return nil
}
