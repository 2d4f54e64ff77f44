package mmap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// smapsFixture is a trimmed /proc/self/smaps of three areas: a file
// mapping partly on huge pages, an anonymous area on huge pages, and a
// stack.
const smapsFixture = `7f0000000000-7f0000600000 r--s 00000000 fd:00 123   /tmp/model.gguf
Size:               6144 kB
Rss:                6144 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:      4096 kB
VmFlags: rd sh mr mw me ms hg
7f0000600000-7f0000a00000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      2048 kB
FilePmdMapped:         0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]
Size:                132 kB
AnonHugePages:         0 kB
`

func TestHugeBytesParse(t *testing.T) {
	const file, anon, end = 0x7f0000000000, 0x7f0000600000, 0x7f0000a00000
	tests := []struct {
		name   string
		lo, hi uintptr
		want   int64
	}{
		{"file mapping", file, anon, 4 << 20},
		{"anonymous area", anon, end, 2 << 20},
		{"both", file, end, 6 << 20},
		{"inside the file mapping, capped at the range", file + 4096, file + 1<<20, 1<<20 - 4096},
		{"no area", 0x1000, 0x2000, 0},
		{"the stack", 0x7ffd00000000, 0x7ffd00021000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hugeBytes(strings.NewReader(smapsFixture), tc.lo, tc.hi)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{
		"zz-7f0000600000 r--s 00000000 fd:00 123 /m\n",
		"7f0000000000-7f0000600000 r--s 00000000 fd:00 123 /m\nFilePmdMapped: 12 MB\n",
		"7f0000000000-7f0000600000 r--s 00000000 fd:00 123 /m\nFilePmdMapped: x kB\n",
	} {
		_, err := hugeBytes(strings.NewReader(bad), file, anon)
		require.Error(t, err, "%q", bad)
	}
}

func TestHugeBytesOfMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, make([]byte, 1<<20), 0o644))
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	data, unmap, err := File(fd, 1<<20)
	require.NoError(t, err)
	defer unmap()
	_ = data[0]
	// A 1 MiB file is smaller than a huge page: the kernel maps it with
	// small pages whatever it was asked.
	n, err := HugeBytes(data)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = HugeBytes(nil)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestTouchMapsPages maps a fresh file and checks, through the process's
// resident set, that Touch maps the pages of a range into the process.
// (The kernel maps a fault's neighbours too, up to 64 KiB around it, so
// this cannot tell a skipped page; TestTouch checks which bytes Touch
// reads.)
func TestTouchMapsPages(t *testing.T) {
	page := os.Getpagesize()
	data, _ := mappedFile(t, 64*page+300)
	b := data[page+100 : 63*page+10]
	lo := uintptr(unsafe.Pointer(&data[0]))
	rss := func() int64 {
		f, err := os.Open("/proc/self/smaps")
		require.NoError(t, err)
		defer f.Close()
		n, err := smapsBytes(f, lo, lo+uintptr(len(data)), "Rss:")
		require.NoError(t, err)
		return n
	}
	require.Zero(t, rss(), "the fresh mapping has resident pages")
	Touch(b, nil)
	require.GreaterOrEqual(t, rss(), int64(63*page-page))
}

// TestHugeFloats writes a 32 MiB HugeFloats slice and checks that huge
// pages back some of it, where the kernel grants them on request.
func TestHugeFloats(t *testing.T) {
	if setting, ok := HugeOnRequest(); !ok {
		t.Skipf("no transparent huge pages on request here (%s)", setting)
	}
	b := HugeFloats(8 << 20)
	require.Len(t, b, 8<<20)
	for i := range b {
		if b[i] != 0 {
			t.Fatalf("b[%d] = %v, want 0", i, b[i])
		}
		b[i] = float32(i)
	}
	huge, err := HugeBytes(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b)))
	require.NoError(t, err)
	require.Positive(t, huge, "no huge pages behind the slice")
	require.Empty(t, HugeFloats(0))
}

// TestAnon writes a 32 MiB Anon buffer and checks that it is zeroed,
// page-aligned and backed by huge pages in part, where the kernel grants
// them on request.
func TestAnon(t *testing.T) {
	if setting, ok := HugeOnRequest(); !ok {
		t.Skipf("no transparent huge pages on request here (%s)", setting)
	}
	b, free, err := Anon(32 << 20)
	require.NoError(t, err)
	defer free()
	require.Len(t, b, 32<<20)
	require.Zero(t, uintptr(unsafe.Pointer(&b[0]))%uintptr(os.Getpagesize()))
	for i := range b {
		if b[i] != 0 {
			t.Fatalf("b[%d] = %d, want 0", i, b[i])
		}
		b[i] = byte(i)
	}
	huge, err := HugeBytes(b)
	require.NoError(t, err)
	require.Positive(t, huge, "no huge pages behind the buffer")
	b, free, err = Anon(0)
	require.NoError(t, err)
	require.Empty(t, b)
	require.NoError(t, free())
}
