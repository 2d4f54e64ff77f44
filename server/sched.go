package server

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ds4-go/ds4/engine"
)

// DefaultBatchGrace is how long the scheduler waits for the other
// decoding slots once a slot has submitted its next token.
const DefaultBatchGrace = 2 * time.Millisecond

// errSchedulerClosed fails evaluations submitted after the scheduler
// stopped.
var errSchedulerClosed = errors.New("server: scheduler stopped")

// evalReq is one evaluation a slot submitted: a prefill chunk, or one
// token to decode.
type evalReq struct {
	sl     *slot
	decode bool
	tokens []int // the prefill chunk
	token  int   // the token to decode
	at     time.Time
	done   chan error
}

// scheduler owns the engine when the server has several slots: it runs
// one evaluation at a time, either one prefill chunk of one slot or one
// decode step of every slot that submitted a token, batched
// (engine.DecodeBatch). Prefill chunks alternate with decode steps, so a
// long prompt stalls the running streams for at most one chunk. A decode
// step fires when every decoding slot has submitted its token, or a grace
// period after the first one did.
type scheduler struct {
	slots []*slot
	grace time.Duration

	mu          sync.Mutex
	pending     []*evalReq
	closed      bool
	lastPrefill bool      // the last evaluation was a prefill chunk
	lastEnd     time.Time // when the last evaluation ended
	wake        chan struct{}
	stopped     chan struct{}

	// The decode step's scratch, used by the scheduler goroutine only.
	batch   []*evalReq
	engines []*engine.Session
	tokens  []int

	lastBatch atomic.Int64   // size of the last decode step
	steps     []atomic.Int64 // decode steps by size (index: size)
	chunks    atomic.Int64   // prefill chunks evaluated
}

// newScheduler returns a running scheduler of slots.
func newScheduler(slots []*slot, grace time.Duration) *scheduler {
	if grace <= 0 {
		grace = DefaultBatchGrace
	}
	sc := &scheduler{
		slots: slots, grace: grace,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		steps: make([]atomic.Int64, len(slots)+1),
	}
	go sc.run()
	return sc
}

// close stops the scheduler once no evaluation is pending.
func (sc *scheduler) close() {
	sc.mu.Lock()
	sc.closed = true
	sc.mu.Unlock()
	sc.signal()
	<-sc.stopped
}

func (sc *scheduler) signal() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// submit queues r, whose done channel has room for one error, and waits
// until the scheduler has evaluated it.
func (sc *scheduler) submit(r *evalReq) error {
	r.at = time.Now()
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return errSchedulerClosed
	}
	sc.pending = append(sc.pending, r)
	sc.mu.Unlock()
	sc.signal()
	return <-r.done
}

// run is the scheduler goroutine.
func (sc *scheduler) run() {
	defer close(sc.stopped)
	var timer *time.Timer
	for {
		sc.mu.Lock()
		prefill, wait := sc.next(time.Now())
		if prefill == nil && len(sc.batch) == 0 {
			if sc.closed && len(sc.pending) == 0 {
				sc.mu.Unlock()
				return
			}
			sc.mu.Unlock()
			if wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-sc.wake:
				case <-timer.C:
				}
				timer.Stop()
			} else {
				<-sc.wake
			}
			continue
		}
		sc.mu.Unlock()
		if prefill != nil {
			sc.prefill(prefill)
		} else {
			sc.decode()
		}
		sc.mu.Lock()
		sc.lastPrefill, sc.lastEnd = prefill != nil, time.Now()
		sc.mu.Unlock()
	}
}

// next picks the next evaluation under sc.mu: a prefill chunk, returned
// and removed from the pending list, or a decode step, moved into
// sc.batch; with neither it returns how long to wait (0: until a
// submission).
func (sc *scheduler) next(now time.Time) (prefill *evalReq, wait time.Duration) {
	var first *evalReq // the oldest prefill
	var oldest time.Time
	decodes := 0
	for _, r := range sc.pending {
		switch {
		case r.decode:
			if decodes == 0 || r.at.Before(oldest) {
				oldest = r.at
			}
			decodes++
		case first == nil || r.at.Before(first.at):
			first = r
		}
	}
	// Slots that are decoding but have not submitted their next token.
	missing := 0
	for _, sl := range sc.slots {
		if sl.state.Load() == slotDecode && !sc.submitted(sl) {
			missing++
		}
	}
	// A decode's grace runs from its submission or from the end of the
	// last evaluation, whichever is later: the slots that evaluation
	// served need a moment to take its results and submit again. Timed
	// from the submission alone, a slot that submitted during a step
	// would run alone right after it, and the batch would split into two
	// steps that alternate from then on.
	since := oldest
	if sc.lastEnd.After(since) {
		since = sc.lastEnd
	}
	switch {
	case first != nil && !sc.lastPrefill:
		sc.remove(first)
		return first, 0
	case decodes > 0 && (missing == 0 || now.Sub(since) >= sc.grace):
		sc.takeDecodes()
		return nil, 0
	case first != nil && decodes == 0 && (missing == 0 || now.Sub(sc.lastEnd) >= sc.grace):
		sc.remove(first)
		return first, 0
	case decodes > 0:
		return nil, max(time.Microsecond, sc.grace-now.Sub(since))
	case first != nil:
		return nil, max(time.Microsecond, sc.grace-now.Sub(sc.lastEnd))
	}
	return nil, 0
}

// submitted reports whether sl has an evaluation pending.
func (sc *scheduler) submitted(sl *slot) bool {
	for _, r := range sc.pending {
		if r.sl == sl {
			return true
		}
	}
	return false
}

// remove drops r from the pending list.
func (sc *scheduler) remove(r *evalReq) {
	for i, p := range sc.pending {
		if p == r {
			sc.pending = append(sc.pending[:i], sc.pending[i+1:]...)
			return
		}
	}
}

// takeDecodes moves the pending decodes into sc.batch.
func (sc *scheduler) takeDecodes() {
	rest := sc.pending[:0]
	for _, r := range sc.pending {
		if r.decode {
			sc.batch = append(sc.batch, r)
		} else {
			rest = append(rest, r)
		}
	}
	clear(sc.pending[len(rest):])
	sc.pending = rest
}

// prefill evaluates one prefill chunk.
func (sc *scheduler) prefill(r *evalReq) {
	sc.chunks.Add(1)
	r.done <- r.sl.sess.Prefill(r.tokens)
}

// decode evaluates the decode step of sc.batch: one engine.DecodeBatch
// when every session is an *engine.Session, else one Decode per slot.
// Sessions whose context is full fail alone; an error of the batched
// step fails every member.
func (sc *scheduler) decode() {
	batch := sc.batch[:0]
	for _, r := range sc.batch {
		if pos := r.sl.sess.Pos(); pos >= r.sl.sess.Context() {
			r.done <- fmt.Errorf("%w: decoding at %d", engine.ErrContextFull, pos)
			continue
		}
		batch = append(batch, r)
	}
	n := len(batch)
	sc.lastBatch.Store(int64(n))
	sc.steps[min(n, len(sc.steps)-1)].Add(1)
	sc.engines, sc.tokens = sc.engines[:0], sc.tokens[:0]
	for _, r := range batch {
		e, ok := r.sl.sess.(*engine.Session)
		if !ok {
			break
		}
		sc.engines, sc.tokens = append(sc.engines, e), append(sc.tokens, r.token)
	}
	if len(sc.engines) == n {
		err := engine.DecodeBatch(sc.engines, sc.tokens)
		for _, r := range batch {
			r.done <- err
		}
	} else {
		for _, r := range batch {
			r.done <- r.sl.sess.Decode(r.token)
		}
	}
	clear(sc.batch[:cap(sc.batch)])
	clear(sc.engines)
	sc.batch = sc.batch[:0]
}

// slotEvaluator is a slot's engine.Evaluator when the server has several
// slots: it submits the slot's prefill chunks and decoded tokens to the
// scheduler and waits for them. A slot has one evaluation in flight at a
// time, so one request record serves them all.
type slotEvaluator struct {
	sl  *slot
	sc  *scheduler
	req evalReq
}

// newSlotEvaluator returns the evaluator of sl through sc.
func newSlotEvaluator(sl *slot, sc *scheduler) *slotEvaluator {
	return &slotEvaluator{sl: sl, sc: sc, req: evalReq{sl: sl, done: make(chan error, 1)}}
}

func (e *slotEvaluator) Context() int          { return e.sl.sess.Context() }
func (e *slotEvaluator) Pos() int              { return e.sl.sess.Pos() }
func (e *slotEvaluator) Logits() []float32     { return e.sl.sess.Logits() }
func (e *slotEvaluator) SetLayerHook(f func()) { e.sl.sess.SetLayerHook(f) }
func (e *slotEvaluator) Layers() int           { return e.sl.sess.Layers() }

func (e *slotEvaluator) Prefill(tokens []int) error {
	if len(tokens) == 0 {
		return nil
	}
	e.req.decode, e.req.tokens = false, tokens
	err := e.sc.submit(&e.req)
	e.req.tokens = nil
	return err
}

func (e *slotEvaluator) Decode(token int) error {
	e.req.decode, e.req.token = true, token
	return e.sc.submit(&e.req)
}
