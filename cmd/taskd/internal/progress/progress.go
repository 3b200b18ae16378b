// Package progress reports the progress of a long operation on a terminal as a
// bar redrawn in place, and elsewhere (a log file, a pipe) as a plain line now
// and then.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Defaults.
const (
	// RedrawInterval is the least time between two redraws of the bar.
	RedrawInterval = 100 * time.Millisecond
	// LineInterval is the least time between two plain lines.
	LineInterval = 5 * time.Second
	// barWidth is the bar's width in characters.
	barWidth = 30
)

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Bar reports how many of total units are done. It is not safe for concurrent
// use.
type Bar struct {
	w     io.Writer
	tty   bool
	label string
	unit  string
	total int64
	done  int64
	start time.Time
	last  time.Time // last output
	lines int       // plain lines printed
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// New returns a Bar on w for total units (0 if unknown). label starts each
// report ("importing"), unit names the units ("tasks"). It draws a bar when w is
// a terminal, else it prints a line at most every LineInterval.
func New(w io.Writer, label, unit string, total int64) *Bar {
	return &Bar{w: w, tty: IsTerminal(w), label: label, unit: unit, total: total, Now: time.Now}
}

// Add counts n more units done and reports if it is time to.
func (b *Bar) Add(n int) {
	now := b.Now()
	if b.start.IsZero() {
		b.start, b.last = now, now
		if b.tty {
			b.draw(now)
		}
	}
	b.done += int64(n)
	switch {
	case b.tty && now.Sub(b.last) >= RedrawInterval:
		b.draw(now)
	case !b.tty && now.Sub(b.last) >= LineInterval:
		b.line(now)
	}
}

// Finish reports the final count: on a terminal it redraws the bar and ends
// its line; elsewhere it prints a last line if any was printed before (a short
// operation prints nothing). Call it once, also after a failure, so that the
// terminal's next line starts clean.
func (b *Bar) Finish() {
	now := b.Now()
	if b.start.IsZero() {
		b.start = now
	}
	switch {
	case b.tty:
		b.draw(now)
		fmt.Fprintln(b.w)
	case b.lines > 0:
		b.line(now)
	}
}

func (b *Bar) draw(now time.Time) {
	b.last = now
	var s strings.Builder
	s.WriteString("\r" + b.label + " ")
	if b.total > 0 {
		filled := int(min(b.done, b.total) * barWidth / b.total)
		s.WriteString("[" + strings.Repeat("=", filled))
		if filled < barWidth {
			s.WriteString(">" + strings.Repeat(" ", barWidth-filled-1))
		}
		fmt.Fprintf(&s, "] %3d%% ", b.done*100/b.total)
	}
	fmt.Fprintf(&s, "%s %s", b.count(), b.unit)
	if rate := b.rate(now); rate > 0 {
		fmt.Fprintf(&s, "  %.0f/s", rate)
	}
	s.WriteString("\x1b[K") // clear what a longer previous draw left
	_, _ = io.WriteString(b.w, s.String())
}

func (b *Bar) line(now time.Time) {
	b.last = now
	b.lines++
	pct := ""
	if b.total > 0 {
		pct = fmt.Sprintf(" (%d%%)", b.done*100/b.total)
	}
	fmt.Fprintf(b.w, "%s: %s %s%s, %s elapsed\n", b.label, b.count(), b.unit, pct, now.Sub(b.start).Round(time.Second))
}

func (b *Bar) count() string {
	if b.total > 0 {
		return fmt.Sprintf("%d/%d", b.done, b.total)
	}
	return fmt.Sprint(b.done)
}

func (b *Bar) rate(now time.Time) float64 {
	elapsed := now.Sub(b.start).Seconds()
	if elapsed < 0.5 {
		return 0
	}
	return float64(b.done) / elapsed
}
