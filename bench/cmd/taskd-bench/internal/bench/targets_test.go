package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{10, 1, 100}, 10},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median(%v) reordered its argument", in)
			}
		}
	}
}

// result is a Result of one run with the counts a target reads.
func result(scenario string, run int, strategy string, cps, mysqlRT, commits, redisRT float64) Result {
	return Result{
		Scenario: scenario, Run: run, Strategy: strategy, CyclesPerSec: cps,
		Workload:                Workload{Mode: ModeInproc},
		MySQLRoundTripsPerCycle: ptr(mysqlRT), CommitsPerCycle: commits, RedisRoundTripsPerCycle: ptr(redisRT),
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	rs := []Result{
		// (a): ratios 2, 4, 3.5 -> median 3.5, met; taskd medians 1, 1.04 -> met, 2 -> not.
		result("a-one-category", 1, StrategyTaskd, 200, 1.00, 2, 1.00),
		result("a-one-category", 1, StrategySeedNaive, 10, 0, 0, 0),
		result("a-one-category", 1, StrategySkipLocked, 100, 8, 2, 0),
		result("a-one-category", 2, StrategyTaskd, 400, 1.04, 2, 1.2),
		result("a-one-category", 2, StrategySkipLocked, 100, 8, 2, 0),
		result("a-one-category", 3, StrategyTaskd, 350, 3.00, 1, 1.00),
		result("a-one-category", 3, StrategySkipLocked, 100, 8, 2, 0),
		// (b): one run, ratio 1.2, not met.
		result("b-50-categories", 1, StrategyTaskd, 120, 2, 2, 2),
		result("b-50-categories", 1, StrategySkipLocked, 100, 8, 2, 0),
		// (f): a taskd run without its baseline is left out: ratio 4 from run 2 only.
		result("f-workers", 1, StrategyTaskd, 999, 2, 2, 2),
		result("f-workers", 2, StrategyTaskd, 600, 2, 2, 2),
		result("f-workers", 2, StrategySkipLocked, 150, 8, 2, 0),
	}
	got := map[string]Target{}
	for _, tg := range targets(rs) {
		got[tg.Name] = tg
	}
	for _, want := range []struct {
		name  string
		value float64
		met   bool
	}{
		{"(a) 1 category, 200 editors: taskd / mysql-skip-locked cycles/s", 3.5, true},
		{"(b) 50 categories, 200 editors: taskd / mysql-skip-locked cycles/s", 1.2, false},
		{"(f) workers, 16 slots, no-op handler: taskd / mysql-skip-locked jobs/s", 4, true},
		{"(a) 1 category, 200 editors: MySQL round trips per cycle", 1.04, true},
		{"(a) 1 category, 200 editors: commits per cycle (Com_commit)", 2, false},
		{"(a) 1 category, 200 editors: Redis round trips per cycle", 1, true},
		{"(b) 50 categories, 200 editors: MySQL round trips per cycle", 2, false},
	} {
		tg, ok := got[want.name]
		if !ok {
			t.Errorf("no target %q; got %v", want.name, got)
			continue
		}
		if tg.Value != want.value || tg.Met != want.met {
			t.Errorf("%s = %v met %v, want %v met %v", want.name, tg.Value, tg.Met, want.value, want.met)
		}
	}
	if n := len(got); n != 9 {
		t.Errorf("%d targets, want 9 (3 ratios, 3 counts for each of a and b)", n)
	}
	a := got["(a) 1 category, 200 editors: taskd / mysql-skip-locked cycles/s"]
	if s := a.String(); !strings.Contains(s, ": 3.50x, want >= 3x: MET (median of 3: taskd 350 cycles/s, mysql-skip-locked 100 cycles/s; per run 2.00x 4.00x 3.50x)") {
		t.Errorf("line = %q", s)
	}
	b := got["(b) 50 categories, 200 editors: MySQL round trips per cycle"]
	if s := b.String(); !strings.Contains(s, ": 2.00, want <= 1: NOT MET") {
		t.Errorf("line = %q", s)
	}
}

func TestTargetsSweepAndMemory(t *testing.T) {
	t.Parallel()
	base := result("d-no-sweep", 0, StrategyTaskd, 100, 2, 2, 2)
	base.Next.P99Ms = 100
	sw := result("d-sweep-100k", 0, StrategyTaskd, 100, 2, 2, 2)
	sw.Sweep = &SweepStats{Recycled: 100_000, DurationSec: 12.5, NextDuring: Latency{P99Ms: 150}}
	e := result("e-http", 0, StrategyTaskd, 100, 0, 2, 0)
	e.Memory.HWMKiB = 48 * 1024
	small := result("c-pool-10k", 0, StrategyTaskd, 100, 1, 1, 1)
	small.Next = Latency{P50Ms: 10, P99Ms: 100}
	big := result("c-pool-1m", 0, StrategyTaskd, 100, 1, 1, 1)
	big.Next = Latency{P50Ms: 11, P99Ms: 180}
	var lines []string
	for _, tg := range targets([]Result{base, sw, e, small, big}) {
		lines = append(lines, tg.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"target (d) sweep of 100,000 expired claims under load: duration: 12.50 s, want <= 10 s: NOT MET",
		"target (d) taskd next p99 during the sweep / without: 1.50x, want <= 2x: MET",
		"target (e) taskd serve over HTTP: peak RSS: 48.00 MiB, want <= 150 MiB: MET",
		"target (c) taskd next p99, pool of 1m / pool of 10k: 1.80x, want <= 1.5x: NOT MET (p99 180.0 ms / 100.0 ms; p50 11.0 ms / 10.0 ms)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
}

// TestTargetsInsertTx: scenario (m) judges its p99s against 50 and 100 ms,
// and its missed rounds against none.
func TestTargetsInsertTx(t *testing.T) {
	t.Parallel()
	l := result("m-insert-tx", 0, StrategyTaskd, 0, 0, 0, 0)
	l.Workload.Editors = 200
	l.InsertTx = &InsertTxStats{Rounds: 200, CommitToClaim: Latency{P50Ms: 3, P99Ms: 60, MaxMs: 70},
		CommitToAnswer: Latency{P50Ms: 4, P99Ms: 20, MaxMs: 30}, Missed: 1}
	var lines []string
	for _, tg := range targets([]Result{l}) {
		lines = append(lines, tg.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"target (m) InsertTx: commit to a waiting worker's claim p99: 60.00 ms, want <= 50 ms: NOT MET (200 transactions, 200 editors; p50 3.0 ms, max 70.0 ms)",
		"target (m) InsertTx: commit to a long-polling editor's answer p99: 20.00 ms, want <= 100 ms: MET",
		"target (m) InsertTx: rounds missed (no claim or answer within 10 s): 1.00, want <= 0: NOT MET",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
	if all, _ := scenario("all", Preset{Rounds: 1}); !slices.ContainsFunc(all, func(r run) bool { return r.name == "m-insert-tx" }) {
		t.Error("-scenario all does not run m-insert-tx")
	}
}

// TestTargetsNotCountedOverHTTP checks that a run without in-process counts
// gives no round-trip target rather than a zero that would pass.
func TestTargetsNotCountedOverHTTP(t *testing.T) {
	t.Parallel()
	r := result("a-one-category", 1, StrategyTaskd, 100, 0, 1, 0)
	r.MySQLRoundTripsPerCycle, r.RedisRoundTripsPerCycle = nil, nil
	for _, tg := range targets([]Result{r}) {
		if strings.Contains(tg.Name, "round trips") {
			t.Errorf("target %q from a run that counted nothing", tg.Name)
		}
	}
}

func TestScenarioRounds(t *testing.T) {
	t.Parallel()
	runs, ok := scenario("all", Preset{Rounds: 3})
	if !ok {
		t.Fatal("no preset all")
	}
	var names []string
	naive := 0
	for _, r := range runs {
		names = append(names, r.name+"#"+string(rune('0'+r.round)))
		for _, s := range r.strategies {
			if s == StrategySeedNaive {
				naive++
			}
		}
		if r.workload.ReplicaReads || r.workload.Replicated {
			t.Errorf("run %s needs a replica, and none is configured", r.name)
		}
	}
	want := "a-one-category#1 b-50-categories#1 f-workers#1 a-one-category#2 b-50-categories#2 f-workers#2 a-one-category#3 b-50-categories#3 f-workers#3"
	if got := strings.Join(names[:9], " "); got != want {
		t.Errorf("compared pairs run in order\n%s\nwant\n%s", got, want)
	}
	if naive != 1 {
		t.Errorf("seed-naive runs %d times, want once", naive)
	}
	runs, _ = scenario("all", Preset{Rounds: 1, Replica: true})
	last := runs[len(runs)-1]
	if !last.workload.ReplicaReads || runs[len(runs)-2].workload.ReplicaReads || !runs[len(runs)-2].workload.Replicated {
		t.Errorf("with a replica, all should end with g-primary-only then g-replica-reads; ends with %s, %s", runs[len(runs)-2].name, last.name)
	}
}

func TestTargetsLongPoll(t *testing.T) {
	t.Parallel()
	r := result("i-long-poll", 0, StrategyTaskd, 0, 0, 0, 0)
	r.Memory.HWMKiB = 600 * 1024
	r.Errors, r.FirstError = 2, "long poll: 503 Service Unavailable"
	r.LongPoll = &LongPollStats{Editors: 10_000, Tasks: 20_000, Answered: 9_998,
		InsertToAnswer: Latency{P50Ms: 800, P99Ms: 1400, MaxMs: 2500}, IdleSec: 15, IdleCores: 0.031}
	var lines []string
	for _, tg := range targets([]Result{r}) {
		lines = append(lines, tg.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"target (i) long polls over HTTP: editors answered: 9998.00, want >= 10000: NOT MET",
		"target (i) long polls over HTTP: insert to answer p99: 1.40 s, want <= 1.5 s: MET (10000 editors, 20000 tasks; p50 0.80 s, max 2.50 s)",
		"target (i) long polls over HTTP: peak RSS: 600.00 MiB, want <= 450 MiB: NOT MET",
		"target (i) long polls over HTTP: idle CPU with every poll parked: 3.10% of a core, want <= 2% of a core: NOT MET (10000 editors, 20000 tasks; taskd serve's CPU over 15.0 s with no work)",
		"target (i) long polls over HTTP: errors: 2.00, want <= 0: NOT MET (the first: long poll: 503 Service Unavailable)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in\n%s", want, got)
		}
	}
	for _, name := range []string{"i", "long-poll"} {
		runs, ok := scenario(name, Preset{Quick: true})
		if !ok || len(runs) != 1 || !runs[0].workload.LongPoll || runs[0].workload.Editors != LongPollEditors/10 {
			t.Errorf("scenario %s -quick: %+v", name, runs)
		}
	}
	all, _ := scenario("all", Preset{})
	if !slices.ContainsFunc(all, func(r run) bool { return r.name == "i-long-poll" && r.workload.Editors == LongPollEditors }) {
		t.Error("all does not run i-long-poll with 10,000 editors")
	}
}

// TestTargetsOneEditor: (j) compares each round's lone editor with group
// commit against the same round's run without, and the median of the
// per-round ratios is judged against 1.10.
func TestTargetsOneEditor(t *testing.T) {
	t.Parallel()
	lone := func(scenario string, run int, nextP50, cycleP50 float64) Result {
		r := result(scenario, run, StrategyTaskd, 300, 1, 1, 1)
		r.Cycles, r.Next.P50Ms, r.Cycle.P50Ms = 900, nextP50, cycleP50
		return r
	}
	rs := []Result{
		// next: 1.0, 1.5, 1.05 -> 1.05, met; cycle: 1.2, 1.3, 1.15 -> 1.2, not met.
		lone("j-one-editor", 1, 2.0, 3.6), lone("j-one-editor-ungrouped", 1, 2.0, 3.0),
		lone("j-one-editor", 2, 3.0, 3.9), lone("j-one-editor-ungrouped", 2, 2.0, 3.0),
		lone("j-one-editor", 3, 2.1, 3.45), lone("j-one-editor-ungrouped", 3, 2.0, 3.0),
		// A round without its baseline is left out.
		lone("j-one-editor", 4, 9, 9),
	}
	got := map[string]Target{}
	for _, tg := range targets(rs) {
		got[tg.Name] = tg
	}
	for _, want := range []struct {
		name  string
		value float64
		met   bool
	}{
		{"(j) one editor alone: next p50, group commit / each write alone", 1.05, true},
		{"(j) one editor alone: submit-and-next p50, group commit / each write alone", 1.2, false},
	} {
		tg, ok := got[want.name]
		if !ok {
			t.Errorf("no target %q; got %v", want.name, got)
			continue
		}
		if math.Abs(tg.Value-want.value) > 1e-9 || tg.Met != want.met || tg.Want != loneSlower {
			t.Errorf("%s: %v", want.name, tg)
		}
		if !strings.Contains(tg.Detail, "median of 3") {
			t.Errorf("%s: detail %q, want the median of 3 rounds", want.name, tg.Detail)
		}
	}

	for _, name := range []string{"j", "one-editor"} {
		runs, ok := scenario(name, Preset{Rounds: 2})
		var names []string
		for _, r := range runs {
			names = append(names, fmt.Sprintf("%s#%d/%d/%d", r.name, r.round, r.workload.Editors, r.workload.GroupCommit))
		}
		want := "j-one-editor#1/1/0 j-one-editor-ungrouped#1/1/1 j-one-editor#2/1/0 j-one-editor-ungrouped#2/1/1"
		if got := strings.Join(names, " "); !ok || got != want {
			t.Errorf("scenario %s: %s, want %s", name, got, want)
		}
	}
	all, _ := scenario("all", Preset{Rounds: 1})
	if !slices.ContainsFunc(all, func(r run) bool { return r.name == "j-one-editor-ungrouped" }) {
		t.Error("all does not run j-one-editor-ungrouped")
	}
}

// TestLongPollMemoryLimit: the child of (i) gets what docs/deployment.md
// recommends, 100 MiB plus 32 KiB per long poll.
func TestLongPollMemoryLimit(t *testing.T) {
	t.Parallel()
	for editors, want := range map[int]int{10_000: 413, 1_000: 132, 1: 101} {
		if got := longPollMemoryLimit(editors); got != want {
			t.Errorf("longPollMemoryLimit(%d) = %d, want %d", editors, got, want)
		}
	}
}
