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

	// Used by the scheduler goroutine: a chunk's tokens evaluated so far,
	// and those the pass being built evaluates.
	off, take int
	one       [1]int // the token to decode as a list
}

// piece returns the tokens r's part of the pass evaluates.
func (r *evalReq) piece() []int {
	if r.decode {
		r.one[0] = r.token
		return r.one[:]
	}
	return r.tokens[r.off : r.off+r.take]
}

// scheduler owns the engine when the server has several slots: it runs
// one pass at a time (engine.EvalBatch) over every slot that submitted a
// token to decode and the prefill chunks submitted, oldest first, as far
// as the pass's rows allow (the prefill chunk size): a chunk that does
// not fit whole gives the pass its first tokens and waits with the rest.
// So a long prompt delays the running streams' tokens by at most one
// chunk, and prompts that arrive together are prefilled together, their
// weights read once. A pass fires when every decoding slot has submitted,
// or a grace period after the later of the first submission and the end
// of the last pass.
type scheduler struct {
	slots []*slot
	grace time.Duration
	rows  int // the most rows a pass takes

	mu      sync.Mutex
	pending []*evalReq
	closed  bool
	lastEnd time.Time // when the last pass ended
	wake    chan struct{}
	stopped chan struct{}

	// The pass's scratch, used by the scheduler goroutine only.
	batch   []*evalReq
	engines []*engine.Session
	toks    [][]int

	lastBatch atomic.Int64   // decode rows of the last pass that had any
	steps     []atomic.Int64 // passes with decode rows, by their number (index)
	chunks    atomic.Int64   // prefill pieces evaluated
}

// newScheduler returns a running scheduler of slots whose passes take at
// most rows rows.
func newScheduler(slots []*slot, grace time.Duration, rows int) *scheduler {
	if grace <= 0 {
		grace = DefaultBatchGrace
	}
	sc := &scheduler{
		slots: slots, grace: grace, rows: max(rows, len(slots)+1),
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
	r.at, r.off = time.Now(), 0
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
		wait := sc.next(time.Now())
		if len(sc.batch) == 0 {
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
		sc.eval()
		sc.mu.Lock()
		sc.lastEnd = time.Now()
		sc.mu.Unlock()
	}
}

// next builds the next pass under sc.mu, moving its submissions into
// sc.batch; when it should not run yet it returns how long to wait (0:
// until a submission).
func (sc *scheduler) next(now time.Time) time.Duration {
	if len(sc.pending) == 0 {
		return 0
	}
	oldest := sc.pending[0].at
	for _, r := range sc.pending {
		if r.at.Before(oldest) {
			oldest = r.at
		}
	}
	// Slots that are decoding but have not submitted their next token.
	missing := 0
	for _, sl := range sc.slots {
		if sl.state.Load() == slotDecode && !sc.submitted(sl) {
			missing++
		}
	}
	// The grace runs from the oldest submission or from the end of the
	// last pass, whichever is later: the slots that pass served need a
	// moment to take its results and submit again. Timed from the
	// submission alone, a slot that submitted during a pass would run
	// alone right after it, and the batch would split into two passes
	// that alternate from then on.
	since := oldest
	if sc.lastEnd.After(since) {
		since = sc.lastEnd
	}
	if missing > 0 && now.Sub(since) < sc.grace {
		return max(time.Microsecond, sc.grace-now.Sub(since))
	}
	sc.take()
	return 0
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

// take moves into sc.batch every pending decode, then the pending
// prefill chunks in the order submitted while the pass has rows left;
// under sc.mu.
func (sc *scheduler) take() {
	rows := 0
	for _, r := range sc.pending {
		if r.decode {
			r.take = 1
			sc.batch = append(sc.batch, r)
			rows++
		}
	}
	for _, r := range sc.pending {
		if !r.decode && rows < sc.rows {
			r.take = min(len(r.tokens)-r.off, sc.rows-rows)
			sc.batch = append(sc.batch, r)
			rows += r.take
		}
	}
	rest := sc.pending[:0]
	for _, r := range sc.pending {
		if r.take == 0 {
			rest = append(rest, r)
		}
	}
	clear(sc.pending[len(rest):])
	sc.pending = rest
}

// eval runs the pass of sc.batch: one engine.EvalBatch when every
// session is an *engine.Session, else each slot's evaluation in turn.
// Slots whose context cannot take their tokens fail alone; an error of
// the batched pass fails every member. A chunk with tokens left goes
// back to the front of the pending list.
func (sc *scheduler) eval() {
	batch := sc.batch[:0]
	decodes := 0
	for _, r := range sc.batch {
		if pos := r.sl.sess.Pos(); pos+r.take > r.sl.sess.Context() {
			sc.finish(r, fmt.Errorf("%w: %d + %d tokens exceed %d", engine.ErrContextFull, pos, r.take, r.sl.sess.Context()))
			continue
		}
		if r.decode {
			decodes++
		} else {
			sc.chunks.Add(1)
		}
		batch = append(batch, r)
	}
	if decodes > 0 {
		sc.lastBatch.Store(int64(decodes))
		sc.steps[min(decodes, len(sc.steps)-1)].Add(1)
	}
	sc.engines, sc.toks = sc.engines[:0], sc.toks[:0]
	for _, r := range batch {
		e, ok := r.sl.sess.(*engine.Session)
		if !ok {
			break
		}
		sc.engines, sc.toks = append(sc.engines, e), append(sc.toks, r.piece())
	}
	if len(sc.engines) == len(batch) {
		err := engine.EvalBatch(sc.engines, sc.toks)
		for _, r := range batch {
			sc.finish(r, err)
		}
	} else {
		for _, r := range batch {
			var err error
			if r.decode {
				err = r.sl.sess.Decode(r.token)
			} else {
				err = r.sl.sess.Prefill(r.piece())
			}
			sc.finish(r, err)
		}
	}
	clear(sc.batch[:cap(sc.batch)])
	clear(sc.engines)
	clear(sc.toks)
	sc.batch = sc.batch[:0]
}

// finish ends r's part of a pass: it answers r, unless r is a chunk with
// tokens left, which goes back to the front of the pending list.
func (sc *scheduler) finish(r *evalReq, err error) {
	r.off += r.take
	r.take = 0
	if err != nil || r.decode || r.off == len(r.tokens) {
		r.done <- err
		return
	}
	sc.mu.Lock()
	sc.pending = append([]*evalReq{r}, sc.pending...)
	sc.mu.Unlock()
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
