// Command chaos runs taskd's fault suite (package internal/chaos): private
// Redis and MariaDB servers, three `taskd serve` replicas, simulated editors
// and scripted faults, then checks from the database. It prints a table per
// fault and exits 1 on any violation, 2 when the run itself failed.
//
//	go run ./internal/chaos/cmd/chaos                       # each fault once
//	go run ./internal/chaos/cmd/chaos -galera                # on a 3-node Galera cluster
//	go run ./internal/chaos/cmd/chaos -workflow              # a staged, overlapped workload
//	go run ./internal/chaos/cmd/chaos -soak -assignments 100000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/chaos"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	var (
		cfg      chaos.Config
		jsonPath string
	)
	flag.StringVar(&cfg.TaskdBin, "taskd", "", "taskd binary to run (default: go build ./cmd/taskd)")
	flag.StringVar(&cfg.WorkDir, "dir", "", "directory for the servers' data and logs (default: a temporary one, removed after a clean run)")
	flag.IntVar(&cfg.Editors, "editors", 30, "simulated editors")
	flag.BoolVar(&cfg.Soak, "soak", false, "run faults in a loop until -assignments or -duration")
	flag.Int64Var(&cfg.Assignments, "assignments", 100_000, "with -soak: stop faults after this many assignments")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "with -soak: stop faults after this long")
	flag.DurationVar(&cfg.Lease, "lease", 2*time.Second, "taskd dispatch.lease_ttl")
	flag.DurationVar(&cfg.SweepInterval, "sweep", time.Second, "taskd sweep.interval")
	flag.DurationVar(&cfg.Slack, "slack", 2*time.Second, "liveness slack over sweep.interval")
	flag.DurationVar(&cfg.RequestBound, "bound", 6*time.Second, "every request answered within its wait plus this")
	flag.DurationVar(&cfg.FaultEvery, "every", 3*time.Second, "calm time after each fault's recovery")
	flag.IntVar(&cfg.Pool, "pool", 1000, "pending tasks the feeder keeps")
	flag.BoolVar(&cfg.Galera, "galera", false, "run on a private 3-node MariaDB Galera cluster, with its faults (node killed and rejoining, node hung, node partitioned)")
	flag.BoolVar(&cfg.Workflow, "workflow", false, "run a staged, overlapped workload (review with send-back, three labels per task, editors of capacity 2 and 3, review-only editors, fair share) through the faults")
	flag.IntVar(&cfg.Replicas, "replicas", 3, "taskd replicas the editors' requests go to in turn (at least 2)")
	flag.IntVar(&cfg.InFlightLimit, "limit", 3, "max_in_flight of category cat0, checked from the audit trail (negative: none; the workflow pass limits none)")
	flag.StringVar(&jsonPath, "json", "", "also write the report as JSON to this file")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "chaos: no arguments expected")
		os.Exit(2)
	}
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s chaos: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	// The faults make both clients log broken connections on purpose.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	redis.SetLogger(quietRedis{})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		if errors.Is(err, chaos.ErrMissingServer) {
			fmt.Fprintln(os.Stderr, "chaos: install redis-server and mariadb-server, and for -galera galera-4 and rsync (scripts/services.sh install does it as root)")
		}
		os.Exit(2)
	}
	rep.WriteText(os.Stdout)
	if jsonPath != "" {
		if err := rep.WriteJSON(jsonPath); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			os.Exit(2)
		}
	}
	if len(rep.Violations) > 0 {
		os.Exit(1)
	}
}
