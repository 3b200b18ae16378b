package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// services returns the stores' addresses, skipping the test when one is
// not set (failing instead under TASKD_TEST_REQUIRE_SERVICES=1).
func services(t *testing.T) (pg, mysqlDSN, redisURL string) {
	t.Helper()
	for _, name := range []string{"TASKD_TEST_POSTGRES_URL", "TASKD_TEST_MYSQL_DSN", "TASKD_TEST_REDIS_URL"} {
		if os.Getenv(name) == "" {
			msg := name + " is not set: start the servers with TASKD_SERVICES_PROFILE=bench scripts/services.sh up"
			if os.Getenv("TASKD_TEST_REQUIRE_SERVICES") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return os.Getenv("TASKD_TEST_POSTGRES_URL"), os.Getenv("TASKD_TEST_MYSQL_DSN"), os.Getenv("TASKD_TEST_REDIS_URL")
}

// TestCompareEndToEnd runs both scenarios on both sides with a few jobs and
// checks that every burn-down completed all of its jobs in its store, that
// the steady state counted completions with the producer ahead, and that
// the table and the JSON say so.
func TestCompareEndToEnd(t *testing.T) {
	pg, dsn, rurl := services(t)
	const jobs = 300
	path := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"-postgres", pg, "-mysql", dsn, "-redis", rurl,
		"-rounds", "1", "-jobs", "300", "-cap", "60s", "-workers", "4",
		"-backlog", "200", "-batch", "50", "-warmup", "200ms", "-window", "1s",
		"-json", path,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("rows = %d, want 2 (burn-down and steady at 4 workers)", len(rep.Rows))
	}
	for _, row := range rep.Rows {
		for side, rs := range map[string][]Result{"River": row.River, "taskd": row.Taskd, "limit": row.Limit} {
			if len(rs) != 1 {
				t.Fatalf("%s %s: %d results, want 1", row.Scenario, side, len(rs))
			}
			r := rs[0]
			if r.Failed != 0 {
				t.Errorf("%s %s: %d jobs failed", row.Scenario, side, r.Failed)
			}
			if r.StoreCPUMsPerJob == nil || *r.StoreCPUMsPerJob < 0 || r.ClientCPUMsPerJob == nil || *r.ClientCPUMsPerJob < 0 {
				t.Errorf("%s %s: CPU per job store %v, client %v, want both measured (the servers run here)", row.Scenario, side, r.StoreCPUMsPerJob, r.ClientCPUMsPerJob)
			}
			if r.JobsPerSec <= 0 || r.Seconds <= 0 {
				t.Errorf("%s %s: %.1f jobs/s over %.2fs, want both positive", row.Scenario, side, r.JobsPerSec, r.Seconds)
			}
			switch row.Scenario {
			case "burn-down":
				if r.Capped || r.Jobs != jobs {
					t.Errorf("burn-down %s: %d jobs completed (capped %v), want all %d", side, r.Jobs, r.Capped, jobs)
				}
			case "steady":
				if r.Jobs <= 0 {
					t.Errorf("steady %s: %d jobs completed in the window", side, r.Jobs)
				}
				if r.MinBacklog == nil || *r.MinBacklog <= 0 {
					t.Errorf("steady %s: fewest jobs waiting %v, want the producer ahead", side, r.MinBacklog)
				}
			}
		}
		if want := row.TaskdJobsPerSec / row.RiverJobsPerSec; row.Ratio != want {
			t.Errorf("%s: ratio %v, want taskd/River %v", row.Scenario, row.Ratio, want)
		}
		if want := row.TaskdJobsPerSec / row.LimitJobsPerSec; row.LimitRatio != want {
			t.Errorf("%s: limit ratio %v, want taskd/limit %v", row.Scenario, row.LimitRatio, want)
		}
	}
	if !strings.Contains(rep.RiverStore, "synchronous_commit=") || !strings.Contains(rep.TaskdStore, "innodb_flush_log_at_trx_commit=") {
		t.Errorf("stores' durability not read: %q, %q", rep.RiverStore, rep.TaskdStore)
	}
	out := stdout.String()
	for _, want := range []string{"burn-down  4", "steady     4", "(h) taskd/River", "store ms/job River / taskd", "River's store: PostgreSQL", "taskd's store: MariaDB",
		"(l) burn-down, 4 workers: taskd / limit", "(l) steady, 4 workers: taskd / limit"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{nil, 0},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestShortDurability(t *testing.T) {
	for in, want := range map[string]string{
		"PostgreSQL 15: fsync=on, synchronous_commit=on, full_page_writes=on":                                 "pg: WAL fsync per commit",
		"PostgreSQL 15: fsync=on, synchronous_commit=off, full_page_writes=on":                                "pg: WAL fsync deferred",
		"PostgreSQL 15: fsync=off, synchronous_commit=on, full_page_writes=on":                                "pg: no fsync",
		"MariaDB 10.11: innodb_flush_log_at_trx_commit=1, innodb_doublewrite=1":                               "innodb: fsync per commit",
		"MariaDB 10.11: innodb_flush_log_at_trx_commit=1, innodb_doublewrite=1, binary log on, sync_binlog=1": "innodb: fsync per commit",
		"MariaDB 10.11: innodb_flush_log_at_trx_commit=1, innodb_doublewrite=1, binary log on, sync_binlog=0": "innodb: redo fsync per commit, binlog not",
		"MariaDB 10.11: innodb_flush_log_at_trx_commit=2, innodb_doublewrite=0":                               "innodb: redo written per commit, fsync ~1/s",
		"MariaDB 10.11: innodb_flush_log_at_trx_commit=0, innodb_doublewrite=0, sync_binlog":                  "innodb: redo written and fsync ~1/s",
	} {
		if got := shortDurability(in); got != want {
			t.Errorf("shortDurability(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDurabilityNote(t *testing.T) {
	const (
		pgSync   = "PostgreSQL 15: fsync=on, synchronous_commit=on, full_page_writes=on"
		pgAsync  = "PostgreSQL 15: fsync=on, synchronous_commit=off, full_page_writes=on"
		dbSync   = "MariaDB 10.11: innodb_flush_log_at_trx_commit=1, innodb_doublewrite=0, binary log on, sync_binlog=1"
		dbRedo   = "MariaDB 10.11: innodb_flush_log_at_trx_commit=1, innodb_doublewrite=0, binary log on, sync_binlog=0"
		dbLazy   = "MariaDB 10.11: innodb_flush_log_at_trx_commit=2, innodb_doublewrite=0, binary log on, sync_binlog=0"
		same     = "durability: the same on both sides: every commit is fsynced"
		sameLazy = "durability: the same on both sides: commits are not fsynced one by one"
		differ   = "durability: NOT the same"
	)
	for _, c := range []struct{ river, taskd, want string }{
		{pgSync, dbSync, same},
		{pgAsync, dbLazy, sameLazy},
		{pgSync, dbLazy, differ},
		{pgSync, dbRedo, differ},
		{pgAsync, dbSync, differ},
		{pgAsync, dbRedo, differ},
	} {
		if got := durabilityNote(c.river, c.taskd); !strings.HasPrefix(got, c.want) {
			t.Errorf("durabilityNote(%q, %q) = %q, want it to start %q", c.river, c.taskd, got, c.want)
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-postgres", "", "-mysql", "x", "-redis", "x"},
		{"-postgres", "x", "-mysql", "x", "-redis", "x", "-workers", "16,0"},
		{"-postgres", "x", "-mysql", "x", "-redis", "x", "-scenarios", "burn-down,soak"},
		{"-postgres", "x", "-mysql", "x", "-redis", "x", "-window", "0s"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("run(%q) = nil error, want one", args)
		} else if out.Len() != 0 {
			t.Errorf("run(%q) printed a table after refusing: %s", args, out.String())
		}
	}
}

// TestSummarizeLeavesOutEmptyRounds: a round in which a side completed
// nothing has no ratio (not +Inf, which JSON cannot carry), and the note
// says so.
func TestSummarizeLeavesOutEmptyRounds(t *testing.T) {
	row := Row{Scenario: "steady", Workers: 1000,
		River: []Result{{JobsPerSec: 2000, Jobs: 8000}, {JobsPerSec: 0, Jobs: 0}, {JobsPerSec: 1000, Jobs: 4000}},
		Taskd: []Result{{JobsPerSec: 100, Jobs: 400}, {JobsPerSec: 50, Jobs: 200}, {JobsPerSec: 200, Jobs: 800}},
	}
	row.summarize()
	if want := []float64{0.05, 0.2}; !slices.Equal(row.RoundRatios, want) {
		t.Errorf("round ratios %v, want %v", row.RoundRatios, want)
	}
	if row.Ratio != 0.125 || row.RiverJobsPerSec != 1000 || row.TaskdJobsPerSec != 100 {
		t.Errorf("ratio %v, River %v, taskd %v; want 0.125, 1000, 100", row.Ratio, row.RiverJobsPerSec, row.TaskdJobsPerSec)
	}
	if row.Met == nil || *row.Met || row.Target != 1 {
		t.Errorf("target %v met %v, want 1 and not met", row.Target, row.Met)
	}
	if _, err := json.Marshal(row); err != nil {
		t.Errorf("marshal: %v", err)
	}
	if n := note(row, 100_000); !strings.Contains(n, "River completed nothing in 1/3") {
		t.Errorf("note %q does not name the empty round", n)
	}
}

func TestOnlyNamesASide(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-postgres", "pg", "-mysql", "my", "-redis", "rd", "-only", "sidekiq"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown side "sidekiq"`) {
		t.Fatalf("-only sidekiq: %v, want an unknown side", err)
	}
}

func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel's clock counted this process some CPU time.
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed %v over 10s of spinning", before)
		}
	}
	if _, err := processCPU(-1); err == nil {
		t.Fatal("processCPU(-1): no error")
	}
	if pids := childrenOf(os.Getppid()); !slices.Contains(pids, os.Getpid()) || pids[0] != os.Getppid() {
		t.Fatalf("childrenOf(parent) = %v, want the parent first and this process among them", pids)
	}
}

func TestMedianCPU(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	rs := []Result{{StoreCPUMsPerJob: v(0.3)}, {}, {StoreCPUMsPerJob: v(0.1)}}
	if got := medianCPU(rs, func(r Result) *float64 { return r.StoreCPUMsPerJob }); got != "0.200" {
		t.Fatalf("medianCPU = %q, want 0.200 (the runs that measured it)", got)
	}
	if got := medianCPU(rs[1:2], func(r Result) *float64 { return r.StoreCPUMsPerJob }); got != "n/a" {
		t.Fatalf("medianCPU of no measurement = %q, want n/a", got)
	}
}

// TestPerJobByServer checks that a store of two kinds of server gets its CPU
// per job split by server, and that the line shows the split.
func TestPerJobByServer(t *testing.T) {
	before := cpuSample{store: 100 * time.Millisecond, byServer: map[string]time.Duration{"mysqld": 80 * time.Millisecond, "redis-server": 20 * time.Millisecond}, ok: true}
	after := cpuSample{store: 400 * time.Millisecond, client: 50 * time.Millisecond, byServer: map[string]time.Duration{"mysqld": 330 * time.Millisecond, "redis-server": 70 * time.Millisecond}, ok: true}
	r := Result{Jobs: 1000}
	r.perJob(before, after)
	if got := *r.StoreCPUMsPerJob; got != 0.3 {
		t.Errorf("store CPU per job %v ms, want 0.3", got)
	}
	if got := byServer(r.StoreCPUMsPerJobByServer); got != " (mysqld 0.250, redis-server 0.050)" {
		t.Errorf("split %q, want mysqld 0.250 and redis-server 0.050", got)
	}
	one := Result{Jobs: 1000}
	one.perJob(cpuSample{byServer: map[string]time.Duration{"postgres": 0}, ok: true}, cpuSample{store: time.Second, byServer: map[string]time.Duration{"postgres": time.Second}, ok: true})
	if got := byServer(one.StoreCPUMsPerJobByServer); got != "" {
		t.Errorf("split of one kind of server %q, want none", got)
	}
}
