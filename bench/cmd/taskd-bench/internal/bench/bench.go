// Package bench measures taskd's dispatcher against two baselines on real
// Redis and MariaDB: the seed algorithm as the classic article writes it
// (seed-naive) and a single MySQL transaction with SKIP LOCKED
// (mysql-skip-locked). Each run gets a fresh database, dropped at its end, so
// real data is never touched.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/sweeper"
)

// Modes.
const (
	ModeInproc = "inproc" // the strategies run in this process
	ModeHTTP   = "http"   // taskd only: a `taskd serve` child, editors over HTTP
)

// Defaults of Workload.
const (
	EditorsDefault    = 200
	CategoriesDefault = 1
	PoolDefault       = 10_000
	DurationDefault   = 10 * time.Second
	LeaseDefault      = 30 * time.Second
)

// Config is where the benchmark runs.
type Config struct {
	// MySQLDSN names the server; the bench creates its own database there
	// (the DSN's database is not used).
	MySQLDSN string
	// ReplicaDSN names a replica of MySQLDSN's server that applies the
	// databases named taskd_r_* (scripts/services.sh starts one); the
	// scenario with candidate reads from a replica needs it.
	ReplicaDSN string
	// GaleraDSN names one node of a MariaDB Galera cluster (scenario g2; the
	// bench creates its own database there, as on MySQLDSN), and GaleraAddrs
	// lists the addresses (host:port) of every node of that cluster, the
	// first being GaleraDSN's. Empty: no Galera scenario.
	GaleraDSN   string
	GaleraAddrs []string
	// Redis is the single Redis server the locks live on.
	Redis *redis.Options
	// Binary is the taskd binary http mode starts (`Binary serve`).
	Binary string
	// ServeEnv is added to the environment of the child in http mode (Redis
	// settings); the bench sets the MySQL DSN, address, admin token and lease.
	ServeEnv []string
	// Progress, when set, is called with a line about each step.
	Progress func(string)
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// Workload is one run's shape.
type Workload struct {
	Editors    int           `json:"editors"`
	Categories int           `json:"categories"`
	Pool       int           `json:"pool"`
	Duration   time.Duration `json:"duration_ns"`
	Think      time.Duration `json:"think_ns"`
	// Abandon is the fraction of claims not submitted: the editor walks
	// away (and a new editor takes its place); the claim expires after Lease.
	Abandon float64       `json:"abandon"`
	Lease   time.Duration `json:"lease_ns"`
	Mode    string        `json:"mode"`
	// Expired adds this many expired claims (category "expired", read by no
	// editor) and sweeps them while the editors run.
	Expired int `json:"expired,omitempty"`
	// Workers, when set, replaces the editors by background workers with
	// this many slots and a no-op handler, taking tasks of cat0; a cycle is
	// then one job (claim, run, commit of its result).
	Workers int `json:"workers,omitempty"`
	// Replicated makes the database one the replica applies; ReplicaReads
	// (which implies it) also gives taskd's store the replica for its
	// candidate reads (store.Config.Replica). Both need Config.ReplicaDSN.
	Replicated   bool `json:"replicated,omitempty"`
	ReplicaReads bool `json:"replica_reads,omitempty"`
	// GroupCommit is taskd's store.Config.GroupCommit: 0 its default, 1 every
	// write in a transaction of its own, as before group commit.
	GroupCommit int `json:"group_commit,omitempty"`
	// LongPoll runs scenario (i) instead of the editors' loop: Editors
	// long-poll an empty pool over HTTP, then Pool tasks are inserted (see
	// runLongPoll). Needs Mode http.
	LongPoll bool `json:"long_poll,omitempty"`
	// InsertTx runs scenario (l) instead of the editors' loop: Editors
	// long-poll, a worker waits, and Pool transactions insert a task for
	// each with Engine.InsertTx and commit (see runInsertTx).
	InsertTx bool `json:"insert_tx,omitempty"`
	// Limits, when set, runs one way of scenario (n) instead of the
	// editors' loop: LimitsSlots worker slots burn down a backlog of Pool
	// tasks unlimited (LimitsNone), under a category max_in_flight equal to
	// the slots (LimitsCategory) or spread over LimitsKeyCount keys of
	// key_limit 1 (LimitsKeys); see runLimits.
	Limits string `json:"limits,omitempty"`
	// Dispatchers, when above 1, runs that many taskd dispatchers, each with
	// a store and connection pool of its own (as as many taskd replicas
	// would), sharing Redis; editor i always talks to dispatcher i mod
	// Dispatchers. Strategy taskd only.
	Dispatchers int `json:"dispatchers,omitempty"`
	// Galera runs on the Galera cluster (Config.GaleraDSN) instead of
	// MySQLDSN's server: GaleraOneNode puts every dispatcher on the first
	// node, GaleraSpread dispatcher i on node i mod the nodes.
	Galera string `json:"galera,omitempty"`
	// CausalOff turns the causal reads of taskd's Galera sessions off
	// (wsrep_sync_wait=0 in the DSN of the dispatchers' stores), to measure
	// what they cost. The harness's own reads stay causal.
	CausalOff bool `json:"causal_off,omitempty"`
	// Retention, when set, runs scenario (k) instead of the editors' loop:
	// Workers worker slots on cat0 and Editors editors on cat1 at full
	// speed, the pool topped up, and the sweeper purging done tasks older
	// than Retention (see runMonth). MinTasks is the tasks the run should
	// push (a target line, 0 for none).
	Retention time.Duration `json:"retention_ns,omitempty"`
	MinTasks  int64         `json:"min_tasks,omitempty"`
}

// Placements of Workload.Galera.
const (
	GaleraOneNode = "one-node" // every dispatcher on the first node
	GaleraSpread  = "spread"   // dispatcher i on node i mod the nodes
)

// WithDefaults returns w with zero fields set to their defaults.
func (w Workload) WithDefaults() Workload {
	if w.Editors == 0 {
		w.Editors = EditorsDefault
	}
	if w.Categories == 0 {
		w.Categories = CategoriesDefault
	}
	if w.Pool == 0 {
		w.Pool = PoolDefault
	}
	if w.Duration == 0 {
		w.Duration = DurationDefault
	}
	if w.Lease == 0 {
		w.Lease = LeaseDefault
	}
	if w.Mode == "" {
		w.Mode = ModeInproc
	}
	return w
}

func (w Workload) validate() error {
	switch {
	case w.Editors < 1:
		return errors.New("editors must be at least 1")
	case w.Categories < 1 || w.Categories > 10_000:
		return errors.New("categories must be 1..10000")
	case w.Pool < 1:
		return errors.New("pool must be at least 1")
	case w.Duration <= 0:
		return errors.New("duration must be positive")
	case w.Think < 0:
		return errors.New("think must not be negative")
	case w.Abandon < 0 || w.Abandon >= 1:
		return errors.New("abandon must be in [0, 1)")
	case w.Mode != ModeInproc && w.Mode != ModeHTTP:
		return fmt.Errorf("mode must be %s or %s", ModeInproc, ModeHTTP)
	case w.GroupCommit < 0:
		return errors.New("group commit must not be negative")
	case w.Workers < 0:
		return errors.New("workers must not be negative")
	case w.Workers > 0 && (w.Mode != ModeInproc || w.Abandon > 0 || w.Expired > 0):
		return errors.New("workers run in process only, without abandon or expired claims")
	case w.LongPoll && (w.Mode != ModeHTTP || w.Workers > 0 || w.Expired > 0):
		return errors.New("the long-poll run runs over HTTP only, without workers or expired claims")
	case w.Retention < 0:
		return errors.New("retention must not be negative")
	case w.Retention > 0 && (w.Mode != ModeInproc || w.Workers < 1 || w.Categories != 2 || w.Expired > 0 || w.Abandon > 0 || w.Replicated || w.ReplicaReads || w.LongPoll || w.Dispatchers > 1 || w.Galera != ""):
		return errors.New("the run with retention runs in process, with workers and editors on 2 categories, on one server, without expired or abandoned claims")
	case w.Limits != "" && w.Limits != LimitsNone && w.Limits != LimitsCategory && w.Limits != LimitsKeys:
		return fmt.Errorf("limits must be %s, %s or %s", LimitsNone, LimitsCategory, LimitsKeys)
	case w.Limits != "" && (w.Mode != ModeInproc || w.Workers > 0 || w.Expired > 0 || w.LongPoll || w.InsertTx || w.Retention > 0):
		return errors.New("the run of limits runs in process, with its own workers, without expired claims")
	case w.Dispatchers < 0:
		return errors.New("dispatchers must not be negative")
	case w.Galera != "" && w.Galera != GaleraOneNode && w.Galera != GaleraSpread:
		return fmt.Errorf("galera must be %s or %s", GaleraOneNode, GaleraSpread)
	case w.CausalOff && w.Galera == "":
		return errors.New("causal reads are turned off on Galera only")
	case (w.Dispatchers > 1 || w.Galera != "") && (w.Mode != ModeInproc || w.Workers > 0 || w.Expired > 0 || w.Replicated || w.ReplicaReads || w.LongPoll):
		return errors.New("several dispatchers, and Galera, run in process only, with editors, without expired claims or a replica")
	}
	return nil
}

// Result is what one run of one strategy measured.
type Result struct {
	Scenario string `json:"scenario"`
	// Run numbers the repetitions of a scenario (1, 2, 3), 0 when it runs
	// once.
	Run      int      `json:"run,omitempty"`
	Strategy string   `json:"strategy"`
	Workload Workload `json:"workload"`
	// Elapsed is how long the editors ran: Duration, or less when the pool
	// ran dry (Drained).
	ElapsedSec float64 `json:"elapsed_s"`
	Drained    bool    `json:"drained"`
	// Cycles counts next+submit cycles (submits accepted).
	Cycles       int64   `json:"cycles"`
	CyclesPerSec float64 `json:"cycles_per_s"`
	// Assignments counts claims obtained (cycles, abandoned ones, and those
	// held when the run ended).
	Assignments int64 `json:"assignments"`
	Abandoned   int64 `json:"abandoned"`
	Errors      int64 `json:"errors"`
	// EmptyHanded counts claims that came back with nothing while the pool
	// still had tasks for the editor (every candidate taken by competitors).
	EmptyHanded int64  `json:"empty_handed"`
	FirstError  string `json:"first_error,omitempty"`
	// Next is the latency of getting an assignment after the previous
	// submit committed (for taskd, the part of Submit after its commit; in
	// http mode, the first next of each editor only), Cycle the latency of
	// submit plus next.
	Next  Latency `json:"next"`
	Cycle Latency `json:"cycle"`
	// ConflictsPerAssignment: candidates found locked in Redis per claim
	// (-1: not known, http mode). RefusedClaims: claims MySQL refused after
	// the Redis lock was taken.
	ConflictsPerAssignment float64 `json:"conflicts_per_assignment"`
	RefusedClaims          int64   `json:"refused_claims"`
	// MySQL statements and Redis commands per assignment, from server-wide
	// counters (anything else using the servers meanwhile is counted too).
	MySQLPerAssignment float64 `json:"mysql_statements_per_assignment"`
	RedisPerAssignment float64 `json:"redis_commands_per_assignment"`
	// Per cycle, counted in this process over the timed window: MySQL
	// round trips and statements sent by the strategy's connections to the
	// primary (a counting driver.Connector; a batch is one round trip and
	// several statements), and Redis round trips (a go-redis hook: each
	// command alone or each pipeline is one). Null in http mode, where the
	// requests leave another process.
	MySQLRoundTripsPerCycle *float64 `json:"mysql_round_trips_per_cycle"`
	MySQLStatementsPerCycle *float64 `json:"mysql_statements_sent_per_cycle"`
	RedisRoundTripsPerCycle *float64 `json:"redis_round_trips_per_cycle"`
	// CandidateReadsPerCycle: taskd's reads of a category's candidates
	// (Dispatcher.Stats), each one MySQL round trip, to the replica when
	// taskd reads candidates from one. Null for other strategies.
	CandidateReadsPerCycle *float64 `json:"candidate_reads_per_cycle,omitempty"`
	// MySQLCPUMsPerCycle is the CPU time the MySQL server process used over
	// the timed window, per cycle (from /proc; null when the server runs on
	// another machine). Server-wide, like CommitsPerCycle.
	MySQLCPUMsPerCycle *float64 `json:"mysql_cpu_ms_per_cycle,omitempty"`
	// ReplicaRoundTripsPerCycle: requests to the replica, when taskd reads
	// candidates from it.
	ReplicaRoundTripsPerCycle *float64 `json:"replica_round_trips_per_cycle,omitempty"`
	// CommitsPerCycle is the delta of the primary's Com_commit (SHOW GLOBAL
	// STATUS; COMMIT statements, whether alone or in a batch) over the timed
	// window, per cycle. It is server-wide: the window holds only the
	// strategy's traffic from this process (the harness's own reads are
	// outside it or are not commits), so only another client of the same
	// server could add to it. Statements run in autocommit are not counted.
	CommitsPerCycle float64 `json:"commits_per_cycle"`
	// DoubleCommits counts tasks with more than one accepted result, or done
	// without one; must be 0.
	DoubleCommits int64 `json:"double_commits"`
	// Memory of this process (inproc) or of the taskd serve child (http).
	Memory Memory `json:"memory"`
	// Sweep, with Workload.Expired: how long sweeping them took, and the next
	// latency of the taskd editors while it ran.
	Sweep *SweepStats `json:"sweep,omitempty"`
	// LongPoll, with Workload.LongPoll: scenario (i)'s figures.
	LongPoll *LongPollStats `json:"long_poll,omitempty"`
	// Month, with Workload.Retention: scenario (k)'s figures.
	Month *MonthStats `json:"month,omitempty"`
	// InsertTx, with Workload.InsertTx: scenario (l)'s figures.
	InsertTx *InsertTxStats `json:"insert_tx,omitempty"`
	// Limits, with Workload.Limits: scenario (n)'s figures.
	Limits *LimitsStats `json:"limits,omitempty"`
}

// SweepStats describes the sweep of a run with expired claims.
type SweepStats struct {
	Recycled    int     `json:"recycled"`
	DurationSec float64 `json:"duration_s"`
	NextDuring  Latency `json:"next_during"`
}

// Run runs workload w for each strategy in turn, each in a database of its
// own, and returns the results.
func Run(ctx context.Context, cfg Config, scenario string, w Workload, strategies []string) ([]Result, error) {
	w = w.WithDefaults()
	if err := w.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var out []Result
	for _, name := range strategies {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		r, err := runOne(ctx, cfg, scenario, w, name)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", scenario, name, err)
		}
		out = append(out, *r)
	}
	return out, nil
}

// ValidStrategy reports whether name is a known strategy.
func ValidStrategy(name string) bool {
	return slices.Contains([]string{StrategyTaskd, StrategySeedNaive, StrategySkipLocked}, name)
}

func (cfg Config) progress(format string, args ...any) {
	if cfg.Progress != nil {
		cfg.Progress(fmt.Sprintf(format, args...))
	}
}

// runOne runs one strategy: a fresh database filled with the pool, editors
// (or workers), the timed loop, then the counters and invariants.
func runOne(ctx context.Context, cfg Config, scenario string, w Workload, name string) (_ *Result, err error) {
	if !ValidStrategy(name) {
		return nil, fmt.Errorf("unknown strategy %q", name)
	}
	if w.Mode == ModeHTTP && name != StrategyTaskd {
		return nil, fmt.Errorf("mode %s runs only the %s strategy", ModeHTTP, StrategyTaskd)
	}
	if w.LongPoll {
		return runLongPoll(ctx, cfg, scenario, w)
	}
	if w.Limits != "" {
		if name != StrategyTaskd {
			return nil, fmt.Errorf("the run of limits runs the %s strategy only", StrategyTaskd)
		}
		return runLimits(ctx, cfg, scenario, w)
	}
	if w.InsertTx {
		if name != StrategyTaskd {
			return nil, fmt.Errorf("the run of InsertTx runs the %s strategy only", StrategyTaskd)
		}
		return runInsertTx(ctx, cfg, scenario, w)
	}
	replicaDSN := ""
	if w.Replicated || w.ReplicaReads {
		if cfg.ReplicaDSN == "" {
			return nil, errors.New("a replicated run needs a replica (mysql.replica_dsn)")
		}
		if w.Mode == ModeHTTP {
			return nil, errors.New("a replicated run runs in process only")
		}
		replicaDSN = cfg.ReplicaDSN
	}
	serverDSN := cfg.MySQLDSN
	if w.Galera != "" {
		if cfg.GaleraDSN == "" || len(cfg.GaleraAddrs) == 0 {
			return nil, errors.New("a Galera run needs a Galera cluster (TASKD_GALERA_DSN and TASKD_GALERA_ADDRS)")
		}
		if name != StrategyTaskd {
			return nil, fmt.Errorf("a Galera run runs the %s strategy only", StrategyTaskd)
		}
		serverDSN = cfg.GaleraDSN
	}
	if w.Dispatchers > 1 && name != StrategyTaskd {
		return nil, fmt.Errorf("several dispatchers run the %s strategy only", StrategyTaskd)
	}
	bd, err := createDB(ctx, serverDSN, replicaDSN)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := bd.drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	filling := time.Now()
	if err := bd.fill(ctx, w.Pool, w.Categories); err != nil {
		return nil, err
	}
	if w.Expired > 0 {
		if err := bd.fillExpired(ctx, w.Expired); err != nil {
			return nil, err
		}
	}
	if w.Galera != "" {
		if err := bd.openNodes(ctx, cfg.GaleraAddrs); err != nil {
			return nil, err
		}
	}
	if err := bd.openStore(ctx, w, cfg.GaleraAddrs); err != nil {
		return nil, err
	}
	cfg.progress("%s %s: pool of %d filled in %s (database %s)", scenario, name, w.Pool+w.Expired, time.Since(filling).Round(time.Millisecond), bd.name)

	// rdb is the strategies' client, its round trips counted; plain is the
	// harness's own (counters, cleanup).
	rdb := redis.NewClient(cfg.Redis)
	defer rdb.Close()
	hook := &roundtrip.RedisHook{}
	rdb.AddHook(hook)
	plain := redis.NewClient(cfg.Redis)
	defer plain.Close()
	prefix := "bench:" + bd.name + ":"
	defer cleanKeys(context.WithoutCancel(ctx), plain, prefix)
	if w.Retention > 0 {
		if name != StrategyTaskd {
			return nil, fmt.Errorf("the run with retention runs the %s strategy only", StrategyTaskd)
		}
		return runMonth(ctx, cfg, scenario, w, bd, rdb, prefix)
	}

	var s strategy
	var inp *inproc
	var hs *httpStrategy
	switch {
	case w.Mode == ModeHTTP:
		env := append(slices.Clone(cfg.ServeEnv), "TASKD_MYSQL_DSN="+bd.dsn, "TASKD_REDIS_KEY_PREFIX="+prefix)
		if hs, err = startServe(ctx, cfg.Binary, env, w.Lease, w.Editors); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := hs.close(ctx); cerr != nil && err == nil {
				err = cerr
			}
		}()
		s = hs
	case name == StrategyTaskd && len(bd.stores) > 1:
		sp := &spread{}
		for _, st := range bd.stores {
			one, err := newInproc(st, rdb, prefix, w.Lease)
			if err != nil {
				return nil, err
			}
			sp.ds = append(sp.ds, one)
		}
		inp = sp.ds[0]
		s = sp
	case name == StrategyTaskd:
		if inp, err = newInproc(bd.store, rdb, prefix, w.Lease); err != nil {
			return nil, err
		}
		s = inp
	case name == StrategySeedNaive:
		s = &naive{sqlEditors: sqlEditors{bd.store}, db: bd.sdb, rdb: rdb, prefix: prefix, lease: w.Lease}
	default:
		s = &skipLocked{sqlEditors: sqlEditors{bd.store}, db: bd.sdb, lease: w.Lease}
	}

	var eds []*editor
	var pool workerPool
	if w.Workers > 0 {
		cats := []string{"cat0"}
		switch name {
		case StrategyTaskd:
			if pool, err = newTaskdWorkers(inp.d, w.Workers, cats); err != nil {
				return nil, err
			}
		case StrategySkipLocked:
			pool = &skipLockedWorkers{db: bd.sdb, slots: w.Workers, categories: cats, lease: w.Lease}
		default:
			return nil, fmt.Errorf("workers run with %s or %s only", StrategyTaskd, StrategySkipLocked)
		}
	} else {
		eds = make([]*editor, w.Editors)
		for i := range eds {
			if eds[i], err = s.newEditor(ctx, "bench-"+strconv.Itoa(i), []string{"cat" + strconv.Itoa(i%w.Categories)}); err != nil {
				return nil, err
			}
		}
	}

	var sweep func(context.Context) (sweeper.Result, error)
	if w.Expired > 0 {
		if inp == nil {
			return nil, errors.New("expired claims are swept only by the in-process taskd strategy")
		}
		sw, err := sweeper.New(inp.d, sweeper.Config{Store: inp.store, Locks: inp.locks, Schedule: "1h"})
		if err != nil {
			return nil, err
		}
		sweep = sw.Sweep
	}

	// start is read when the run starts, before when the counted window
	// opens (the same, except for editors: see below).
	var d []*dispatcher.Dispatcher
	if sp, ok := s.(*spread); ok {
		for _, one := range sp.ds {
			d = append(d, one.d)
		}
	} else if inp != nil {
		d = []*dispatcher.Dispatcher{inp.d}
	}
	start, err := readCounters(ctx, bd, plain, hook, d)
	if err != nil {
		return nil, err
	}
	before := start
	conflicts0, refused0 := s.counts()
	var lr loopResult
	var after serverCounters
	var afterErr error
	if pool != nil {
		var wr workerRun
		wr, err = runWorkers(ctx, pool, w.Duration, func() { after, afterErr = readCounters(ctx, bd, plain, hook, d) })
		if err != nil {
			return nil, err
		}
		lr = loopResult{elapsed: wr.elapsed, cycles: wr.jobs, assignments: wr.jobs, errors: wr.errors, firstError: wr.firstError, cyclesAtClose: wr.counted}
	} else {
		// The counted window: see runLoop.
		var beforeErr error
		lr = runLoop(ctx, s, eds, w, sweep, bd.empty, window{
			open:  func() { before, beforeErr = readCounters(ctx, bd, plain, hook, d) },
			close: func() { after, afterErr = readCounters(ctx, bd, plain, hook, d) },
		})
		if beforeErr != nil {
			return nil, beforeErr
		}
	}
	if afterErr != nil {
		return nil, afterErr
	}
	conflicts1, refused1 := s.counts()

	r := &Result{
		Scenario: scenario, Strategy: name, Workload: w,
		ElapsedSec: lr.elapsed.Seconds(), Drained: lr.drained,
		Cycles: lr.cycles, Assignments: lr.assignments, Abandoned: lr.abandoned,
		Errors: lr.errors, FirstError: lr.firstError, EmptyHanded: lr.emptyHanded,
		Next:  summarize(durations(lr.next, 0, 0)),
		Cycle: summarize(durations(lr.cycle, 0, 0)),
	}
	if lr.elapsed > 0 {
		r.CyclesPerSec = float64(lr.cycles) / lr.elapsed.Seconds()
	}
	a := float64(max(lr.assignments, 1))
	c := float64(max(lr.cyclesAtClose-lr.cyclesAtOpen, 1)) // cycles in the counted window
	r.MySQLPerAssignment = float64(after.questions-start.questions) / a
	r.RedisPerAssignment = float64(after.redisCommands-start.redisCommands) / a
	r.CommitsPerCycle = float64(after.comCommit-before.comCommit) / c
	if before.mysqldCPU >= 0 && after.mysqldCPU >= 0 {
		r.MySQLCPUMsPerCycle = ptr(float64(after.mysqldCPU-before.mysqldCPU) / float64(time.Millisecond) / c)
	}
	if hs == nil {
		sent := after.primary.Sub(before.primary)
		r.MySQLRoundTripsPerCycle = ptr(float64(sent.RoundTrips) / c)
		r.MySQLStatementsPerCycle = ptr(float64(sent.Statements) / c)
		r.RedisRoundTripsPerCycle = ptr(float64(after.redisRoundTrips-before.redisRoundTrips) / c)
		if len(d) > 0 {
			r.CandidateReadsPerCycle = ptr(float64(after.candidateReads-before.candidateReads) / c)
		}
		if bd.replicaCount != nil {
			r.ReplicaRoundTripsPerCycle = ptr(float64(after.replica.RoundTrips-before.replica.RoundTrips) / c)
		}
	}
	r.ConflictsPerAssignment = float64(conflicts1-conflicts0) / a
	r.RefusedClaims = refused1 - refused0
	if conflicts0 < 0 {
		r.ConflictsPerAssignment, r.RefusedClaims = -1, -1
	}
	if lr.sweep != nil {
		lr.sweep.NextDuring = summarize(durations(lr.next, lr.sweepFrom, lr.sweepTo))
		r.Sweep = lr.sweep
	}
	if hs != nil {
		r.Memory, err = hs.memory()
	} else {
		r.Memory, err = readMemory("self")
	}
	if err != nil {
		return nil, err
	}
	if r.DoubleCommits, err = bd.doubleCommits(ctx); err != nil {
		return nil, err
	}
	unit := "cycles"
	if w.Workers > 0 {
		unit = "jobs"
	}
	cfg.progress("%s %s: %d %s in %.1fs (%.0f/s), next p99 %.1fms", scenario, name, r.Cycles, unit, r.ElapsedSec, r.CyclesPerSec, r.Next.P99Ms)
	return r, nil
}

func ptr[T any](v T) *T { return &v }

// cleanKeys removes the run's Redis keys.
func cleanKeys(ctx context.Context, rdb *redis.Client, prefix string) {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Unlink(ctx, keys...)
	}
}

// loopResult is what the editors did in one run.
type loopResult struct {
	elapsed                        time.Duration
	drained                        bool
	cycles, assignments, abandoned int64
	errors                         int64
	emptyHanded                    int64
	firstError                     string
	next, cycle                    []sample
	sweep                          *SweepStats
	sweepFrom, sweepTo             time.Duration
	// cyclesAtOpen and cyclesAtClose are the cycles done when the counted
	// window opened and closed.
	cyclesAtOpen, cyclesAtClose int64
}

// window is called when runLoop's counted window opens and closes.
type window struct{ open, close func() }

// maxSweepWait bounds how long a run waits past its duration for its sweep.
const maxSweepWait = 2 * time.Minute

// runLoop runs one goroutine per editor until the duration passes or the pool
// runs dry: claim, think, then submit (or abandon). With sweep, it sweeps
// meanwhile, and the editors keep going until the sweep is done.
//
// The counted window, for the per-cycle counts, opens (win.open is called)
// once every editor holds its first assignment, or half-way through the
// duration at the latest, so that the first claims do not count as cycles;
// it closes (win.close) when the duration ends (or the sweep), before the
// editors stop, so that cycles cut short at the end do not count either.
// The editors keep going while the counters are read.
//
// A claim that comes back empty-handed ends the run only when empty says the
// editor's categories have no pending task left: taskd's Next also comes back
// empty when competitors hold every candidate of its batch.
func runLoop(ctx context.Context, s strategy, eds []*editor, w Workload, sweep func(context.Context) (sweeper.Result, error),
	empty func(ctx context.Context, categories []string) (bool, error), win window) loopResult {
	var (
		stop                                   atomic.Bool
		drained                                atomic.Bool
		drainOnce                              sync.Once
		drainCh                                = make(chan struct{})
		cycles, assignments, abandoned, errCnt atomic.Int64
		emptyHanded                            atomic.Int64
		firstClaims                            atomic.Int64
		firstErr                               sync.Once
		lr                                     loopResult
		mu                                     sync.Mutex
		wg                                     sync.WaitGroup
	)
	start := time.Now()
	var openOnce sync.Once
	openWindow := func() {
		openOnce.Do(func() {
			lr.cyclesAtOpen = cycles.Load()
			win.open()
		})
	}
	fail := func(err error) {
		errCnt.Add(1)
		firstErr.Do(func() { lr.firstError = err.Error() })
	}
	for i, e := range eds {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			var next, cycle []sample
			var cur *ref
			var submitted time.Time // when the previous submit started; zero if none
			gen := 0
			claimed := false // whether this editor got its first assignment
			for !stop.Load() {
				if cur == nil {
					t0 := time.Now()
					r, err := s.claim(ctx, e)
					if errors.Is(err, errNoTask) {
						if none, err := empty(ctx, e.categories); err != nil || !none {
							emptyHanded.Add(1)
							if err != nil {
								fail(err)
							}
							continue
						}
						drained.Store(true)
						stop.Store(true)
						drainOnce.Do(func() { close(drainCh) })
						break
					}
					if err != nil {
						fail(err)
						submitted = time.Time{}
						time.Sleep(10 * time.Millisecond)
						continue
					}
					d := time.Since(t0)
					next = append(next, sample{t0.Sub(start), d})
					if !submitted.IsZero() {
						cycle = append(cycle, sample{submitted.Sub(start), time.Since(submitted)})
					}
					assignments.Add(1)
					cur = &r
					if gen == 0 && !claimed {
						claimed = true
						if firstClaims.Add(1) == int64(len(eds)) {
							openWindow()
						}
					}
				}
				if w.Think > 0 {
					time.Sleep(w.Think)
				}
				if w.Abandon > 0 && rng.Float64() < w.Abandon {
					abandoned.Add(1)
					gen++
					ne, err := s.newEditor(ctx, fmt.Sprintf("bench-%d-%d", i, gen), e.categories)
					if err != nil {
						fail(err)
						break
					}
					e, cur, submitted = ne, nil, time.Time{}
					continue
				}
				t0 := time.Now()
				nr, nextTook, err := s.submit(ctx, e, *cur)
				cur = nil
				if err != nil {
					fail(err)
					submitted = time.Time{}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				cycles.Add(1)
				submitted = t0
				if nr != nil {
					if nextTook >= 0 {
						next = append(next, sample{time.Since(start) - nextTook, nextTook})
					}
					cycle = append(cycle, sample{t0.Sub(start), time.Since(t0)})
					submitted = time.Time{}
					assignments.Add(1)
					cur = nr
				}
			}
			mu.Lock()
			lr.next = append(lr.next, next...)
			lr.cycle = append(lr.cycle, cycle...)
			mu.Unlock()
		})
	}
	sweepDone := make(chan struct{})
	if sweep != nil {
		go func() {
			defer close(sweepDone)
			t0 := time.Now()
			res, err := sweep(ctx)
			d := time.Since(t0)
			if err != nil {
				fail(fmt.Errorf("sweep: %w", err))
			}
			lr.sweepFrom, lr.sweepTo = t0.Sub(start), t0.Sub(start)+d
			lr.sweep = &SweepStats{Recycled: res.Recycled, DurationSec: d.Seconds()}
		}()
	} else {
		close(sweepDone)
	}
	timer := time.NewTimer(w.Duration)
	half := time.NewTimer(w.Duration / 2)
	defer half.Stop()
wait:
	for {
		select {
		case <-half.C:
			openWindow()
		case <-timer.C:
			break wait
		case <-drainCh:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	select { // a sweep keeps the editors going until it is done
	case <-sweepDone:
	case <-time.After(maxSweepWait):
	case <-ctx.Done():
	}
	openWindow() // when the run ended before half its duration
	lr.cyclesAtClose = cycles.Load()
	win.close()
	stop.Store(true)
	lr.elapsed = time.Since(start)
	wg.Wait()
	<-sweepDone
	lr.drained = drained.Load()
	lr.cycles, lr.assignments, lr.abandoned, lr.errors = cycles.Load(), assignments.Load(), abandoned.Load(), errCnt.Load()
	lr.emptyHanded = emptyHanded.Load()
	return lr
}
