// Command taskd-bench measures taskd's dispatcher against two baselines on real
// MySQL and Redis. It lives beside the taskd command rather than in it, so the
// production binary carries neither the baselines' SQL nor the load generator.
//
// Usage:
//
//	taskd-bench [flags]
//
// `taskd-bench -help` lists the flags; `make bench` runs every scenario. The
// stores come from config.yaml's mysql and redis sections and their TASKD_*
// environment variables, as for taskd.
//
// Exit status: 0 on success, 1 when a run failed, 2 for a usage or
// configuration error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/bench/cmd/taskd-bench/internal/bench"
	"github.com/taskd/taskd/internal/config"
)

const name = "taskd-bench"

const about = `
Measures the dispatcher against two baselines on the configured MySQL and Redis:
seed-naive (read candidates, SET NX them one at a time until one sticks, then
UPDATE) and mysql-skip-locked (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1 and an
UPDATE in one transaction). Each run creates its own database
(taskd_bench_<random>) on the server of mysql.dsn and drops it at the end, so
real data is never touched; Redis keys get a prefix of their own and are
removed. Redis must be a single server (not Cluster or Redlock).

Reports per strategy: next+submit cycles/s, next latency p50/p99, lock conflicts
per assignment, refused claims, MySQL statements and Redis commands per
assignment (server-wide counters), MySQL round trips, statements and Redis
round trips per cycle (counted in this process), commits per cycle (the
primary's Com_commit), and the resident memory of the process.
-scenario runs a preset (all: every measurement, 3 to 5 minutes; -quick for
a short smoke run); without it, one run of the workload the flags describe.
The compared pairs (taskd against mysql-skip-locked on 1 and 50 categories,
and background workers) and the lone editor run -rounds times, interleaved, and the target lines
judge their medians. With mysql.replica_dsn set (a replica that applies the
databases named taskd_r_*), -scenario all also measures taskd's statements
on the primary with and without candidate reads from the replica.

In -mode http, the taskd binary (-binary; default ./bin/taskd when it exists,
else taskd on $PATH) runs 'serve' as a child process and the editors use its
HTTP API; only the taskd strategy runs. -scenario all and http include such a
run.

-scenario one-editor (or j; part of all) is one editor alone, with group
commit and with every write in a transaction of its own (as before group
commit), back to back -rounds times: the (j) target lines compare their next
and submit-and-next latency p50.

-scenario long-poll (or i; part of all) is scenario (i): 10,000 editors (1,000
with -quick) long-poll 'taskd serve' over HTTP on an empty pool, then 20,000
tasks are inserted through POST /v1/tasks; it reports how many were answered,
insert-to-answer p50/p99 and the child's peak RSS. The child runs with the
memory_limit_mib docs/deployment.md recommends for that many long polls (100 MiB
plus 32 KiB per poll). It holds a connection per
editor, so it sets RLIMIT_NOFILE (setrlimit) to the hard limit for itself and
the taskd serve child, and fails at once when the hard limit is below editors
+ 1024 (raise it with ulimit -Hn as root, LimitNOFILE= or docker --ulimit).

-scenario insert-tx (or m; part of all) is scenario (m): an engine in this
process with a worker of one slot and 200 editors long-polling it over HTTP (40
with -quick); then as many transactions of the application's own *sql.DB, one
after the other, each inserting a task for the worker and one for the editors
with Engine.InsertManyTx and committing. It reports p50/p99 from the COMMIT to
the worker's claim (target 50 ms) and to the editor's answer (target 100 ms).

-scenario limits (or n; part of all) is scenario (n): an engine in this process
with 100 worker slots burns down a backlog of 40,000 tasks (8,000 with -quick),
inserted through POST /v1/tasks while their category is paused, three ways in
fresh databases, interleaved -rounds times: unlimited; under the category's
max_in_flight equal to the slots (target: at least 0.9 of unlimited); and spread
over 100 limit_keys of key_limit 1 (against River Pro's users' 17k of 33k jobs an
hour). A burn-down stops after 2 minutes and reports the tasks it did. A taskd
without limits reports those two ways as not run, with the reason.

mysql.dsn, mysql.replica_dsn and redis.* are read as taskd reads them: the
file given with -config, else $TASKD_CONFIG, else ./config.yaml when it
exists; then TASKD_MYSQL_DSN, TASKD_MYSQL_REPLICA_DSN,
TASKD_REDIS_ADDRS, TASKD_REDIS_USERNAME, TASKD_REDIS_PASSWORD, TASKD_REDIS_DB and
TASKD_REDIS_CLUSTER.

-scenario month (or k; part of all) is scenario (k), a month in an hour: 16
worker slots and 50 editors push tasks through at full speed for 90s while
the sweeper (schedule 10s, under its lock) purges done tasks older than 15s;
it reports the tables' rows and bytes at the start, middle and end, claim p99
in the first and last tenth and during a purge batch against outside, row
lock waits and MariaDB CPU with and without a purge batch, and claim errors.
-scenario month-long (make bench-month) is its long form: 40 minutes, a
retention of 5 minutes, 5 million tasks or more.

-scenario storage (not part of all) measures what a done task keeps on disk
until retention purges it: 20,000 tasks each with a payload and a result of
a few bytes, 1 KiB and 10 KiB, run by background workers in a database of
their own, and the growth of tasks, task_events and task_results
(data_length + index_length after ANALYZE TABLE) per task.

-scenario galera (or g2; part of all when a cluster is configured) is scenario
(g2): the 50-category workload served by 3 dispatchers (as 3 replicas of taskd)
on a MariaDB Galera cluster, all on one node, spread over the nodes, and spread
with causal reads off (wsrep_sync_wait=0), plus the same on the single server
of mysql.dsn, -rounds times interleaved; the (g2) target lines give the
ratios. The cluster comes from TASKD_GALERA_DSN (one node's DSN, or one naming
every node as tcp(a,b,c)) and TASKD_GALERA_ADDRS (its nodes' host:port,
comma-separated, the first being the DSN's node; default the DSN's list).`

// errHelp means the help was printed as asked; the exit status is 0.
var errHelp = errors.New("help requested")

// usageError is a usage or configuration error: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one kills the process at once.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		os.Exit(0)
	case errors.As(err, &ue):
		report(os.Stderr, err)
		fmt.Fprintf(os.Stderr, "Run '%s -help' for usage.\n", name)
		os.Exit(2)
	default:
		report(os.Stderr, err)
		os.Exit(1)
	}
}

// report prints err on w, each line (errors.Join makes several) prefixed with
// the command's name.
func report(w io.Writer, err error) {
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(w, "%s: %s\n", name, strings.TrimRight(line, "\n"))
	}
}

// run parses args, runs the benchmark and writes its table to stdout and its
// progress to stderr.
func run(ctx context.Context, args []string, env func(string) (string, bool), stdout, stderr io.Writer) error {
	f := flag.NewFlagSet(name, flag.ContinueOnError)
	f.SetOutput(io.Discard) // errors are reported by main
	configFile := f.String("config", "", "configuration `file` (default: $"+config.FileEnv+", else ./"+config.DefaultFile+" when it exists)")
	editors := f.Int("editors", bench.EditorsDefault, "concurrent editors")
	categories := f.Int("categories", bench.CategoriesDefault, "categories; editor i takes tasks from category i mod categories")
	pool := f.Int("pool", bench.PoolDefault, "tasks in the pool at the start")
	duration := f.Duration("duration", bench.DurationDefault, "how long each strategy runs (less if the pool runs dry)")
	workers := f.Int("workers", 0, "run this many background worker slots with a no-op handler instead of editors (strategies taskd and mysql-skip-locked)")
	think := f.Duration("think", 0, "time an editor works on a task before submitting")
	abandon := f.Float64("abandon", 0, "fraction of claims abandoned (not submitted; the editor is replaced)")
	lease := f.Duration("lease", bench.LeaseDefault, "lease of each claim")
	mode := f.String("mode", bench.ModeInproc, "inproc (strategies in this process) or http (taskd serve as a child)")
	strategies := f.String("strategies", strings.Join([]string{bench.StrategyTaskd, bench.StrategySeedNaive, bench.StrategySkipLocked}, ","), "comma-separated strategies to run")
	scenario := f.String("scenario", "", "run a preset instead of one workload: "+strings.Join(bench.ScenarioNames, ", ")+
		" (long-poll, alias i, raises RLIMIT_NOFILE to the hard limit for itself and its taskd serve child: see above)")
	jsonFile := f.String("json", "", "also write the results as JSON to `file`")
	binary := f.String("binary", "", "taskd binary for -mode http (default: ./bin/taskd when it exists, else taskd on $PATH)")
	quick := f.Bool("quick", false, "with -scenario: shorten every run (2s, smaller pools) for a smoke test")
	rounds := f.Int("rounds", bench.RoundsDefault, "with -scenario: how many times the compared pairs (a, b, f), j and g2 run; the targets use the medians")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of this process (go tool pprof) to `file`")
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: %s [flags]\n\n%s\n\nFlags:\n", name, strings.TrimSpace(about))
			f.SetOutput(stdout)
			f.PrintDefaults()
			return errHelp
		}
		return &usageError{err}
	}
	if f.NArg() > 0 {
		return usagef("unexpected argument %q", f.Arg(0))
	}
	var names []string
	for _, s := range strings.Split(*strategies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !bench.ValidStrategy(s) {
			return usagef("unknown strategy %q", s)
		}
		names = append(names, s)
	}
	if *mode == bench.ModeHTTP && *scenario == "" {
		names = []string{bench.StrategyTaskd}
	}
	cfg, err := config.Load(config.Path(*configFile, env), env)
	if err != nil {
		return &usageError{err}
	}
	if cfg.Redis.Cluster || len(cfg.Redis.Addrs) > 1 {
		return usagef("needs a single Redis server, not a Cluster or Redlock masters (redis.addrs: %s)", strings.Join(cfg.Redis.Addrs, ","))
	}
	bin := *binary
	if needsServe(*mode, *scenario) {
		if bin, err = findTaskd(bin); err != nil {
			return &usageError{err}
		}
	}
	galeraDSN, galeraAddrs, err := galeraCluster(env)
	if err != nil {
		return &usageError{err}
	}
	bcfg := bench.Config{
		MySQLDSN:    cfg.MySQL.DSN,
		ReplicaDSN:  cfg.MySQL.ReplicaDSN,
		GaleraDSN:   galeraDSN,
		GaleraAddrs: galeraAddrs,
		Redis: &redis.Options{
			Addr: cfg.Redis.Addrs[0], Username: cfg.Redis.Username, Password: cfg.Redis.Password, DB: cfg.Redis.DB,
			PoolSize: max(*editors, 200) / 4, ContextTimeoutEnabled: true,
		},
		Binary: bin,
		ServeEnv: []string{
			"TASKD_REDIS_ADDRS=" + cfg.Redis.Addrs[0],
			"TASKD_REDIS_USERNAME=" + cfg.Redis.Username,
			"TASKD_REDIS_PASSWORD=" + cfg.Redis.Password,
			"TASKD_REDIS_DB=" + strconv.Itoa(cfg.Redis.DB),
		},
		Progress: func(s string) { fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), s) },
	}
	w := bench.Workload{
		Editors: *editors, Categories: *categories, Pool: *pool, Duration: *duration,
		Think: *think, Abandon: *abandon, Lease: *lease, Mode: *mode, Workers: *workers,
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *rounds < 1 {
		return usagef("-rounds must be at least 1")
	}
	if *scenario == "storage" {
		n := bench.StorageTasks
		if *quick {
			n /= 10
		}
		figs, err := bench.MeasureStorage(ctx, bcfg, bench.StorageSizes, n)
		bench.WriteStorage(stdout, figs)
		if *jsonFile != "" && len(figs) > 0 {
			b, jerr := json.MarshalIndent(map[string]any{"storage": figs}, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(*jsonFile, append(b, '\n'), 0o644)
			}
			if jerr != nil {
				return fmt.Errorf("write results: %w", jerr)
			}
			fmt.Fprintf(stdout, "results written to %s\n", *jsonFile)
		}
		return err
	}
	preset := bench.Preset{Rounds: *rounds, Quick: *quick, Replica: bcfg.ReplicaDSN != "", Galera: galeraDSN != ""}
	rep, runErr := bench.RunScenario(ctx, bcfg, *scenario, preset, w, names)
	if rep == nil {
		return &usageError{runErr}
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if *jsonFile != "" {
		if err := rep.WriteJSON(*jsonFile); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		fmt.Fprintf(stdout, "results written to %s\n", *jsonFile)
	}
	return runErr
}

// galeraCluster reads the Galera cluster of scenario g2 from
// TASKD_GALERA_DSN and TASKD_GALERA_ADDRS: the DSN of its first node and
// every node's address. Neither set: no cluster ("", nil).
func galeraCluster(env func(string) (string, bool)) (dsn string, addrs []string, err error) {
	dsn, _ = env("TASKD_GALERA_DSN")
	list, _ := env("TASKD_GALERA_ADDRS")
	if dsn == "" {
		if list != "" {
			return "", nil, errors.New("TASKD_GALERA_ADDRS needs TASKD_GALERA_DSN")
		}
		return "", nil, nil
	}
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("TASKD_GALERA_DSN: %w", err)
	}
	if list == "" {
		list = mcfg.Addr
	}
	for a := range strings.SplitSeq(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return "", nil, errors.New("TASKD_GALERA_ADDRS: no address")
	}
	mcfg.Addr = addrs[0]
	return mcfg.FormatDSN(), addrs, nil
}

// needsServe reports whether the run starts `taskd serve`: -mode http, or a
// preset that includes the run over HTTP.
func needsServe(mode, scenario string) bool {
	return mode == bench.ModeHTTP || scenario == "all" || scenario == "http" || scenario == "long-poll" || scenario == "i"
}

// findTaskd returns the absolute path of the taskd binary: bin itself when
// set, else ./bin/taskd when it exists, else taskd on $PATH. The path is
// absolute because the child runs in a directory of its own.
func findTaskd(bin string) (string, error) {
	if bin == "" {
		if _, err := os.Stat(defaultBinary); err == nil {
			bin = defaultBinary
		} else if bin, err = exec.LookPath("taskd"); err != nil {
			return "", errors.New("no taskd binary for the run over HTTP: build one with 'make build' or name it with -binary")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("-binary: %w", err)
	}
	return filepath.Abs(bin)
}

// defaultBinary is where `make build` puts taskd.
const defaultBinary = "bin/taskd"

// startCPUProfile profiles this process's CPU into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
