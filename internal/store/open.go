package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
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
//   - READ COMMITTED for every transaction of the session, set once per connection:
//     a locking read then takes record locks only, never gap locks, and gap locks
//     are what makes concurrent claims and releases of neighbouring rows deadlock.
//     Nothing in the store relies on a repeatable snapshot: every decision about a
//     claim is made on a row the transaction has locked. (With binary logging, the
//     server must log rows, binlog_format ROW or MIXED, the default of MySQL and
//     MariaDB.)
//
// Wrap the connector (for example with an OpenTelemetry database/sql wrapper) and
// pass the resulting *sql.DB to OpenDB.
func Connector(dsn string) (driver.Connector, error) {
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
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return readCommitted{connector}, nil
}

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
type readCommitted struct{ driver.Connector }

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
	return conn, nil
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
