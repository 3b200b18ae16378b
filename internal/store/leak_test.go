package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// TestCanceledWritesLeaveNoTransactionOpen: claimants whose contexts end at
// random points of their writes (a grouped cycle, a batch of one, a
// transaction of several round trips) must never leave a transaction open on
// a connection the pool keeps: the pool's next user of that connection would
// run inside it (its START TRANSACTION committing the half-done one), and the
// transaction's row locks would stall every other claimant meanwhile. Each
// time the pool hands a connection out again, the connection asks the server
// (@@in_transaction, MariaDB's), and so does every idle one at the end.
func TestCanceledWritesLeaveNoTransactionOpen(t *testing.T) {
	t.Parallel()
	for _, group := range []int{store.GroupCommitDefault, 1} {
		t.Run(fmt.Sprintf("group%d", group), func(t *testing.T) {
			t.Parallel()
			b, leaks := leakSetup(t, store.Config{GroupCommit: group})
			const editors, rounds, nTasks = 12, 120, 60
			nts := make([]tasks.NewTask, nTasks)
			for i := range nts {
				nts[i] = tasks.NewTask{Category: "c", Title: fmt.Sprintf("t%d", i)}
			}
			ids := b.insert(t, nts...)
			eds := make([]*tasks.Editor, editors)
			for i := range eds {
				eds[i] = b.editor(t, fmt.Sprintf("ed%d", i), "c")
			}
			// A context that ends a little later, or at once, or not at all.
			randCtx := func() (context.Context, context.CancelFunc) {
				switch p := rand.IntN(10); {
				case p == 0:
					return context.WithCancel(b.ctx)
				case p == 1:
					ctx, cancel := context.WithCancel(b.ctx)
					cancel()
					return ctx, cancel
				default:
					return context.WithTimeout(b.ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
				}
			}
			var wg sync.WaitGroup
			for _, e := range eds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					holder := tasks.EditorHolder(e.ID)
					for range rounds {
						id := ids[rand.IntN(len(ids))]
						task, err := b.store.GetTask(b.ctx, id)
						if err != nil {
							t.Errorf("get task %d: %v", id, err)
							return
						}
						if task.Status == tasks.StatusDone {
							continue
						}
						ctx, cancel := randCtx()
						c, err := b.store.Claim(ctx, tasks.ClaimParams{
							TaskID: id, Fence: task.Fence, Status: task.Status,
							Holder: holder, EditorID: e.ID, Lease: tasks.LeaseMin,
						})
						cancel()
						if err != nil {
							continue
						}
						tid, fence := c.Task.ID, c.Fence
						ctx, cancel = randCtx()
						switch p := rand.IntN(100); {
						case p < 15:
							_, _ = b.store.Submit(ctx, tasks.SubmitParams{TaskID: tid, Fence: fence, Holder: holder, Result: rawJSON(`{}`)})
						case p < 25:
							_, _ = b.store.Heartbeat(ctx, tasks.HeartbeatParams{TaskID: tid, Fence: fence, Holder: holder, Lease: tasks.LeaseMin})
						case p < 35:
							next := ids[rand.IntN(len(ids))]
							nt, err := b.store.GetTask(b.ctx, next)
							if err == nil && next != tid && nt.Status == tasks.StatusPending {
								_, _ = b.store.SubmitAndClaim(ctx,
									tasks.SubmitParams{TaskID: tid, Fence: fence, Holder: holder, Result: rawJSON(`{}`)},
									tasks.ClaimParams{TaskID: next, Fence: nt.Fence, Status: tasks.StatusPending, Holder: holder, EditorID: e.ID, Lease: tasks.LeaseMin})
							}
						case p < 40:
							// Walk away: the lease passes, and another editor's
							// claim takes the task over in a transaction.
						default:
							_, _ = b.store.Release(ctx, tasks.ReleaseParams{TaskID: tid, Fence: fence, Holder: holder, Reason: "later", Skip: p < 45})
						}
						cancel()
					}
				}()
			}
			wg.Wait()
			// Writes whose callers left may still be on their way (a group in
			// flight, a COMMIT or a ROLLBACK in the background); wait for them.
			testenv.Eventually(t, time.Minute, "the store's connections are back in the pool", func() bool {
				return b.db.Stats().InUse == 0
			})
			t.Logf("%d connections handed out again by the pool", leaks.reused.Load())
			if n := leaks.inTx.Load(); n > 0 {
				t.Errorf("the pool handed out %d connections inside a transaction", n)
			}
			checkNoTransactionOpen(t, b)
		})
	}
}

// checkNoTransactionOpen fails t if a connection idle in b's pool is inside a
// transaction: it takes all of them at once and asks each.
func checkNoTransactionOpen(t *testing.T, b *bundle) {
	t.Helper()
	idle := b.db.Stats().Idle
	for range idle {
		conn, err := b.db.Connx(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var in int
		if err := conn.GetContext(b.ctx, &in, "SELECT @@in_transaction"); err != nil {
			t.Fatal(err)
		}
		if in != 0 {
			t.Error("a connection idle in the pool is inside a transaction")
		}
	}
}

// leakWatch counts the connections the pool hands out again, and those of
// them that are inside a transaction.
type leakWatch struct{ reused, inTx atomic.Int64 }

// leakSetup is setup over a connector whose connections, each time the pool
// hands one out again, ask the server whether they are inside a transaction.
func leakSetup(t *testing.T, cfg store.Config) (*bundle, *leakWatch) {
	t.Helper()
	connector, err := store.Connector(storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	w := &leakWatch{}
	db, err := store.OpenDB(t.Context(), sql.OpenDB(watchedConnector{connector, w}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := store.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{ctx: t.Context(), db: db, store: s}, w
}

type watchedConnector struct {
	driver.Connector
	w *leakWatch
}

// fullConn is what the MySQL driver's connections implement and database/sql
// uses.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

func (c watchedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	fc, ok := conn.(fullConn)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("the driver's connection lacks an interface database/sql uses")
	}
	return watchedConn{fc, c.w}, nil
}

type watchedConn struct {
	fullConn
	w *leakWatch
}

// ResetSession runs when the pool hands the connection out again: a
// connection inside a transaction is counted, and discarded.
func (c watchedConn) ResetSession(ctx context.Context) error {
	if err := c.fullConn.ResetSession(ctx); err != nil {
		return err
	}
	c.w.reused.Add(1)
	rows, err := c.QueryContext(ctx, "SELECT @@in_transaction", nil)
	if err != nil {
		return driver.ErrBadConn
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil && err != io.EOF {
		return driver.ErrBadConn
	}
	// An unsigned integer from MariaDB; any other answer is not 0 either.
	if n, ok := v[0].(uint64); !ok || n != 0 {
		c.w.inTx.Add(1)
		return driver.ErrBadConn
	}
	return nil
}
