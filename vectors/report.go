package vectors

import (
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"
)

// StepRow is one step of one case of an official run, as the run reports
// it: the official token, the local one and the acceptance rule's
// failures at the step. A case skipped, or failed before it produced a
// step, has one row of Step -1 whose Failures say why.
type StepRow struct {
	CaseID       string  `parquet:"case_id"`
	CaseStatus   string  `parquet:"case_status"` // CaseResult.Status
	Step         int64   `parquet:"step"`
	OfficialText string  `parquet:"official_text"` // invalid UTF-8 replaced; the hex is authoritative
	OfficialHex  string  `parquet:"official_hex"`
	LocalText    string  `parquet:"local_text"`
	LocalHex     string  `parquet:"local_hex"`
	LocalID      int64   `parquet:"local_id"` // -1 where unknown (an endpoint) or the step is missing
	LocalLogprob float64 `parquet:"local_logprob"`
	Match        bool    `parquet:"selected_match"`
	Failures     string  `parquet:"failures"` // the step's failures, "; "-separated; "" when it passed
}

// Ran reports whether the case ran far enough to report its steps: it was
// not skipped and did not fail before producing a step.
func (r *CaseResult) Ran() bool { return r.Skipped == "" && (r.Err == nil || len(r.Got) > 0) }

// StepRows returns the rows of the result r of case c: one per official
// step where the case ran, else one of Step -1.
func StepRows(c VecCase, r CaseResult) []StepRow {
	if !r.Ran() {
		why := r.Skipped
		if r.Err != nil {
			why = r.Err.Error()
		}
		return []StepRow{{CaseID: r.ID, CaseStatus: r.Status(), Step: -1, Failures: why}}
	}
	rows := make([]StepRow, len(c.Steps))
	for i, want := range c.Steps {
		row := StepRow{CaseID: r.ID, CaseStatus: r.Status(), Step: int64(i), OfficialText: validText(want.Selected),
			OfficialHex: hex.EncodeToString(want.Selected), LocalID: -1}
		if i < len(r.Got) {
			g := r.Got[i].Selected
			row.LocalText, row.LocalHex, row.LocalID, row.LocalLogprob = validText(g.Bytes), hex.EncodeToString(g.Bytes), int64(g.ID), g.Logprob
			row.Match = string(g.Bytes) == string(want.Selected)
		}
		var msgs []string
		for _, f := range r.Failures {
			if f.Step == i {
				msgs = append(msgs, f.Msg)
			}
		}
		row.Failures = strings.Join(msgs, "; ")
		rows[i] = row
	}
	return rows
}

// Tally counts the results that passed, failed (or erred) and were
// skipped.
func Tally(results []CaseResult) (passed, failed, skipped int) {
	for i := range results {
		switch results[i].Status() {
		case "ok":
			passed++
		case "skipped":
			skipped++
		default:
			failed++
		}
	}
	return passed, failed, skipped
}

// MissingCase returns the first of ids that names none of cases, or ""
// when each names one.
func MissingCase(cases []VecCase, ids []string) string {
	for _, id := range ids {
		if !slices.ContainsFunc(cases, func(c VecCase) bool { return c.ID == id }) {
			return id
		}
	}
	return ""
}

// validText returns token bytes as a string, with invalid UTF-8 replaced.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
