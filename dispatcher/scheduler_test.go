package dispatcher

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
	if got := PeriodicKey("digest", base.Add(6*time.Hour).In(time.FixedZone("X", 3600))); got != "schedule:digest:2026-11-23T18:00:00Z" {
		t.Errorf("PeriodicKey = %q", got)
	}
}

func TestNewSchedulerRefuses(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{}
	ok := Periodic{Name: "a", Spec: "@hourly", Task: tasks.NewTask{Category: "c", Title: "t"}}
	for _, c := range []struct {
		ps   []Periodic
		want string
	}{
		{nil, "no schedules"},
		{[]Periodic{ok, ok}, `"a" is used twice`},
		{[]Periodic{{Name: "b", Spec: "never", Task: ok.Task}}, `schedule 0 ("b"): schedule "never"`},
		{[]Periodic{{Name: strings.Repeat("n", MaxPeriodicNameLen+1), Spec: "@hourly", Task: ok.Task}}, "name must be 1..64"},
		{[]Periodic{{Spec: "@hourly", Task: ok.Task}}, "name is required"},
		{[]Periodic{{Name: "b", Spec: "@hourly", Task: tasks.NewTask{Category: "c"}}}, "title"},
	} {
		if _, err := NewScheduler(d, SchedulerConfig{Schedules: c.ps}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want it to say %q", c.ps, err, c.want)
		}
	}
}
