// Package roundtrip counts the requests a program sends to MySQL and Redis:
// round trips, statements and commits. The benchmarks report them per
// cycle, and tests hold the claim path to its budget with them.
package roundtrip

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/store"
)

// Counts are the totals a Connector has seen so far.
type Counts struct {
	// RoundTrips counts requests that waited for the server's answer: each
	// Exec and Query (a multi-statement batch is one), Begin, Commit,
	// Rollback, Prepare and each execution of a prepared statement.
	RoundTrips int64
	// Statements counts the SQL statements those requests carried: a batch
	// counts each of its statements, Begin, Commit and Rollback one each.
	Statements int64
	// Commits counts the transactions committed by request: Commit calls
	// and COMMIT statements inside batches.
	Commits int64
}

func (c Counts) Sub(o Counts) Counts {
	return Counts{c.RoundTrips - o.RoundTrips, c.Statements - o.Statements, c.Commits - o.Commits}
}

// Connector wraps a driver.Connector so that every request its
// connections send to the server is counted. The connections keep every
// optional interface of the MySQL driver's that database/sql uses, so the
// pool behaves as without the wrapper (in particular, interpolated
// arguments still go in one request).
type Connector struct {
	driver.Connector
	roundTrips, statements, commits atomic.Int64
}

// counts returns the totals so far.
func (c *Connector) Counts() Counts {
	return Counts{c.roundTrips.Load(), c.statements.Load(), c.commits.Load()}
}

// OpenMySQL opens dsn as store.Open does (store.Connector's settings, the
// pool settings of store.OpenDB), over a Connector that counts its requests.
func OpenMySQL(ctx context.Context, dsn string) (*sqlx.DB, *Connector, error) {
	connector, err := store.Connector(dsn)
	if err != nil {
		return nil, nil, err
	}
	cc := &Connector{Connector: connector}
	db, err := store.OpenDB(ctx, sql.OpenDB(cc))
	if err != nil {
		return nil, nil, err
	}
	return db, cc, nil
}

// sent notes one request to the server carrying query.
func (c *Connector) sent(query string) {
	c.roundTrips.Add(1)
	n, commits := countStatements(query)
	c.statements.Add(int64(n))
	c.commits.Add(int64(commits))
}

// Connect counts nothing: opening a connection (handshake, session
// settings) is not part of a request.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countedConn{conn: conn, c: c}, nil
}

// countedConn is a driver connection that counts its requests.
type countedConn struct {
	conn driver.Conn
	c    *Connector
}

var (
	_ driver.Conn               = (*countedConn)(nil)
	_ driver.ConnBeginTx        = (*countedConn)(nil)
	_ driver.ConnPrepareContext = (*countedConn)(nil)
	_ driver.ExecerContext      = (*countedConn)(nil)
	_ driver.QueryerContext     = (*countedConn)(nil)
	_ driver.Pinger             = (*countedConn)(nil)
	_ driver.SessionResetter    = (*countedConn)(nil)
	_ driver.Validator          = (*countedConn)(nil)
	_ driver.NamedValueChecker  = (*countedConn)(nil)
)

func (cc *countedConn) Prepare(query string) (driver.Stmt, error) {
	return cc.PrepareContext(context.Background(), query)
}

func (cc *countedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := cc.conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = cc.conn.Prepare(query) // the driver has no PrepareContext
	}
	cc.c.roundTrips.Add(1)
	if err != nil {
		return nil, err
	}
	return &countedStmt{Stmt: st, query: query, c: cc.c}, nil
}

func (cc *countedConn) Close() error { return cc.conn.Close() }

func (cc *countedConn) Begin() (driver.Tx, error) {
	return cc.BeginTx(context.Background(), driver.TxOptions{})
}

func (cc *countedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var tx driver.Tx
	var err error
	if b, ok := cc.conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		//lint:ignore SA1019 the driver has no BeginTx
		tx, err = cc.conn.Begin()
	}
	n := int64(1)
	if sql.IsolationLevel(opts.Isolation) != sql.LevelDefault {
		n++ // the MySQL driver sets the level with a request of its own first
	}
	cc.c.roundTrips.Add(n)
	cc.c.statements.Add(n)
	if err != nil {
		return nil, err
	}
	return &countedTx{tx: tx, c: cc.c}, nil
}

func (cc *countedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := cc.conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) { // ErrSkip: database/sql prepares instead; nothing was sent
		cc.c.sent(query)
	}
	return res, err
}

func (cc *countedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := cc.conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		cc.c.sent(query)
	}
	return rows, err
}

func (cc *countedConn) Ping(ctx context.Context) error {
	p, ok := cc.conn.(driver.Pinger)
	if !ok {
		return nil
	}
	cc.c.roundTrips.Add(1)
	return p.Ping(ctx)
}

// ResetSession and IsValid of the MySQL driver send nothing to the server.
func (cc *countedConn) ResetSession(ctx context.Context) error {
	if r, ok := cc.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cc *countedConn) IsValid() bool {
	if v, ok := cc.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cc *countedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cc.conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countedTx counts Commit and Rollback.
type countedTx struct {
	tx driver.Tx
	c  *Connector
}

func (t *countedTx) Commit() error {
	t.c.roundTrips.Add(1)
	t.c.statements.Add(1)
	t.c.commits.Add(1)
	return t.tx.Commit()
}

func (t *countedTx) Rollback() error {
	t.c.roundTrips.Add(1)
	t.c.statements.Add(1)
	return t.tx.Rollback()
}

// countedStmt counts each execution of a prepared statement. Closing one
// sends a packet the server does not answer, so it is not a round trip.
type countedStmt struct {
	driver.Stmt
	query string
	c     *Connector
}

func (s *countedStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.c.sent(s.query)
	//lint:ignore SA1019 database/sql calls ExecContext when the statement has it
	return s.Stmt.Exec(args)
}

func (s *countedStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.c.sent(s.query)
	//lint:ignore SA1019 database/sql calls QueryContext when the statement has it
	return s.Stmt.Query(args)
}

func (s *countedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.sent(s.query)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return nil, errors.New("prepared statement without ExecContext")
}

func (s *countedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.sent(s.query)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return nil, errors.New("prepared statement without QueryContext")
}

func (s *countedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countStatements returns how many statements query holds (separated by ';'
// outside quotes, backquotes and comments; empty ones are not counted) and
// how many of them are COMMIT.
func countStatements(query string) (statements, commits int) {
	var cur strings.Builder
	end := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		statements++
		if f := strings.Fields(s); strings.EqualFold(f[0], "COMMIT") {
			commits++
		}
	}
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case ch == '\'' || ch == '"' || ch == '`':
			j := i + 1
			for j < len(query) && query[j] != ch {
				if query[j] == '\\' && ch != '`' {
					j++
				}
				j++
			}
			cur.WriteString(query[i:min(j+1, len(query))])
			i = j
		case ch == '-' && strings.HasPrefix(query[i:], "-- "), ch == '#':
			for i < len(query) && query[i] != '\n' {
				i++
			}
			cur.WriteByte(' ')
		case ch == '/' && strings.HasPrefix(query[i:], "/*"):
			j := strings.Index(query[i+2:], "*/")
			if j < 0 {
				i = len(query)
			} else {
				i += j + 3
			}
			cur.WriteByte(' ')
		case ch == ';':
			end()
		default:
			cur.WriteByte(ch)
		}
	}
	end()
	return statements, commits
}

// RedisHook is a go-redis hook that counts round trips: each command
// processed alone and each pipeline (or MULTI/EXEC transaction) is one. The
// commands go-redis sends to set up a new connection (HELLO, AUTH, SELECT,
// CLIENT ...) are not counted, as a MySQL connection's handshake is not.
type RedisHook struct{ roundTrips atomic.Int64 }

var _ redis.Hook = (*RedisHook)(nil)

// RoundTrips returns the round trips counted so far.
func (h *RedisHook) RoundTrips() int64 { return h.roundTrips.Load() }

func (h *RedisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *RedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !connSetup(cmd) {
			h.roundTrips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *RedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !connSetup(c) }) {
			return next(ctx, cmds) // empty, or a new connection's setup
		}
		h.roundTrips.Add(1)
		return next(ctx, cmds)
	}
}

// connSetup reports whether cmd is one go-redis sends when it opens a
// connection.
func connSetup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "auth", "select", "client", "readonly":
		return true
	}
	return false
}
