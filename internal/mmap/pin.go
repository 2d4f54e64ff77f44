package mmap

import "fmt"

// How a Pin keeps its regions in memory.
const (
	// Locked regions are mlocked: the kernel never evicts them.
	Locked = "mlock"
	// Populated regions were read in with MADV_WILLNEED and a touch of
	// every page: in memory now, but evictable under pressure.
	Populated = "populate"
)

// Pin is a set of memory regions held in memory.
type Pin struct {
	How    string // Locked or Populated
	Bytes  int64  // bytes of the regions
	Err    error  // why locking was refused, when How is Populated
	unlock func()
}

// Unpin releases the regions' locks; populated regions need nothing.
func (p *Pin) Unpin() {
	if p.unlock != nil {
		p.unlock()
		p.unlock = nil
	}
}

// PinRegions keeps regions in memory: it locks them (mlock), and where the
// system refuses (RLIMIT_MEMLOCK, no CAP_IPC_LOCK, no mlock) it unlocks
// what it locked and populates them instead (MADV_WILLNEED, then one read
// of every page), saying why in the Pin's Err. The kernel locks and reads
// whole pages, so a region's first and last pages are held entire.
func PinRegions(regions [][]byte) *Pin { return pin(regions, lock, unlockRegion) }

// LockRegions locks regions in memory (mlock) and returns the function
// that unlocks them; on an error it has unlocked those it locked, and the
// error is a *LockError naming the region refused.
func LockRegions(regions [][]byte) (unlock func(), err error) {
	return lockAll(regions, lock, unlockRegion)
}

// LockError is a refused lock of one region.
type LockError struct {
	Index int // the region's index
	Bytes int
	Err   error
}

func (e *LockError) Error() string { return fmt.Sprintf("mlock %d bytes: %v", e.Bytes, e.Err) }

func (e *LockError) Unwrap() error { return e.Err }

// lockAll is LockRegions with the lock and unlock calls given.
func lockAll(regions [][]byte, lock, unlock func([]byte) error) (func(), error) {
	var locked [][]byte
	release := func() {
		for _, r := range locked {
			unlock(r)
		}
	}
	for i, r := range regions {
		if len(r) == 0 {
			continue
		}
		if err := lock(r); err != nil {
			release()
			return func() {}, &LockError{Index: i, Bytes: len(r), Err: err}
		}
		locked = append(locked, r)
	}
	return release, nil
}

// pin is PinRegions with the lock and unlock calls given.
func pin(regions [][]byte, lock, unlock func([]byte) error) *Pin {
	p := &Pin{How: Locked}
	for _, r := range regions {
		p.Bytes += int64(len(r))
	}
	release, err := lockAll(regions, lock, unlock)
	if err != nil {
		p.How, p.Err = Populated, err
		for _, r := range regions {
			willNeed(r)
			Touch(r, nil)
		}
		return p
	}
	p.unlock = release
	return p
}
