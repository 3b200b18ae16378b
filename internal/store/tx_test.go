package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// TestTransactionsRetryDeadlocks provokes a deadlock between two store transactions
// that lock two rows in opposite order, and checks that the victim ran again and both
// committed exactly once.
func TestTransactionsRetryDeadlocks(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	x := b.insertOne(t, "news", 0)
	y := b.insertOne(t, "news", 0)

	var runs atomic.Int32
	var bothHoldOne sync.WaitGroup
	bothHoldOne.Add(2)
	bump := func(first, second int64) error {
		attempt := 0
		return store.InTx(b.store, b.ctx, func(tx *sqlx.Tx) error {
			attempt++
			runs.Add(1)
			const q = `UPDATE tasks SET priority = priority + 1 WHERE id = ?`
			if _, err := tx.ExecContext(b.ctx, q, first); err != nil {
				return err
			}
			if attempt == 1 {
				bothHoldOne.Done()
				bothHoldOne.Wait()
			}
			_, err := tx.ExecContext(b.ctx, q, second)
			return err
		})
	}
	var wg sync.WaitGroup
	var errs [2]error
	wg.Go(func() { errs[0] = bump(x, y) })
	wg.Go(func() { errs[1] = bump(y, x) })
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	if n := runs.Load(); n != 3 {
		t.Errorf("%d runs, want 3 (the deadlock victim ran twice)", n)
	}
	for _, id := range []int64{x, y} {
		if p := b.task(t, id).Priority; p != 2 {
			t.Errorf("task %d priority = %d, want 2 (one bump per committed transaction)", id, p)
		}
	}
}

// TestTransactionLosingLockWaitIsBusy: a transaction whose lock wait times out is
// rolled back and reported as ErrBusy, with the server's error kept, and changes
// nothing.
func TestTransactionLosingLockWaitIsBusy(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)

	holder, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(b.ctx, `SELECT id FROM tasks WHERE id = ? FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}

	runs := 0
	err = store.InTx(b.store, b.ctx, func(tx *sqlx.Tx) error {
		runs++
		if _, err := tx.ExecContext(b.ctx, `SET SESSION innodb_lock_wait_timeout = 1`); err != nil {
			return err
		}
		_, err := tx.ExecContext(b.ctx, `UPDATE tasks SET priority = 7 WHERE id = ?`, id)
		return err
	})
	var me *mysql.MySQLError
	if !errors.Is(err, tasks.ErrBusy) || !errors.As(err, &me) || me.Number != 1205 {
		t.Fatalf("err = %v, want ErrBusy wrapping the lock wait timeout (1205)", err)
	}
	if runs != 1 {
		t.Errorf("%d runs, want 1: a lock wait timeout is not retried", runs)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if p := b.task(t, id).Priority; p != 0 {
		t.Errorf("priority = %d after the refused transaction, want 0", p)
	}
}

// TestOneEditorsRacingRequestsDoNotDeadlock races each write an editor can make
// about its claim (a skip, whose record's foreign key locks the editor's row, among
// them) with a claim of its next task on the locking path, which locks the editor's
// row and then the task it still has. Rows are locked in one order, so no
// transaction may lose a deadlock, and the outcome is one of the orders.
func TestOneEditorsRacingRequestsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	writes := map[string]func(id, fence int64) error{
		"skip": func(id, fence int64) error {
			_, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: fence, Holder: ed.Holder(), Skip: true})
			return err
		},
		"release": func(id, fence int64) error {
			_, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: fence, Holder: ed.Holder()})
			return err
		},
		"submit": func(id, fence int64) error {
			_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: fence, Holder: ed.Holder(), Result: rawJSON(`1`)})
			return err
		},
		"heartbeat": func(id, fence int64) error {
			_, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: fence, Holder: ed.Holder(), Lease: time.Minute})
			return err
		},
	}
	for name, write := range writes {
		for range 25 {
			held := b.insertOne(t, "news", 0)
			next := b.insertOne(t, "news", 0)
			c := b.claim(t, held, ed.Holder(), ed.ID, time.Minute)
			var writeErr, claimErr error
			var wg sync.WaitGroup
			wg.Go(func() { writeErr = write(held, c.Fence) })
			wg.Go(func() {
				_, claimErr = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: next, Status: "", Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
			})
			wg.Wait()
			if writeErr != nil {
				t.Fatalf("%s: %v", name, writeErr)
			}
			// The claim either came after the write ended the claim, or found the
			// editor still holding it (a heartbeat never ends it).
			if claimErr != nil && !errors.Is(claimErr, tasks.ErrEditorBusy) {
				t.Fatalf("%s: claim: %v", name, claimErr)
			}
			if name == "heartbeat" && claimErr == nil {
				t.Fatalf("heartbeat: the editor claimed a second task while holding one")
			}
			// Done with both, for the next round.
			b.exec(t, "UPDATE tasks SET status = 'done', editor_id = NULL WHERE id IN (?, ?)", held, next)
		}
	}
	if n := store.LockConflicts(b.store); n != 0 {
		t.Errorf("%d transactions lost a lock conflict, want 0", n)
	}
}

// TestRefusedTransactionEndsWithItsCallersDeadline: a transaction its own code
// refuses (a claim found stale, or at its category's limit) is rolled back;
// a server that stops answering just before that ROLLBACK (a SIGSTOPped
// server, here a frozen proxy) holds the caller no longer than its context,
// though database/sql's Rollback takes none and the driver waits for the
// server's answer with no deadline.
func TestRefusedTransactionEndsWithItsCallersDeadline(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(storetest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	hung := testenv.StartProxy(t, cfg.Addr)
	cfg.Addr = hung.Addr()
	db, err := store.Open(t.Context(), cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, s)

	// As an API request's time (http.request_timeout), shortened.
	const timeout = 500 * time.Millisecond
	const bound = timeout + time.Second
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	errRefused := errors.New("refused")
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- store.InTx(s, ctx, func(tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT 1`); err != nil {
				return err
			}
			hung.Freeze()
			return errRefused
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errRefused) {
			t.Errorf("err = %v, want the transaction's own refusal", err)
		}
		if took := time.Since(start); took > bound {
			t.Errorf("answered after %v; want within %v of a deadline of %v", took.Round(time.Millisecond), bound, timeout)
		}
	case <-time.After(bound):
		t.Errorf("no answer %v after the transaction began, with a deadline of %v: its ROLLBACK waits on the hung server", bound, timeout)
		hung.Thaw()
		<-done
	}
}
