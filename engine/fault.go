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
// raised by the step inside the model's file buffer, on this goroutine or
// on a backend's helper (which forwards it as a panic wrapping the
// runtime's error), into *err, with the session reset since the fault
// left it half-updated. Other panics, faults elsewhere included, go on.
func (s *Session) guard(err *error, old bool) {
	debug.SetPanicOnFault(old)
	if p := recover(); p != nil {
		*err = s.m.fault(p)
		s.Reset()
	}
}

// guardBatch is guard for a step over the sessions ss, which a fault
// resets all.
func guardBatch(err *error, old bool, ss []*Session) {
	debug.SetPanicOnFault(old)
	if p := recover(); p != nil {
		*err = ss[0].m.fault(p)
		for _, s := range ss {
			s.Reset()
		}
	}
}

// fault returns the error of a memory fault p, recovered from a step,
// raised reading m's file buffer; it panics again with p for any other
// panic (a bug).
func (m *Model) fault(p any) error {
	e, _ := p.(error)
	var fault interface{ Addr() uintptr }
	if e == nil || !errors.As(e, &fault) || m.File == nil || !m.File.Holds(fault.Addr()) {
		panic(p)
	}
	return m.faultError()
}

// faultError describes a memory fault raised reading m's weights, naming
// a change in the file's size where there is one. The fault's address is
// left out: the message may reach a client, and addresses are the
// process's own.
func (m *Model) faultError() error {
	if m.File != nil {
		if err := m.File.CheckSize(); err != nil {
			return fmt.Errorf("%w: %w", ErrModelFault, err)
		}
	}
	return fmt.Errorf("%w (the file changed on disk, or its disk failed)", ErrModelFault)
}
