package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var errDiskFull = errors.New("disk full")

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	err := Write(path, 0o644, func(w io.Writer) error {
		_, _ = w.Write([]byte("partial"))
		return errDiskFull
	})
	require.ErrorIs(t, err, errDiskFull)
	got, _ := os.ReadFile(path)
	require.Equal(t, "old", string(got), "a failed write leaves the old file")
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 1, "no temporary file is left behind")

	require.NoError(t, Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write([]byte("new"))
		return err
	}))
	got, _ = os.ReadFile(path)
	require.Equal(t, "new", string(got))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	entries, _ = os.ReadDir(dir)
	require.Len(t, entries, 1)
}

func TestWriteMissingDir(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "no", "such", "dir", "f"), 0o644, func(io.Writer) error { return nil })
	require.Error(t, err)
}
