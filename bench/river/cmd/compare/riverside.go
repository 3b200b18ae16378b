package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's own benchmark's fetch settings (cmd/river/riverbench): a fetch at
// most every 2 ms while jobs keep coming, and a poll every 20 ms otherwise
// (its defaults are 100 ms and 1 s).
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

// noopArgs is the River job: no arguments, a worker that does nothing.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// riverSide is River over Postgres, in a schema of its own (migrated once,
// dropped by Close), its client built on the default pgx pool as River's
// benchmark does.
type riverSide struct {
	url    string
	schema string
	pool   *pgxpool.Pool // the client's
	admin  *pgxpool.Pool // the harness's: migrations, counts
	client *river.Client[pgx.Tx]
	ran    atomic.Int64
	args   []river.InsertManyParams
	logCounter
}

func newRiverSide(ctx context.Context, url string) (*riverSide, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	rs := &riverSide{url: url, schema: "river_bench_" + hex.EncodeToString(b[:])}
	var err error
	if rs.admin, err = pgxpool.New(ctx, url); err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := rs.admin.Ping(ctx); err != nil {
		rs.admin.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if _, err := rs.admin.Exec(ctx, "CREATE SCHEMA "+rs.schema); err != nil {
		rs.admin.Close()
		return nil, fmt.Errorf("create schema %s: %w", rs.schema, err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(rs.admin), &rivermigrate.Config{Schema: rs.schema, Logger: warnLogger()})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		_ = rs.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("migrate river: %w", err)
	}
	return rs, nil
}

func (rs *riverSide) Name() string { return "River" }

func (rs *riverSide) Reset(ctx context.Context, workers int) error {
	if rs.client != nil {
		return errors.New("reset: the previous client is still running")
	}
	// As River's benchmark does before a run.
	if _, err := rs.admin.Exec(ctx, "TRUNCATE "+rs.schema+".river_job"); err != nil {
		return fmt.Errorf("truncate river_job: %w", err)
	}
	if _, err := rs.admin.Exec(ctx, "VACUUM FULL "+rs.schema+".river_job"); err != nil {
		return fmt.Errorf("vacuum river_job: %w", err)
	}
	var err error
	if rs.pool, err = pgxpool.New(ctx, rs.url); err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	rs.ran.Store(0)
	rs.reset()
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error {
		rs.ran.Add(1)
		return nil
	}))
	rs.client, err = river.NewClient(riverpgxv5.New(rs.pool), &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		Schema:            rs.schema,
		Logger:            rs.logger(),
	})
	if err != nil {
		rs.pool.Close()
		rs.client = nil
		return fmt.Errorf("new river client: %w", err)
	}
	return nil
}

func (rs *riverSide) Insert(ctx context.Context, n int) error {
	if len(rs.args) < n {
		rs.args = make([]river.InsertManyParams, n)
		for i := range rs.args {
			rs.args[i].Args = noopArgs{}
		}
	}
	_, err := rs.client.InsertManyFast(ctx, rs.args[:n])
	return err
}

func (rs *riverSide) Start(ctx context.Context) error { return rs.client.Start(ctx) }

func (rs *riverSide) Stop(ctx context.Context) error {
	if rs.client == nil {
		return nil
	}
	err := rs.client.Stop(ctx)
	rs.pool.Close()
	rs.client, rs.pool = nil, nil
	return err
}

func (rs *riverSide) Handled() int64 { return rs.ran.Load() }

func (rs *riverSide) count(ctx context.Context, where string) (int64, error) {
	var n int64
	err := rs.admin.QueryRow(ctx, "SELECT count(*) FROM "+rs.schema+".river_job WHERE "+where).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count river jobs: %w", err)
	}
	return n, nil
}

// River's job states: available, scheduled, pending and retryable wait;
// running runs; completed, cancelled and discarded are final.
func (rs *riverSide) Completed(ctx context.Context) (int64, error) {
	return rs.count(ctx, "state = 'completed'")
}

func (rs *riverSide) Unfinished(ctx context.Context) (int64, error) {
	return rs.count(ctx, "state IN ('available', 'scheduled', 'pending', 'retryable', 'running')")
}

func (rs *riverSide) Failed(ctx context.Context) (int64, error) {
	return rs.count(ctx, "state IN ('retryable', 'cancelled', 'discarded') OR errors <> '{}'")
}

func (rs *riverSide) Durability(ctx context.Context) (string, error) {
	var version, fsync, syncCommit, fpw string
	err := rs.admin.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
	current_setting('synchronous_commit'), current_setting('full_page_writes')`).Scan(&version, &fsync, &syncCommit, &fpw)
	if err != nil {
		return "", fmt.Errorf("read postgres settings: %w", err)
	}
	return fmt.Sprintf("PostgreSQL %s: fsync=%s, synchronous_commit=%s, full_page_writes=%s", version, fsync, syncCommit, fpw), nil
}

func (rs *riverSide) Servers(ctx context.Context) []int {
	var dir string
	if err := rs.admin.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return nil
	}
	pid := pidFromFile(dir + "/postmaster.pid")
	if pid == 0 {
		return nil
	}
	return childrenOf(pid)
}

func (rs *riverSide) Close(ctx context.Context) error {
	err := rs.Stop(ctx)
	if _, derr := rs.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+rs.schema+" CASCADE"); derr != nil {
		err = errors.Join(err, fmt.Errorf("drop schema %s: %w", rs.schema, derr))
	}
	rs.admin.Close()
	return err
}
