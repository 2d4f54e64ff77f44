package cpu

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ds4-go/ds4/backends"
)

// goid returns the id of the calling goroutine, from its stack header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// recoverParallel runs be.Parallel(n, t) and returns what it panicked with.
func recoverParallel(be *Backend, n int, t backends.Task) (p any) {
	defer func() { p = recover() }()
	be.Parallel(n, t)
	return nil
}

// TestParallelPanic makes pieces of a parallel job panic on a helper
// goroutine or on the caller: the process survives, the caller gets the
// panic as a *PanicError once no worker runs the job any more, and the
// backend goes on working.
func TestParallelPanic(t *testing.T) {
	const n = 64
	be := New(4)
	for _, c := range []struct {
		name string
		// piece runs piece i; onCaller says whether it runs on the
		// goroutine that called Parallel; started is closed once a helper
		// runs a piece, running counts the helpers' pieces in progress.
		piece func(i int, onCaller bool, started func(), wait <-chan struct{}, running *atomic.Int32)
		value string // the panic value's text
		check func(t *testing.T, pe *PanicError)
	}{
		{
			name: "helper panics",
			piece: func(i int, onCaller bool, started func(), wait <-chan struct{}, _ *atomic.Int32) {
				if onCaller {
					<-wait // until a helper has joined
					return
				}
				started()
				panic("boom in a helper")
			},
			value: "boom in a helper",
		},
		{
			name: "helper index out of range",
			piece: func(i int, onCaller bool, started func(), wait <-chan struct{}, _ *atomic.Int32) {
				if onCaller {
					<-wait
					return
				}
				started()
				var s []int
				_ = s[i]
			},
			value: "index out of range",
			check: func(t *testing.T, pe *PanicError) {
				var re runtime.Error
				if !errors.As(pe, &re) {
					t.Errorf("%T does not unwrap to a runtime.Error", pe.Value)
				}
			},
		},
		{
			name: "caller panics while a helper runs",
			piece: func(i int, onCaller bool, started func(), wait <-chan struct{}, running *atomic.Int32) {
				if onCaller {
					<-wait
					panic("boom on the caller")
				}
				running.Add(1)
				defer running.Add(-1)
				started()
				time.Sleep(20 * time.Millisecond)
			},
			value: "boom on the caller",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			caller := goid()
			var once sync.Once
			joined := make(chan struct{})
			started := func() { once.Do(func() { close(joined) }) }
			var running atomic.Int32
			wait := make(chan struct{})
			go func() {
				select {
				case <-joined:
				case <-time.After(10 * time.Second):
					t.Error("no helper joined the job")
				}
				close(wait)
			}()
			p := recoverParallel(be, n, backends.TaskFunc(func(i int) {
				c.piece(i, goid() == caller, started, wait, &running)
			}))
			pe, ok := p.(*PanicError)
			if !ok {
				t.Fatalf("Parallel panicked with %T %v, want a *PanicError", p, p)
			}
			if r := running.Load(); r != 0 {
				t.Errorf("Parallel returned with %d helper pieces still running", r)
			}
			if !strings.Contains(pe.Error(), c.value) || !strings.Contains(string(pe.Stack), "cpu.TestParallelPanic") {
				t.Errorf("panic %q lacks the value %q or the panicking piece's stack", pe.Error(), c.value)
			}
			if c.check != nil {
				c.check(t, pe)
			}
			// The workers survived and run the next job in full.
			var count atomic.Int32
			be.Parallel(n, backends.TaskFunc(func(int) { count.Add(1) }))
			if count.Load() != n {
				t.Errorf("next job ran %d of %d pieces", count.Load(), n)
			}
		})
	}
	closeWithin(t, be, 5*time.Second)

	// Run serially, a panic is raised unchanged.
	serial := New(1)
	defer serial.Close()
	if p := recoverParallel(serial, n, backends.TaskFunc(func(int) { panic("serial boom") })); p != "serial boom" {
		t.Errorf("serial panic %v", p)
	}
}
