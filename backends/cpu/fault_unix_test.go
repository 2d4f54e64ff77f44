//go:build unix

package cpu

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ds4-go/ds4/backends"
)

// TestParallelFaultReachesCaller reads a file mapping whose file was
// truncated under it, one page per piece, on every worker: the bus errors
// must come back to the caller as a *PanicError over the runtime's fault
// error, not end the process.
func TestParallelFaultReachesCaller(t *testing.T) {
	page := os.Getpagesize()
	const pages = 64
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, make([]byte, pages*page), 0o644))
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	data, err := unix.Mmap(int(fd.Fd()), 0, pages*page, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(data)
	require.NoError(t, os.Truncate(path, int64(page)))

	be := New(4)
	defer closeWithin(t, be, 5*time.Second)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var sum atomic.Int64
	got := func() (p any) {
		defer func() { p = recover() }()
		be.Parallel(pages, backends.TaskFunc(func(i int) {
			time.Sleep(time.Millisecond) // let every helper join
			sum.Add(int64(data[i*page]))
		}))
		return nil
	}()
	pe, ok := got.(*PanicError)
	require.True(t, ok, "got %v", got)
	var fault interface{ Addr() uintptr }
	require.ErrorAs(t, pe, &fault)
	require.GreaterOrEqual(t, fault.Addr(), unsafePointer(data)+uintptr(page))
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
