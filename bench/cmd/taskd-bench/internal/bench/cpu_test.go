package bench

import (
	"strings"
	"testing"
)

func TestCPULines(t *testing.T) {
	t.Parallel()
	withCPU := func(scenario string, run int, strategy string, ms float64) Result {
		r := result(scenario, run, strategy, 100, 1, 1, 1)
		r.MySQLCPUMsPerCycle = ptr(ms)
		return r
	}
	rs := []Result{
		withCPU("a-one-category", 1, StrategyTaskd, 0.9),
		withCPU("a-one-category", 1, StrategySkipLocked, 0.5),
		withCPU("a-one-category", 2, StrategyTaskd, 0.6),
		withCPU("a-one-category", 2, StrategySkipLocked, 0.4),
		withCPU("a-one-category", 3, StrategyTaskd, 0.7),
		withCPU("a-one-category", 3, StrategySkipLocked, 0.45),
		// (b) over HTTP: not measured, left out.
		result("b-50-categories", 1, StrategyTaskd, 100, 1, 1, 1),
		withCPU("f-workers", 1, StrategyTaskd, 0.2),
		withCPU("f-workers", 1, StrategySkipLocked, 0.3),
		withCPU("d-no-sweep", 0, StrategyTaskd, 9),
	}
	lines := cpuLines(rs)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (a and f): %v", len(lines), lines)
	}
	want := []string{
		"MariaDB CPU per cycle, (a) 1 category, 200 editors: taskd 0.70 ms, mysql-skip-locked 0.45 ms (median of 3; per run taskd 0.90 0.60 0.70, mysql-skip-locked 0.50 0.40 0.45)",
		"MariaDB CPU per job, (f) workers, 16 slots, no-op handler: taskd 0.20 ms, mysql-skip-locked 0.30 ms (median of 1; per run taskd 0.20, mysql-skip-locked 0.30)",
	}
	for i, l := range lines {
		if got := l.String(); got != want[i] {
			t.Errorf("line %d = %q\nwant      %q", i, got, want[i])
		}
	}
	rep := &Report{Results: rs, CPU: lines}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), want[0]) {
		t.Errorf("table has no MariaDB CPU line:\n%s", b.String())
	}
}
