package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/cmd/taskd/internal/bench"
	"github.com/taskd/taskd/cmd/taskd/internal/config"
)

// runBench measures the dispatcher against the baselines.
func runBench(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("bench", "bench [flags]", `
Measures the dispatcher against two baselines on the configured MySQL and Redis:
seed-naive (read candidates, SET NX them one at a time until one sticks, then
UPDATE) and mysql-skip-locked (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1 and an
UPDATE in one transaction). Each run creates its own database
(taskd_bench_<random>) on the server of mysql.dsn and drops it at the end, so
real data is never touched; Redis keys get a prefix of their own and are
removed. Redis must be a single server (not Cluster or Redlock).

Reports per strategy: next+submit cycles/s, next latency p50/p99, lock conflicts
per assignment, refused claims, MySQL statements and Redis commands per
assignment (server-wide counters), and the resident memory of the process.
-scenario runs a preset (all: every measurement, a few minutes); without it,
one run of the workload the flags describe.

In -mode http, the taskd binary (-binary, default this one) runs 'serve' as a
child process and the editors use its HTTP API; only the taskd strategy runs.`)
	editors := f.Int("editors", bench.EditorsDefault, "concurrent editors")
	categories := f.Int("categories", bench.CategoriesDefault, "categories; editor i takes tasks from category i mod categories")
	pool := f.Int("pool", bench.PoolDefault, "tasks in the pool at the start")
	duration := f.Duration("duration", bench.DurationDefault, "how long each strategy runs (less if the pool runs dry)")
	think := f.Duration("think", 0, "time an editor works on a task before submitting")
	abandon := f.Float64("abandon", 0, "fraction of claims abandoned (not submitted; the editor is replaced)")
	lease := f.Duration("lease", bench.LeaseDefault, "lease of each claim")
	mode := f.String("mode", bench.ModeInproc, "inproc (strategies in this process) or http (taskd serve as a child)")
	strategies := f.String("strategies", strings.Join([]string{bench.StrategyTaskd, bench.StrategySeedNaive, bench.StrategySkipLocked}, ","), "comma-separated strategies to run")
	scenario := f.String("scenario", "", "run a preset instead of one workload: "+strings.Join(bench.ScenarioNames, ", "))
	jsonFile := f.String("json", "", "also write the results as JSON to `file`")
	binary := f.String("binary", "", "taskd binary for -mode http (default: this executable)")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of this process (go tool pprof) to `file`")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	var names []string
	for _, s := range strings.Split(*strategies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !bench.ValidStrategy(s) {
			return usagef("bench", "unknown strategy %q", s)
		}
		names = append(names, s)
	}
	if *mode == bench.ModeHTTP && *scenario == "" {
		names = []string{bench.StrategyTaskd}
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	if config.Mode(cfg.Redis) != config.RedisSingle {
		return usagef("bench", "bench needs a single Redis server, not %s", config.Mode(cfg.Redis))
	}
	bin := *binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("find this executable: %w", err)
		}
	}
	bcfg := bench.Config{
		MySQLDSN: cfg.MySQL.DSN,
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
		Progress: func(s string) { fmt.Fprintf(a.stderr, "%s %s\n", time.Now().Format("15:04:05"), s) },
	}
	w := bench.Workload{
		Editors: *editors, Categories: *categories, Pool: *pool, Duration: *duration,
		Think: *think, Abandon: *abandon, Lease: *lease, Mode: *mode,
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep, runErr := bench.RunScenario(ctx, bcfg, *scenario, w, names)
	if rep == nil {
		return usagef("bench", "%v", runErr)
	}
	if err := rep.WriteTable(a.stdout); err != nil {
		return err
	}
	if *jsonFile != "" {
		if err := rep.WriteJSON(*jsonFile); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		fmt.Fprintf(a.stdout, "results written to %s\n", *jsonFile)
	}
	return runErr
}

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
