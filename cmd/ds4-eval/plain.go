package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/ds4-go/ds4/harness"
)

// ANSI styles of the plain output on a terminal.
const (
	ansiReset = "\x1b[0m"
	ansiDim   = "\x1b[90m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiCyan  = "\x1b[36m"
	ansiBold  = "\x1b[1m"
)

// plain streams the run as upstream's --plain mode does: a header per
// question, the generated text (thinking dimmed on a terminal) and a
// result line.
type plain struct {
	w        io.Writer
	color    bool
	thinking bool
}

func newPlain(w io.Writer) *plain {
	return &plain{w: w, color: isTerminal(w)}
}

// style returns s when writing to a terminal, else "".
func (p *plain) style(s string) string {
	if p.color {
		return s
	}
	return ""
}

// start prints the header "[i/n] source/domain title" of a case about to
// run.
func (p *plain) start(r *harness.EvalResult, n int, think bool) {
	c := r.Case
	fmt.Fprintf(p.w, "\n%s[%d/%d] %s%s%s/%s%s%s %s%s\n", p.style(ansiBold), r.Index+1, n,
		p.style(ansiCyan), c.Source, p.style(ansiReset), p.style(ansiCyan), c.Domain, p.style(ansiReset), c.Title, p.style(ansiReset))
	p.thinking = think
	if think {
		fmt.Fprint(p.w, p.style(ansiDim))
	}
}

// token prints one generated token; the dimming ends with the token that
// closes thinking.
func (p *plain) token(text []byte, thinking bool) {
	if p.thinking && !thinking {
		fmt.Fprint(p.w, p.style(ansiReset))
	}
	p.thinking = thinking
	p.w.Write(text)
}

// result prints the outcome line of a case: upstream's
// "PASSED|FAIL got X expected Y (Ns, N tokens)", or the skip line.
func (p *plain) result(r *harness.EvalResult, n, ctx int) {
	if r.Status == harness.StatusSkipped {
		fmt.Fprintf(p.w, "\n[%d/%d] SKIPPED %s prompt=%d ctx=%d\n", r.Index+1, n, r.Case.Name(), r.PromptTokens, ctx)
		return
	}
	if p.thinking {
		fmt.Fprint(p.w, p.style(ansiReset))
		p.thinking = false
	}
	if !strings.HasSuffix(r.Output, "\n") {
		fmt.Fprintln(p.w)
	}
	switch r.Status {
	case harness.StatusPassed:
		fmt.Fprintf(p.w, "%sPASSED%s got %s expected %s (%.1fs, %d tokens)\n", p.style(ansiGreen), p.style(ansiReset), r.Picked, r.Case.Answer, r.GenSec, r.Generated)
	case harness.StatusFailed:
		fmt.Fprintf(p.w, "%sFAIL%s got %s expected %s (%.1fs, %d tokens)\n", p.style(ansiRed), p.style(ansiReset), r.Picked, r.Case.Answer, r.GenSec, r.Generated)
	default:
		fmt.Fprintf(p.w, "%s (%.1fs, %d tokens)\n", r.Status, r.GenSec, r.Generated)
	}
}

// printSpeed prints the prefill and generation speeds over the cases run.
func printSpeed(w io.Writer, results []harness.EvalResult) {
	var prompt, gen int
	var prefillSec, genSec float64
	for _, r := range results {
		if r.PrefillSec > 0 {
			prompt += r.PromptTokens
			prefillSec += r.PrefillSec
		}
		gen += r.Generated
		genSec += r.GenSec
	}
	fmt.Fprintf(w, "ds4-eval: prefill: %.2f t/s (%d tokens), generation: %.2f t/s (%d tokens)\n",
		perSecond(prompt, prefillSec), prompt, perSecond(gen, genSec), gen)
}

func perSecond(n int, sec float64) float64 {
	if sec > 0 {
		return float64(n) / sec
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
