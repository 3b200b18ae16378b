package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// Pool settings applied by Open. Callers may change them on the returned handle.
const (
	MaxOpenConnsDefault    = 32
	MaxIdleConnsDefault    = 16
	ConnMaxLifetimeDefault = 3 * time.Minute
	ConnMaxIdleTimeDefault = time.Minute
)

// LockWaitTimeoutDefault is the session's innodb_lock_wait_timeout that
// Connector sets unless the DSN names one: how long a statement waits for a
// row lock before the server answers 1205 (a lock wait timeout, which the
// store reports as tasks.ErrBusy).
const LockWaitTimeoutDefault = 5 * time.Second

// Open connects to MySQL or MariaDB and pings the server: OpenDB over
// Connector(dsn).
func Open(ctx context.Context, dsn string) (*sqlx.DB, error) {
	connector, err := Connector(dsn)
	if err != nil {
		return nil, err
	}
	return OpenDB(ctx, sql.OpenDB(connector))
}

// Connector returns a connector for dsn. Whatever the DSN says, it forces the
// settings the store's correctness rests on:
//
//   - clientFoundRows=true: an UPDATE reports the rows it matched, not the rows it
//     changed. A fenced write is accepted only when it matched exactly one row, and a
//     write that changes nothing (for example a heartbeat within the same millisecond)
//     must still count as matched.
//   - parseTime=true, loc=UTC and the session time_zone '+00:00': DATETIME(3) values
//     such as lease deadlines are read and written as UTC instants, and NOW(3) is UTC,
//     so deadlines never shift with a server's local zone or its DST changes.
//   - interpolateParams=true: arguments are escaped into the statement text by the
//     driver, so each statement costs one round trip instead of prepare, execute and
//     close.
//   - multiStatements=true: a claim or a submit is a batch of statements in one
//     transaction, sent as one query. Every statement is a constant of this package
//     with ? placeholders, and arguments are escaped by the driver, so no input ever
//     becomes SQL text.
//   - group_concat_max_len 1 MiB (MariaDB's default; MySQL's is 1024 bytes): a
//     group of cycles reads the ids of its locked editors, live submits and busy
//     editors as GROUP_CONCAT lists (see Cycles), which must not be cut short.
//   - innodb_lock_wait_timeout LockWaitTimeoutDefault (5 s) for the session,
//     unless the DSN sets it: a statement waiting for a row lock that another
//     transaction keeps (the server's default is 50 s) ends with a lock wait
//     timeout, which the store answers as tasks.ErrBusy, before the bounds of
//     the store's own writes end (a group of claims has 30 s) and before an API
//     request's (10 s by default): a claim then fails with a clear error and
//     is retried by its caller, rather than waiting to its deadline.
//   - READ COMMITTED for every transaction of the session, set once per connection:
//     a locking read then takes record locks only, never gap locks, and gap locks
//     are what makes concurrent claims and releases of neighbouring rows deadlock.
//     Nothing in the store relies on a repeatable snapshot: every decision about a
//     claim is made on a row the transaction has locked. (With binary logging, the
//     server must log rows, binlog_format ROW or MIXED, the default of MySQL and
//     MariaDB.)
//
// On a node of a Galera cluster (wsrep_on), each connection also checks that
// the node is ready (wsrep_ready: in the primary component and synced), else the
// connection fails with ErrNodeNotReady; and its reads are causal
// (wsrep_sync_wait 1, unless the DSN sets wsrep_sync_wait itself): a read sees
// every transaction committed on any node before it began.
//
// The DSN may name several servers that all accept writes, such as the nodes of
// a Galera cluster: tcp(db1:3306,db2:3306,db3:3306). Connections then go to the
// first of them that has not failed within NodeRetryDefault; when that node fails
// (it refuses connections, drops them, is not ready, or does not answer a new
// connection within NodeConnectTimeoutDefault, as a stopped server whose port
// still accepts does), its pooled connections are retired and new ones go to
// the next, until it answers again.
//
// Wrap the connector (for example with an OpenTelemetry database/sql wrapper) and
// pass the resulting *sql.DB to OpenDB.
func Connector(dsn string) (driver.Connector, error) {
	addrs, dsn, err := splitAddrs(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: parse dsn: %w", err)
	}
	cfg.ClientFoundRows = true
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.MultiStatements = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["group_concat_max_len"] = strconv.Itoa(groupConcatMaxLen)
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(int(LockWaitTimeoutDefault / time.Second))
	}
	if len(addrs) == 0 {
		return newSessionConnector(cfg)
	}
	f := &failover{retry: NodeRetryDefault, connectTimeout: NodeConnectTimeoutDefault, now: time.Now}
	for _, addr := range addrs {
		nodeCfg := cfg.Clone()
		nodeCfg.Addr = addr
		c, err := newSessionConnector(nodeCfg)
		if err != nil {
			return nil, err
		}
		f.nodes = append(f.nodes, &node{addr: addr, connector: c})
	}
	return f, nil
}

func newSessionConnector(cfg *mysql.Config) (driver.Connector, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	// The DSN's own wsrep_sync_wait, if any, is the driver's to set (on connect,
	// as any system variable the DSN names); taskd sets its own only without one.
	syncWait := causalReads
	if _, ok := cfg.Params["wsrep_sync_wait"]; ok {
		syncWait = ""
	}
	return readCommitted{Connector: connector, syncWait: syncWait}, nil
}

// causalReads is the wsrep_sync_wait of a Galera node's sessions: 1, reads
// (SELECT, SHOW, BEGIN) wait until the node has applied every transaction the
// cluster committed before they began.
const causalReads = "1"

// erUnknownSystemVariable is MySQL's answer to @@wsrep_on.
const erUnknownSystemVariable = 1193

// groupConcatMaxLen is the session's group_concat_max_len. A list of a round of
// cycles holds at most GroupCommitMax ids, each at most 22 bytes with its comma
// (and a disabled editor's "d"): far below it.
const groupConcatMaxLen = 1 << 20

// setReadCommittedSQL is standard SQL on both servers, unlike the name of the
// variable behind it (tx_isolation on MariaDB, transaction_isolation on MySQL 8), so
// it runs on each new connection instead of being a DSN parameter.
const setReadCommittedSQL = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"

// readCommitted is a connector whose connections run their transactions at READ
// COMMITTED.
type readCommitted struct {
	driver.Connector
	// syncWait is the wsrep_sync_wait set on a Galera node's connections; ""
	// sets none.
	syncWait string
}

func (c readCommitted) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	execer, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("open database: the driver's connection cannot execute statements")
	}
	if _, err := execer.ExecContext(ctx, setReadCommittedSQL, nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("open database: set isolation level: %w", err)
	}
	if err := c.galera(ctx, conn, execer); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// ErrNodeNotReady is the error of a connection to a Galera node that cannot
// serve: it is outside the cluster's primary component, or still joining. It
// wraps driver.ErrBadConn: the connection is of no use, and database/sql
// tries another (which a Connector over several nodes makes on the next one).
var ErrNodeNotReady = fmt.Errorf("galera node not ready: %w", driver.ErrBadConn)

// galera checks, on a Galera node, that the node is ready, and makes the
// session's reads causal unless the DSN set wsrep_sync_wait. On another server
// it does nothing (MySQL has no wsrep_on).
func (c readCommitted) galera(ctx context.Context, conn driver.Conn, execer driver.ExecerContext) error {
	queryer, ok := conn.(driver.QueryerContext)
	if !ok {
		return fmt.Errorf("open database: the driver's connection cannot query")
	}
	on, err := queryString(ctx, queryer, "SELECT @@wsrep_on")
	switch {
	case mysqlErrorIs(err, erUnknownSystemVariable):
		return nil
	case err != nil:
		return fmt.Errorf("open database: read wsrep_on: %w", err)
	case on != "1":
		return nil
	}
	ready, err := queryString(ctx, queryer, "SHOW GLOBAL STATUS LIKE 'wsrep_ready'")
	if err != nil {
		return fmt.Errorf("open database: read wsrep_ready: %w", err)
	}
	if ready != "ON" {
		return fmt.Errorf("open database: %w (wsrep_ready is %q)", ErrNodeNotReady, ready)
	}
	if c.syncWait == "" {
		return nil
	}
	if _, err := execer.ExecContext(ctx, "SET SESSION wsrep_sync_wait = "+c.syncWait, nil); err != nil {
		return fmt.Errorf("open database: set wsrep_sync_wait: %w", err)
	}
	return nil
}

// queryString runs a query that answers one row, and returns its last column as
// text ("" for NULL or no row): the value of SELECT @@x, or of SHOW ... LIKE 'x'.
func queryString(ctx context.Context, q driver.QueryerContext, query string) (string, error) {
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		return "", err
	}
	switch v := dest[len(dest)-1].(type) {
	case []byte:
		return string(v), nil
	case nil:
		return "", nil
	default:
		return fmt.Sprint(v), nil
	}
}

// OpenDB sets the pool settings on db, a handle over a Connector, and pings the
// server. It closes db when the ping fails.
func OpenDB(ctx context.Context, db *sql.DB) (*sqlx.DB, error) {
	x := sqlx.NewDb(db, "mysql")
	x.SetMaxOpenConns(MaxOpenConnsDefault)
	x.SetMaxIdleConns(MaxIdleConnsDefault)
	x.SetConnMaxLifetime(ConnMaxLifetimeDefault)
	x.SetConnMaxIdleTime(ConnMaxIdleTimeDefault)
	if err := x.PingContext(ctx); err != nil {
		_ = x.Close()
		return nil, fmt.Errorf("open database: ping: %w", err)
	}
	return x, nil
}
