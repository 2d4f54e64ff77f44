package vectors

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
)

// The acceptance rule of upstream's logprob-vector runner.
const (
	// AcceptTopK is how many local alternatives are searched for each
	// official top token.
	AcceptTopK = 20
	// AcceptTolerance is the largest |local − official| log-probability
	// difference accepted, in nats.
	AcceptTolerance = 4.0
)

// TopToken is a candidate token with its log-probability; ID is -1 when
// the source only knows the bytes (an HTTP endpoint).
type TopToken struct {
	ID      int
	Bytes   []byte
	Logprob float64
}

// Step is what a source produced at one greedy decoding step: the chosen
// token and its most probable alternatives, most probable first.
type Step struct {
	Selected TopToken
	Top      []TopToken
}

// Source runs a case's prompt greedily: thinking off, empty system text,
// the case's context size, steps tokens, k alternatives per step.
type Source interface {
	Continue(ctx context.Context, c VecCase, prompt string, steps, k int) ([]Step, error)
}

// Failure is one violation of the acceptance rule.
type Failure struct {
	Step int
	Msg  string
}

func (f Failure) String() string { return fmt.Sprintf("step %d: %s", f.Step, f.Msg) }

// CheckStep applies the acceptance rule to one step: the selected token's
// bytes must equal the official ones, and every official top token must
// be among the first AcceptTopK local alternatives with a log-probability
// within tol nats.
func CheckStep(i int, want VecStep, got Step, tol float64) []Failure {
	var fs []Failure
	if !bytes.Equal(got.Selected.Bytes, want.Selected) {
		fs = append(fs, Failure{i, fmt.Sprintf("selected token mismatch: local %q, official %q", got.Selected.Bytes, want.Selected)})
	}
	top := got.Top[:min(len(got.Top), AcceptTopK)]
	for _, t := range want.Top {
		j := indexBytes(top, t.Bytes)
		switch {
		case j < 0:
			fs = append(fs, Failure{i, fmt.Sprintf("official top token %q missing locally", t.Bytes)})
		case !(math.Abs(top[j].Logprob-t.Logprob) <= tol):
			fs = append(fs, Failure{i, fmt.Sprintf("logprob delta too high for %q: local=%g official=%g", t.Bytes, top[j].Logprob, t.Logprob)})
		}
	}
	return fs
}

func indexBytes(top []TopToken, b []byte) int {
	for j, t := range top {
		if bytes.Equal(t.Bytes, b) {
			return j
		}
	}
	return -1
}

// CaseResult is the outcome of one vector case.
type CaseResult struct {
	ID       string
	Skipped  string // the reason, when the case was not run
	Err      error  // a runtime failure (the steps were not all produced)
	Failures []Failure
	Got      []Step
}

// Passed reports whether the case ran and met the acceptance rule.
func (r *CaseResult) Passed() bool { return r.Skipped == "" && r.Err == nil && len(r.Failures) == 0 }

// Status returns "ok", "FAIL", "ERROR" or "skipped".
func (r *CaseResult) Status() string {
	switch {
	case r.Skipped != "":
		return "skipped"
	case r.Err != nil:
		return "ERROR"
	case len(r.Failures) > 0:
		return "FAIL"
	}
	return "ok"
}

// CheckCase applies the acceptance rule to every step of c.
func CheckCase(c VecCase, got []Step, tol float64) CaseResult {
	r := CaseResult{ID: c.ID, Got: got}
	for i, want := range c.Steps {
		if i >= len(got) {
			r.Failures = append(r.Failures, Failure{i, "step missing locally (generation stopped)"})
			continue
		}
		r.Failures = append(r.Failures, CheckStep(i, want, got[i], tol)...)
	}
	return r
}

// SkipReason returns why upstream skips a case, or "".
func SkipReason(id string) string {
	if id == "long_memory_archive" {
		return "API/official graph mismatch (upstream skips it)"
	}
	return ""
}

// RunOptions configure RunCases.
type RunOptions struct {
	// Dir is the fixture's directory, used to resolve prompt paths.
	Dir string
	// Tolerance is the accepted log-probability difference; 0 means
	// AcceptTolerance.
	Tolerance float64
	// All runs the cases upstream skips.
	All bool
	// Only, when non-empty, selects cases by id.
	Only []string
	// Progress, when set, is called before each case.
	Progress func(c VecCase)
}

// RunCases runs every case of a fixture through src and applies the
// acceptance rule; a failure in one case does not stop the others.
func RunCases(ctx context.Context, src Source, cases []VecCase, opt RunOptions) []CaseResult {
	tol := opt.Tolerance
	if tol == 0 {
		tol = AcceptTolerance
	}
	var out []CaseResult
	for _, c := range cases {
		if len(opt.Only) > 0 && !slices.Contains(opt.Only, c.ID) {
			continue
		}
		if why := SkipReason(c.ID); why != "" && !opt.All {
			out = append(out, CaseResult{ID: c.ID, Skipped: why})
			continue
		}
		if opt.Progress != nil {
			opt.Progress(c)
		}
		prompt, err := readPrompt(opt.Dir, c.PromptPath)
		if err != nil {
			out = append(out, CaseResult{ID: c.ID, Err: err})
			continue
		}
		got, err := src.Continue(ctx, c, prompt, len(c.Steps), AcceptTopK)
		r := CheckCase(c, got, tol)
		r.Err = err
		out = append(out, r)
	}
	return out
}

func readPrompt(dir, p string) (string, error) {
	path, err := ResolvePrompt(dir, p)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("vectors: %w", err)
	}
	return string(b), nil
}

// CompareSteps computes Metrics between a reference's steps and a run's,
// position by position, from their top-k lists matched by token bytes.
// KL is approximated over the reference's listed tokens plus one bucket
// for the unlisted mass; a token the run does not list gets an equal share
// of the run's unlisted mass, capped at its smallest listed probability.
// The target is the reference's selected token. It is exact when both
// lists hold (nearly) all the probability mass.
func CompareSteps(ref, run []Step) (Metrics, []PositionStat, error) {
	if len(ref) != len(run) {
		return Metrics{}, nil, fmt.Errorf("vectors: compare %d steps against %d", len(run), len(ref))
	}
	stats := make([]PositionStat, len(ref))
	for i := range ref {
		r, g := ref[i], run[i]
		rt, gt := first(r), first(g)
		st := PositionStat{Position: i, RefTop: rt.ID, RunTop: gt.ID, SameTop1: bytes.Equal(rt.Bytes, gt.Bytes)}
		st.Target = r.Selected.ID
		pRef := logprobOf(r, r.Selected.Bytes)
		pRun := logprobOf(g, r.Selected.Bytes)
		st.NLLRef, st.NLLRun = -pRef, -pRun
		st.DeltaP = math.Exp(pRun) - math.Exp(pRef)
		st.KL = sparseKL(r, g)
		stats[i] = st
	}
	return Summarize(stats), stats, nil
}

// first returns a step's most probable token.
func first(s Step) TopToken {
	if len(s.Top) > 0 {
		return s.Top[0]
	}
	return s.Selected
}

// logprobOf returns the log-probability a step gives to a token: from its
// list, else the selected token's, else half the unlisted mass (the other
// half for the rest), capped as unlistedShare says.
func logprobOf(s Step, b []byte) float64 {
	if j := indexBytes(s.Top, b); j >= 0 {
		return s.Top[j].Logprob
	}
	if bytes.Equal(s.Selected.Bytes, b) && len(s.Top) == 0 {
		return s.Selected.Logprob
	}
	return math.Log(unlistedShare(s, 2))
}

// unlistedShare is the probability given to each of n tokens a step does
// not list: an equal share of the unlisted mass, at most the smallest
// listed probability, at least 1e-10.
func unlistedShare(s Step, n int) float64 {
	rest, low := 1.0, 1.0
	for _, t := range s.Top {
		p := math.Exp(t.Logprob)
		rest -= p
		low = min(low, p)
	}
	return max(min(max(rest, 0)/float64(n), low), 1e-10)
}

func sparseKL(r, g Step) float64 {
	top := r.Top
	if len(top) == 0 {
		top = []TopToken{r.Selected}
	}
	missing := 0
	for _, t := range top {
		if indexBytes(g.Top, t.Bytes) < 0 {
			missing++
		}
	}
	share := unlistedShare(g, missing+1)
	var kl, pSum, qSum float64
	for _, t := range top {
		p := math.Exp(t.Logprob)
		q := share
		if j := indexBytes(g.Top, t.Bytes); j >= 0 {
			q = math.Exp(g.Top[j].Logprob)
		}
		pSum += p
		qSum += q
		if p > 0 {
			kl += p * (t.Logprob - math.Log(q))
		}
	}
	if pRest := 1 - pSum; pRest > 1e-9 {
		kl += pRest * (math.Log(pRest) - math.Log(max(1-qSum, 1e-10)))
	}
	return max(kl, 0)
}
