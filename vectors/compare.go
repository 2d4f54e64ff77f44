package vectors

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CaseComparison is the comparison of one case of two saved runs: its
// summary and its positions.
type CaseComparison struct {
	ID      string
	Metrics Metrics
	Stats   []PositionStat
}

// IsDumps reports whether path names saved JSON dumps: a .json file or a
// directory.
func IsDumps(path string) bool {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return true
	}
	return strings.EqualFold(filepath.Ext(path), ".json")
}

// CompareDumps compares two saved runs (ReadDumps) case by case: two
// files with each other whatever their cases' ids, two directories on the
// cases both hold, in id order, each on the steps both have.
func CompareDumps(ref, run string) ([]CaseComparison, error) {
	a, err := ReadDumps(ref)
	if err != nil {
		return nil, err
	}
	b, err := ReadDumps(run)
	if err != nil {
		return nil, err
	}
	if len(a) == 1 && len(b) == 1 {
		for ka, da := range a {
			for _, db := range b {
				a, b = map[string]Dump{ka: da}, map[string]Dump{ka: db}
			}
		}
	}
	var ids []string
	for id := range a {
		if _, ok := b[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("compare: %s and %s have no case in common", ref, run)
	}
	sort.Strings(ids)
	var out []CaseComparison
	for _, id := range ids {
		sa, sb := a[id].StepList(), b[id].StepList()
		n := min(len(sa), len(sb))
		m, stats, err := CompareSteps(sa[:n], sb[:n])
		if err != nil {
			return nil, fmt.Errorf("compare %s: %w", id, err)
		}
		out = append(out, CaseComparison{ID: id, Metrics: m, Stats: stats})
	}
	return out, nil
}

// CompareLogitFiles compares two raw float32 logit files (ReadLogits) of
// vocab logits a row, as the one case id.
func CompareLogitFiles(ref, run string, vocab int, id string) ([]CaseComparison, error) {
	a, err := ReadLogits(ref, vocab)
	if err != nil {
		return nil, err
	}
	b, err := ReadLogits(run, vocab)
	if err != nil {
		return nil, err
	}
	m, stats, err := CompareTargets(a, b, vocab, nil)
	if err != nil {
		return nil, err
	}
	return []CaseComparison{{ID: id, Metrics: m, Stats: stats}}, nil
}

// SummarizeAll returns the metrics over every position of cmps.
func SummarizeAll(cmps []CaseComparison) Metrics {
	var all []PositionStat
	for _, c := range cmps {
		all = append(all, c.Stats...)
	}
	return Summarize(all)
}
