package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// NodeRetryDefault is how long a connector over several addresses passes over a
// node that failed before it tries that node again.
const NodeRetryDefault = 5 * time.Second

// NodeConnectTimeoutDefault bounds one attempt of a connector over several
// addresses to connect to one node: dial, handshake and session set-up. A node
// that does not answer within it (a stopped server, whose port still accepts
// connections) fails as one that refused, and the next node is tried within the
// caller's time; the caller's context still bounds the whole of Connect.
const NodeConnectTimeoutDefault = time.Second

// splitAddrs takes the address list out of a DSN whose tcp(...) names several
// addresses, comma-separated, as in "user:pw@tcp(db1:3306,db2:3306)/taskd". It
// returns the addresses and the DSN with the first one alone. A DSN with one
// address, or none, comes back as it is, with no list.
func splitAddrs(dsn string) (addrs []string, single string, err error) {
	at := strings.LastIndex(dsn, "@tcp(")
	if at < 0 {
		return nil, dsn, nil
	}
	start := at + len("@tcp(")
	end := strings.IndexByte(dsn[start:], ')')
	if end < 0 {
		return nil, dsn, nil
	}
	list := dsn[start : start+end]
	if !strings.Contains(list, ",") {
		return nil, dsn, nil
	}
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, "", fmt.Errorf("open database: parse dsn: empty address in tcp(%s)", list)
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, "", fmt.Errorf("open database: parse dsn: address %q of tcp(%s) needs host:port", a, list)
		}
		addrs = append(addrs, a)
	}
	return addrs, dsn[:start] + addrs[0] + dsn[start+end:], nil
}

// failover is a connector over several MySQL servers that accept writes, such as
// the nodes of a Galera cluster. Every connection goes to the first node of the
// list that has not failed within retry; when a node fails (it refuses a
// connection, drops one, answers that it cannot serve, or does not answer a
// new connection within connectTimeout), its pooled
// connections are retired and new ones go to the next node. A failed node is
// tried again after retry, and, when every node has failed, at once.
type failover struct {
	nodes []*node
	retry time.Duration
	// connectTimeout bounds each node's attempt (NodeConnectTimeoutDefault).
	connectTimeout time.Duration
	now            func() time.Time
}

// node is one server of a failover connector.
type node struct {
	addr      string
	connector driver.Connector
	// failedAt is when the node last failed (Unix nanoseconds), 0 while healthy.
	failedAt atomic.Int64
	// epoch counts the node's failures: a connection made in an older epoch is
	// no longer valid.
	epoch atomic.Uint64
}

func (n *node) fail(now time.Time) {
	n.failedAt.Store(now.UnixNano())
	n.epoch.Add(1)
}

// usable reports whether the node has not failed within retry of now.
func (n *node) usable(now time.Time, retry time.Duration) bool {
	at := n.failedAt.Load()
	return at == 0 || now.Sub(time.Unix(0, at)) >= retry
}

func (f *failover) Connect(ctx context.Context) (driver.Conn, error) {
	now := f.now()
	var errs []error
	// Usable nodes first, in the list's order; then those that failed lately,
	// in case one is back.
	for _, usable := range []bool{true, false} {
		for _, n := range f.nodes {
			if n.usable(now, f.retry) != usable {
				continue
			}
			epoch := n.epoch.Load()
			conn, err := f.connect(ctx, n)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				n.fail(f.now())
				errs = append(errs, fmt.Errorf("%s: %w", n.addr, err))
				continue
			}
			n.failedAt.Store(0)
			return &nodeConn{conn: conn, node: n, epoch: epoch, now: f.now}, nil
		}
	}
	return nil, fmt.Errorf("open database: no node answers: %w", errors.Join(errs...))
}

// connect connects to n within f.connectTimeout. When that time ends first,
// the error says so: the node is as lost as one that refused, even though the
// caller's context has time left for the next node.
func (f *failover) connect(ctx context.Context, n *node) (driver.Conn, error) {
	nctx, cancel := context.WithTimeoutCause(ctx, f.connectTimeout, errNodeTimeout)
	defer cancel()
	conn, err := n.connector.Connect(nctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(nctx), errNodeTimeout) {
		return nil, fmt.Errorf("%w: %w", errNodeTimeout, err)
	}
	return conn, err
}

// errNodeTimeout is the error of a node that did not answer a new connection
// within the failover connector's connect timeout.
var errNodeTimeout = errors.New("connect: no answer within the node's connect timeout")

func (f *failover) Driver() driver.Driver { return f.nodes[0].connector.Driver() }

// nodeConn is a connection to one node of a failover connector. It forwards
// every call to the driver's connection and fails its node on an error that
// says the node is gone or cannot serve; it is not valid any more once its node
// failed, so that the pool drops it.
type nodeConn struct {
	conn  driver.Conn
	node  *node
	epoch uint64
	now   func() time.Time
}

// observe fails the connection's node when err says the node is lost.
func (c *nodeConn) observe(err error) error {
	if err != nil && nodeLost(err) {
		c.node.fail(c.now())
	}
	return err
}

// Server errors that say a node cannot serve at all.
const (
	// erUnknownCom is what a Galera node outside the primary component answers
	// ("WSREP has not yet prepared node for application use").
	erUnknownCom = 1047
	// erServerShutdown: the server is shutting down.
	erServerShutdown = 1053
)

// nodeLost reports whether err says that the server is gone or refuses to serve,
// rather than that one statement failed: the connection broke while the server
// was answering (the driver's ErrInvalidConn, EOF, a network error other than a
// timeout), the server is shutting down, or a Galera node is not in the
// cluster's primary component. A connection the driver closed itself, after a
// context ended, is not the node's fault; nor is a timeout, which may be one slow
// statement (a node that no longer answers fails its next connection instead).
func nodeLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return !netErr.Timeout()
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		mysqlErrorIs(err, erUnknownCom, erServerShutdown)
}

func (c *nodeConn) Prepare(query string) (driver.Stmt, error) {
	st, err := c.conn.Prepare(query)
	return st, c.observe(err)
}

func (c *nodeConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.conn.(driver.ConnPrepareContext); ok {
		st, err := p.PrepareContext(ctx, query)
		return st, c.observe(err)
	}
	return c.Prepare(query)
}

func (c *nodeConn) Close() error { return c.conn.Close() }

func (c *nodeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *nodeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("open database: the driver's connection cannot begin a transaction with options")
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.observe(err)
	}
	return nodeTx{tx: tx, c: c}, nil
}

func (c *nodeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	return res, c.observe(err)
}

func (c *nodeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	return rows, c.observe(err)
}

func (c *nodeConn) Ping(ctx context.Context) error {
	if p, ok := c.conn.(driver.Pinger); ok {
		return c.observe(p.Ping(ctx))
	}
	return nil
}

// ResetSession forwards to the driver. Its error is not the node's: the driver
// answers ErrBadConn for a connection it closed itself.
func (c *nodeConn) ResetSession(ctx context.Context) error {
	if r, ok := c.conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid is false once the connection's node failed, after the connection was
// made: the pool then closes it instead of reusing it.
func (c *nodeConn) IsValid() bool {
	if c.node.epoch.Load() != c.epoch {
		return false
	}
	if v, ok := c.conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *nodeConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// nodeTx is a transaction on a nodeConn: a commit or rollback that finds the
// node lost fails it.
type nodeTx struct {
	tx driver.Tx
	c  *nodeConn
}

func (t nodeTx) Commit() error   { return t.c.observe(t.tx.Commit()) }
func (t nodeTx) Rollback() error { return t.c.observe(t.tx.Rollback()) }
