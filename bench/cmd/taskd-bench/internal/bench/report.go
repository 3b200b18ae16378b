package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// run is one named run of a scenario: a workload and the strategies it runs.
type run struct {
	name       string
	round      int // 1..Rounds for a repeated comparison, 0 for a single run
	workload   Workload
	strategies []string
}

// ScenarioNames lists the presets of -scenario.
var ScenarioNames = []string{"all", "one-category", "categories", "workers", "one-editor", "pool-size", "sweep", "http", "replica", "long-poll", "insert-tx", "limits", "galera", "month", "month-long", "storage"}

// Preset shapes the presets: how many times the compared pairs run, and
// whether to shorten every run.
type Preset struct {
	// Rounds is how many times the compared pairs (a, b, f, j, g2) run,
	// interleaved; the targets are judged on the medians. Default
	// RoundsDefault.
	Rounds int
	// Quick shortens every run (2s, smaller pools) for a smoke test; its
	// figures are not the ones to quote.
	Quick bool
	// Replica says whether a replica is configured; without one the
	// replica preset is left out.
	Replica bool
	// Galera says whether a Galera cluster is configured (Config.GaleraDSN);
	// without one the galera preset (g2) is left out of all.
	Galera bool
}

// RoundsDefault is how many times a compared pair runs.
const RoundsDefault = 3

// scenario returns the runs of a preset, in the order they run.
func scenario(name string, p Preset) ([]run, bool) {
	if p.Rounds <= 0 {
		p.Rounds = RoundsDefault
	}
	pair := []string{StrategyTaskd, StrategySkipLocked}
	d, short, big, pool, pollers, g2Pool, txRounds, limPool := 6*time.Second, 5*time.Second, 1_000_000, 100_000, LongPollEditors, 30_000, InsertTxRounds, LimitsPool
	if p.Quick {
		d, short, big, pool, pollers, g2Pool, txRounds, limPool = 2*time.Second, 2*time.Second, 100_000, 20_000, LongPollEditors/10, 10_000, InsertTxRounds/5, LimitsPool/5
	}
	// The compared pairs: (a) 200 editors on one category (with seed-naive
	// in the first round), (b) 200 editors over 50 categories, (f) 16
	// background worker slots with a no-op handler.
	a := func(round int) run {
		st := pair
		if round == 1 {
			st = []string{StrategyTaskd, StrategySeedNaive, StrategySkipLocked}
		}
		return run{"a-one-category", round, Workload{Editors: 200, Categories: 1, Pool: pool, Duration: d}, st}
	}
	b := func(round int) run {
		return run{"b-50-categories", round, Workload{Editors: 200, Categories: 50, Pool: pool, Duration: d}, pair}
	}
	f := func(round int) run {
		return run{"f-workers", round, Workload{Workers: 16, Categories: 1, Pool: pool, Duration: d}, pair}
	}
	// (j) one editor alone, with group commit and with every write in a
	// transaction of its own (as before group commit): a lone write must
	// not wait for a group.
	j := func(round int) []run {
		w := Workload{Editors: 1, Categories: 1, Pool: pool / 10, Duration: short}
		alone := w
		alone.GroupCommit = 1
		return []run{
			{"j-one-editor", round, w, []string{StrategyTaskd}},
			{"j-one-editor-ungrouped", round, alone, []string{StrategyTaskd}},
		}
	}
	rounds := func(mk ...func(int) run) []run {
		var out []run
		for i := 1; i <= p.Rounds; i++ {
			for _, m := range mk {
				out = append(out, m(i))
			}
		}
		return out
	}
	presets := map[string][]run{
		"one-category": rounds(a),
		"categories":   rounds(b),
		"workers":      rounds(f),
		"one-editor":   roundsOf(p.Rounds, j),
		// (c) next latency against the size of the pool.
		"pool-size": {
			{"c-pool-10k", 0, Workload{Editors: 100, Categories: 1, Pool: 10_000, Duration: short}, []string{StrategyTaskd}},
			{"c-pool-" + shortCount(big), 0, Workload{Editors: 100, Categories: 1, Pool: big, Duration: short}, []string{StrategyTaskd}},
		},
		// (d) a sweep of 100,000 expired claims under load, and the same load without.
		"sweep": {
			{"d-no-sweep", 0, Workload{Editors: 200, Categories: 1, Pool: pool, Duration: short}, []string{StrategyTaskd}},
			{"d-sweep-100k", 0, Workload{Editors: 200, Categories: 1, Pool: pool, Duration: short, Expired: 100_000}, []string{StrategyTaskd}},
		},
		// (e) the real server over HTTP, for its memory.
		"http": {{"e-http", 0, Workload{Editors: 200, Categories: 1, Pool: pool, Duration: d, Mode: ModeHTTP}, []string{StrategyTaskd}}},
		// (i) editors long-polling one taskd serve on an empty pool, then
		// twice as many tasks inserted.
		"long-poll": {{"i-long-poll", 0, Workload{Editors: pollers, Categories: 1, Pool: 2 * pollers, Duration: d, Mode: ModeHTTP, LongPoll: true}, []string{StrategyTaskd}}},
		// (m) tasks inserted in the caller's transaction (InsertTx): from
		// its COMMIT to a waiting worker's claim and a long-polling
		// editor's answer.
		"insert-tx": {{"m-insert-tx", 0, Workload{Editors: txRounds, Categories: 2, Pool: txRounds, InsertTx: true}, []string{StrategyTaskd}}},
		// (g) taskd's statements on the primary without and with candidate
		// reads from a replica; both databases are replicated, so the
		// replica applies the same writes in both.
		"replica": {
			{"g-primary-only", 0, Workload{Editors: 200, Categories: 50, Pool: pool, Duration: d, Replicated: true}, []string{StrategyTaskd}},
			{"g-replica-reads", 0, Workload{Editors: 200, Categories: 50, Pool: pool, Duration: d, Replicated: true, ReplicaReads: true}, []string{StrategyTaskd}},
		},
	}
	// (n) worker jobs/s unlimited, under a category limit equal to the
	// slots and over 100 keys of limit 1, the ways interleaved in rounds.
	n := func(round int) []run {
		var out []run
		for _, way := range []string{LimitsNone, LimitsCategory, LimitsKeys} {
			out = append(out, run{"n-limits-" + way, round, Workload{Editors: 1, Categories: 1, Pool: limPool, Limits: way}, []string{StrategyTaskd}})
		}
		return out
	}
	presets["limits"] = roundsOf(p.Rounds, n)
	// (k) a month in an hour: workers and editors at full speed with done
	// tasks purged after seconds (short, in all) or minutes (month-long,
	// make bench-month: 5 million tasks or more).
	monthD, monthKeep := 90*time.Second, 15*time.Second
	if p.Quick {
		monthD, monthKeep = 20*time.Second, 4*time.Second
	}
	presets["month"] = []run{{"k-month", 0, Workload{Workers: 16, Editors: 50, Categories: 2, Pool: 2 * refillLow, Duration: monthD, Retention: monthKeep}, []string{StrategyTaskd}}}
	presets["month-long"] = []run{{"k-month-long", 0, Workload{Workers: 16, Editors: 50, Categories: 2, Pool: 2 * refillLow, Duration: MonthLongDuration, Retention: 5 * time.Minute, MinTasks: MonthLongTasks}, []string{StrategyTaskd}}}
	// (g2) the (b) workload on a 3-node Galera cluster, three dispatchers
	// on one node, spread over the nodes, spread with causal reads off, and
	// on the single MariaDB server; the rounds interleaved.
	g2 := func(round int) []run { return g2Runs(round, g2Pool, short) }
	presets["galera"] = roundsOf(p.Rounds, g2)
	if name == "all" {
		out := rounds(a, b, f)
		out = append(out, roundsOf(p.Rounds, j)...)
		if p.Galera {
			out = append(out, presets["galera"]...)
		}
		for _, n := range []string{"pool-size", "sweep", "http", "long-poll", "insert-tx", "limits", "month", "replica"} {
			if n == "replica" && !p.Replica {
				continue
			}
			out = append(out, presets[n]...)
		}
		return out, true
	}
	switch name {
	case "i":
		name = "long-poll"
	case "j":
		name = "one-editor"
	case "g2":
		name = "galera"
	case "k":
		name = "month"
	case "m":
		name = "insert-tx"
	case "n":
		name = "limits"
	}
	rs, ok := presets[name]
	return rs, ok
}

// roundsOf returns the runs mk makes for rounds 1 to n, in order.
func roundsOf(n int, mk func(round int) []run) []run {
	var out []run
	for i := 1; i <= n; i++ {
		out = append(out, mk(i)...)
	}
	return out
}

// shortCount writes 1000000 as 1m and 100000 as 100k.
func shortCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// Report is everything one taskd-bench run measured.
type Report struct {
	Started time.Time `json:"started"`
	Results []Result  `json:"results"`
	Ratios  []Ratio   `json:"ratios"`
	// Targets judges the targets on the medians of the repeated
	// runs.
	Targets []Target `json:"targets"`
	// CPU is the MariaDB server's CPU per cycle (a, b) and per job (f) of
	// each strategy, medians of the repeated runs.
	CPU   []CPULine `json:"mysql_cpu"`
	Notes []string  `json:"notes"`
}

// Notes printed under every table.
var notes = []string{
	"every strategy's submit writes the same durable result (task done by a fenced UPDATE + a task_results row); taskd also writes its audit events (task_events) on claim and submit",
	"taskd's submit returns the next assignment in the same call (as the API's submit does): a cycle is one Submit; next latency is the part of it after the commit (lock release + next claim), or, when the next claim goes in the submit's own transaction (a pending task: store.Store.SubmitAndClaim), all of that transaction and what follows it",
	"mysql/op and redis/op are deltas of server-wide counters (Questions, total_commands_processed) per assignment: anything else using the servers is counted too",
	"rt/cyc columns are counted in this process over the timed window, per cycle: mysql rt = requests the strategy's connections sent to the primary (a counting driver.Connector under the same settings as store.Open; a statement batch is one, BEGIN, COMMIT and ROLLBACK one each), stmts = the statements those requests carried, redis rt = go-redis commands processed alone plus pipelines (a hook); n/a over HTTP, where the requests leave the taskd serve child",
	"commits/cyc is the delta of the primary's Com_commit (SHOW GLOBAL STATUS) over the timed window per cycle: server-wide, but the harness reads nothing that commits in that window and make bench runs its own servers, so it is this strategy's COMMITs (alone or inside a batch); autocommit statements are not counted",
	"f-workers: editors = 16w means 16 background worker slots with a no-op handler; cycles/s is jobs/s (claim, run, commit of the result). mysql-skip-locked there is a worker loop in River's model: per job, BEGIN; SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1; UPDATE to assigned; COMMIT; then UPDATE to done + result row in a transaction of its own",
	"j-one-editor: one editor alone, taskd as configured (group commit on) and j-one-editor-ungrouped with store.Config.GroupCommit 1 (every write in a transaction of its own, as before group commit), back to back in each round; the (j) targets compare their next and cycle p50, median of the per-round ratios",
	"a, b and f run " + fmt.Sprint(RoundsDefault) + " times each (unless -rounds says otherwise), interleaved, each run in a fresh database; the target lines judge the median cycles/s of each strategy and the median of the per-run ratios",
	"g2-*: the b workload (200 editors, 50 categories) served by 3 taskd dispatchers in this process, each with a store and connection pool of its own (as 3 replicas of taskd), sharing Redis, editor i always on dispatcher i mod 3: g2-mariadb on the single MariaDB server, g2-one-node with every dispatcher on node 1 of the 3-node Galera cluster, g2-spread with dispatcher i on node i+1, g2-spread-causal-off the same with wsrep_sync_wait=0 (taskd's reads not causal). On Galera, mysql/op, commits/cyc and mysqld ms/cyc add up the 3 nodes (their Questions, Com_commit and CPU: the nodes share this machine's cores); the g2 targets judge the medians of the per-round ratios",
	"seed-naive and mysql-skip-locked only claim pending rows: abandoned claims come back to them only with a sweeper, which they do not have",
	"mysqld ms/cyc and the MariaDB CPU lines: CPU time (user + system, /proc/PID/stat) of the MySQL server process over the counted window, per cycle (per job in f): server-wide, like commits/cyc, so it includes InnoDB's background threads (purge, flushing) while the window is open; n/a when the server runs on another machine",
	"k-month (a month in an hour): 16 worker slots (cat0, editors = 16w) and 50 editors (cat1) at full speed, each category topped up to 20,000 pending tasks or more, while a sweeper started as taskd starts it (schedule 10s, sweep.interval's default, under its lock) purges done tasks older than the retention (15s; 5 minutes in k-month-long, make bench-month) in batches of " + fmt.Sprint(MonthBatchDefault) + "; cycles/s is tasks done per second (jobs plus editors' cycles). Table sizes are data_length + index_length after ANALYZE TABLE (allocated pages) and COUNT(*); the tasks table holds the pending pool too. Claim latency is the editors' next; a claim is during a purge when it started inside a batch, outside when it started after the first batch and outside any. Row lock waits are Innodb_row_lock_waits (server-wide: the purge's own waits count too) in 250 ms intervals that overlapped a batch or not; the waiting statements are sampled from information_schema.INNODB_TRX at the same times",
	"m-insert-tx: a taskd.Engine in this process (a worker of one slot, the API on a loopback listener, dispatch.poll_interval at its default 5s) and " + fmt.Sprint(InsertTxRounds) + " editors long-polling it over HTTP (wait_ms 60000); then " + fmt.Sprint(InsertTxRounds) + " rounds, one after the other: the application's own *sql.DB begins a transaction, InsertManyTx adds a task for the worker and one for the editors, and COMMIT; commit to claim runs from the return of the COMMIT to the worker's handler starting on the task, commit to answer to the HTTP answer holding the other. Nothing but the commit tells taskd: the engine's commit waiters see it end",
	"n-limits-*: a taskd.Engine in this process with " + fmt.Sprint(LimitsSlots) + " worker slots (a no-op handler returning {\"ok\":true}) and a backlog of " + fmt.Sprint(LimitsPool) + " tasks of one category inserted through POST /v1/tasks while the category is paused; cycles/s is the backlog over the time from the category's resume to its last task done (burn-down). Three ways, each in a fresh database with the same engine and durability, interleaved in rounds: none (no limit), category (the category's max_in_flight " + fmt.Sprint(LimitsSlots) + ", equal to the slots: never binding) and keys (each task's limit_key one of " + fmt.Sprint(LimitsKeyCount) + ", interleaved, under key_limit 1). A taskd without limits skips the category and keys ways with the reason. River Pro users report limits cutting throughput from 33k to 17k jobs an hour (0.52x)",
	"memory is VmHWM/VmRSS of this process (inproc: peak over everything run before) or of the taskd serve child (http)",
	"i-long-poll: editors each long-poll POST /v1/assignments/next (wait_ms 60000) on an empty pool; once every poll is written and taskd serve is quiet, its CPU is measured over 15 s (1.5 s with -quick) with every poll parked and no work (idle, in cores), then twice as many tasks go in through POST /v1/tasks, 20 batches one after the other; insert to answer runs from the acknowledgement of the batch holding the editor's task to its answer. The child runs with memory_limit_mib 100 + 32 KiB per editor (413 for 10,000), as docs/deployment.md recommends for a process holding that many long polls. The harness sets RLIMIT_NOFILE to its hard limit (setrlimit) for itself and the taskd serve child, and stops with an error when the hard limit is below editors + 1024",
}

// RunScenario runs the preset name (or, for "", the single workload w with
// strategies) and returns the report.
func RunScenario(ctx context.Context, cfg Config, name string, p Preset, w Workload, strategies []string) (*Report, error) {
	rep := &Report{Started: time.Now().UTC(), Notes: notes}
	runs := []run{{"custom", 0, w, strategies}}
	if name != "" {
		var ok bool
		if runs, ok = scenario(name, p); !ok {
			return nil, fmt.Errorf("unknown scenario %q", name)
		}
		if name == "all" && !p.Replica {
			rep.Notes = append(rep.Notes, "g (primary statements with and without a replica) did not run: no replica configured (mysql.replica_dsn / TASKD_MYSQL_REPLICA_DSN)")
		}
		if name == "all" && !p.Galera {
			rep.Notes = append(rep.Notes, "g2 (a 3-node Galera cluster) did not run: no cluster configured (TASKD_GALERA_DSN, TASKD_GALERA_ADDRS)")
		}
	}
	finish := func() {
		rep.Ratios = append(append(ratios(rep.Results), g2Ratios(rep.Results)...), limitsRatios(rep.Results)...)
		rep.Targets = append(append(targets(rep.Results), g2Targets(rep.Results)...), limitsTargets(rep.Results)...)
		rep.CPU = cpuLines(rep.Results)
	}
	for i, r := range runs {
		if r.round > 0 {
			cfg.progress("run %d of %d: %s, round %d", i+1, len(runs), r.name, r.round)
		} else {
			cfg.progress("run %d of %d: %s", i+1, len(runs), r.name)
		}
		res, err := Run(ctx, cfg, r.name, r.workload, r.strategies)
		for j := range res {
			res[j].Run = r.round
		}
		rep.Results = append(rep.Results, res...)
		if err != nil {
			finish()
			return rep, err
		}
	}
	finish()
	return rep, nil
}

// find returns the first result of strategy in scenario, or nil.
func find(rs []Result, scenario, strategy string) *Result {
	for i := range rs {
		if rs[i].Scenario == scenario && rs[i].Strategy == strategy {
			return &rs[i]
		}
	}
	return nil
}

// findRun returns the result of strategy in round run of scenario, or nil.
func findRun(rs []Result, scenario string, run int, strategy string) *Result {
	for i := range rs {
		if rs[i].Scenario == scenario && rs[i].Run == run && rs[i].Strategy == strategy {
			return &rs[i]
		}
	}
	return nil
}

// ratios computes the comparisons of each run, for those results present.
func ratios(rs []Result) []Ratio {
	var out []Ratio
	cps := func(r *Result) float64 { return r.CyclesPerSec }
	type key struct {
		scenario string
		run      int
	}
	seen := map[key]bool{}
	for _, r := range rs {
		k := key{r.Scenario, r.Run}
		if seen[k] {
			continue
		}
		seen[k] = true
		t := findRun(rs, k.scenario, k.run, StrategyTaskd)
		if t == nil {
			continue
		}
		name := k.scenario
		if k.run > 0 {
			name += " #" + fmt.Sprint(k.run)
		}
		for _, base := range []string{StrategySeedNaive, StrategySkipLocked} {
			if b := findRun(rs, k.scenario, k.run, base); b != nil {
				out = append(out, newRatio(name+": taskd / "+base, "cycles/s", cps(t), cps(b), 0, true))
			}
		}
	}
	if b := find(rs, "c-pool-10k", StrategyTaskd); b != nil {
		for i := range rs {
			if a := &rs[i]; strings.HasPrefix(a.Scenario, "c-pool-") && a.Scenario != b.Scenario && a.Strategy == StrategyTaskd {
				out = append(out, newRatio("c: taskd next p99 pool "+strings.TrimPrefix(a.Scenario, "c-pool-")+" / pool 10k", "next p99", a.Next.P99Ms, b.Next.P99Ms, 0, false))
			}
		}
	}
	if s, b := find(rs, "d-sweep-100k", StrategyTaskd), find(rs, "d-no-sweep", StrategyTaskd); s != nil && b != nil && s.Sweep != nil {
		out = append(out, newRatio("d: taskd next p99 during sweep / without", "next p99", s.Sweep.NextDuring.P99Ms, b.Next.P99Ms, 0, false))
	}
	if g, p := find(rs, "g-replica-reads", StrategyTaskd), find(rs, "g-primary-only", StrategyTaskd); g != nil && p != nil &&
		g.MySQLStatementsPerCycle != nil && p.MySQLStatementsPerCycle != nil {
		out = append(out, newRatio("g: taskd statements sent to the primary per cycle, replica reads / primary only", "stmts/cycle",
			*g.MySQLStatementsPerCycle, *p.MySQLStatementsPerCycle, 0, false))
		out = append(out, newRatio("g: taskd cycles/s, replica reads / primary only", "cycles/s", g.CyclesPerSec, p.CyclesPerSec, 0, true))
	}
	return out
}

// WriteTable prints the report as a table, the ratio lines, the target
// lines and the notes.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trun\tstrategy\tmode\teditors\tcats\tpool\tcycles/s\tempty\tnext p50 ms\tnext p99 ms\tcycle p99 ms\tconflicts/op\trefused\tmysql/op\tmysql rt/cyc\tstmts/cyc\tcommits/cyc\treads/cyc\tmysqld ms/cyc\tredis/op\tredis rt/cyc\terrors\tdouble\tRSS MiB\tHWM MiB\t")
	for _, r := range rep.Results {
		conf := fmt.Sprintf("%.2f", r.ConflictsPerAssignment)
		refused := fmt.Sprint(r.RefusedClaims)
		if r.ConflictsPerAssignment < 0 {
			conf, refused = "n/a", "n/a"
		}
		drained := ""
		if r.Drained {
			drained = "*"
		}
		runNo := "-"
		if r.Run > 0 {
			runNo = fmt.Sprint(r.Run)
		}
		eds := fmt.Sprint(r.Workload.Editors)
		if r.Workload.Workers > 0 {
			eds = fmt.Sprintf("%dw", r.Workload.Workers)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%.0f%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%.2f\t%s\t%s\t%.1f\t%s\t%d\t%d\t%.0f\t%.0f\t\n",
			r.Scenario, runNo, r.Strategy, r.Workload.Mode, eds, r.Workload.Categories, r.Workload.Pool,
			r.CyclesPerSec, drained, r.EmptyHanded, latency(r.Next, r.Next.P50Ms), latency(r.Next, r.Next.P99Ms), latency(r.Cycle, r.Cycle.P99Ms), conf, refused,
			r.MySQLPerAssignment, perCycle(r.MySQLRoundTripsPerCycle), perCycle(r.MySQLStatementsPerCycle), r.CommitsPerCycle,
			perCycle(r.CandidateReadsPerCycle), perCycle(r.MySQLCPUMsPerCycle),
			r.RedisPerAssignment, perCycle(r.RedisRoundTripsPerCycle), r.Errors, r.DoubleCommits,
			float64(r.Memory.RSSKiB)/1024, float64(r.Memory.HWMKiB)/1024)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if lp := r.LongPoll; lp != nil {
			fmt.Fprintf(w, "%s: %d editors long-polled, %d tasks inserted in %d batches over %.2fs; %d answered (%d answers 204 first), insert to answer p50 %.0fms p99 %.0fms max %.0fms; idle with every poll parked %.4f of a core over %.1fs; RLIMIT_NOFILE %d\n",
				r.Scenario, lp.Editors, lp.Tasks, lp.Batches, lp.InsertSec, lp.Answered, lp.NoContent,
				lp.InsertToAnswer.P50Ms, lp.InsertToAnswer.P99Ms, lp.InsertToAnswer.MaxMs, lp.IdleCores, lp.IdleSec, lp.FDLimit)
		}
		if m := r.Month; m != nil {
			writeMonth(w, r.Scenario, r, m)
		}
		if it := r.InsertTx; it != nil {
			fmt.Fprintf(w, "%s: %d transactions committed, each with a task for the waiting worker and one for %d long-polling editors; commit to claim p50 %.1fms p99 %.1fms max %.1fms; commit to answer p50 %.1fms p99 %.1fms max %.1fms; %d rounds missed\n",
				r.Scenario, it.Rounds, r.Workload.Editors, it.CommitToClaim.P50Ms, it.CommitToClaim.P99Ms, it.CommitToClaim.MaxMs,
				it.CommitToAnswer.P50Ms, it.CommitToAnswer.P99Ms, it.CommitToAnswer.MaxMs, it.Missed)
		}
		if l := r.Limits; l != nil {
			writeLimits(w, r, l)
		}
		if r.Sweep != nil {
			fmt.Fprintf(w, "%s: swept %d expired claims in %.2fs; taskd next during the sweep p50 %.2fms p99 %.2fms (%d claims)\n",
				r.Scenario, r.Sweep.Recycled, r.Sweep.DurationSec, r.Sweep.NextDuring.P50Ms, r.Sweep.NextDuring.P99Ms, r.Sweep.NextDuring.Count)
		}
		if r.ReplicaRoundTripsPerCycle != nil {
			fmt.Fprintf(w, "%s %s: %s MySQL round trips per cycle to the replica\n", r.Scenario, r.Strategy, perCycle(r.ReplicaRoundTripsPerCycle))
		}
		if r.Drained {
			fmt.Fprintf(w, "%s %s: * the pool ran dry after %.1fs\n", r.Scenario, r.Strategy, r.ElapsedSec)
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s %s: %d errors, the first: %s\n", r.Scenario, r.Strategy, r.Errors, r.FirstError)
		}
	}
	for _, ra := range rep.Ratios {
		fmt.Fprintln(w, ra.String())
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintln(w)
		for _, t := range rep.Targets {
			fmt.Fprintln(w, t.String())
		}
	}
	if len(rep.CPU) > 0 {
		fmt.Fprintln(w)
		for _, c := range rep.CPU {
			fmt.Fprintln(w, c.String())
		}
	}
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	return nil
}

// latency renders a latency of l in milliseconds, "-" when l has no
// samples (background workers).
func latency(l Latency, ms float64) string {
	if l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ms)
}

// perCycle renders a per-cycle count, n/a when it was not counted.
func perCycle(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *v)
}

// WriteJSON writes the report as indented JSON to path.
func (rep *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
