package server

import (
	"fmt"
	"sync/atomic"

	"github.com/ds4-go/ds4/engine"
)

// Slot states, as /metrics reports them.
const (
	slotIdle int32 = iota
	slotPrefill
	slotDecode
)

// slotStateNames names the slot states in /metrics.
var slotStateNames = [...]string{"idle", "prefill", "decode"}

// slot is one live session that requests run on, with its disk KV cache
// manager and its live protocol bindings. Each slot runs its requests in
// its own goroutine; with more than one slot their evaluations go through
// the scheduler (sched.go).
type slot struct {
	id   int
	sess Session          // the live session
	ev   engine.Evaluator // evaluates on sess: sess itself or the scheduler
	kv   KVCache          // nil without a disk KV cache
	live liveBindings
	jobs chan *job

	state  atomic.Int32 // slotIdle, slotPrefill or slotDecode
	tokens atomic.Int64 // the live tokens, for /metrics

	// Guarded by Server.smu.
	busy      bool  // running a request, or reserved for a parked prompt
	finishing bool  // its response is complete; it is only tidying up
	prompt    []int // while finishing: the prompt of its request
	parked    bool  // holds a parked prompt, not a conversation
	used      int64 // when it last ran a request, in Server.useSeq ticks
}

// setState sets sl's state and tells the scheduler, which waits for the
// decoding slots.
func (s *Server) setState(sl *slot, st int32) {
	sl.state.Store(st)
	if s.sched != nil {
		s.sched.signal()
	}
}

// slotName returns " (slot=K)" for log lines when the server has several
// slots, "" otherwise.
func (s *Server) slotName(sl *slot) string {
	if len(s.slots) < 2 {
		return ""
	}
	return fmt.Sprintf(" (slot=%d)", sl.id)
}

// evaluate evaluates a generated token; checkpoint allows a continued
// disk checkpoint first.
func (sl *slot) evaluate(tok int, checkpoint bool) error {
	if sl.kv != nil {
		return sl.kv.Decode(tok, checkpoint)
	}
	return sl.ev.Decode(tok)
}

// invalidate empties the live session and its bindings after an error.
func (sl *slot) invalidate() {
	if sl.kv != nil {
		sl.kv.Invalidate()
	} else {
		sl.sess.Reset()
	}
	sl.live.clear()
	sl.tokens.Store(0)
}

// newSlots returns the slots of cfg: one per session of Config.Sessions,
// or the one of Config.Session.
func (s *Server) newSlots(cfg Config) []*slot {
	sessions := cfg.Sessions
	if len(sessions) == 0 {
		sessions = []Session{cfg.Session}
	}
	slots := make([]*slot, len(sessions))
	for i, sess := range sessions {
		slots[i] = &slot{id: i, sess: sess, ev: sess, jobs: make(chan *job)}
	}
	if len(slots) > 1 {
		s.sched = newScheduler(slots, cfg.BatchGrace, cfg.PrefillChunk)
		for _, sl := range slots {
			sl.ev = newSlotEvaluator(sl, s.sched)
		}
	}
	for _, sl := range slots {
		switch {
		case cfg.KVCaches != nil:
			sl.kv = cfg.KVCaches(sl.id, sl.sess, sl.ev)
		case len(slots) == 1:
			sl.kv = cfg.KVCache
		}
	}
	return slots
}

// dispatch is the dispatcher goroutine: whenever a slot is free it takes
// the next queued job and gives it to the slot chosen for it.
func (s *Server) dispatch() {
	defer s.wg.Done()
	for {
		s.waitFree()
		j, ok := <-s.queue
		if !ok {
			break
		}
		if !j.state.CompareAndSwap(jobQueued, jobRunning) {
			continue
		}
		s.stats.queued.Add(-1)
		j.mu.Lock() // wait out a keep-alive in progress
		j.mu.Unlock()
		s.waitFinishing(j.req)
		sl := s.choose(j.req)
		for sl == nil { // a slot parking a prompt took the free one
			s.waitFree()
			sl = s.choose(j.req)
		}
		sl.jobs <- j
	}
	for _, sl := range s.slots {
		close(sl.jobs)
	}
	s.slotsWG.Wait()
	if s.sched != nil {
		s.sched.close()
	}
	for _, sl := range s.slots {
		if sl.kv == nil {
			continue
		}
		if st, ok := sl.kv.Close(); ok {
			s.log.Printf("ds4-server: saved the live session%s (%d tokens) to the disk KV cache: %s", s.slotName(sl), st.Tokens, st.Path)
		}
	}
}

// waitFree waits until a slot is free.
func (s *Server) waitFree() {
	for {
		s.smu.Lock()
		free := false
		for _, sl := range s.slots {
			free = free || !sl.busy
		}
		s.smu.Unlock()
		if free {
			return
		}
		<-s.freed
	}
}

// waitFinishing waits while a slot is finishing a response (its reply is
// sent; it evaluates the last token) whose prompt shares more tokens with
// r than any free slot's live tokens do: r is likely the client's next
// turn, which that slot will hold in a moment.
func (s *Server) waitFinishing(r *request) {
	for {
		s.smu.Lock()
		best, wait := 0, false
		for _, sl := range s.slots {
			if !sl.busy {
				best = max(best, commonPrefix(sl.sess.Tokens(), r.tokens))
			}
		}
		for _, sl := range s.slots {
			wait = wait || sl.finishing && commonPrefix(sl.prompt, r.tokens) > best
		}
		s.smu.Unlock()
		if !wait {
			return
		}
		<-s.freed
	}
}

// choose picks the slot for r among the free ones and marks it busy: the
// slot whose live state the request continues with the most tokens, else
// an empty slot, else the least recently used one (whose disk KV cache
// manager saves it to disk before it is replaced); nil when none is free.
func (s *Server) choose(r *request) *slot {
	s.smu.Lock()
	defer s.smu.Unlock()
	var best *slot
	bestReuse := 0
	if len(s.slots) > 1 {
		for _, sl := range s.slots {
			if sl.busy {
				continue
			}
			if p, err := s.plan(sl, r, false); err == nil && p.reuse > bestReuse {
				best, bestReuse = sl, p.reuse
			}
		}
	}
	for _, sl := range s.slots {
		if best != nil {
			break
		}
		if !sl.busy && sl.sess.Pos() == 0 {
			best = sl
		}
	}
	if best == nil {
		for _, sl := range s.slots {
			if !sl.busy && (best == nil || sl.used < best.used) {
				best = sl
			}
		}
	}
	if best == nil {
		return nil
	}
	best.busy, best.parked = true, false
	s.busySlots++
	s.stats.busy.Store(true)
	return best
}

// release marks sl free after a request.
func (s *Server) release(sl *slot) {
	s.smu.Lock()
	sl.busy, sl.finishing, sl.prompt = false, false, nil
	s.useSeq++
	sl.used = s.useSeq
	s.busySlots--
	s.stats.busy.Store(s.busySlots > 0)
	s.smu.Unlock()
	s.signalFree()
}

// signalFree wakes the dispatcher.
func (s *Server) signalFree() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// setFinishing records that sl's response to the request of prompt is
// about to be complete.
func (s *Server) setFinishing(sl *slot, prompt []int) {
	s.smu.Lock()
	sl.finishing, sl.prompt = true, prompt
	s.smu.Unlock()
}

// runSlot is a slot's goroutine: it runs the jobs the dispatcher gives it.
func (s *Server) runSlot(sl *slot) {
	defer s.slotsWG.Done()
	for j := range sl.jobs {
		s.runJob(sl, j)
		sl.state.Store(slotIdle)
		sl.tokens.Store(int64(sl.sess.Pos()))
		close(j.done)
		s.release(sl)
	}
}

// better reports whether a is a better place than b to park a prompt:
// an empty slot before a parked one, then the least recently used.
func better(a, b *slot) bool {
	ae, be := a.sess.Pos() == 0, b.sess.Pos() == 0
	if ae != be {
		return ae
	}
	return a.used < b.used
}

// park copies the prompt state of sl, whose session was just brought to
// a request's prompt, into a free slot that holds nothing or only another
// parked prompt, so that the same prompt sent again finds it there after
// sl has moved past it (docs/server.md#parked-prompts). It does nothing
// without such a slot or when the sessions cannot be copied.
func (s *Server) park(sl *slot) {
	if len(s.slots) < 2 {
		return
	}
	src, ok := sl.sess.(*engine.Session)
	if !ok || src.Pos() == 0 {
		return
	}
	s.smu.Lock()
	var dst *slot
	for _, o := range s.slots {
		if o.busy || o.sess.Pos() != 0 && !o.parked {
			continue
		}
		if dst == nil || better(o, dst) {
			dst = o
		}
	}
	if dst != nil {
		dst.busy = true
		s.busySlots++
	}
	s.smu.Unlock()
	if dst == nil {
		return
	}
	ok = false
	if d, isEngine := dst.sess.(*engine.Session); isEngine {
		dst.invalidate()
		if err := d.CopyFrom(src); err != nil {
			s.log.Printf("ds4-server: parking the prompt of slot=%d in slot=%d: %v", sl.id, dst.id, err)
			dst.invalidate()
		} else {
			ok = true
			dst.tokens.Store(int64(d.Pos()))
		}
	}
	s.smu.Lock()
	dst.busy, dst.parked = false, ok
	s.useSeq++
	dst.used = s.useSeq
	s.busySlots--
	s.smu.Unlock()
	s.signalFree()
}
