package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// TestEpochAligned: @every ticks fall on multiples of the delay since the Unix
// epoch, whenever the process started, so replicas agree on them.
func TestEpochAligned(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		delay    time.Duration
		now, out time.Time
	}{
		{10 * time.Second, base.Add(3500 * time.Millisecond), base.Add(10 * time.Second)},
		{10 * time.Second, base.Add(10 * time.Second), base.Add(20 * time.Second)},
		{time.Second, base.Add(999 * time.Millisecond), base.Add(time.Second)},
		{time.Hour, base.Add(59 * time.Minute), base.Add(time.Hour)},
		{7 * time.Second, time.Unix(100, 0).UTC(), time.Unix(105, 0).UTC()},
	} {
		if got := (epochAligned{c.delay}).Next(c.now); !got.Equal(c.out) {
			t.Errorf("every %v from %v: next %v, want %v", c.delay, c.now, got, c.out)
		}
	}
	if got := Key("digest", base.Add(6*time.Hour).In(time.FixedZone("X", 3600))); got != "schedule:digest:2026-11-23T18:00:00Z" {
		t.Errorf("Key = %q", got)
	}
}

func TestNewSchedulerRefuses(t *testing.T) {
	t.Parallel()
	var d Adder
	ok := Periodic{Name: "a", Spec: "@hourly", Task: tasks.NewTask{Category: "c", Title: "t"}}
	for _, c := range []struct {
		ps   []Periodic
		want string
	}{
		{nil, "no schedules"},
		{[]Periodic{{Name: "b", Spec: "never", Task: ok.Task}}, `schedule 0 ("b"): schedule "never"`},
		{[]Periodic{{Name: strings.Repeat("n", MaxNameLen+1), Spec: "@hourly", Task: ok.Task}}, "name must be 1..64"},
		{[]Periodic{{Spec: "@hourly", Task: ok.Task}}, "name is required"},
		{[]Periodic{{Name: "b", Spec: "@hourly", Task: tasks.NewTask{Category: "c"}}}, "title"},
	} {
		if _, err := New(d, Config{Schedules: c.ps}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want it to say %q", c.ps, err, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec   string
		period time.Duration
	}{
		{"10s", 10 * time.Second},
		{" 1m30s ", 90 * time.Second},
		{"1s", time.Second},
		{"@every 10s", 10 * time.Second},
		{"@every 2h", 2 * time.Hour},
		{"@hourly", time.Hour},
		{"CRON_TZ=UTC @daily", 24 * time.Hour},
		{"*/15 * * * * *", 15 * time.Second},              // with seconds
		{"0 */5 * * * *", 5 * time.Minute},                // with seconds
		{"*/10 * * * *", 10 * time.Minute},                // without
		{"0,10 * * * * *", 50 * time.Second},              // the longest gap
		{"CRON_TZ=UTC 0 0 9 * * MON-FRI", 72 * time.Hour}, // Friday to Monday
	} {
		s, err := Parse(c.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.spec, err)
			continue
		}
		if s.Period() != c.period {
			t.Errorf("Parse(%q).Period() = %v, want %v", c.spec, s.Period(), c.period)
		}
		if s.String() != strings.TrimSpace(c.spec) {
			t.Errorf("Parse(%q).String() = %q", c.spec, s.String())
		}
	}
	for _, c := range []struct{ spec, want string }{
		{"", "must be set"},
		{"500ms", "whole number of seconds, at least 1s"},
		{"@every 1500ms", "whole number of seconds"},
		{"@every 0s", "at least 1s"},
		{"-10s", "at least 1s"},
		{"@every", "cron expression"},
		{"@every often", "@every needs a duration"},
		{"@sometimes", "cron expression"},
		{"every ten seconds", `schedule "every ten seconds"`},
		{"* * * * * * *", "cron expression"},
		{"61 * * * * *", "cron expression"},
		{"0 0 0 30 2 *", "never runs"}, // 30 February
	} {
		_, err := Parse(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error mentioning %q", c.spec, err, c.want)
		}
	}
}
