package store_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// TestGaleraReadsAreCausal: a commit on one node is seen at once by a read on
// another through the store's connections, which Galera alone does not promise
// (it applies a commit on the other nodes after the commit returns).
func TestGaleraReadsAreCausal(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := context.Background()
	var syncWait int
	if err := g.Nodes[1].GetContext(ctx, &syncWait, "SELECT @@wsrep_sync_wait"); err != nil {
		t.Fatal(err)
	}
	if syncWait != 1 {
		t.Fatalf("wsrep_sync_wait = %d on a store connection, want 1", syncWait)
	}
	if _, err := g.Nodes[0].ExecContext(ctx, "CREATE TABLE causal (id INT PRIMARY KEY, v INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Nodes[0].ExecContext(ctx, "INSERT INTO causal VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for i := 1; i <= 300; i++ {
		if _, err := g.Nodes[0].ExecContext(ctx, "UPDATE causal SET v = ? WHERE id = 1", i); err != nil {
			t.Fatal(err)
		}
		var v int
		if err := g.Nodes[1+i%2].GetContext(ctx, &v, "SELECT v FROM causal WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		if v != i {
			stale++
		}
	}
	if stale != 0 {
		t.Errorf("%d of 300 reads on another node missed the commit just before them", stale)
	}
}

// TestGaleraDSNSyncWaitWins: a DSN that sets wsrep_sync_wait keeps its value.
func TestGaleraDSNSyncWaitWins(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := context.Background()
	db, err := store.Open(ctx, g.DSNs[1]+"&wsrep_sync_wait=0")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var syncWait int
	if err := db.GetContext(ctx, &syncWait, "SELECT @@wsrep_sync_wait"); err != nil {
		t.Fatal(err)
	}
	if syncWait != 0 {
		t.Fatalf("wsrep_sync_wait = %d, want the DSN's 0", syncWait)
	}
}

// nodeName answers the name of the Galera node db's next connection reaches.
func nodeName(ctx context.Context, db *sqlx.DB) (string, error) {
	var name string
	err := db.GetContext(ctx, &name, "SELECT @@wsrep_node_name")
	return name, err
}

// withAddrs returns dsn with its address replaced by the list addrs.
func withAddrs(t *testing.T, dsn string, addrs ...string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.FormatDSN()
	return strings.Replace(out, "tcp("+cfg.Addr+")", "tcp("+strings.Join(addrs, ",")+")", 1)
}

// openNodes opens a DSN naming several nodes, with no idle connections kept, so
// that each statement shows where a new connection goes.
func openNodes(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(0)
	return db
}

func TestFailoverPassesOverDeadAddress(t *testing.T) {
	g := storetest.NewGalera(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there any more: connections are refused
	db := openNodes(t, withAddrs(t, g.DSNs[0], dead, g.Addrs[1], g.Addrs[2]))
	for range 5 {
		name, err := nodeName(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if name != "galera-2" {
			t.Fatalf("connected to %s, want galera-2, the first address that answers", name)
		}
	}
}

func TestFailoverMovesOnAndBack(t *testing.T) {
	g := storetest.NewGalera(t)
	proxy := newProxy(t, g.Addrs[0])
	dsn := withAddrs(t, g.DSNs[0], proxy.addr, g.Addrs[1])
	connector, err := store.Connector(dsn)
	if err != nil {
		t.Fatal(err)
	}
	store.SetNodeRetry(connector, 200*time.Millisecond)
	db, err := store.OpenDB(context.Background(), sql.OpenDB(connector))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	ctx := context.Background()
	if name, err := nodeName(ctx, db); err != nil || name != "galera-1" {
		t.Fatalf("first connection reached %q (%v), want galera-1", name, err)
	}

	// A connection held open across the loss of its node.
	held, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.stop()
	var failed int
	testenv.Eventually(t, 30*time.Second, "statements reach galera-2 while galera-1 is lost", func() bool {
		name, err := nodeName(ctx, db)
		if err != nil {
			failed++
			return false
		}
		return name == "galera-2"
	})
	if failed != 0 {
		t.Errorf("%d statements failed while the first node was lost; the next node should take them at once", failed)
	}
	if err := held.GetContext(ctx, new(string), "SELECT @@wsrep_node_name"); err == nil {
		t.Error("a connection to the lost node still answered")
	}
	_ = held.Close()

	proxy.start()
	testenv.Eventually(t, 30*time.Second, "statements reach galera-1 again once it answers", func() bool {
		name, err := nodeName(ctx, db)
		return err == nil && name == "galera-1"
	})
}

// TestFailoverPassesOverNodeOutsidePrimary isolates the third node from the
// others: outside the primary component it refuses reads and writes, and the
// store's connections go to the next node instead.
func TestFailoverPassesOverNodeOutsidePrimary(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := context.Background()
	third, err := store.Open(ctx, g.DSNs[2])
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	g.Isolate(t, 2)

	_, err = store.Open(ctx, g.DSNs[2])
	if !errors.Is(err, store.ErrNodeNotReady) {
		t.Fatalf("open the isolated node alone: %v, want ErrNodeNotReady", err)
	}
	db := openNodes(t, withAddrs(t, g.DSNs[0], g.Addrs[2], g.Addrs[0]))
	for range 5 {
		name, err := nodeName(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if name != "galera-1" {
			t.Fatalf("connected to %s, want galera-1: galera-3 is outside the primary component", name)
		}
	}
}

// proxy forwards TCP connections to a server until stopped, which cuts every
// connection it carries and refuses new ones, as a lost node does.
type proxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestFailoverPassesOverHungNode: a first node whose TCP port accepts
// connections but never answers (a stopped server, here a frozen proxy) costs
// a new connection at most NodeConnectTimeout: the connector then marks it
// failed and goes to the next node, so statements bounded as an API request's
// are (3 s) succeed there instead of all waiting on the hung node to their end.
func TestFailoverPassesOverHungNode(t *testing.T) {
	t.Parallel()
	direct := storetest.NewDatabase(t)
	cfg, err := mysql.ParseDSN(direct)
	if err != nil {
		t.Fatal(err)
	}
	hung := testenv.StartProxy(t, cfg.Addr)
	connector, err := store.Connector(withAddrs(t, direct, hung.Addr(), cfg.Addr))
	if err != nil {
		t.Fatal(err)
	}
	store.SetNodeRetry(connector, time.Minute)
	db, err := store.OpenDB(context.Background(), sql.OpenDB(connector))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxIdleConns(0)
	hung.Freeze()
	t.Cleanup(hung.Thaw)

	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		var one int
		err := db.GetContext(ctx, &one, "SELECT 1")
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("statement %d, with the first node hung: %v after %v; want an answer from the next node", i, err, took.Round(time.Millisecond))
		}
		if i > 0 && took > time.Second {
			t.Errorf("statement %d took %v: the hung node should be passed over once it failed", i, took.Round(time.Millisecond))
		}
	}
}

// TestGroupCommitLeavesAHungNode: groups in flight on a node that stopped
// answering end shortly (2 s) after every member has left (answered at its own
// deadline), not after the group's own bound of 30 s, so that the writes queued
// behind them go to the next node instead of each waiting to its deadline too.
func TestGroupCommitLeavesAHungNode(t *testing.T) {
	t.Parallel()
	direct := storetest.NewDatabase(t)
	cfg, err := mysql.ParseDSN(direct)
	if err != nil {
		t.Fatal(err)
	}
	hung := testenv.StartProxy(t, cfg.Addr)
	connector, err := store.Connector(withAddrs(t, direct, hung.Addr(), cfg.Addr))
	if err != nil {
		t.Fatal(err)
	}
	store.SetNodeRetry(connector, time.Minute)
	ctx := context.Background()
	db, err := store.OpenDB(ctx, sql.OpenDB(connector))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := store.New(db, store.Config{GroupCommit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Galera(ctx); err != nil {
		t.Fatal(err)
	}
	// Two pooled connections to the first node, one for each flight.
	var conns []*sql.Conn
	for range 2 {
		c, err := db.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	beat := func(ctx context.Context) error {
		_, err := s.Heartbeat(ctx, tasks.HeartbeatParams{TaskID: 1, Fence: 1, Holder: "nobody", Lease: time.Minute})
		return err
	}

	hung.Freeze()
	t.Cleanup(hung.Thaw)
	// Each flight takes a connection to the hung node; its member leaves.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if err := beat(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("heartbeat on the hung node: %v, want its deadline", err)
			}
		})
	}
	wg.Wait()

	next, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err = beat(next)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the next heartbeat waited %v to its deadline behind the groups left on the hung node", time.Since(start).Round(time.Millisecond))
	}
	if !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("the next heartbeat, of a claim nobody holds: %v, want ErrStale from the next node", err)
	}
}
