// Package progress reports the progress of long work: a redrawn bar on a
// terminal, periodic log lines otherwise.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Bar tracks progress towards a total and reports it to a writer.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	unit     string
	total    int64
	done     int64
	tty      bool
	start    time.Time
	last     time.Time
	interval time.Duration
}

// New returns a bar reporting to w; it redraws in place when w is a
// terminal and logs a line every 5 seconds otherwise. unit "B" formats
// counts as bytes.
func New(w io.Writer, label string, total int64, unit string) *Bar {
	now := time.Now()
	b := &Bar{w: w, label: label, unit: unit, total: total, start: now, last: now, interval: 5 * time.Second}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.tty = true
		b.interval = 100 * time.Millisecond
	}
	return b
}

// Add records n more units of work done.
func (b *Bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if now := time.Now(); now.Sub(b.last) >= b.interval {
		b.last = now
		b.draw(false)
	}
}

// Finish reports the final state and ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw(true)
}

func (b *Bar) draw(final bool) {
	elapsed := time.Since(b.start).Seconds()
	frac := 1.0
	if b.total > 0 {
		frac = float64(b.done) / float64(b.total)
	}
	rate := ""
	if elapsed > 0 {
		rate = fmt.Sprintf(" %s/s", b.format(int64(float64(b.done)/elapsed)))
	}
	msg := fmt.Sprintf("%s %5.1f%% %s/%s%s %.1fs", b.label, 100*frac, b.format(b.done), b.format(b.total), rate, elapsed)
	if b.tty {
		const width = 30
		n := min(width, int(frac*width))
		fmt.Fprintf(b.w, "\r%s [%s%s]", msg, strings.Repeat("=", n), strings.Repeat(" ", width-n))
		if final {
			fmt.Fprintln(b.w)
		}
		return
	}
	fmt.Fprintln(b.w, msg)
}

func (b *Bar) format(n int64) string {
	if b.unit != "B" {
		return fmt.Sprintf("%d%s", n, b.unit)
	}
	const mib = 1 << 20
	if n >= 1<<30 {
		return fmt.Sprintf("%.2fGiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/mib)
}
