package bench

import (
	"strings"
	"testing"
	"time"
)

func TestScenarioMonth(t *testing.T) {
	t.Parallel()
	runs, ok := scenario("all", Preset{Rounds: 1})
	if !ok {
		t.Fatal("no preset all")
	}
	var k *run
	for i := range runs {
		if runs[i].name == "k-month" {
			k = &runs[i]
		}
		if runs[i].name == "k-month-long" {
			t.Error("all runs the long form of (k)")
		}
	}
	if k == nil {
		t.Fatal("all does not run k-month")
	}
	if k.workload.Duration > 90*time.Second || k.workload.Duration < 10*k.workload.Retention/2 {
		t.Errorf("k-month runs %s with a retention of %s: want at most 90s and 5 turnovers or more", k.workload.Duration, k.workload.Retention)
	}
	if err := k.workload.WithDefaults().validate(); err != nil {
		t.Errorf("k-month: %v", err)
	}
	alias, _ := scenario("k", Preset{})
	if len(alias) != 1 || alias[0].name != "k-month" {
		t.Errorf("-scenario k runs %v, want k-month", alias)
	}
	long, _ := scenario("month-long", Preset{})
	if len(long) != 1 || long[0].workload.MinTasks < 5_000_000 || long[0].workload.Retention < time.Minute {
		t.Errorf("month-long runs %+v, want 5 million tasks or more with a retention of minutes", long)
	}
}

func TestIsPurge(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"DELETE FROM task_events WHERE task_id IN (7, 17,":       true,
		"DELETE FROM tasks WHERE id IN (1, 2)":                   true,
		"SELECT id FROM tasks FORCE INDEX (PRIMARY) WHERE id IN": true,
		"UPDATE tasks FORCE INDEX (PRIMARY) SET run_after =":     false,
		"INSERT INTO task_results (task_id, fence,":              false,
	} {
		if got := isPurge(q); got != want {
			t.Errorf("isPurge(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestInWindow(t *testing.T) {
	t.Parallel()
	ws := [][2]time.Duration{{10, 20}, {30, 40}}
	for at, want := range map[time.Duration]bool{5: false, 10: true, 19: true, 20: false, 25: false, 35: true, 40: false, 50: false} {
		if got := inWindow(ws, at); got != want {
			t.Errorf("inWindow(%d) = %v, want %v", at, got, want)
		}
	}
	if !overlaps(ws, 15, 25) || overlaps(ws, 20, 30) || !overlaps(ws, 0, 100) {
		t.Error("overlaps is wrong")
	}
}

func TestTargetsMonth(t *testing.T) {
	t.Parallel()
	r := result("k-month-long", 0, StrategyTaskd, 0, 0, 0, 0)
	r.Workload.MinTasks = 5_000_000
	r.Errors, r.FirstError = 1, "Error 1205: Lock wait timeout exceeded"
	r.Month = &MonthStats{
		Middle:          []TableFigure{{Name: "tasks", Bytes: 100 << 20}, {Name: "task_events", Bytes: 50 << 20}},
		End:             []TableFigure{{Name: "tasks", Bytes: 110 << 20}, {Name: "task_events", Bytes: 70 << 20}},
		FirstTenth:      Latency{Count: 10, P99Ms: 10},
		LastTenth:       Latency{Count: 10, P99Ms: 11},
		DuringPurge:     Latency{Count: 10, P99Ms: 20},
		Outside:         Latency{Count: 10, P99Ms: 10},
		ClaimErrors:     1,
		OtherWaitsPurge: 2,
		Pushed:          4_000_000,
	}
	var lines []string
	for _, tg := range targets([]Result{r}) {
		lines = append(lines, tg.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"target (k) k-month-long: tasks bytes, end / middle: 1.10x, want <= 1.2x: MET",
		"target (k) k-month-long: task_events bytes, end / middle: 1.40x, want <= 1.2x: NOT MET",
		"target (k) k-month-long: claim p99, last tenth / first tenth: 1.10x, want <= 1.2x: MET",
		"target (k) k-month-long: claim p99 during a purge batch / outside: 2.00x, want <= 1.5x: NOT MET",
		"target (k) k-month-long: claim errors (lock wait timeouts, deadlocks, any other): 1.00, want <= 0: NOT MET (the first: Error 1205",
		"target (k) k-month-long: claim-path transactions seen waiting for a lock inside a purge batch (INNODB_TRX, every 250 ms): 2.00, want <= 0: NOT MET",
		"target (k) k-month-long: tasks pushed: 4000000.00, want >= 5e+06: NOT MET",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets lack %q:\n%s", want, got)
		}
	}
}
