package schedule

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron is when something runs: a cron schedule (robfig/cron) and the text
// it was parsed from. The zero value is not usable; Parse makes one.
type Cron struct {
	spec     string
	cron     cron.Schedule
	min, max time.Duration // the shortest and longest gap between two runs
}

// specParser reads cron's standard expressions with an optional seconds
// field, and its descriptors (@every, @hourly, @daily, ...).
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// scheduleSample is how many activations Parse looks at to find the gaps
// between runs of a cron expression.
const scheduleSample = 500

// Parse parses when something runs:
//
//   - a Go duration, "10s" or "1m30s", short for "@every 10s";
//   - a descriptor: "@every 10s", "@hourly", "@daily", "@weekly", ...;
//   - a cron expression, five fields (minute hour day-of-month month
//     day-of-week) or six with seconds first: "0 */5 * * * *" is every five
//     minutes, "*/20 * * * * *" every 20 seconds; an optional "CRON_TZ=Zone "
//     prefix sets the time zone (the default is the local one).
//
// Cron counts in whole seconds, so durations (plain or after @every) must be
// whole seconds, at least 1s; a schedule that never fires is refused too.
// The error says what is wrong and quotes spec.
func Parse(spec string) (Cron, error) {
	text := strings.TrimSpace(spec)
	if text == "" {
		return Cron{}, errors.New("schedule must be set, e.g. \"10s\" or \"@every 10s\"")
	}
	if _, err := time.ParseDuration(text); err == nil {
		text = "@every " + text
	}
	if rest, ok := strings.CutPrefix(text, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Cron{}, fmt.Errorf("schedule %q: @every needs a duration such as 10s or 1m30s", spec)
		}
		if d < time.Second || d%time.Second != 0 {
			return Cron{}, fmt.Errorf("schedule %q: must be a whole number of seconds, at least 1s (cron's resolution)", spec)
		}
	}
	sched, err := specParser.Parse(text)
	if err != nil {
		return Cron{}, fmt.Errorf("schedule %q: want a duration, @every, a descriptor or a cron expression: %w", spec, err)
	}
	s := Cron{spec: strings.TrimSpace(spec), cron: sched}
	if c, ok := sched.(cron.ConstantDelaySchedule); ok {
		s.min, s.max = c.Delay, c.Delay
		return s, nil
	}
	// The gaps of a cron expression vary (weekdays, month lengths): look at
	// a sample of activations from now.
	t := sched.Next(time.Now())
	for range scheduleSample {
		next := sched.Next(t)
		if next.IsZero() {
			break
		}
		gap := next.Sub(t)
		if s.min == 0 || gap < s.min {
			s.min = gap
		}
		s.max = max(s.max, gap)
		t = next
	}
	if s.min == 0 {
		return Cron{}, fmt.Errorf("schedule %q: never runs twice", spec)
	}
	return s, nil
}

// String returns the spec the schedule was parsed from.
func (s Cron) String() string { return s.spec }

// Period is the longest time between two runs. For a duration or @every it
// is that duration; for a cron expression, the longest gap between two
// activations in a sample of the next few hundred.
func (s Cron) Period() time.Duration { return s.max }

// MinGap is the shortest time between two runs, found as Period is.
func (s Cron) MinGap() time.Duration { return s.min }

// Next returns the first activation after t (cron.Schedule's method).
func (s Cron) Next(t time.Time) time.Time { return s.cron.Next(t) }

// CronLogger passes robfig/cron's logs to log: its routine messages (every
// tick, skipped runs) at debug level, prefixed with the service's name.
func CronLogger(log *slog.Logger, name string) cron.Logger { return cronLogger{log, name} }

type cronLogger struct {
	log  *slog.Logger
	name string // the service, "sweeper" or "scheduler"
}

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug(l.name+" cron: "+msg, kv...) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error(l.name+" cron: "+msg, append(kv, "err", err)...)
}
