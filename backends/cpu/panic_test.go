package cpu

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
)

// TestParallelPanicReachesCaller makes every worker, the caller and its
// helpers, panic in a piece at the same time: Parallel must raise one
// *PanicError on the caller's goroutine, and the backend must keep
// working.
func TestParallelPanicReachesCaller(t *testing.T) {
	be := New(4)
	defer closeWithin(t, be, 5*time.Second)
	for round := range 3 {
		var arrived atomic.Int32
		release := make(chan struct{})
		var once sync.Once
		got := func() (p any) {
			defer func() { p = recover() }()
			be.Parallel(4, backends.TaskFunc(func(i int) {
				if arrived.Add(1) == 4 {
					once.Do(func() { close(release) })
				}
				select {
				case <-release:
				case <-time.After(5 * time.Second):
				}
				panic(fmt.Sprintf("piece %d", i))
			}))
			return nil
		}()
		var pe *PanicError
		require.IsType(t, pe, got, "round %d", round)
		pe = got.(*PanicError)
		require.Regexp(t, `^piece [0-3]$`, pe.Value)
		require.Contains(t, pe.Error(), "cpu: panic in a parallel job: piece")
		require.NotEmpty(t, pe.Stack)

		counts := make([]atomic.Int32, 100)
		be.Parallel(len(counts), backends.TaskFunc(func(i int) { counts[i].Add(1) }))
		for i := range counts {
			require.Equal(t, int32(1), counts[i].Load(), "index %d after a panic", i)
		}
	}
	// An error value stays reachable through the PanicError.
	sentinel := errors.New("kernel failed")
	func() {
		defer func() {
			err, _ := recover().(error)
			require.ErrorIs(t, err, sentinel)
		}()
		be.Parallel(64, backends.TaskFunc(func(i int) {
			if i == 63 {
				panic(sentinel)
			}
		}))
	}()
}
