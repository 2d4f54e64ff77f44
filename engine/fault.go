package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrModelFault reports that a step faulted reading the model's weights:
// the mapped file was truncated under the process, or its disk failed.
var ErrModelFault = errors.New("engine: memory fault reading the model")

// guard ends a step that reads the model's mapping: it restores the
// goroutine's panic-on-fault setting to old and turns a memory fault
// raised by the step, on this goroutine or on a backend's helper (which
// forwards it as a panic wrapping the runtime's error), into *err, with
// the session reset since the fault left it half-updated. Other panics go
// on unchanged.
func (s *Session) guard(err *error, old bool) {
	debug.SetPanicOnFault(old)
	p := recover()
	if p == nil {
		return
	}
	e, _ := p.(error)
	var fault interface{ Addr() uintptr }
	if e == nil || !errors.As(e, &fault) {
		panic(p)
	}
	s.Reset()
	*err = s.m.faultError(e)
}

// faultError describes a memory fault e raised reading m's weights,
// naming a change in the file's size where there is one.
func (m *Model) faultError(e error) error {
	if m.File != nil {
		if serr := m.File.CheckSize(); serr != nil {
			return fmt.Errorf("%w: %w (%v)", ErrModelFault, serr, e)
		}
	}
	return fmt.Errorf("%w: %v", ErrModelFault, e)
}
