// Command compare measures River and taskd's embedded workers side by side in
// one run, on the same machine: no-op jobs, each side over its own store
// (River: PostgreSQL; taskd: MariaDB and Redis), each driven through its
// public API as an application embedding it would. Two scenarios, each at
// 16, 100 and 1,000 workers:
//
//   - burn-down: -jobs jobs inserted in batches of 5,000, then the workers
//     start; jobs/s is the jobs over the time from the start until the last
//     completion was committed. A side still at it after -cap is measured
//     over what it completed by then (said in the table).
//   - steady: a producer keeps -backlog jobs waiting (by its own count it
//     inserts a batch whenever fewer wait), so the workers never wait for
//     it; jobs/s is the completions committed during -window, after
//     -warmup.
//
// Each (scenario, workers) pair runs -rounds times, River and taskd one
// after the other, which one first alternating; the table shows the
// medians and the median of the per-round ratios taskd/River, target (h)
// >= 1.0 at 100 and 1,000 workers. A job counts as done only once its
// completion is committed in its store: the harness counts completed rows.
//
//	cd bench/river && go run ./cmd/compare [-quick] [-rounds 3] [-json FILE]
//
// The stores are -postgres, -mysql and -redis, by default
// $TASKD_TEST_POSTGRES_URL, $TASKD_TEST_MYSQL_DSN and $TASKD_TEST_REDIS_URL
// (TASKD_SERVICES_PROFILE=bench scripts/services.sh up prints them).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// targetRatio is issue 18's (h): taskd's jobs/s at least River's, at 100
// and at 1,000 workers.
const targetRatio = 1.0

// Row is one scenario at one worker count, over all rounds.
type Row struct {
	Scenario string   `json:"scenario"`
	Workers  int      `json:"workers"`
	River    []Result `json:"river"`
	Taskd    []Result `json:"taskd"`
	// RiverJobsPerSec and TaskdJobsPerSec are the medians of the rounds.
	RiverJobsPerSec float64 `json:"river_jobs_per_sec"`
	TaskdJobsPerSec float64 `json:"taskd_jobs_per_sec"`
	// Ratio is the median of the per-round ratios taskd/River. A round in
	// which a side completed nothing has no ratio and is left out; with no
	// round left, Ratio is 0.
	Ratio       float64   `json:"ratio_taskd_river"`
	RoundRatios []float64 `json:"round_ratios"`
	// Target is the ratio (h) wants, 0 where it sets none; Met says
	// whether Ratio reaches it.
	Target float64 `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
	// Limit is (l), the raw fenced loop on taskd's MariaDB (see limitSide),
	// when it ran; LimitRatio the median of the per-round ratios
	// taskd/limit.
	Limit            []Result  `json:"limit,omitempty"`
	LimitJobsPerSec  float64   `json:"limit_jobs_per_sec,omitempty"`
	LimitRatio       float64   `json:"ratio_taskd_limit,omitempty"`
	LimitRoundRatios []float64 `json:"limit_round_ratios,omitempty"`
}

// limitTarget is (l): taskd's jobs/s at least this share of the limit's.
const limitTarget = 0.6

// Report is what -json writes.
type Report struct {
	Time         time.Time `json:"time"`
	GoVersion    string    `json:"go_version"`
	GOMAXPROCS   int       `json:"gomaxprocs"`
	RiverVersion string    `json:"river_version"`
	Quick        bool      `json:"quick"`
	Rounds       int       `json:"rounds"`
	Jobs         int       `json:"burn_down_jobs"`
	Cap          string    `json:"burn_down_cap"`
	Backlog      int       `json:"steady_backlog"`
	Batch        int       `json:"steady_batch"`
	Warmup       string    `json:"steady_warmup"`
	Window       string    `json:"steady_window"`
	// FetchCooldown and FetchPollInterval are River's settings.
	FetchCooldown     string `json:"river_fetch_cooldown"`
	FetchPollInterval string `json:"river_fetch_poll_interval"`
	// RiverStore and TaskdStore are the stores' durability settings, as
	// the servers report them.
	RiverStore string  `json:"river_store"`
	TaskdStore string  `json:"taskd_store"`
	Rows       []Row   `json:"rows"`
	Seconds    float64 `json:"seconds"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		pgURL      = fs.String("postgres", os.Getenv("TASKD_TEST_POSTGRES_URL"), "PostgreSQL URL for River (default $TASKD_TEST_POSTGRES_URL)")
		mysqlDSN   = fs.String("mysql", os.Getenv("TASKD_TEST_MYSQL_DSN"), "MySQL DSN for taskd; each run makes a database of its own there (default $TASKD_TEST_MYSQL_DSN)")
		redisURL   = fs.String("redis", os.Getenv("TASKD_TEST_REDIS_URL"), "Redis URL for taskd (default $TASKD_TEST_REDIS_URL)")
		quick      = fs.Bool("quick", false, "a short smoke run: 10,000 jobs, 1 round, short windows (not figures to quote)")
		rounds     = fs.Int("rounds", 3, "rounds of every scenario")
		jobs       = fs.Int("jobs", 100_000, "burn-down: jobs inserted before the workers start")
		capAfter   = fs.Duration("cap", 8*time.Second, "burn-down: a side still at it after this is measured over what it completed")
		backlog    = fs.Int("backlog", 10_000, "steady: jobs the producer keeps waiting")
		batch      = fs.Int("batch", 1_000, "steady: jobs per insert of the producer")
		warmup     = fs.Duration("warmup", 2*time.Second, "steady: time before the window opens")
		window     = fs.Duration("window", 4*time.Second, "steady: time measured")
		workerArg  = fs.String("workers", "16,100,1000", "worker counts, comma-separated")
		scenarios  = fs.String("scenarios", "burn-down,steady", "scenarios to run, comma-separated")
		jsonPath   = fs.String("json", "", "also write the results as JSON to this file")
		taskdBatch = fs.Int("taskd-batch-size", 0, "taskd's worker.batch_size (0: its default)")
		cpuProf    = fs.String("cpuprofile", "", "write a Go CPU profile of the whole run (both sides) to this file")
		only       = fs.String("only", "", "run only this side (River or taskd): its figures alone, no ratio, for A/B runs of one side")
		withLimit  = fs.Bool("limit", true, "also run (l), the limit: a raw fenced two-UPDATE loop on taskd's MariaDB (no Redis, no events, one candidate index), and print taskd / limit")
		mysqlSync  = fs.Bool("mysql-sync", true, "set the MySQL server's innodb_flush_log_at_trx_commit and sync_binlog to 1 for the run, and restore them after: every commit fsynced, as PostgreSQL's at its defaults (-mysql-sync=false leaves the server as it runs)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *quick {
		// Only what the command line did not set.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"rounds": "1", "jobs": "10000", "cap": "5s", "backlog": "5000", "warmup": "1s", "window": "2s"} {
			if !set[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	switch {
	case *pgURL == "":
		return errors.New("no PostgreSQL: set TASKD_TEST_POSTGRES_URL (eval \"$(TASKD_SERVICES_PROFILE=bench scripts/services.sh up)\") or pass -postgres")
	case *mysqlDSN == "":
		return errors.New("no MySQL: set TASKD_TEST_MYSQL_DSN or pass -mysql")
	case *redisURL == "":
		return errors.New("no Redis: set TASKD_TEST_REDIS_URL or pass -redis")
	case *rounds < 1 || *jobs < 1 || *capAfter <= 0 || *backlog < 1 || *batch < 1 || *warmup < 0 || *window <= 0:
		return errors.New("-rounds, -jobs, -cap, -backlog, -batch and -window must be positive, -warmup at least 0")
	}
	if *only != "" && !strings.EqualFold(*only, "river") && !strings.EqualFold(*only, "taskd") && !strings.EqualFold(*only, "limit") {
		return fmt.Errorf("-only: unknown side %q (River, taskd, limit)", *only)
	}
	workers, err := parseInts(*workerArg)
	if err != nil {
		return fmt.Errorf("-workers: %w", err)
	}
	kinds := strings.Split(*scenarios, ",")
	for _, k := range kinds {
		if k != "burn-down" && k != "steady" {
			return fmt.Errorf("-scenarios: unknown scenario %q (burn-down, steady)", k)
		}
	}

	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	began := time.Now()
	rs, err := newRiverSide(ctx, *pgURL)
	if err != nil {
		return err
	}
	defer func() { _ = rs.Close(context.WithoutCancel(ctx)) }()
	ts, err := newTaskdSide(ctx, *mysqlDSN, *redisURL, *mysqlSync)
	if err != nil {
		return err
	}
	defer func() { _ = ts.Close(context.WithoutCancel(ctx)) }()
	ts.batchSize = *taskdBatch
	var ls *limitSide
	if *withLimit {
		if ls, err = newLimitSide(ctx, *mysqlDSN); err != nil {
			return err
		}
		defer func() { _ = ls.Close(context.WithoutCancel(ctx)) }()
	}

	report := Report{
		Time: began.UTC(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		RiverVersion: moduleVersion("github.com/riverqueue/river"), Quick: *quick,
		Rounds: *rounds, Jobs: *jobs, Cap: capAfter.String(),
		Backlog: *backlog, Batch: *batch, Warmup: warmup.String(), Window: window.String(),
		FetchCooldown: riverFetchCooldown.String(), FetchPollInterval: riverFetchPollInterval.String(),
	}
	if report.RiverStore, err = rs.Durability(ctx); err != nil {
		return err
	}
	if report.TaskdStore, err = ts.Durability(ctx); err != nil {
		return err
	}
	st := Steady{Backlog: *backlog, Batch: *batch, Warmup: *warmup, Window: *window}
	for _, k := range kinds {
		for _, w := range workers {
			report.Rows = append(report.Rows, Row{Scenario: k, Workers: w})
		}
	}
	fmt.Fprintf(stderr, "River %s and taskd, %d rounds of %d runs each\n", report.RiverVersion, *rounds, len(report.Rows))
	for round := range *rounds {
		for i := range report.Rows {
			row := &report.Rows[i]
			sides := []subject{rs, ts}
			if ls != nil {
				sides = append(sides, ls)
			}
			// Each side goes first in turn.
			k := (round + i) % len(sides)
			sides = slices.Concat(sides[k:], sides[:k])
			if *only != "" {
				sides = slices.DeleteFunc(sides, func(s subject) bool { return !strings.EqualFold(s.Name(), *only) })
			}
			for _, s := range sides {
				var res Result
				if row.Scenario == "burn-down" {
					res, err = burnDown(ctx, s, row.Workers, *jobs, *capAfter)
				} else {
					res, err = steady(ctx, s, row.Workers, st)
				}
				if err != nil {
					return fmt.Errorf("%s, %d workers, round %d: %w", row.Scenario, row.Workers, round+1, err)
				}
				switch s.Name() {
				case rs.Name():
					row.River = append(row.River, res)
				case ts.Name():
					row.Taskd = append(row.Taskd, res)
				default:
					row.Limit = append(row.Limit, res)
				}
				fmt.Fprintf(stderr, "  round %d  %-9s %5d workers  %-5s %s\n", round+1, row.Scenario, row.Workers, s.Name(), describe(res, *jobs))
			}
		}
	}
	for i := range report.Rows {
		report.Rows[i].summarize()
	}
	report.Seconds = time.Since(began).Seconds()

	printTable(stdout, &report)
	if *jsonPath != "" {
		return writeJSON(*jsonPath, &report)
	}
	return nil
}

// summarize sets the medians, the per-round ratios and the target of a
// row whose rounds have run.
func (row *Row) summarize() {
	row.RiverJobsPerSec = median(perSec(row.River))
	row.TaskdJobsPerSec = median(perSec(row.Taskd))
	row.RoundRatios = nil
	for i := range min(len(row.River), len(row.Taskd)) {
		if t, r := row.Taskd[i].JobsPerSec, row.River[i].JobsPerSec; t > 0 && r > 0 {
			row.RoundRatios = append(row.RoundRatios, t/r)
		}
	}
	row.Ratio = 0
	if len(row.RoundRatios) > 0 {
		row.Ratio = median(row.RoundRatios)
	}
	row.LimitJobsPerSec = median(perSec(row.Limit))
	row.LimitRoundRatios, row.LimitRatio = nil, 0
	for i := range min(len(row.Limit), len(row.Taskd)) {
		if t, l := row.Taskd[i].JobsPerSec, row.Limit[i].JobsPerSec; t > 0 && l > 0 {
			row.LimitRoundRatios = append(row.LimitRoundRatios, t/l)
		}
	}
	if len(row.LimitRoundRatios) > 0 {
		row.LimitRatio = median(row.LimitRoundRatios)
	}
	row.Target, row.Met = 0, nil
	if row.Workers >= 100 {
		row.Target = targetRatio
		met := row.Ratio >= targetRatio
		row.Met = &met
	}
}

// describe says what one run measured, for the progress lines.
func describe(r Result, jobs int) string {
	s := fmt.Sprintf("%8.0f jobs/s  %d jobs in %.2fs", r.JobsPerSec, r.Jobs, r.Seconds)
	if r.Capped {
		s += fmt.Sprintf(" (capped: %d of %d)", r.Jobs, jobs)
	}
	if r.MinBacklog != nil {
		s += fmt.Sprintf(", fewest waiting %d", *r.MinBacklog)
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d FAILED", r.Failed)
	}
	if r.StoreCPUMsPerJob != nil {
		s += fmt.Sprintf(", CPU per job: store %.3f ms%s, client %.3f ms", *r.StoreCPUMsPerJob, byServer(r.StoreCPUMsPerJobByServer), *r.ClientCPUMsPerJob)
	}
	s += fmt.Sprintf(", insert %.0f jobs/s, setup %.1fs, stop %.1fs", r.InsertPerSec, r.SetupSeconds, r.StopSeconds)
	if r.Logged > 0 {
		s += fmt.Sprintf("; logged %d warnings/errors, first: %s", r.Logged, r.FirstLogged)
	}
	return s
}

func printTable(w io.Writer, r *Report) {
	fmt.Fprintf(w, "River %s vs taskd's embedded workers: no-op jobs/s, median of %d round(s), %s, GOMAXPROCS=%d\n",
		r.RiverVersion, r.Rounds, r.GoVersion, r.GOMAXPROCS)
	fmt.Fprintf(w, "burn-down: %d jobs inserted first, capped at %s; steady: a producer keeps %d jobs waiting, %s window after %s\n",
		r.Jobs, r.Cap, r.Backlog, r.Window, r.Warmup)
	if r.Quick {
		fmt.Fprintln(w, "-quick: a smoke run, not figures to quote")
	}
	durability := shortDurability(r.RiverStore) + " / " + shortDurability(r.TaskdStore)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tworkers\tRiver jobs/s\ttaskd jobs/s\t(h) taskd/River\tper round\ttarget\tstore ms/job River / taskd\tclient ms/job River / taskd\tdurability River / taskd\tnote")
	for _, row := range r.Rows {
		target := ""
		if row.Met != nil {
			target = fmt.Sprintf(">= %.1f %s", row.Target, metWord(*row.Met))
		}
		spread := "-"
		if len(row.RoundRatios) > 0 {
			spread = fmt.Sprintf("%.3f..%.3f", slices.Min(row.RoundRatios), slices.Max(row.RoundRatios))
		}
		store := medianCPU(row.River, func(r Result) *float64 { return r.StoreCPUMsPerJob }) + " / " +
			medianCPU(row.Taskd, func(r Result) *float64 { return r.StoreCPUMsPerJob })
		client := medianCPU(row.River, func(r Result) *float64 { return r.ClientCPUMsPerJob }) + " / " +
			medianCPU(row.Taskd, func(r Result) *float64 { return r.ClientCPUMsPerJob })
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Scenario, row.Workers,
			row.RiverJobsPerSec, row.TaskdJobsPerSec, row.Ratio, spread, target, store, client, durability, note(row, r.Jobs))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "store ms/job: CPU time (/proc) of the store's servers over the measured span, per job (River: PostgreSQL's postmaster and its children; taskd: mysqld and redis-server); client ms/job: this process's, running one side at a time")
	fmt.Fprintf(w, "River's store: %s\ntaskd's store: %s\n", r.RiverStore, r.TaskdStore)
	fmt.Fprintln(w, durabilityNote(r.RiverStore, r.TaskdStore))
	for _, row := range r.Rows {
		if row.Met != nil {
			fmt.Fprintf(w, "(h) %s, %d workers: taskd / River %.3fx (per round %s), want >= %.1f  %s\n", row.Scenario, row.Workers,
				row.Ratio, joinFloats(row.RoundRatios), row.Target, metWord(*row.Met))
		}
	}
	for _, row := range r.Rows {
		if row.LimitRatio > 0 {
			fmt.Fprintf(w, "(l) %s, %d workers: taskd / limit %.3fx (limit %.0f jobs/s, store %s ms/job; per round %s), want >= %.1f  %s\n",
				row.Scenario, row.Workers, row.LimitRatio, row.LimitJobsPerSec,
				medianCPU(row.Limit, func(r Result) *float64 { return r.StoreCPUMsPerJob }),
				joinFloats(row.LimitRoundRatios), limitTarget, metWord(row.LimitRatio >= limitTarget))
		}
	}
	fmt.Fprintf(w, "River comparison took %.0fs\n", r.Seconds)
}

// note names what qualifies a row's figures: capped burn-downs, a producer
// that fell behind, failed jobs.
func note(row Row, jobs int) string {
	var notes []string
	for _, side := range []struct {
		name string
		rs   []Result
	}{{"River", row.River}, {"taskd", row.Taskd}} {
		var capped, starved, failed, logged, none int
		var done []string
		for _, res := range side.rs {
			if res.Capped {
				capped++
				done = append(done, strconv.FormatInt(res.Jobs, 10))
			}
			if res.MinBacklog != nil && *res.MinBacklog <= 0 {
				starved++
			}
			failed += int(res.Failed)
			logged += int(res.Logged)
			if res.Jobs == 0 {
				none++
			}
		}
		if none > 0 {
			notes = append(notes, fmt.Sprintf("%s completed nothing in %d/%d (no ratio for that round)", side.name, none, len(side.rs)))
		}
		if capped > 0 {
			notes = append(notes, fmt.Sprintf("%s capped in %d/%d (done %s of %d)", side.name, capped, len(side.rs), strings.Join(done, ", "), jobs))
		}
		if starved > 0 {
			notes = append(notes, fmt.Sprintf("%s ran out of jobs in %d/%d", side.name, starved, len(side.rs)))
		}
		if failed > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d jobs failed", side.name, failed))
		}
		if logged > 0 {
			notes = append(notes, fmt.Sprintf("%s logged %d warnings/errors", side.name, logged))
		}
	}
	return strings.Join(notes, "; ")
}

// durabilityNote says whether the two stores ran at the same durability, and
// which: the (h) ratios compare like with like only when they did.
func durabilityNote(river, taskd string) string {
	r, t := shortDurability(river), shortDurability(taskd)
	switch {
	case r == "pg: WAL fsync per commit" && t == "innodb: fsync per commit":
		return "durability: the same on both sides: every commit is fsynced before it is acknowledged (PostgreSQL's WAL; MariaDB's redo and binary logs)"
	case r != "pg: WAL fsync per commit" && t != "innodb: fsync per commit" && t != "innodb: redo fsync per commit, binlog not":
		return "durability: the same on both sides: commits are not fsynced one by one (" + r + "; " + t + "); a machine crash loses the last second or so"
	default:
		return "durability: NOT the same (River " + r + ", taskd " + t + "): the ratios compare unequal stores; -mysql-sync (the default) fsyncs MariaDB's every commit, as PostgreSQL's"
	}
}

// shortDurability condenses a store's settings to what a commit waits for.
func shortDurability(store string) string {
	switch {
	case strings.HasPrefix(store, "PostgreSQL"):
		if strings.Contains(store, "fsync=off") {
			return "pg: no fsync"
		}
		if strings.Contains(store, "synchronous_commit=off") {
			return "pg: WAL fsync deferred"
		}
		return "pg: WAL fsync per commit"
	case strings.HasPrefix(store, "MariaDB"):
		// With the binary log on, a commit is durable only once both logs
		// are fsynced: recovery rolls back what the binary log lacks.
		binlogLag := strings.Contains(store, "binary log on") && !strings.Contains(store, "sync_binlog=1")
		switch {
		case strings.Contains(store, "innodb_flush_log_at_trx_commit=1") && !binlogLag:
			return "innodb: fsync per commit"
		case strings.Contains(store, "innodb_flush_log_at_trx_commit=1"):
			return "innodb: redo fsync per commit, binlog not"
		case strings.Contains(store, "innodb_flush_log_at_trx_commit=2"):
			return "innodb: redo written per commit, fsync ~1/s"
		default:
			return "innodb: redo written and fsync ~1/s"
		}
	}
	return store
}

// medianCPU renders the median of a CPU figure over rs, "n/a" when no run
// measured it.
func medianCPU(rs []Result, f func(Result) *float64) string {
	var vs []float64
	for _, r := range rs {
		if v := f(r); v != nil {
			vs = append(vs, *v)
		}
	}
	if len(vs) == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(median(vs), 'f', 3, 64)
}

func metWord(met bool) string {
	if met {
		return "MET"
	}
	return "NOT MET"
}

func perSec(rs []Result) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.JobsPerSec
	}
	return out
}

// median is 0 for no values (a side left out with -only).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func joinFloats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(parts, " ")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// warnLogger is River's migrator's logger: warnings and errors to stderr.
func warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func writeJSON(path string, r *Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// byServer formats a store's CPU per job by server, " (mysqld 0.100,
// redis-server 0.019)", in name order; "" for a store of one kind.
func byServer(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.3f", name, m[name]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
