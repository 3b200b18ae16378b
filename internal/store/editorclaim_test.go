package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// countingConnector counts what its connections send the server: queries,
// statements, BEGINs, COMMITs and ROLLBACKs, each one round trip.
type countingConnector struct {
	driver.Connector
	n *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: conn, n: c.n}, nil
}

type countingConn struct {
	driver.Conn
	n *atomic.Int64
}

func (c countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.n.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.n.Add(1)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.n.Add(1)
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, n: c.n}, nil
}

func (c countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c countingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c countingConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

type countingTx struct {
	driver.Tx
	n *atomic.Int64
}

func (t countingTx) Commit() error   { t.n.Add(1); return t.Tx.Commit() }
func (t countingTx) Rollback() error { t.n.Add(1); return t.Tx.Rollback() }

// TestClaimRoundTrips counts what a claim sends the server: an editor's claim of a
// pending task is one round trip, refused or not because the editor is disabled,
// as it was before editors could be disabled; the check rides in the batch's lock
// of the editor's row.
func TestClaimRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	connector, err := store.Connector(storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	db, err := store.OpenDB(ctx, sql.OpenDB(countingConnector{Connector: connector, n: &n}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // one warm connection: a claim dials none
	store, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, store)
	b := &bundle{ctx: ctx, db: db, store: store}
	ann := b.editor(t, "ann", "news")
	bob := b.editor(t, "bob", "news")
	ids := b.insert(t, tasks.NewTask{Category: "news", Title: "1"}, tasks.NewTask{Category: "news", Title: "2"})
	if _, err := store.DisableEditor(ctx, bob.ID); err != nil {
		t.Fatal(err)
	}

	claim := func(id int64, ed *tasks.Editor) (int64, error) {
		before := n.Load()
		_, err := store.Claim(ctx, tasks.ClaimParams{
			TaskID: id, Fence: 0, Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute,
		})
		return n.Load() - before, err
	}
	if trips, err := claim(ids[0], ann); err != nil || trips != 1 {
		t.Errorf("claim of a pending task: %d round trips, err %v; want 1, nil", trips, err)
	}
	if trips, err := claim(ids[1], bob); !errors.Is(err, tasks.ErrEditorDisabled) || trips != 1 {
		t.Errorf("claim by a disabled editor: %d round trips, err %v; want 1, ErrEditorDisabled", trips, err)
	}
}
