package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/tasks"
)

// Scenario (k), a month in an hour: background workers (category cat0) and
// editors (cat1) push tasks through at full speed while the pool is topped up
// and the sweeper, started as taskd starts it (under its lock, on a schedule
// of monthSchedule), purges done tasks older than Workload.Retention. It
// measures whether the tables plateau and whether the claims stay as fast at
// the end as at the start, and while a purge batch runs.

// monthSchedule is how often the scenario's sweeper sweeps, and purges until
// the next sweep is nearly due: sweep.interval's default.
const monthSchedule = "10s"

// MonthBatchDefault is the purge batch of scenario (k): larger than the
// sweeper's default, so that one sweeping process keeps up with the
// workers' rate.
const MonthBatchDefault = 2000

// refillLow and refillChunk: when a category has fewer than refillLow pending
// tasks, refillChunk more are inserted in one statement.
const (
	refillLow   = 20_000
	refillChunk = 5_000
	refillEvery = 100 * time.Millisecond
)

// monitorEvery is how often the server's row lock counters and CPU are read.
const monitorEvery = 250 * time.Millisecond

// monthTables are the tables whose size (k) reports: those retention purges
// that the workload writes.
var monthTables = []string{"tasks", "task_events", "task_results"}

// MonthStats is what scenario (k) measured.
type MonthStats struct {
	RetentionSec float64 `json:"retention_s"`
	// Turnovers is the run's duration over the retention: how many times
	// the done tasks were replaced.
	Turnovers float64 `json:"turnovers"`
	// Pushed counts the tasks done (jobs plus editors' cycles); Inserted
	// those the refill added during the run.
	Pushed   int64 `json:"pushed"`
	Inserted int64 `json:"inserted"`
	// Start, Middle and End are the tables' sizes at those points.
	Start  []TableFigure `json:"start"`
	Middle []TableFigure `json:"middle"`
	End    []TableFigure `json:"end"`
	// FirstTenth and LastTenth: the editors' claim (next) latency in the
	// first and last tenth of the run.
	FirstTenth Latency `json:"claim_first_tenth"`
	LastTenth  Latency `json:"claim_last_tenth"`
	// DuringPurge: claims that started while a purge batch ran; Outside:
	// those that started after the first batch, while none ran.
	DuringPurge Latency `json:"claim_during_purge"`
	Outside     Latency `json:"claim_outside_purge"`
	// Batches, PurgedRows (all tables), PurgeSec (time inside batches).
	Batches    int              `json:"purge_batches"`
	PurgedRows int64            `json:"purged_rows"`
	PurgedBy   map[string]int64 `json:"purged_rows_by_table"`
	PurgeSec   float64          `json:"purge_s"`
	// Row lock waits (Innodb_row_lock_waits, server-wide) per second in the
	// monitor's intervals that overlapped a purge batch and in the others,
	// and the mysqld CPU (cores busy) in each; -1 when not read.
	LockWaitsPerSecPurge   float64 `json:"row_lock_waits_per_s_purge"`
	LockWaitsPerSecOutside float64 `json:"row_lock_waits_per_s_outside"`
	LockTimeMsPurge        float64 `json:"row_lock_time_ms_purge"`
	LockTimeMsOutside      float64 `json:"row_lock_time_ms_outside"`
	CPUPurge               float64 `json:"mysqld_cores_purge"`
	CPUOutside             float64 `json:"mysqld_cores_outside"`
	// ClaimErrors counts the editors' failed claims and submits and the
	// workers' failed jobs and lost leases (a lock wait timeout, 1205, or a
	// deadlock, 1213, on the claim path would be among them); the Result's
	// FirstError says what the first was.
	ClaimErrors int64 `json:"claim_errors"`
	// Waiting counts, per statement (its first words), the transactions
	// information_schema.INNODB_TRX showed waiting for a lock at the
	// monitor's readings: who waited, whichever its cause.
	Waiting map[string]int `json:"waiting_statements,omitempty"`
	// OtherWaitsPurge and OtherWaitsOutside count the transactions seen
	// waiting whose statement is not the purge's (claims, submits, jobs,
	// the refill), at readings inside a purge batch and outside: a sample
	// of the lock waits on the claim path, not a count of every one.
	OtherWaitsPurge   int `json:"other_waits_purge"`
	OtherWaitsOutside int `json:"other_waits_outside"`
}

// TableFigure is one table's size at one point of (k).
type TableFigure struct {
	Name string `json:"name"`
	// Rows is COUNT(*), EstRows InnoDB's estimate.
	Rows    int64 `json:"rows"`
	EstRows int64 `json:"est_rows"`
	// Bytes is data_length + index_length after ANALYZE TABLE (allocated
	// pages); FileBytes the size of its tablespace file (-1 when unknown).
	Bytes     int64 `json:"bytes"`
	FileBytes int64 `json:"file_bytes"`
}

// purgeClock is the store the scenario's sweeper purges through: it records
// when each purge batch ran and what it deleted.
type purgeClock struct {
	*store.Store
	start time.Time

	mu      sync.Mutex
	windows [][2]time.Duration
	rows    map[string]int64
}

// PurgeTasks runs the store's and records the batch.
func (p *purgeClock) PurgeTasks(ctx context.Context, status tasks.Status, olderThan time.Duration, limit int) (store.Purged, error) {
	t0 := time.Since(p.start)
	got, err := p.Store.PurgeTasks(ctx, status, olderThan, limit)
	t1 := time.Since(p.start)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.windows = append(p.windows, [2]time.Duration{t0, t1})
	for t, n := range got.Rows {
		p.rows[t] += n
	}
	return got, err
}

func (p *purgeClock) snapshot() ([][2]time.Duration, map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rows := make(map[string]int64, len(p.rows))
	for t, n := range p.rows {
		rows[t] = n
	}
	return slices.Clone(p.windows), rows
}

// inWindow reports whether at falls in one of windows (sorted by start).
func inWindow(windows [][2]time.Duration, at time.Duration) bool {
	i, _ := slices.BinarySearchFunc(windows, at, func(w [2]time.Duration, at time.Duration) int {
		switch {
		case w[1] <= at:
			return -1
		case w[0] > at:
			return 1
		}
		return 0
	})
	return i < len(windows) && windows[i][0] <= at && at < windows[i][1]
}

// overlaps reports whether [from, to) overlaps one of windows.
func overlaps(windows [][2]time.Duration, from, to time.Duration) bool {
	for _, w := range windows {
		if w[0] < to && from < w[1] {
			return true
		}
	}
	return false
}

// monitorSample is one reading of the server's lock counters and CPU.
type monitorSample struct {
	at         time.Duration
	waits      int64
	lockTimeMs int64
	cpu        time.Duration
}

func readLockCounters(ctx context.Context, bd *benchDB) (waits, timeMs int64, err error) {
	rows, err := bd.db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_row_lock_waits', 'Innodb_row_lock_time')`)
	if err != nil {
		return 0, 0, fmt.Errorf("read row lock counters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, 0, fmt.Errorf("read row lock counters: %w", err)
		}
		if strings.EqualFold(name, "Innodb_row_lock_waits") {
			waits = v
		} else {
			timeMs = v
		}
	}
	return waits, timeMs, rows.Err()
}

// waitingSQL reads the statements of the transactions waiting for a lock.
const waitingSQL = `SELECT COALESCE(LEFT(trx_query, 200), '') FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`

// readWaiting returns the statements waiting for a lock now, each by its
// first words.
func readWaiting(ctx context.Context, bd *benchDB) ([]string, error) {
	var qs []string
	if err := bd.db.SelectContext(ctx, &qs, waitingSQL); err != nil {
		return nil, fmt.Errorf("read lock waits: %w", err)
	}
	for i, q := range qs {
		f := strings.Fields(q)
		qs[i] = strings.Join(f[:min(len(f), 8)], " ")
	}
	return qs, nil
}

// purgeStatements start the statements of a purge batch (store.PurgeTasks).
var purgeStatements = []string{"DELETE FROM task_", "DELETE FROM tasks ", "SELECT id FROM tasks FORCE INDEX (PRIMARY)",
	"SELECT id, COALESCE(group_id", "SELECT task_id, seq FROM task_results", "INSERT INTO task_results_feed"}

// isPurge reports whether q (its first words) is a statement of a purge batch.
func isPurge(q string) bool {
	return slices.ContainsFunc(purgeStatements, func(p string) bool { return strings.HasPrefix(q, p) })
}

// tableFigures runs ANALYZE TABLE (so that the lengths are current) and reads
// the sizes and exact row counts of monthTables.
func tableFigures(ctx context.Context, bd *benchDB) ([]TableFigure, error) {
	if _, err := bd.db.ExecContext(ctx, "ANALYZE TABLE "+strings.Join(monthTables, ", ")); err != nil {
		return nil, fmt.Errorf("analyze tables: %w", err)
	}
	sizes, err := bd.store.TableSizes(ctx)
	if err != nil {
		return nil, err
	}
	var out []TableFigure
	for _, name := range monthTables {
		f := TableFigure{Name: name, FileBytes: -1}
		for _, s := range sizes {
			if s.Name == name {
				f.Bytes, f.EstRows = s.Bytes, s.Rows
			}
		}
		if err := bd.db.GetContext(ctx, &f.Rows, "SELECT COUNT(*) FROM "+name); err != nil {
			return nil, fmt.Errorf("count %s: %w", name, err)
		}
		var size int64
		if err := bd.db.GetContext(ctx, &size, `SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = ?`, bd.name+"/"+name); err == nil {
			f.FileBytes = size
		}
		out = append(out, f)
	}
	return out, nil
}

// refill keeps every category of cats at refillLow pending tasks or more
// until ctx ends, and returns how many it inserted.
func refill(ctx context.Context, bd *benchDB, cats []string, fail func(error)) int64 {
	var inserted int64
	ins := fmt.Sprintf(`INSERT INTO tasks (category, priority, title, payload)
SELECT ?, seq %% 10, CONCAT('task ', seq), '{}' FROM seq_1_to_%d`, refillChunk)
	count := fmt.Sprintf(`SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE pool_status = 'pending' AND category = ? LIMIT %d) x`, refillLow)
	for ctx.Err() == nil {
		for _, c := range cats {
			var n int
			if err := bd.db.GetContext(ctx, &n, count, c); err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("refill: %w", err))
				}
				return inserted
			}
			if n >= refillLow {
				continue
			}
			if _, err := bd.db.ExecContext(ctx, ins, c); err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("refill: %w", err))
				}
				return inserted
			}
			inserted += refillChunk
		}
		sleepCtx(ctx, refillEvery)
	}
	return inserted
}

// runMonth runs scenario (k) in bd: see MonthStats.
func runMonth(ctx context.Context, cfg Config, scenario string, w Workload, bd *benchDB, rdb *redis.Client, prefix string) (*Result, error) {
	inp, err := newInproc(bd.store, rdb, prefix, w.Lease)
	if err != nil {
		return nil, err
	}
	pool, err := newTaskdWorkers(inp.d, w.Workers, []string{"cat0"})
	if err != nil {
		return nil, err
	}
	eds := make([]*editor, w.Editors)
	for i := range eds {
		if eds[i], err = inp.newEditor(ctx, "bench-"+strconv.Itoa(i), []string{"cat1"}); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	pc := &purgeClock{Store: bd.store, start: start, rows: map[string]int64{}}
	sw, err := sweeper.New(inp.d, sweeper.Config{
		Store: pc, Locks: inp.locks, Schedule: monthSchedule,
		Retention: sweeper.Retention{Done: w.Retention, Batch: MonthBatchDefault},
	})
	if err != nil {
		return nil, err
	}
	ms := &MonthStats{RetentionSec: w.Retention.Seconds()}
	if ms.Start, err = tableFigures(ctx, bd); err != nil {
		return nil, err
	}

	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var bgWG sync.WaitGroup
	var errMu sync.Mutex
	var bgErr error
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		bgErr = errors.Join(bgErr, err)
	}
	var inserted int64
	bgWG.Go(func() { inserted = refill(bg, bd, []string{"cat0", "cat1"}, fail) })
	var samples []monitorSample
	type waitReading struct {
		at time.Duration
		qs []string
	}
	var waiting []waitReading
	bgWG.Go(func() {
		t := time.NewTicker(monitorEvery)
		defer t.Stop()
		for {
			waits, lt, err := readLockCounters(bg, bd)
			if err != nil {
				if bg.Err() == nil {
					fail(err)
				}
				return
			}
			at := time.Since(start)
			samples = append(samples, monitorSample{at, waits, lt, processCPU(bd.mysqldPID)})
			qs, err := readWaiting(bg, bd)
			if err != nil {
				if bg.Err() == nil {
					fail(err)
				}
				return
			}
			if len(qs) > 0 {
				waiting = append(waiting, waitReading{at, qs})
			}
			select {
			case <-bg.Done():
				return
			case <-t.C:
			}
		}
	})
	bgWG.Go(func() {
		sleepCtx(bg, w.Duration/2)
		if bg.Err() != nil {
			return
		}
		m, err := tableFigures(bg, bd)
		if err != nil {
			fail(fmt.Errorf("middle: %w", err))
		}
		ms.Middle = m
	})

	if err := sw.Start(ctx); err != nil {
		return nil, err
	}
	if err := pool.start(ctx); err != nil {
		return nil, err
	}
	never := func(context.Context, []string) (bool, error) { return false, nil }
	lr := runLoop(ctx, inp, eds, w, nil, never, window{open: func() {}, close: func() {}})
	jobs := pool.jobs()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	wErrs, wFirst, wErr := pool.stop(sctx)
	swErr := sw.Stop(sctx)
	stopBG()
	bgWG.Wait()
	if err := errors.Join(wErr, swErr, bgErr); err != nil {
		return nil, err
	}
	if ms.End, err = tableFigures(ctx, bd); err != nil {
		return nil, err
	}

	windows, rows := pc.snapshot()
	slices.SortFunc(windows, func(a, b [2]time.Duration) int { return int(a[0] - b[0]) })
	ms.Batches, ms.PurgedBy = len(windows), rows
	for _, n := range rows {
		ms.PurgedRows += n
	}
	for _, win := range windows {
		ms.PurgeSec += (win[1] - win[0]).Seconds()
	}
	el := lr.elapsed
	ms.Turnovers = el.Seconds() / w.Retention.Seconds()
	ms.Pushed = jobs + lr.cycles
	ms.Inserted = inserted
	ms.FirstTenth = summarize(durations(lr.next, 0, el/10))
	ms.LastTenth = summarize(durations(lr.next, el*9/10, 0))
	var during, outside []time.Duration
	if len(windows) > 0 {
		for _, s := range lr.next {
			switch {
			case inWindow(windows, s.at):
				during = append(during, s.d)
			case s.at >= windows[0][0]:
				outside = append(outside, s.d)
			}
		}
	}
	slices.Sort(during)
	slices.Sort(outside)
	ms.DuringPurge, ms.Outside = summarize(during), summarize(outside)
	var pw, ow, pt, ot int64
	var pSec, oSec float64
	var pCPU, oCPU time.Duration
	cpuKnown := true
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		sec := (b.at - a.at).Seconds()
		if a.cpu < 0 || b.cpu < 0 {
			cpuKnown = false
		}
		if overlaps(windows, a.at, b.at) {
			pw, pt, pSec, pCPU = pw+b.waits-a.waits, pt+b.lockTimeMs-a.lockTimeMs, pSec+sec, pCPU+b.cpu-a.cpu
		} else {
			ow, ot, oSec, oCPU = ow+b.waits-a.waits, ot+b.lockTimeMs-a.lockTimeMs, oSec+sec, oCPU+b.cpu-a.cpu
		}
	}
	perSec := func(n int64, sec float64) float64 {
		if sec == 0 {
			return 0
		}
		return float64(n) / sec
	}
	ms.LockWaitsPerSecPurge, ms.LockWaitsPerSecOutside = perSec(pw, pSec), perSec(ow, oSec)
	ms.LockTimeMsPurge, ms.LockTimeMsOutside = float64(pt), float64(ot)
	ms.CPUPurge, ms.CPUOutside = -1, -1
	if cpuKnown && pSec > 0 {
		ms.CPUPurge = pCPU.Seconds() / pSec
	}
	if cpuKnown && oSec > 0 {
		ms.CPUOutside = oCPU.Seconds() / oSec
	}
	ms.ClaimErrors = lr.errors + wErrs
	ms.Waiting = map[string]int{}
	for _, wr := range waiting {
		for _, q := range wr.qs {
			ms.Waiting[q]++
			switch {
			case isPurge(q):
			case inWindow(windows, wr.at):
				ms.OtherWaitsPurge++
			default:
				ms.OtherWaitsOutside++
			}
		}
	}

	r := &Result{
		Scenario: scenario, Strategy: StrategyTaskd, Workload: w,
		ElapsedSec: el.Seconds(), Cycles: ms.Pushed, Assignments: lr.assignments + jobs,
		Errors: ms.ClaimErrors, FirstError: lr.firstError, EmptyHanded: lr.emptyHanded,
		Next:  summarize(durations(lr.next, 0, 0)),
		Cycle: summarize(durations(lr.cycle, 0, 0)),
		Month: ms,
	}
	if r.FirstError == "" {
		r.FirstError = wFirst
	}
	if el > 0 {
		r.CyclesPerSec = float64(ms.Pushed) / el.Seconds()
	}
	if r.Memory, err = readMemory("self"); err != nil {
		return nil, err
	}
	if r.DoubleCommits, err = bd.doubleCommits(ctx); err != nil {
		return nil, err
	}
	cfg.progress("%s: %d tasks in %.1fs (%.0f/s), %d rows purged in %d batches, claim p99 %.1fms", scenario, ms.Pushed, r.ElapsedSec, r.CyclesPerSec, ms.PurgedRows, ms.Batches, r.Next.P99Ms)
	return r, nil
}

// The long form of (k), make bench-month: it runs MonthLongDuration and
// should push MonthLongTasks tasks or more.
const (
	MonthLongDuration = 40 * time.Minute
	MonthLongTasks    = 5_000_000
)

// Bounds of (k)'s targets.
const (
	monthPlateau   = 1.2 // end bytes / middle bytes, per table
	monthFlat      = 1.2 // claim p99, last tenth / first tenth
	monthPurgeCost = 1.5 // claim p99 during a purge batch / outside
)

// writeMonth prints (k)'s figures under the table.
func writeMonth(w io.Writer, scenario string, r Result, m *MonthStats) {
	fmt.Fprintf(w, "%s: %d tasks pushed in %.0fs (%.0f/s; %d inserted by the refill), done tasks kept %.0fs: the retention turned over %.1f times (as many days of traffic under the default retention of 24 h, %.0f tasks a day at this rate)\n",
		scenario, m.Pushed, r.ElapsedSec, r.CyclesPerSec, m.Inserted, m.RetentionSec, m.Turnovers, r.CyclesPerSec*86400)
	points := []struct {
		name string
		fs   []TableFigure
	}{{"start", m.Start}, {"middle", m.Middle}, {"end", m.End}}
	for _, p := range points {
		var parts []string
		for _, f := range p.fs {
			file := "n/a"
			if f.FileBytes >= 0 {
				file = fmt.Sprintf("%.1f MiB", mib(f.FileBytes))
			}
			parts = append(parts, fmt.Sprintf("%s %d rows %.1f MiB (file %s)", f.Name, f.Rows, mib(f.Bytes), file))
		}
		fmt.Fprintf(w, "%s: tables at the %s: %s\n", scenario, p.name, strings.Join(parts, ", "))
	}
	var by []string
	for _, t := range slices.Sorted(maps.Keys(m.PurgedBy)) {
		by = append(by, fmt.Sprintf("%s %d", t, m.PurgedBy[t]))
	}
	rate := 0.0
	if m.PurgeSec > 0 {
		rate = float64(m.PurgedRows) / m.PurgeSec
	}
	fmt.Fprintf(w, "%s: purged %d rows (%s) in %d batches, %.1fs inside batches: %.0f rows/s while purging, %.0f rows/s over the run\n",
		scenario, m.PurgedRows, strings.Join(by, ", "), m.Batches, m.PurgeSec, rate, float64(m.PurgedRows)/max(r.ElapsedSec, 1e-9))
	fmt.Fprintf(w, "%s: claim p99 first tenth %.2fms (%d), last tenth %.2fms (%d); during a purge batch %.2fms (%d), outside %.2fms (%d)\n",
		scenario, m.FirstTenth.P99Ms, m.FirstTenth.Count, m.LastTenth.P99Ms, m.LastTenth.Count,
		m.DuringPurge.P99Ms, m.DuringPurge.Count, m.Outside.P99Ms, m.Outside.Count)
	cpu := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f cores", v)
	}
	fmt.Fprintf(w, "%s: InnoDB row lock waits (server-wide, %s intervals) %.1f/s in intervals with a purge batch, %.1f/s without (row lock time %.0f ms, %.0f ms); mysqld CPU %s with a purge batch, %s without; claim errors %d\n",
		scenario, monitorEvery, m.LockWaitsPerSecPurge, m.LockWaitsPerSecOutside, m.LockTimeMsPurge, m.LockTimeMsOutside,
		cpu(m.CPUPurge), cpu(m.CPUOutside), m.ClaimErrors)
	if len(m.Waiting) > 0 {
		qs := slices.SortedFunc(maps.Keys(m.Waiting), func(a, b string) int { return m.Waiting[b] - m.Waiting[a] })
		var parts []string
		for _, q := range qs[:min(len(qs), 5)] {
			parts = append(parts, fmt.Sprintf("%dx %q", m.Waiting[q], q))
		}
		fmt.Fprintf(w, "%s: transactions seen waiting for a row lock (INNODB_TRX, at the same readings): %s; not the purge's: %d at readings inside a purge batch, %d outside\n",
			scenario, strings.Join(parts, ", "), m.OtherWaitsPurge, m.OtherWaitsOutside)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// monthTargets judges (k): the tables plateau, the claims stay as fast at
// the end and beside a purge batch, no claim fails on a lock, and the long
// form pushes its tasks.
func monthTargets(rs []Result) []Target {
	var out []Target
	for i := range rs {
		r := &rs[i]
		m := r.Month
		if m == nil {
			continue
		}
		label := "(k) " + r.Scenario
		for _, name := range monthTables {
			mid, end := figure(m.Middle, name), figure(m.End, name)
			if mid == nil || end == nil || mid.Bytes == 0 {
				continue
			}
			out = append(out, newTarget(label+": "+name+" bytes, end / middle", float64(end.Bytes)/float64(mid.Bytes), "x", monthPlateau, false,
				fmt.Sprintf("%.1f MiB / %.1f MiB; rows %d / %d", mib(end.Bytes), mib(mid.Bytes), end.Rows, mid.Rows)))
		}
		if m.FirstTenth.P99Ms > 0 {
			out = append(out, newTarget(label+": claim p99, last tenth / first tenth", m.LastTenth.P99Ms/m.FirstTenth.P99Ms, "x", monthFlat, false,
				fmt.Sprintf("%.2f ms / %.2f ms", m.LastTenth.P99Ms, m.FirstTenth.P99Ms)))
		}
		if m.Outside.P99Ms > 0 && m.DuringPurge.Count > 0 {
			out = append(out, newTarget(label+": claim p99 during a purge batch / outside", m.DuringPurge.P99Ms/m.Outside.P99Ms, "x", monthPurgeCost, false,
				fmt.Sprintf("%.2f ms (%d claims) / %.2f ms (%d claims)", m.DuringPurge.P99Ms, m.DuringPurge.Count, m.Outside.P99Ms, m.Outside.Count)))
		}
		waits := newTarget(label+": row lock waits per second, intervals with a purge batch - without (server-wide, the purge's own included)",
			m.LockWaitsPerSecPurge-m.LockWaitsPerSecOutside, "", 0, false,
			fmt.Sprintf("%.1f/s - %.1f/s; row lock time %.0f ms - %.0f ms", m.LockWaitsPerSecPurge, m.LockWaitsPerSecOutside, m.LockTimeMsPurge, m.LockTimeMsOutside))
		waits.Informational = true
		out = append(out, waits)
		out = append(out, newTarget(label+": claim-path transactions seen waiting for a lock inside a purge batch (INNODB_TRX, every 250 ms)", float64(m.OtherWaitsPurge), "", 0, false,
			fmt.Sprintf("a sample, not a count of every wait; %d seen outside purge batches", m.OtherWaitsOutside)))
		out = append(out, newTarget(label+": claim errors (lock wait timeouts, deadlocks, any other)", float64(m.ClaimErrors), "", 0, false, firstError(r)))
		if r.Workload.MinTasks > 0 {
			out = append(out, newTarget(label+": tasks pushed", float64(m.Pushed), "", float64(r.Workload.MinTasks), true,
				fmt.Sprintf("in %.0f s", r.ElapsedSec)))
		}
	}
	return out
}

// figure returns the figure of table name in fs, or nil.
func figure(fs []TableFigure, name string) *TableFigure {
	for i := range fs {
		if fs[i].Name == name {
			return &fs[i]
		}
	}
	return nil
}
