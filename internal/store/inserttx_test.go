package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestCommitWaiter: a waiter's Await blocks while the transaction that
// inserted a task is open, a second at a time, and then tells a commit from
// a rollback; the caller's transaction sees its own insert and nothing of it
// is visible outside before the commit. A cancelled wait closes the waiter's
// connection; a closed waiter gives its connection back with the session's
// lock wait timeout restored.
func TestCommitWaiter(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	w, err := b.store.NewCommitWaiter(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	insert := func() (int64, func(commit bool)) {
		t.Helper()
		tx, err := b.db.BeginTxx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ins, err := b.store.InsertIn(b.ctx, tx, []tasks.NewTask{{Category: "news", Title: "a"}})
		if err != nil || len(ins) != 1 || !ins[0].Created {
			t.Fatalf("insert in a transaction: %+v, %v", ins, err)
		}
		return ins[0].ID, func(commit bool) {
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Error(err)
			}
		}
	}

	// Open: a second's wait, then ErrStillOpen; outside, no task.
	id, end := insert()
	started := time.Now()
	if _, err := w.Await(b.ctx, id); !errors.Is(err, store.ErrStillOpen) {
		t.Fatalf("await an open transaction: %v, want ErrStillOpen", err)
	}
	if d := time.Since(started); d < 900*time.Millisecond || d > 3*time.Second {
		t.Errorf("an open transaction's wait took %v, want about 1s", d)
	}
	if _, err := b.store.GetTask(b.ctx, id); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("the task of an open transaction outside it: %v, want ErrNotFound", err)
	}
	// Committed while the waiter waits: it answers at the commit.
	time.AfterFunc(200*time.Millisecond, func() { end(true) })
	started = time.Now()
	if committed, err := w.Await(b.ctx, id); err != nil || !committed {
		t.Fatalf("await a transaction that commits: %v, %v; want committed", committed, err)
	}
	if d := time.Since(started); d < 150*time.Millisecond || d > 900*time.Millisecond {
		t.Errorf("the wait for a commit 200ms away took %v", d)
	}
	// Rolled back while the waiter waits.
	id, end = insert()
	time.AfterFunc(200*time.Millisecond, func() { end(false) })
	if committed, err := w.Await(b.ctx, id); err != nil || committed {
		t.Fatalf("await a transaction that rolls back: %v, %v; want not committed", committed, err)
	}
	w.Close()
	// With one connection in the pool, the next query has the waiter's.
	b.db.SetMaxOpenConns(1)
	if w, err = b.store.NewCommitWaiter(b.ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var timeout int
	if err := b.db.GetContext(b.ctx, &timeout, "SELECT @@SESSION.innodb_lock_wait_timeout"); err != nil || timeout != int(store.LockWaitTimeoutDefault/time.Second) {
		t.Errorf("the waiter's session's lock wait timeout once closed: %d (%v), want %v", timeout, err, store.LockWaitTimeoutDefault)
	}
	b.db.SetMaxOpenConns(store.MaxOpenConnsDefault)

	// Cancelled: the wait ends at once and the connection is closed.
	w, err = b.store.NewCommitWaiter(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, end = insert()
	defer end(false)
	ctx, cancel := context.WithCancel(b.ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	inUse := b.db.Stats().InUse
	started = time.Now()
	if _, err := w.Await(ctx, id); err == nil || errors.Is(err, store.ErrStillOpen) {
		t.Fatalf("a cancelled wait: %v, want the context's error", err)
	}
	if d := time.Since(started); d > 500*time.Millisecond {
		t.Errorf("a cancelled wait returned after %v, want at once", d)
	}
	if n := b.db.Stats().InUse; n != inUse-1 {
		t.Errorf("%d connections in use after a cancelled wait, want %d: the waiter's closed", n, inUse-1)
	}
	if _, err := w.Await(b.ctx, id); err == nil {
		t.Error("await on a waiter whose wait was cancelled: no error")
	}
}
