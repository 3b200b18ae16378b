package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
}

func TestDurationsWindow(t *testing.T) {
	t.Parallel()
	ss := []sample{{at: 0, d: 5}, {at: 10, d: 3}, {at: 20, d: 1}, {at: 30, d: 2}}
	got := durations(ss, 10, 30)
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("durations in [10, 30) = %v, want [1 3]", got)
	}
	if got := durations(ss, 0, 0); len(got) != 4 || got[0] != 1 {
		t.Errorf("durations unbounded = %v, want 4 sorted", got)
	}
}

func TestRatioLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    Ratio
		want string
	}{
		{newRatio("taskd / seed-naive", "cycles/s", 340, 100, 3, true), "taskd / seed-naive cycles/s = 3.40x (340 / 100) (target >= 3x) MET"},
		{newRatio("taskd / seed-naive", "cycles/s", 200, 100, 3, true), "taskd / seed-naive cycles/s = 2.00x (200 / 100) (target >= 3x) NOT MET"},
		{newRatio("p99", "next p99", 30, 10, 2, false), "p99 next p99 = 3.00x (30 / 10) (target <= 2x) NOT MET"},
		{newRatio("x", "cycles/s", 1, 0, 0, true), "x cycles/s = 0.00x (1 / 0)"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestParseMemory(t *testing.T) {
	t.Parallel()
	m, err := readMemory("self")
	if err != nil {
		t.Fatal(err)
	}
	if m.RSSKiB <= 0 || m.HWMKiB < m.RSSKiB {
		t.Errorf("memory of this process = %+v, want 0 < RSS <= HWM", m)
	}
}

// services returns the test servers' config, or skips (fails with
// TASKD_TEST_REQUIRE_SERVICES=1) when they are not set.
func services(t *testing.T) Config {
	t.Helper()
	dsn, url := os.Getenv("TASKD_TEST_MYSQL_DSN"), os.Getenv("TASKD_TEST_REDIS_URL")
	if dsn == "" || url == "" {
		if os.Getenv("TASKD_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("TASKD_TEST_MYSQL_DSN and TASKD_TEST_REDIS_URL must be set")
		}
		t.Skip("TASKD_TEST_MYSQL_DSN or TASKD_TEST_REDIS_URL not set; run with make test")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return Config{MySQLDSN: dsn, Redis: opt}
}

// TestRunEveryStrategy runs each in-process strategy for a second with 4
// editors on a pool of 200 and checks that work got done and no task got two
// accepted results.
func TestRunEveryStrategy(t *testing.T) {
	t.Parallel()
	cfg := services(t)
	w := Workload{Editors: 4, Categories: 2, Pool: 200, Duration: time.Second}
	rs, err := Run(context.Background(), cfg, "test", w, []string{StrategyTaskd, StrategySeedNaive, StrategySkipLocked})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("got %d results, want 3", len(rs))
	}
	for _, r := range rs {
		if r.Cycles <= 0 {
			t.Errorf("%s: %d cycles, want some", r.Strategy, r.Cycles)
		}
		if r.DoubleCommits != 0 {
			t.Errorf("%s: %d tasks committed twice", r.Strategy, r.DoubleCommits)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors, the first: %s", r.Strategy, r.Errors, r.FirstError)
		}
		if r.Next.Count == 0 || r.Next.P99Ms < r.Next.P50Ms {
			t.Errorf("%s: next latency %+v", r.Strategy, r.Next)
		}
		// Every cycle that came back with a next is timed, taskd's
		// submit-and-claim in one transaction included, not only each
		// editor's first next.
		if r.Next.Count <= w.Editors || int64(r.Next.Count) < r.Cycles/2 {
			t.Errorf("%s: %d next latencies timed in %d cycles", r.Strategy, r.Next.Count, r.Cycles)
		}
	}
	var b strings.Builder
	rep := &Report{Results: rs, Ratios: ratios(rs)}
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "test: taskd / seed-naive cycles/s") {
		t.Errorf("table has no ratio line:\n%s", b.String())
	}
}

// TestRunWorkers runs both worker strategies for a second with 4 slots and
// checks that jobs got done, once each, and that the in-process counters saw
// them: the SKIP LOCKED loop sends 8 requests per job (two transactions of
// BEGIN, two statements, COMMIT), which jobs in flight at either end of the
// window can move by at most a few.
func TestRunWorkers(t *testing.T) {
	t.Parallel()
	cfg := services(t)
	w := Workload{Workers: 4, Categories: 1, Pool: 20_000, Duration: time.Second}
	rs, err := Run(context.Background(), cfg, "test-workers", w, []string{StrategyTaskd, StrategySkipLocked})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Cycles <= 0 || r.Errors != 0 || r.DoubleCommits != 0 {
			t.Errorf("%s: %d jobs, %d errors (%s), %d double commits", r.Strategy, r.Cycles, r.Errors, r.FirstError, r.DoubleCommits)
		}
		if r.MySQLRoundTripsPerCycle == nil || *r.MySQLRoundTripsPerCycle <= 0 {
			t.Errorf("%s: MySQL round trips per job not counted: %v", r.Strategy, r.MySQLRoundTripsPerCycle)
		}
	}
	if sl := rs[1]; sl.MySQLRoundTripsPerCycle != nil {
		got, slack := *sl.MySQLRoundTripsPerCycle*float64(sl.Cycles), 8.0*float64(w.Workers)
		if want := 8 * float64(sl.Cycles); got < want-slack || got > want+slack {
			t.Errorf("skip-locked workers: %.0f requests for %d jobs, want 8 per job (± %.0f)", got, sl.Cycles, slack)
		}
		if *sl.RedisRoundTripsPerCycle != 0 {
			t.Errorf("skip-locked workers: %.2f Redis round trips per job, want 0", *sl.RedisRoundTripsPerCycle)
		}
	}
}

// TestRunReplicaReads runs taskd with its candidate reads on the replica and
// checks that the replica was read and that the cycles still committed once
// each.
func TestRunReplicaReads(t *testing.T) {
	t.Parallel()
	cfg := services(t)
	cfg.ReplicaDSN = testenv.Lookup(t, testenv.MySQLReplicaDSNVar)
	// The run drains the pool (it ends when the pool runs dry): each category's
	// 100 tasks outlast the first candidate read, which comes before the counted
	// window opens, so the window holds replica reads however slow the machine.
	w := Workload{Editors: 4, Categories: 2, Pool: 200, Duration: time.Minute, Replicated: true, ReplicaReads: true}
	rs, err := Run(context.Background(), cfg, "test-replica", w, []string{StrategyTaskd})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Cycles <= 0 || r.Errors != 0 || r.DoubleCommits != 0 {
		t.Errorf("%d cycles, %d errors (%s), %d double commits", r.Cycles, r.Errors, r.FirstError, r.DoubleCommits)
	}
	if r.ReplicaRoundTripsPerCycle == nil || *r.ReplicaRoundTripsPerCycle <= 0 {
		t.Errorf("replica round trips per cycle = %v, want some: the store did not read the replica", r.ReplicaRoundTripsPerCycle)
	}
}
