package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// sqlCounts are the totals a countingConnector has seen so far.
type sqlCounts struct {
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

func (c sqlCounts) sub(o sqlCounts) sqlCounts {
	return sqlCounts{c.RoundTrips - o.RoundTrips, c.Statements - o.Statements, c.Commits - o.Commits}
}

// countingConnector wraps a driver.Connector so that every request its
// connections send to the server is counted. The connections keep every
// optional interface of the MySQL driver's that database/sql uses, so the
// pool behaves as without the wrapper (in particular, interpolated
// arguments still go in one request).
type countingConnector struct {
	driver.Connector
	roundTrips, statements, commits atomic.Int64
}

// counts returns the totals so far.
func (c *countingConnector) counts() sqlCounts {
	return sqlCounts{c.roundTrips.Load(), c.statements.Load(), c.commits.Load()}
}

// sent notes one request to the server carrying query.
func (c *countingConnector) sent(query string) {
	c.roundTrips.Add(1)
	n, commits := countStatements(query)
	c.statements.Add(int64(n))
	c.commits.Add(int64(commits))
}

// Connect counts nothing: opening a connection (handshake, session
// settings) is not part of a request.
func (c *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{conn: conn, c: c}, nil
}

// countingConn is a driver connection that counts its requests.
type countingConn struct {
	conn driver.Conn
	c    *countingConnector
}

var (
	_ driver.Conn               = (*countingConn)(nil)
	_ driver.ConnBeginTx        = (*countingConn)(nil)
	_ driver.ConnPrepareContext = (*countingConn)(nil)
	_ driver.ExecerContext      = (*countingConn)(nil)
	_ driver.QueryerContext     = (*countingConn)(nil)
	_ driver.Pinger             = (*countingConn)(nil)
	_ driver.SessionResetter    = (*countingConn)(nil)
	_ driver.Validator          = (*countingConn)(nil)
	_ driver.NamedValueChecker  = (*countingConn)(nil)
)

func (cc *countingConn) Prepare(query string) (driver.Stmt, error) {
	return cc.PrepareContext(context.Background(), query)
}

func (cc *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
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
	return &countingStmt{Stmt: st, query: query, c: cc.c}, nil
}

func (cc *countingConn) Close() error { return cc.conn.Close() }

func (cc *countingConn) Begin() (driver.Tx, error) {
	return cc.BeginTx(context.Background(), driver.TxOptions{})
}

func (cc *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
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
	return &countingTx{tx: tx, c: cc.c}, nil
}

func (cc *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
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

func (cc *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
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

func (cc *countingConn) Ping(ctx context.Context) error {
	p, ok := cc.conn.(driver.Pinger)
	if !ok {
		return nil
	}
	cc.c.roundTrips.Add(1)
	return p.Ping(ctx)
}

// ResetSession and IsValid of the MySQL driver send nothing to the server.
func (cc *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := cc.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cc *countingConn) IsValid() bool {
	if v, ok := cc.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cc *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cc.conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countingTx counts Commit and Rollback.
type countingTx struct {
	tx driver.Tx
	c  *countingConnector
}

func (t *countingTx) Commit() error {
	t.c.roundTrips.Add(1)
	t.c.statements.Add(1)
	t.c.commits.Add(1)
	return t.tx.Commit()
}

func (t *countingTx) Rollback() error {
	t.c.roundTrips.Add(1)
	t.c.statements.Add(1)
	return t.tx.Rollback()
}

// countingStmt counts each execution of a prepared statement. Closing one
// sends a packet the server does not answer, so it is not a round trip.
type countingStmt struct {
	driver.Stmt
	query string
	c     *countingConnector
}

func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.c.sent(s.query)
	//lint:ignore SA1019 database/sql calls ExecContext when the statement has it
	return s.Stmt.Exec(args)
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.c.sent(s.query)
	//lint:ignore SA1019 database/sql calls QueryContext when the statement has it
	return s.Stmt.Query(args)
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.sent(s.query)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return nil, errors.New("prepared statement without ExecContext")
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.sent(s.query)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return nil, errors.New("prepared statement without QueryContext")
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
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

// redisCounter is a go-redis hook that counts round trips: each command
// processed alone and each pipeline (or MULTI/EXEC transaction) is one. The
// commands go-redis sends to set up a new connection (HELLO, AUTH, SELECT,
// CLIENT ...) are not counted, as a MySQL connection's handshake is not.
type redisCounter struct{ roundTrips atomic.Int64 }

var _ redis.Hook = (*redisCounter)(nil)

func (h *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !connSetup(cmd) {
			h.roundTrips.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
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
