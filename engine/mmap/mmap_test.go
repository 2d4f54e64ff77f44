package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := []byte("mapped bytes")
	require.NoError(t, os.WriteFile(path, want, 0o644))
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	data, unmap, err := File(fd, len(want))
	require.NoError(t, err)
	require.Equal(t, want, data)
	require.NoError(t, unmap())
}
