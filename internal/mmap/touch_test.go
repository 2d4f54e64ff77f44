package mmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// mappedFile writes n bytes to a file and maps it with File.
func mappedFile(t *testing.T, n int) ([]byte, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*131>>5) | 1
	}
	require.NoError(t, os.WriteFile(path, want, 0o644))
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	data, unmap, err := File(fd, n)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, unmap()) })
	return data, want
}

// TestTouch touches mapped ranges that start and end inside pages, in one
// chunk and in many, and checks the sum of the bytes read (one per page,
// at the steps from the range's first byte, and its last byte) and the
// progress reported.
func TestTouch(t *testing.T) {
	page := os.Getpagesize()
	tests := []struct {
		name         string
		size, lo, hi int // file size, range
		chunk        int
	}{
		{"one page", page, 0, page, touchChunk},
		{"ragged range, one chunk", 9*page + 77, 123, 9*page + 50, touchChunk},
		{"ragged range, chunks of two pages", 9*page + 77, 123, 9*page + 50, 2 * page},
		{"chunks of one page", 33 * page, page - 1, 33 * page, page},
		{"empty", page, 5, 5, page},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, file := mappedFile(t, tc.size)
			b := data[tc.lo:tc.hi]
			var done int64
			got := touch(b, tc.chunk, func(n int64) { done += n })

			var want uint64
			if n := tc.hi - tc.lo; n > 0 {
				for i := tc.lo; i < tc.hi; i += page {
					want += uint64(file[i])
				}
				want += uint64(file[tc.hi-1])
			}
			require.Equal(t, want, got)
			require.Equal(t, int64(tc.hi-tc.lo), done)
		})
	}
	require.Zero(t, Touch(nil, nil))
}
