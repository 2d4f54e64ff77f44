package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSchedulerNext checks how the scheduler builds its next pass from
// the slots' states, the pending submissions and the clock: that it waits
// a grace after the last pass for the slots that pass served (so a slot
// which submitted during it does not run alone and split the batch),
// that prefill chunks join the decoding slots' pass, and that they fill
// the rows the decodes leave, oldest first, a chunk splitting where the
// rows end.
func TestSchedulerNext(t *testing.T) {
	const grace = 2 * time.Millisecond
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ms := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Millisecond))) }
	type sub struct {
		slot   int
		tokens int // a prefill chunk's tokens; 0 for a decode
		at     time.Time
	}
	type part struct{ slot, take int }
	for _, c := range []struct {
		name    string
		states  []int32 // slot states
		pending []sub
		lastEnd time.Time
		now     time.Time
		batch   []part
		left    []int // slots still pending after, in order
		wait    time.Duration
	}{
		{name: "a slot that submitted during the last pass waits for the others",
			states: []int32{slotDecode, slotDecode, slotDecode}, pending: []sub{{0, 0, ms(10)}},
			lastEnd: ms(60), now: ms(60.5), left: []int{0}, wait: 1500 * time.Microsecond},
		{name: "until a grace after the pass",
			states: []int32{slotDecode, slotDecode, slotDecode}, pending: []sub{{0, 0, ms(10)}},
			lastEnd: ms(60), now: ms(62), batch: []part{{0, 1}}},
		{name: "or until every decoding slot submitted",
			states: []int32{slotDecode, slotDecode, slotIdle}, pending: []sub{{1, 0, ms(60.2)}, {0, 0, ms(10)}},
			lastEnd: ms(60), now: ms(60.3), batch: []part{{1, 1}, {0, 1}}},
		{name: "a late submission waits its own grace",
			states: []int32{slotDecode, slotDecode}, pending: []sub{{0, 0, ms(70)}},
			lastEnd: ms(60), now: ms(71), left: []int{0}, wait: time.Millisecond},
		{name: "a prefill chunk joins the decodes",
			states: []int32{slotDecode, slotPrefill}, pending: []sub{{1, 10, ms(20)}, {0, 0, ms(59)}},
			lastEnd: ms(60), now: ms(60.1), batch: []part{{0, 1}, {1, 10}}},
		{name: "chunks fill the rows the decodes leave, the last one split",
			states: []int32{slotDecode, slotPrefill, slotPrefill, slotPrefill}, pending: []sub{{1, 5, ms(20)}, {2, 20, ms(30)}, {0, 0, ms(59)}, {3, 4, ms(59.5)}},
			lastEnd: ms(60), now: ms(60.1), batch: []part{{0, 1}, {1, 5}, {2, 10}}, left: []int{3}},
		{name: "a prefill chunk waits a grace for decoding slots",
			states: []int32{slotDecode, slotPrefill}, pending: []sub{{1, 8, ms(20)}},
			lastEnd: ms(60), now: ms(60.5), left: []int{1}, wait: 1500 * time.Microsecond},
		{name: "a prefill chunk runs at once with no slot decoding",
			states: []int32{slotIdle, slotPrefill}, pending: []sub{{1, 8, ms(60.2)}},
			lastEnd: ms(60), now: ms(60.3), batch: []part{{1, 8}}},
		{name: "nothing pending",
			states: []int32{slotIdle}, lastEnd: ms(60), now: ms(90)},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &scheduler{grace: grace, rows: 16, lastEnd: c.lastEnd}
			for i, st := range c.states {
				sl := &slot{id: i}
				sl.state.Store(st)
				sc.slots = append(sc.slots, sl)
			}
			for _, p := range c.pending {
				r := &evalReq{sl: sc.slots[p.slot], decode: p.tokens == 0, at: p.at}
				if p.tokens > 0 {
					r.tokens = make([]int, p.tokens)
				}
				sc.pending = append(sc.pending, r)
			}
			require.Equal(t, c.wait, sc.next(c.now))
			var batch []part
			for _, r := range sc.batch {
				batch = append(batch, part{r.sl.id, r.take})
			}
			require.Equal(t, c.batch, batch)
			var left []int
			for _, r := range sc.pending {
				left = append(left, r.sl.id)
			}
			require.Equal(t, c.left, left)
		})
	}
}
