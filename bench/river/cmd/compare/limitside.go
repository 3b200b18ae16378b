package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
)

// limitSide is (l), the limit of a fenced MySQL queue on this machine: the
// least a worker job can cost on the same MariaDB taskd runs on, with no
// Redis, no audit events, no client work beyond the loop. A job is a row of
// a narrow table with one candidate index; a claim takes up to a fetcher's
// free slots in one transaction (SELECT ... FOR UPDATE SKIP LOCKED, then one
// UPDATE that moves them to running and raises their fence); a completion is
// one UPDATE of up to limitCompleteMax jobs, each fenced: WHERE id and fence
// match and the job is running, its count checked. Two UPDATEs per job, as a
// fenced design must do at least.
type limitSide struct {
	admin  *sqlx.DB // the server: create and drop databases
	dsn    *mysql.Config
	db     *sqlx.DB // the run's database
	dbName string

	workers int
	ran     atomic.Int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errMu   sync.Mutex
	err     error
	logged  atomic.Int64
}

// The limit loop's shape: like River's producer and completer, batched.
const (
	// limitConns bounds the loop's connections: a fetcher and completers.
	limitConns = 8
	// limitCompleteMax is the most jobs one completion UPDATE carries.
	limitCompleteMax = 1_000
	// limitCompleteEvery is how long a completer waits to fill a batch.
	limitCompleteEvery = 2 * time.Millisecond
	// limitIdle is how long a fetcher that found nothing waits.
	limitIdle = 10 * time.Millisecond
)

const limitSchema = `CREATE TABLE limit_jobs (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  state TINYINT NOT NULL DEFAULT 0,
  fence BIGINT NOT NULL DEFAULT 0,
  args VARCHAR(64) NOT NULL,
  KEY limit_jobs_available (state, id)
) ENGINE=InnoDB`

// Job states.
const (
	limitAvailable = 0
	limitRunning   = 1
	limitCompleted = 2
)

func newLimitSide(ctx context.Context, dsn string) (*limitSide, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	ls := &limitSide{dsn: cfg.Clone()}
	ls.dsn.DBName = ""
	if ls.admin, err = store.Open(ctx, ls.dsn.FormatDSN()); err != nil {
		return nil, fmt.Errorf("connect to mysql: %w", err)
	}
	return ls, nil
}

func (ls *limitSide) Name() string { return "limit" }

func (ls *limitSide) Reset(ctx context.Context, workers int) error {
	if ls.cancel != nil {
		return errors.New("reset: the previous loop is still running")
	}
	if err := ls.dropDB(ctx); err != nil {
		return err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "taskd_limit_" + hex.EncodeToString(b[:])
	if _, err := ls.admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	ls.dbName = name
	cfg := ls.dsn.Clone()
	cfg.DBName = name
	var err error
	if ls.db, err = store.Open(ctx, cfg.FormatDSN()); err != nil {
		return fmt.Errorf("connect to %s: %w", name, err)
	}
	ls.db.SetMaxOpenConns(limitConns)
	ls.db.SetMaxIdleConns(limitConns)
	if _, err := ls.db.ExecContext(ctx, limitSchema); err != nil {
		return fmt.Errorf("create limit_jobs: %w", err)
	}
	ls.workers = workers
	ls.ran.Store(0)
	ls.logged.Store(0)
	ls.err = nil
	return nil
}

func (ls *limitSide) Insert(ctx context.Context, n int) error {
	q := "INSERT INTO limit_jobs (args) VALUES " + strings.TrimSuffix(strings.Repeat("('{}'),", n), ",")
	_, err := ls.db.ExecContext(ctx, q)
	return err
}

// Start runs the fetchers, the slots and the completers until Stop.
func (ls *limitSide) Start(ctx context.Context) error {
	ctx, ls.cancel = context.WithCancel(context.WithoutCancel(ctx))
	// One fetcher, as River's producer per queue: fetchers racing for the head
	// of the candidate index with SKIP LOCKED measured 4 to 7 times slower
	// here.
	const fetchers = 1
	slots := make(chan struct{}, ls.workers)
	for range ls.workers {
		slots <- struct{}{}
	}
	done := make(chan [2]int64, ls.workers)
	for i := range fetchers {
		share := ls.workers / fetchers
		if i < ls.workers%fetchers {
			share++
		}
		ls.wg.Go(func() { ls.fetch(ctx, share, slots, done) })
	}
	for range fetchers {
		ls.wg.Go(func() { ls.complete(ctx, slots, done) })
	}
	return nil
}

// fetch claims jobs for up to share slots at a time, runs each (a no-op
// handler) and hands it to a completer.
func (ls *limitSide) fetch(ctx context.Context, share int, slots chan struct{}, done chan<- [2]int64) {
	for ctx.Err() == nil {
		// Take the free slots, up to the share, waiting for one at least.
		n := 0
		select {
		case <-slots:
			n = 1
		case <-ctx.Done():
			return
		}
	more:
		for n < share {
			select {
			case <-slots:
				n++
			default:
				break more
			}
		}
		jobs, err := ls.claim(ctx, n)
		if err != nil && ctx.Err() == nil {
			ls.fail(err)
		}
		for range n - len(jobs) {
			slots <- struct{}{}
		}
		for _, j := range jobs {
			ls.ran.Add(1) // the handler
			done <- j
		}
		if len(jobs) == 0 {
			sleepCtx(ctx, limitIdle)
		}
	}
}

// claim moves up to n available jobs to running in one transaction, and
// returns their ids and new fences.
func (ls *limitSide) claim(ctx context.Context, n int) ([][2]int64, error) {
	tx, err := ls.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var rows []struct {
		ID    int64 `db:"id"`
		Fence int64 `db:"fence"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT id, fence FROM limit_jobs FORCE INDEX (limit_jobs_available)
WHERE state = 0 ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`, n); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, tx.Commit()
	}
	ids := make([]string, len(rows))
	out := make([][2]int64, len(rows))
	for i, r := range rows {
		ids[i] = fmt.Sprint(r.ID)
		out[i] = [2]int64{r.ID, r.Fence + 1}
	}
	res, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE limit_jobs SET state = %d, fence = fence + 1 WHERE id IN (%s) AND state = %d`,
		limitRunning, strings.Join(ids, ","), limitAvailable))
	if err != nil {
		return nil, err
	}
	if got, err := res.RowsAffected(); err != nil || got != int64(len(rows)) {
		return nil, fmt.Errorf("claimed %d of %d locked jobs (%v)", got, len(rows), err)
	}
	return out, tx.Commit()
}

// complete writes the completions handed to it, in batches, each fenced,
// and gives the slots back.
func (ls *limitSide) complete(ctx context.Context, slots chan<- struct{}, done <-chan [2]int64) {
	batch := make([][2]int64, 0, limitCompleteMax)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if err := ls.completeBatch(context.WithoutCancel(ctx), batch); err != nil {
			ls.fail(err)
		}
		for range batch {
			slots <- struct{}{}
		}
		batch = batch[:0]
	}
	t := time.NewTicker(limitCompleteEvery)
	defer t.Stop()
	for {
		select {
		case j := <-done:
			batch = append(batch, j)
			if len(batch) == limitCompleteMax {
				flush()
			}
		case <-t.C:
			flush()
		case <-ctx.Done():
			// Drain what the fetchers handed over, then stop.
			for {
				select {
				case j := <-done:
					batch = append(batch, j)
				default:
					flush()
					return
				}
			}
		}
	}
}

// completeBatch moves the jobs to completed in one statement, each only at
// its fence and while running, and checks that all matched.
func (ls *limitSide) completeBatch(ctx context.Context, jobs [][2]int64) error {
	var q strings.Builder
	fmt.Fprintf(&q, "UPDATE limit_jobs SET state = %d WHERE state = %d AND (id, fence) IN (", limitCompleted, limitRunning)
	for i, j := range jobs {
		if i > 0 {
			q.WriteByte(',')
		}
		fmt.Fprintf(&q, "(%d,%d)", j[0], j[1])
	}
	q.WriteByte(')')
	res, err := ls.db.ExecContext(ctx, q.String())
	if err != nil {
		return err
	}
	if got, err := res.RowsAffected(); err != nil || got != int64(len(jobs)) {
		return fmt.Errorf("completed %d of %d jobs at their fence (%v)", got, len(jobs), err)
	}
	return nil
}

func (ls *limitSide) fail(err error) {
	ls.logged.Add(1)
	ls.errMu.Lock()
	defer ls.errMu.Unlock()
	if ls.err == nil {
		ls.err = err
	}
}

func (ls *limitSide) Stop(ctx context.Context) error {
	if ls.cancel == nil {
		return nil
	}
	ls.cancel()
	ls.cancel = nil
	stopped := make(chan struct{})
	go func() { ls.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ls *limitSide) Handled() int64 { return ls.ran.Load() }

func (ls *limitSide) count(ctx context.Context, where string) (int64, error) {
	var n int64
	if err := ls.db.GetContext(ctx, &n, "SELECT COUNT(*) FROM limit_jobs WHERE "+where); err != nil {
		return 0, fmt.Errorf("count limit jobs: %w", err)
	}
	return n, nil
}

func (ls *limitSide) Completed(ctx context.Context) (int64, error) {
	return ls.count(ctx, fmt.Sprintf("state = %d", limitCompleted))
}

func (ls *limitSide) Unfinished(ctx context.Context) (int64, error) {
	return ls.count(ctx, fmt.Sprintf("state <> %d", limitCompleted))
}

// Failed is 0: the loop has no failure path; its errors are logged.
func (ls *limitSide) Failed(context.Context) (int64, error) { return 0, nil }

func (ls *limitSide) Durability(ctx context.Context) (string, error) {
	return (&taskdSide{admin: ls.admin}).Durability(ctx)
}

// Servers is mysqld alone: the limit uses no Redis.
func (ls *limitSide) Servers(ctx context.Context) []int {
	var file string
	if err := ls.admin.GetContext(ctx, &file, "SELECT @@pid_file"); err != nil {
		return nil
	}
	if pid := pidFromFile(file); pid != 0 {
		return []int{pid}
	}
	return nil
}

func (ls *limitSide) Logged() (int64, string) {
	ls.errMu.Lock()
	defer ls.errMu.Unlock()
	if ls.err == nil {
		return ls.logged.Load(), ""
	}
	return ls.logged.Load(), ls.err.Error()
}

func (ls *limitSide) dropDB(ctx context.Context) error {
	if ls.db != nil {
		_ = ls.db.Close()
		ls.db = nil
	}
	if ls.dbName == "" {
		return nil
	}
	if _, err := ls.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+ls.dbName+"`"); err != nil {
		return fmt.Errorf("drop database %s: %w", ls.dbName, err)
	}
	ls.dbName = ""
	return nil
}

func (ls *limitSide) Close(ctx context.Context) error {
	err := errors.Join(ls.Stop(ctx), ls.dropDB(ctx))
	_ = ls.admin.Close()
	return err
}
