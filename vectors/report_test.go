package vectors

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStepRows checks the rows of each kind of case result: skipped,
// failed before a step, passed, failed at a step, stopped early, and a
// token of invalid UTF-8.
func TestStepRows(t *testing.T) {
	c := VecCase{ID: "c", Steps: []VecStep{{Selected: []byte("Ada")}, {Selected: []byte(" L")}}}
	tok := func(b string, id int, lp float64) Step {
		return Step{Selected: TopToken{ID: id, Bytes: []byte(b), Logprob: lp}}
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		c    VecCase
		r    CaseResult
		want []StepRow
	}{
		{"skipped", c, CaseResult{ID: "c", Skipped: "upstream skips it"},
			[]StepRow{{CaseID: "c", CaseStatus: "skipped", Step: -1, Failures: "upstream skips it"}}},
		{"error before a step", c, CaseResult{ID: "c", Err: boom},
			[]StepRow{{CaseID: "c", CaseStatus: "ERROR", Step: -1, Failures: "boom"}}},
		{"passed", c, CaseResult{ID: "c", Got: []Step{tok("Ada", 7, -0.25), tok(" L", 8, -1)}}, []StepRow{
			{CaseID: "c", CaseStatus: "ok", Step: 0, OfficialText: "Ada", OfficialHex: "416461", LocalText: "Ada", LocalHex: "416461", LocalID: 7, LocalLogprob: -0.25, Match: true},
			{CaseID: "c", CaseStatus: "ok", Step: 1, OfficialText: " L", OfficialHex: "204c", LocalText: " L", LocalHex: "204c", LocalID: 8, LocalLogprob: -1, Match: true},
		}},
		{"failed at a step", c, CaseResult{ID: "c", Got: []Step{tok("Ada", 7, -0.25), tok("x", -1, -2)},
			Failures: []Failure{{1, "selected token mismatch"}, {1, "delta 5"}}}, []StepRow{
			{CaseID: "c", CaseStatus: "FAIL", Step: 0, OfficialText: "Ada", OfficialHex: "416461", LocalText: "Ada", LocalHex: "416461", LocalID: 7, LocalLogprob: -0.25, Match: true},
			{CaseID: "c", CaseStatus: "FAIL", Step: 1, OfficialText: " L", OfficialHex: "204c", LocalText: "x", LocalHex: "78", LocalID: -1, LocalLogprob: -2,
				Failures: "selected token mismatch; delta 5"},
		}},
		{"stopped early with an error", c, CaseResult{ID: "c", Err: boom, Got: []Step{tok("Ada", 7, -0.25)}, Failures: []Failure{{1, "step missing"}}}, []StepRow{
			{CaseID: "c", CaseStatus: "ERROR", Step: 0, OfficialText: "Ada", OfficialHex: "416461", LocalText: "Ada", LocalHex: "416461", LocalID: 7, LocalLogprob: -0.25, Match: true},
			{CaseID: "c", CaseStatus: "ERROR", Step: 1, OfficialText: " L", OfficialHex: "204c", LocalID: -1, Failures: "step missing"},
		}},
		{"invalid UTF-8", VecCase{ID: "u", Steps: []VecStep{{Selected: []byte{0xe2, 0x82}}}}, CaseResult{ID: "u", Got: []Step{tok("\xe2\x82", 3, -0.5)}}, []StepRow{
			{CaseID: "u", CaseStatus: "ok", Step: 0, OfficialText: "\uFFFD", OfficialHex: "e282", LocalText: "\uFFFD", LocalHex: "e282", LocalID: 3, LocalLogprob: -0.5, Match: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, StepRows(tc.c, tc.r))
		})
	}
}

func TestTally(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		res                     []CaseResult
		passed, failed, skipped int
	}{
		{"none", nil, 0, 0, 0},
		{"each kind", []CaseResult{{ID: "a"}, {ID: "b", Skipped: "why"}, {ID: "c", Err: errors.New("x")}, {ID: "d", Failures: []Failure{{0, "m"}}}, {ID: "e"}}, 2, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f, s := Tally(tc.res)
			require.Equal(t, []int{tc.passed, tc.failed, tc.skipped}, []int{p, f, s})
		})
	}
}

func TestMissingCase(t *testing.T) {
	cases := []VecCase{{ID: "a"}, {ID: "b"}}
	for _, tc := range []struct {
		name string
		ids  []string
		want string
	}{
		{"none asked", nil, ""},
		{"all known", []string{"b", "a"}, ""},
		{"the first unknown", []string{"a", "x", "y"}, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, MissingCase(cases, tc.ids))
		})
	}
}
