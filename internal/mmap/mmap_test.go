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

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := make([]byte, 3<<20+7) // past a huge page, with a ragged end
	for i := range want {
		want[i] = byte(i * 31 >> 3)
	}
	require.NoError(t, os.WriteFile(path, want, 0o644))
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	data, free, err := Read(fd, len(want))
	require.NoError(t, err)
	require.Equal(t, want, data)
	data[0]++ // private memory: writable, and the file keeps its bytes
	require.NoError(t, free())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got)

	_, _, err = Read(fd, len(want)+1) // the file is shorter than asked
	require.Error(t, err)
	data, free, err = Read(fd, 0)
	require.NoError(t, err)
	require.Empty(t, data)
	require.NoError(t, free())
}
