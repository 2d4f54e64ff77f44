package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSchedulerNext checks the scheduler's choice of the next evaluation
// against the slots' states, the pending submissions and the clock: in
// particular that a slot which submitted during the last step waits a
// grace after it for the slots that step served, so the batch stays
// whole.
func TestSchedulerNext(t *testing.T) {
	const grace = 2 * time.Millisecond
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ms := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Millisecond))) }
	type sub struct {
		slot   int
		decode bool
		at     time.Time
	}
	for _, c := range []struct {
		name        string
		states      []int32 // slot states
		pending     []sub
		lastEnd     time.Time
		lastPrefill bool
		now         time.Time
		batch       []int // slots of the decode step it fires, if any
		prefill     int   // slot of the prefill chunk it runs, or -1
		wait        time.Duration
	}{
		{name: "a slot that submitted during the last step waits for the others",
			states: []int32{slotDecode, slotDecode, slotDecode}, pending: []sub{{0, true, ms(10)}},
			lastEnd: ms(60), now: ms(60.5), prefill: -1, wait: 1500 * time.Microsecond},
		{name: "until a grace after the step",
			states: []int32{slotDecode, slotDecode, slotDecode}, pending: []sub{{0, true, ms(10)}},
			lastEnd: ms(60), now: ms(62), batch: []int{0}, prefill: -1},
		{name: "or until every decoding slot submitted",
			states: []int32{slotDecode, slotDecode, slotIdle}, pending: []sub{{1, true, ms(60.2)}, {0, true, ms(10)}},
			lastEnd: ms(60), now: ms(60.3), batch: []int{1, 0}, prefill: -1},
		{name: "a late submission waits its own grace",
			states: []int32{slotDecode, slotDecode}, pending: []sub{{0, true, ms(70)}},
			lastEnd: ms(60), now: ms(71), prefill: -1, wait: time.Millisecond},
		{name: "a prefill chunk goes first after a decode step",
			states: []int32{slotDecode, slotPrefill}, pending: []sub{{0, true, ms(59)}, {1, false, ms(20)}},
			lastEnd: ms(60), now: ms(60.1), prefill: 1},
		{name: "a decode step goes first after a prefill chunk",
			states: []int32{slotDecode, slotPrefill}, pending: []sub{{0, true, ms(59)}, {1, false, ms(20)}},
			lastEnd: ms(60), lastPrefill: true, now: ms(60.1), batch: []int{0}, prefill: -1},
		{name: "a prefill chunk waits a grace for decoding slots",
			states: []int32{slotDecode, slotPrefill}, pending: []sub{{1, false, ms(20)}},
			lastEnd: ms(60), lastPrefill: true, now: ms(60.5), prefill: -1, wait: 1500 * time.Microsecond},
		{name: "nothing pending",
			states: []int32{slotIdle}, lastEnd: ms(60), now: ms(90), prefill: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &scheduler{grace: grace, lastEnd: c.lastEnd, lastPrefill: c.lastPrefill}
			for i, st := range c.states {
				sl := &slot{id: i}
				sl.state.Store(st)
				sc.slots = append(sc.slots, sl)
			}
			for _, p := range c.pending {
				sc.pending = append(sc.pending, &evalReq{sl: sc.slots[p.slot], decode: p.decode, at: p.at})
			}
			prefill, wait := sc.next(c.now)
			require.Equal(t, c.wait, wait)
			if c.prefill < 0 {
				require.Nil(t, prefill)
			} else {
				require.NotNil(t, prefill)
				require.Equal(t, c.prefill, prefill.sl.id)
			}
			var batch []int
			for _, r := range sc.batch {
				batch = append(batch, r.sl.id)
			}
			require.Equal(t, c.batch, batch)
		})
	}
}
