package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
)

// fillChunk is how many rows one INSERT ... SELECT of the fill writes.
const fillChunk = 200_000

// benchDB is a database made for one run and dropped after it.
type benchDB struct {
	name  string
	dsn   string // DSN of the bench database
	admin *sqlx.DB
	// db is the harness's own handle (fill, checks, counters); sdb is what
	// the strategies use, over a counting connector (primary).
	db, sdb *sqlx.DB
	primary *roundtrip.Connector
	// replicaDSN names the replica server (no database) when the run reads
	// candidates from a replica; replica is then its handle on the bench
	// database, over replicaCount.
	replicaDSN   string
	replica      *sqlx.DB
	replicaCount *roundtrip.Connector
	store        *store.Store
	// mysqldPID is the MySQL server's process id when it runs on this
	// machine, else 0.
	mysqldPID int
	// With several dispatchers (Workload.Dispatchers), stores holds each
	// one's store, stores[0] being store; the others' handles are extra,
	// counted by extraCount.
	stores     []*store.Store
	extra      []*sqlx.DB
	extraCount []*roundtrip.Connector
	// On Galera (openNodes), nodes holds the harness's handles on the
	// other nodes and nodePIDs their server processes (0 when unknown);
	// their counters and CPU add to the first node's.
	nodes    []*sqlx.DB
	nodePIDs []int
}

// replicatedPrefix starts the names of the databases the test replica
// applies (scripts/services.sh).
const replicatedPrefix = "taskd_r_"

// createDB creates a fresh database (taskd_bench_<random>, or
// taskd_r_bench_<random> when replicaDSN is set, so that the replica applies
// it) on the server of dsn and applies the schema. The database of dsn
// itself is never touched. Call openStore once the pool is filled.
func createDB(ctx context.Context, dsn, replicaDSN string) (*benchDB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "taskd_bench_" + hex.EncodeToString(b[:])
	if replicaDSN != "" {
		name = replicatedPrefix + "bench_" + hex.EncodeToString(b[:])
	}
	cfg.DBName = ""
	admin, err := store.Open(ctx, cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("connect to mysql: %w", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	bd := &benchDB{name: name, admin: admin, replicaDSN: replicaDSN}
	cfg.DBName = name
	bd.dsn = cfg.FormatDSN()
	if bd.db, err = store.Open(ctx, bd.dsn); err != nil {
		bd.drop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	if _, err := migrate.Up(ctx, bd.db); err != nil {
		bd.drop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	bd.mysqldPID = serverPID(ctx, bd.db)
	return bd, nil
}

// openStore opens the strategies' handles and taskd's store. On a
// replicated database it first waits until the replica has applied the
// filled pool, so that the replica is idle when the timed window opens;
// with w.ReplicaReads, the store reads its candidates from the replica.
// w.GroupCommit is the store's Config.GroupCommit (0: its default). With
// w.Dispatchers above 1 it opens that many stores (bd.stores), each over a
// pool of its own: on Galera, on the first of addrs (GaleraOneNode) or
// on addrs[i mod len(addrs)] (GaleraSpread), with wsrep_sync_wait=0 when
// w.CausalOff.
func (bd *benchDB) openStore(ctx context.Context, w Workload, addrs []string) error {
	dsns := []string{bd.dsn}
	if n := max(w.Dispatchers, 1); n > 1 || w.Galera != "" {
		dsns = dsns[:0]
		for i := range n {
			addr := ""
			switch w.Galera {
			case GaleraOneNode:
				addr = addrs[0]
			case GaleraSpread:
				addr = addrs[i%len(addrs)]
			}
			dsn, err := nodeDSN(bd.dsn, addr, w.CausalOff)
			if err != nil {
				return err
			}
			dsns = append(dsns, dsn)
		}
	}
	var err error
	if bd.sdb, bd.primary, err = roundtrip.OpenMySQL(ctx, dsns[0]); err != nil {
		return fmt.Errorf("connect to %s: %w", bd.name, err)
	}
	scfg := store.Config{GroupCommit: w.GroupCommit}
	if bd.replicaDSN != "" {
		rcfg, err := mysql.ParseDSN(bd.replicaDSN)
		if err != nil {
			return fmt.Errorf("parse mysql replica dsn: %w", err)
		}
		rcfg.DBName = ""
		radmin, err := store.Open(ctx, rcfg.FormatDSN())
		if err != nil {
			return fmt.Errorf("connect to the mysql replica: %w", err)
		}
		defer radmin.Close()
		if err := catchUp(ctx, bd.db, radmin); err != nil {
			return err
		}
		if w.ReplicaReads {
			rcfg.DBName = bd.name
			if bd.replica, bd.replicaCount, err = roundtrip.OpenMySQL(ctx, rcfg.FormatDSN()); err != nil {
				return fmt.Errorf("connect to %s on the replica: %w", bd.name, err)
			}
			scfg.Replica = bd.replica
		}
	}
	if bd.store, err = newStore(ctx, bd.sdb, scfg); err != nil {
		return err
	}
	bd.stores = []*store.Store{bd.store}
	for _, dsn := range dsns[1:] {
		db, count, err := roundtrip.OpenMySQL(ctx, dsn)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", bd.name, err)
		}
		bd.extra, bd.extraCount = append(bd.extra, db), append(bd.extraCount, count)
		st, err := newStore(ctx, db, scfg)
		if err != nil {
			return err
		}
		bd.stores = append(bd.stores, st)
	}
	return nil
}

// newStore returns taskd's store over db, having asked whether the server is
// a Galera node, so that the question is not counted in the timed window.
func newStore(ctx context.Context, db *sqlx.DB, cfg store.Config) (*store.Store, error) {
	st, err := store.New(db, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := st.Galera(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// catchUpTimeout bounds the wait for the replica to apply the pool.
const catchUpTimeout = 5 * time.Minute

// catchUp waits until replica has applied everything primary has logged.
func catchUp(ctx context.Context, primary, replica *sqlx.DB) error {
	var pos string
	if err := primary.GetContext(ctx, &pos, "SELECT @@gtid_binlog_pos"); err != nil {
		return fmt.Errorf("read the primary's GTID position: %w", err)
	}
	var res int
	if err := replica.GetContext(ctx, &res, "SELECT MASTER_GTID_WAIT(?, ?)", pos, catchUpTimeout.Seconds()); err != nil {
		return fmt.Errorf("wait for the replica: %w", err)
	}
	if res != 0 {
		return fmt.Errorf("the replica did not reach GTID %s within %s", pos, catchUpTimeout)
	}
	return nil
}

// drop closes the connections and drops the database (the drop replicates).
func (bd *benchDB) drop(ctx context.Context) error {
	for _, db := range append(append([]*sqlx.DB{bd.db, bd.sdb, bd.replica}, bd.extra...), bd.nodes...) {
		if db != nil {
			_ = db.Close()
		}
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
	q := fmt.Sprintf(`SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE pool_status = 'pending' AND category IN (%s) LIMIT 1) x`, inList(len(categories)))
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

// serverCounters are counters read before and after a run's timed window.
type serverCounters struct {
	questions     int64 // MySQL statements (SHOW GLOBAL STATUS 'Questions'), server-wide
	comCommit     int64 // MySQL COMMITs (SHOW GLOBAL STATUS 'Com_commit'), server-wide
	redisCommands int64 // Redis total_commands_processed, server-wide
	// Counted in this process: the strategies' requests to the primary and
	// the replica, and their Redis round trips.
	primary, replica roundtrip.Counts
	redisRoundTrips  int64
	// candidateReads counts the taskd dispatcher's candidate reads (0 for
	// other strategies).
	candidateReads int64
	// mysqldCPU is the CPU time the MySQL server process has used, -1 when
	// it cannot be read (a server on another machine).
	mysqldCPU time.Duration
}

// readCounters reads the counters. It reads the server-wide ones with the
// harness's own handles (bd.db, plain), which are not counted.
func readCounters(ctx context.Context, bd *benchDB, plain *redis.Client, hook *roundtrip.RedisHook, ds []*dispatcher.Dispatcher) (serverCounters, error) {
	var c serverCounters
	// This process's counts first, right after the caller read its cycles.
	for _, d := range ds {
		c.candidateReads += d.Stats().CandidateReads
	}
	c.mysqldCPU = processCPU(bd.mysqldPID)
	for _, pid := range bd.nodePIDs {
		if cpu := processCPU(pid); cpu >= 0 && c.mysqldCPU >= 0 {
			c.mysqldCPU += cpu
		} else {
			c.mysqldCPU = -1
		}
	}
	if bd.primary != nil {
		c.primary = bd.primary.Counts()
	}
	for _, cc := range bd.extraCount {
		n := cc.Counts()
		c.primary.RoundTrips += n.RoundTrips
		c.primary.Statements += n.Statements
		c.primary.Commits += n.Commits
	}
	if bd.replicaCount != nil {
		c.replica = bd.replicaCount.Counts()
	}
	c.redisRoundTrips = hook.RoundTrips()
	var rows []struct {
		Name  string `db:"Variable_name"`
		Value string `db:"Value"`
	}
	for _, db := range append([]*sqlx.DB{bd.db}, bd.nodes...) {
		var part []struct {
			Name  string `db:"Variable_name"`
			Value string `db:"Value"`
		}
		if err := db.SelectContext(ctx, &part, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_commit')"); err != nil {
			return c, fmt.Errorf("read mysql status: %w", err)
		}
		rows = append(rows, part...)
	}
	for _, r := range rows {
		v, _ := strconv.ParseInt(r.Value, 10, 64)
		switch strings.ToLower(r.Name) {
		case "questions":
			c.questions += v
		case "com_commit":
			c.comCommit += v
		}
	}
	info, err := plain.Info(ctx, "stats").Result()
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

// serverPID returns the process id of the MySQL server db is connected to,
// read from its pid file, or 0 when the server does not run on this machine
// (or the file cannot be read).
func serverPID(ctx context.Context, db *sqlx.DB) int {
	var file string
	if err := db.GetContext(ctx, &file, "SELECT @@pid_file"); err != nil {
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
		return 0
	}
	return pid
}

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100
// on every Linux architecture Go supports).
const clockTicks = 100

// processCPU returns the CPU time (user and system) process pid has used, or
// -1 when it cannot be read.
func processCPU(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name, in parentheses, may hold spaces: count the fields
	// after it. utime and stime are fields 14 and 15 of the line.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}
