package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/tasks"
)

// taskdCategory is the category of the no-op tasks.
const taskdCategory = "noop"

// taskdSide is taskd's engine as an embedder runs it: taskd.New with a
// handler and worker.concurrency, over MariaDB and Redis, each run in a
// fresh database and under a fresh Redis key prefix.
type taskdSide struct {
	dsn       *mysql.Config // the server; DBName is set per run
	redisAddr string
	redisDB   int
	admin     *sqlx.DB // the harness's: create, count and drop databases
	db        *sqlx.DB // the harness's handle on the run's database
	dbName    string
	engine    *taskd.Engine
	ran       atomic.Int64
	batch     []tasks.NewTask
	// batchSize is worker.batch_size, 0 for its default.
	batchSize int
	logCounter
	// restore is the server's settings to put back on Close, when
	// newTaskdSide changed them.
	restore *syncSettings
}

// syncSettings are the MySQL server's settings that decide whether a
// commit is fsynced.
type syncSettings struct {
	FlushLog   int `db:"flush_log"`   // innodb_flush_log_at_trx_commit
	SyncBinlog int `db:"sync_binlog"` // sync_binlog
}

func (s syncSettings) set(ctx context.Context, db *sqlx.DB) error {
	_, err := db.ExecContext(ctx, "SET GLOBAL innodb_flush_log_at_trx_commit = ?, GLOBAL sync_binlog = ?", s.FlushLog, s.SyncBinlog)
	return err
}

// newTaskdSide connects to the MySQL server of dsn. With syncCommits it
// sets the server's innodb_flush_log_at_trx_commit and sync_binlog to 1
// until Close, so that every commit is fsynced, as PostgreSQL's are at its
// defaults; else it leaves the server as it is.
func newTaskdSide(ctx context.Context, dsn, redisURL string, syncCommits bool) (*taskdSide, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	ropt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	ts := &taskdSide{dsn: cfg.Clone(), redisAddr: ropt.Addr, redisDB: ropt.DB}
	ts.dsn.DBName = ""
	if ts.admin, err = store.Open(ctx, ts.dsn.FormatDSN()); err != nil {
		return nil, fmt.Errorf("connect to mysql: %w", err)
	}
	if syncCommits {
		var old syncSettings
		err := ts.admin.GetContext(ctx, &old, "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush_log, @@GLOBAL.sync_binlog AS sync_binlog")
		if err == nil {
			err = syncSettings{FlushLog: 1, SyncBinlog: 1}.set(ctx, ts.admin)
		}
		if err != nil {
			_ = ts.admin.Close()
			return nil, fmt.Errorf("set innodb_flush_log_at_trx_commit and sync_binlog: %w", err)
		}
		ts.restore = &old
	}
	return ts, nil
}

func (ts *taskdSide) Name() string { return "taskd" }

func (ts *taskdSide) Reset(ctx context.Context, workers int) error {
	if ts.engine != nil {
		return errors.New("reset: the previous engine is still running")
	}
	if err := ts.dropDB(ctx); err != nil {
		return err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	name := "taskd_river_" + suffix
	if _, err := ts.admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	ts.dbName = name
	cfg := ts.dsn.Clone()
	cfg.DBName = name
	var err error
	if ts.db, err = store.Open(ctx, cfg.FormatDSN()); err != nil {
		return fmt.Errorf("connect to %s: %w", name, err)
	}
	if _, err := migrate.Up(ctx, ts.db); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	ts.ran.Store(0)
	ts.reset()
	noop := taskd.HandlerFunc(func(context.Context, *tasks.Task) (any, error) {
		ts.ran.Add(1)
		return nil, nil
	})
	ts.engine, err = taskd.New(taskd.Config{
		MySQL:  taskd.MySQLConfig{DSN: cfg.FormatDSN()},
		Redis:  taskd.RedisConfig{Addrs: []string{ts.redisAddr}, DB: ts.redisDB, KeyPrefix: "taskd-river-" + suffix + ":"},
		Worker: taskd.WorkerConfig{Concurrency: workers, BatchSize: ts.batchSize},
	}, taskd.WithHandler(taskdCategory, noop), taskd.WithLogger(ts.logger()))
	if err != nil {
		return fmt.Errorf("new engine: %w", err)
	}
	return nil
}

func (ts *taskdSide) Insert(ctx context.Context, n int) error {
	if len(ts.batch) < n {
		ts.batch = make([]tasks.NewTask, n)
		for i := range ts.batch {
			ts.batch[i] = tasks.NewTask{Category: taskdCategory, Title: "job " + strconv.Itoa(i)}
		}
	}
	_, err := ts.engine.InsertTasks(ctx, ts.batch[:n])
	return err
}

func (ts *taskdSide) Start(ctx context.Context) error { return ts.engine.Start(ctx) }

func (ts *taskdSide) Stop(ctx context.Context) error {
	if ts.engine == nil {
		return nil
	}
	err := ts.engine.Stop(ctx)
	ts.engine = nil
	return err
}

func (ts *taskdSide) Handled() int64 { return ts.ran.Load() }

func (ts *taskdSide) count(ctx context.Context, where string) (int64, error) {
	var n int64
	if err := ts.db.GetContext(ctx, &n, "SELECT COUNT(*) FROM tasks WHERE "+where); err != nil {
		return 0, fmt.Errorf("count taskd tasks: %w", err)
	}
	return n, nil
}

func (ts *taskdSide) Completed(ctx context.Context) (int64, error) {
	return ts.count(ctx, "status = 'done'")
}

func (ts *taskdSide) Unfinished(ctx context.Context) (int64, error) {
	return ts.count(ctx, "status IN ('pending', 'assigned')")
}

// Failed counts dead and cancelled tasks and those that failed an attempt.
func (ts *taskdSide) Failed(ctx context.Context) (int64, error) {
	return ts.count(ctx, "status IN ('dead', 'cancelled') OR last_error IS NOT NULL")
}

func (ts *taskdSide) Durability(ctx context.Context) (string, error) {
	var v struct {
		Version   string `db:"version"`
		FlushLog  int    `db:"flush_log"`
		Doublew   int    `db:"doublewrite"`
		LogBin    int    `db:"log_bin"`
		SyncBinlo int    `db:"sync_binlog"`
	}
	err := ts.admin.GetContext(ctx, &v, `SELECT @@version AS version, @@innodb_flush_log_at_trx_commit AS flush_log,
	@@innodb_doublewrite AS doublewrite, @@log_bin AS log_bin, @@sync_binlog AS sync_binlog`)
	if err != nil {
		return "", fmt.Errorf("read mariadb settings: %w", err)
	}
	d := fmt.Sprintf("MariaDB %s: innodb_flush_log_at_trx_commit=%d, innodb_doublewrite=%d", v.Version, v.FlushLog, v.Doublew)
	if v.LogBin == 1 {
		d += fmt.Sprintf(", binary log on, sync_binlog=%d", v.SyncBinlo)
	}
	return d, nil
}

func (ts *taskdSide) Servers(ctx context.Context) []int {
	var file string
	if err := ts.admin.GetContext(ctx, &file, "SELECT @@pid_file"); err != nil {
		return nil
	}
	mysqld := pidFromFile(file)
	if mysqld == 0 {
		return nil
	}
	pids := []int{mysqld}
	rdb := redis.NewClient(&redis.Options{Addr: ts.redisAddr, DB: ts.redisDB})
	defer rdb.Close()
	if info, err := rdb.InfoMap(ctx, "server").Result(); err == nil {
		if pid, err := strconv.Atoi(info["Server"]["process_id"]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// dropDB drops the previous run's database, if any.
func (ts *taskdSide) dropDB(ctx context.Context) error {
	if ts.db != nil {
		_ = ts.db.Close()
		ts.db = nil
	}
	if ts.dbName == "" {
		return nil
	}
	if _, err := ts.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+ts.dbName+"`"); err != nil {
		return fmt.Errorf("drop database %s: %w", ts.dbName, err)
	}
	ts.dbName = ""
	return nil
}

func (ts *taskdSide) Close(ctx context.Context) error {
	err := errors.Join(ts.Stop(ctx), ts.dropDB(ctx))
	if ts.restore != nil {
		if serr := ts.restore.set(ctx, ts.admin); serr != nil {
			err = errors.Join(err, fmt.Errorf("restore innodb_flush_log_at_trx_commit and sync_binlog: %w", serr))
		}
	}
	_ = ts.admin.Close()
	return err
}
