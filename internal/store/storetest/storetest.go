// Package storetest gives integration tests a fresh MySQL database with the taskd
// schema, so that tests can run in parallel without seeing each other's rows.
//
// Tests find the server through TASKD_TEST_MYSQL_DSN (a go-sql-driver DSN whose user
// may create and drop databases). When it is unset they are skipped, unless
// TASKD_TEST_REQUIRE_SERVICES=1, in which case they fail.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/testenv"
)

// DSN returns the server DSN from TASKD_TEST_MYSQL_DSN. When the variable is unset it
// skips the test, or fails it if TASKD_TEST_REQUIRE_SERVICES=1.
func DSN(tb testing.TB) string {
	tb.Helper()
	return testenv.Lookup(tb, testenv.MySQLDSNVar)
}

// NewDatabase creates a database named taskd_t_<random>, applies the migrations with
// migrate.Up, drops the database when the test ends, and returns a DSN for it.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	dsn := NewEmptyDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open the test database: %v", err)
	}
	defer db.Close()
	if _, err := migrate.Up(ctx, db); err != nil {
		tb.Fatalf("migrate the test database: %v", err)
	}
	return dsn
}

// NewEmptyDatabase creates a database named taskd_t_<random> with no tables, drops it
// when the test ends, and returns a DSN for it.
func NewEmptyDatabase(tb testing.TB) string {
	tb.Helper()
	return newEmptyDatabase(tb, "taskd_t_")
}

func newEmptyDatabase(tb testing.TB, prefix string) string {
	tb.Helper()
	return createDatabase(tb, DSN(tb), prefix)
}

// createDatabase creates a database named prefix<random> on the server of dsn,
// drops it when the test ends, and returns a DSN for it.
func createDatabase(tb testing.TB, dsn, prefix string) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("parse %s: %v", dsn, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])

	admin := cfg.Clone()
	admin.DBName = ""
	connector, err := mysql.NewConnector(admin)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	func() {
		db := sql.OpenDB(connector)
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
			tb.Fatalf("create database %s: %v", name, err)
		}
	}()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db := sql.OpenDB(connector)
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})

	cfg.DBName = name
	return cfg.FormatDSN()
}

// NewDB is NewDatabase opened with store.Open; the handle is closed when the test ends
// (before the database is dropped).
func NewDB(tb testing.TB) *sqlx.DB {
	tb.Helper()
	dsn := NewDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// Replicated is a test database on the primary and its copy on the replica.
type Replicated struct {
	// Primary and Replica are opened with store.Open and closed when the test
	// ends.
	Primary, Replica *sqlx.DB
	// ReplicaAdmin is the replica server without a database selected, for
	// STOP/START REPLICA.
	ReplicaAdmin *sqlx.DB
	// PrimaryDSN and ReplicaDSN name the database on each server.
	PrimaryDSN, ReplicaDSN string
}

// NewReplicated creates a database named taskd_r_<random> on the primary
// (TASKD_TEST_MYSQL_DSN), applies the migrations, and waits until the replica
// (TASKD_TEST_MYSQL_REPLICA_DSN) has them.
func NewReplicated(tb testing.TB) *Replicated {
	tb.Helper()
	replicaDSN := testenv.Lookup(tb, testenv.MySQLReplicaDSNVar)
	primaryDSN := newEmptyDatabase(tb, "taskd_r_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(dsn string) *sqlx.DB {
		db, err := store.Open(ctx, dsn)
		if err != nil {
			tb.Fatalf("open %s: %v", dsn, err)
		}
		tb.Cleanup(func() { _ = db.Close() })
		return db
	}
	r := &Replicated{Primary: open(primaryDSN), PrimaryDSN: primaryDSN}
	if _, err := migrate.Up(ctx, r.Primary); err != nil {
		tb.Fatalf("migrate the test database: %v", err)
	}
	pcfg, err := mysql.ParseDSN(primaryDSN)
	if err != nil {
		tb.Fatal(err)
	}
	rcfg, err := mysql.ParseDSN(replicaDSN)
	if err != nil {
		tb.Fatalf("parse %s: %v", testenv.MySQLReplicaDSNVar, err)
	}
	r.ReplicaAdmin = open(rcfg.FormatDSN())
	rcfg.DBName = pcfg.DBName
	CatchUp(tb, r.Primary, r.ReplicaAdmin)
	r.ReplicaDSN = rcfg.FormatDSN()
	r.Replica = open(r.ReplicaDSN)
	return r
}

// CatchUp waits until the replica has applied everything the primary has
// logged so far (at most a minute).
func CatchUp(tb testing.TB, primary, replica *sqlx.DB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	var pos string
	if err := primary.GetContext(ctx, &pos, "SELECT @@gtid_binlog_pos"); err != nil {
		tb.Fatalf("read the primary's GTID position: %v", err)
	}
	var res int
	if err := replica.GetContext(ctx, &res, "SELECT MASTER_GTID_WAIT(?, 60)", pos); err != nil {
		tb.Fatalf("wait for the replica: %v", err)
	}
	if res != 0 {
		tb.Fatalf("the replica did not reach GTID %s within 60s (MASTER_GTID_WAIT = %d)", pos, res)
	}
}

// Galera is a test database on a Galera cluster, opened on each node.
type Galera struct {
	// Nodes are the database on each node, the first node first, opened with
	// store.Open and closed when the test ends.
	Nodes []*sqlx.DB
	// DSNs name the database on each node; Addrs are the nodes' addresses.
	DSNs, Addrs []string
}

// NewGalera creates a database named taskd_g_<random> through the first node of
// the cluster TASKD_TEST_GALERA_DSN and TASKD_TEST_GALERA_ADDRS name, applies
// the migrations, and opens it on every node. It is dropped when the test ends.
//
// The test has the cluster to itself: NewGalera waits until no other test, of
// this process or another, holds it (a lock file beside the cluster's
// addresses), since a test may cut a node off (Isolate) and that disturbs every
// other user of the cluster.
func NewGalera(tb testing.TB) *Galera {
	tb.Helper()
	return newGalera(tb, true)
}

// NewEmptyGalera is NewGalera without the migrations: the database has no
// tables.
func NewEmptyGalera(tb testing.TB) *Galera {
	tb.Helper()
	return newGalera(tb, false)
}

func newGalera(tb testing.TB, migrated bool) *Galera {
	tb.Helper()
	base := testenv.Lookup(tb, testenv.GaleraDSNVar)
	addrs := testenv.List(tb, testenv.GaleraAddrsVar)
	lockCluster(tb, addrs)
	dsn := createDatabase(tb, base, "taskd_g_")
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := &Galera{Addrs: addrs}
	for _, addr := range addrs {
		node := cfg.Clone()
		node.Addr = addr
		g.DSNs = append(g.DSNs, node.FormatDSN())
		// The database was created through the first node, whose answer
		// may come before another node applied it: a causal read there
		// waits until it did, and only then is the database named in a
		// connection to it.
		awaitDatabase(ctx, tb, node)
	}
	for i, dsn := range g.DSNs {
		db, err := store.Open(ctx, dsn)
		if err != nil {
			tb.Fatalf("open node %d (%s): %v", i+1, addrs[i], err)
		}
		tb.Cleanup(func() { _ = db.Close() })
		g.Nodes = append(g.Nodes, db)
		if i == 0 && migrated {
			if _, err := migrate.Up(ctx, db); err != nil {
				tb.Fatalf("migrate the test database: %v", err)
			}
		}
	}
	return g
}

// awaitDatabase waits until the Galera node of cfg has applied the creation of
// cfg's database: a read with wsrep_sync_wait=1 runs only once the node has
// applied every write the cluster committed before it.
func awaitDatabase(ctx context.Context, tb testing.TB, cfg *mysql.Config) {
	tb.Helper()
	admin := cfg.Clone()
	admin.DBName = ""
	connector, err := mysql.NewConnector(admin)
	if err != nil {
		tb.Fatalf("connect to %s: %v", cfg.Addr, err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		tb.Fatalf("connect to %s: %v", cfg.Addr, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		tb.Fatalf("causal reads on %s: %v", cfg.Addr, err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", cfg.DBName).Scan(&n); err != nil {
		tb.Fatalf("look for database %s on %s: %v", cfg.DBName, cfg.Addr, err)
	}
	if n != 1 {
		tb.Fatalf("database %s is not on node %s after a causal read", cfg.DBName, cfg.Addr)
	}
}

// isolateStatementMax bounds each statement Isolate sends the node.
const isolateStatementMax = 10 * time.Second

// Isolate cuts node i (0-based) off the cluster's group communication until
// the test ends (gmcast.isolate), and waits until it has left the primary
// component: it then refuses reads and writes. At the end it waits until the
// node is back and synced.
func (g *Galera) Isolate(tb testing.TB, i int) {
	tb.Helper()
	ctx := context.Background()
	// A connection of the driver's own: the store's refuse a node outside
	// the primary component.
	cfg, err := mysql.ParseDSN(g.DSNs[i])
	if err != nil {
		tb.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	admin := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	admin.SetMaxOpenConns(1)
	tb.Cleanup(func() { _ = admin.Close() })
	// Each statement is bounded: a node rejoining a loaded cluster may not
	// answer for a while, and Eventually's bound must hold.
	status := func(name string) string {
		var row struct {
			Name  string `db:"Variable_name"`
			Value string `db:"Value"`
		}
		ctx, cancel := context.WithTimeout(ctx, isolateStatementMax)
		defer cancel()
		if err := admin.GetContext(ctx, &row, "SHOW GLOBAL STATUS LIKE '"+name+"'"); err != nil {
			return "error: " + err.Error()
		}
		return row.Value
	}
	set := func(v string) {
		ctx, cancel := context.WithTimeout(ctx, isolateStatementMax)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate="+v+"'"); err != nil {
			tb.Fatalf("gmcast.isolate=%s: %v", v, err)
		}
	}
	set("1")
	tb.Cleanup(func() {
		set("0")
		testenv.Eventually(tb, 60*time.Second, "the isolated node synced again", func() bool {
			return status("wsrep_local_state_comment") == "Synced" && status("wsrep_ready") == "ON"
		})
	})
	testenv.Eventually(tb, 60*time.Second, "the node left the primary component", func() bool {
		return status("wsrep_cluster_status") == "non-Primary"
	})
}

// lockCluster takes the cluster of addrs for tb until it ends: an exclusive
// flock on a file named after the addresses, in the temporary directory.
func lockCluster(tb testing.TB, addrs []string) {
	tb.Helper()
	sum := sha256.Sum256([]byte(strings.Join(addrs, ",")))
	path := filepath.Join(os.TempDir(), "taskd-galera-"+hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatalf("open the cluster's lock file: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		tb.Fatalf("lock the cluster: %v", err)
	}
	tb.Cleanup(func() { _ = f.Close() }) // closing it unlocks
}
