package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/tasks"
	"github.com/taskd/taskd/tasks/migrate"
)

// fillChunk is how many rows one INSERT ... SELECT of the fill writes.
const fillChunk = 200_000

// benchDB is a database made for one run and dropped after it.
type benchDB struct {
	name  string
	dsn   string // DSN of the bench database
	admin *sqlx.DB
	db    *sqlx.DB
	store *tasks.Store
}

// createDB creates a fresh database (taskd_bench_<random>) on the server of
// dsn, applies the schema and opens a store on it. The database of dsn itself
// is never touched.
func createDB(ctx context.Context, dsn string) (*benchDB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "taskd_bench_" + hex.EncodeToString(b[:])
	cfg.DBName = ""
	admin, err := tasks.Open(ctx, cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("connect to mysql: %w", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	bd := &benchDB{name: name, admin: admin}
	cfg.DBName = name
	bd.dsn = cfg.FormatDSN()
	if bd.db, err = tasks.Open(ctx, bd.dsn); err != nil {
		bd.drop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	if _, err := migrate.Up(ctx, bd.db); err != nil {
		bd.drop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	if bd.store, err = tasks.NewStore(bd.db, tasks.Config{}); err != nil {
		bd.drop(context.WithoutCancel(ctx))
		return nil, err
	}
	return bd, nil
}

// drop closes the connections and drops the database.
func (bd *benchDB) drop(ctx context.Context) error {
	if bd.db != nil {
		_ = bd.db.Close()
	}
	_, err := bd.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+bd.name+"`")
	_ = bd.admin.Close()
	if err != nil {
		return fmt.Errorf("drop database %s: %w", bd.name, err)
	}
	return nil
}

// fill inserts n pending tasks spread over categories cat0..cat<categories-1>
// (task i in cat<i mod categories>, priority i mod 10) with MariaDB's SEQUENCE
// engine, in chunks.
func (bd *benchDB) fill(ctx context.Context, n, categories int) error {
	return bd.fillWith(ctx, n, func(seq string) string {
		return fmt.Sprintf(`INSERT INTO tasks (category, priority, title, payload)
SELECT CONCAT('cat', seq %% %d), seq %% 10, CONCAT('task ', seq), '{}' FROM %s`, categories, seq)
	})
}

// fillExpired inserts n tasks in category "expired" (no editor reads it) that
// are assigned to a holder that is gone and whose lease has passed: what a
// sweep recycles.
func (bd *benchDB) fillExpired(ctx context.Context, n int) error {
	return bd.fillWith(ctx, n, func(seq string) string {
		return `INSERT INTO tasks (category, priority, title, payload, status, fence, holder,
	assigned_at, lease_expires_at, attempts)
SELECT 'expired', seq % 10, CONCAT('expired ', seq), '{}', 'assigned', 1, 'bench:gone',
	NOW(3) - INTERVAL 2 MINUTE, NOW(3) - INTERVAL 1 MINUTE, 1 FROM ` + seq
	})
}

func (bd *benchDB) fillWith(ctx context.Context, n int, query func(seq string) string) error {
	for lo := 0; lo < n; lo += fillChunk {
		hi := min(lo+fillChunk, n) - 1
		seq := "seq_" + strconv.Itoa(lo) + "_to_" + strconv.Itoa(hi)
		if _, err := bd.db.ExecContext(ctx, query(seq)); err != nil {
			return fmt.Errorf("fill pool (rows %d..%d): %w", lo, hi, err)
		}
	}
	return nil
}

// empty reports whether categories have no pending task left.
func (bd *benchDB) empty(ctx context.Context, categories []string) (bool, error) {
	var n int
	q := fmt.Sprintf(`SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE status = 'pending' AND category IN (%s) LIMIT 1) x`, inList(len(categories)))
	if err := bd.db.GetContext(ctx, &n, q, catArgs(categories)...); err != nil {
		return false, fmt.Errorf("check pool: %w", err)
	}
	return n == 0, nil
}

// doubleCommits counts tasks with more than one accepted result, which the
// fencing must make impossible, and tasks done without a result for their fence.
func (bd *benchDB) doubleCommits(ctx context.Context) (int64, error) {
	var n int64
	err := bd.db.GetContext(ctx, &n, `SELECT
	(SELECT COUNT(*) FROM (SELECT task_id FROM task_results GROUP BY task_id HAVING COUNT(*) > 1) x) +
	(SELECT COUNT(*) FROM tasks t WHERE t.status = 'done'
		AND NOT EXISTS (SELECT 1 FROM task_results r WHERE r.task_id = t.id AND r.fence = t.fence))`)
	if err != nil {
		return 0, fmt.Errorf("check results: %w", err)
	}
	return n, nil
}

// serverCounters are server-wide counters read before and after a run.
type serverCounters struct {
	questions     int64 // MySQL statements (SHOW GLOBAL STATUS 'Questions')
	redisCommands int64 // Redis total_commands_processed
}

func readCounters(ctx context.Context, db *sqlx.DB, rdb *redis.Client) (serverCounters, error) {
	var c serverCounters
	var row struct {
		Name  string `db:"Variable_name"`
		Value string `db:"Value"`
	}
	if err := db.GetContext(ctx, &row, "SHOW GLOBAL STATUS LIKE 'Questions'"); err != nil {
		return c, fmt.Errorf("read mysql questions: %w", err)
	}
	c.questions, _ = strconv.ParseInt(row.Value, 10, 64)
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return c, fmt.Errorf("read redis stats: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			c.redisCommands, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return c, nil
}
