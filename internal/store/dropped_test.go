package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// claimUnderHeldLock claims a task on s for an editor whose row another
// transaction of db holds locked and never lets go, and checks that the
// claim ends with ErrBusy when the server's lock wait ends, well before the
// group's 30 s: the server's waits end before the store's own bounds do, so
// that a claim fails promptly with a clear error instead of waiting to its
// deadline.
func claimUnderHeldLock(t *testing.T, s *store.Store, db *sqlx.DB) {
	t.Helper()
	ctx := t.Context()
	_, hash := tasks.NewToken()
	ed, err := s.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ann", Categories: []string{"news"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.InsertTasks(ctx, []tasks.NewTask{{Category: "news", Title: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, `SELECT id FROM editors WHERE id = ? FOR UPDATE`, ed.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = s.Claim(cctx, tasks.ClaimParams{
		TaskID: ids[0], Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute,
	})
	took := time.Since(start)
	if !errors.Is(err, tasks.ErrBusy) && !errors.Is(err, tasks.ErrStale) {
		t.Errorf("claim behind a held lock: %v after %v, want ErrBusy", err, took.Round(time.Millisecond))
	}
	if limit := store.LockWaitTimeoutDefault + 5*time.Second; took > limit {
		t.Errorf("claim behind a held lock took %v, want at most %v", took.Round(time.Millisecond), limit)
	}
}

func TestClaimBehindHeldLockEndsPromptly(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	claimUnderHeldLock(t, b.store, b.db)
}

func TestGaleraClaimBehindHeldLockEndsPromptly(t *testing.T) {
	g := storetest.NewGalera(t)
	s, err := store.New(g.Nodes[2], store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, s)
	claimUnderHeldLock(t, s, g.Nodes[2])
}

// claimAfterKill kills every connection s's pool holds, from another
// connection of the same server (admin), as a server does that restarts or
// drops idle clients, then claims: the claim must not notice.
func claimAfterKill(t *testing.T, s *store.Store, admin *sqlx.DB) {
	t.Helper()
	ctx := t.Context()
	_, hash := tasks.NewToken()
	ed, err := s.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ann", Categories: []string{"news"}, TokenHash: hash, Capacity: 5})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		ids, err := s.InsertTasks(ctx, []tasks.NewTask{{Category: "news", Title: "t"}})
		if err != nil {
			t.Fatal(err)
		}
		// Take three connections at once, so that the pool holds them all.
		var conns []*sqlx.Conn
		var killed []int64
		for range 3 {
			c, err := s.DB().Connx(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var id int64
			if err := c.GetContext(ctx, &id, "SELECT CONNECTION_ID()"); err != nil {
				t.Fatal(err)
			}
			conns, killed = append(conns, c), append(killed, id)
		}
		for _, c := range conns {
			_ = c.Close()
		}
		for _, id := range killed {
			if _, err := admin.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
				t.Fatalf("kill connection %d: %v", id, err)
			}
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = s.Claim(cctx, tasks.ClaimParams{
			TaskID: ids[0], Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute,
		})
		cancel()
		if took := time.Since(start); err != nil || took > 5*time.Second {
			t.Errorf("round %d: claim after the pool's connections were killed: %v after %v, want a claim at once", round, err, took.Round(time.Millisecond))
		}
	}
}

func TestClaimAfterConnectionsKilled(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	claimAfterKill(t, b.store, storetest.NewDB(t))
}

func TestGaleraClaimAfterConnectionsKilled(t *testing.T) {
	g := storetest.NewGalera(t)
	s, err := store.New(g.Nodes[2], store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, s)
	admin, err := store.Open(t.Context(), g.DSNs[2])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	claimAfterKill(t, s, admin)
}

// TestLockWaitTimeoutSetting: sessions wait LockWaitTimeoutDefault for a row
// lock, unless the DSN says otherwise.
func TestLockWaitTimeoutSetting(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		dsn  string
		want int
	}{
		{dsn, int(store.LockWaitTimeoutDefault / time.Second)},
		{dsn + sep + "innodb_lock_wait_timeout=7", 7},
	} {
		db, err := store.Open(t.Context(), c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		err = db.GetContext(t.Context(), &got, `SELECT @@session.innodb_lock_wait_timeout`)
		_ = db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: innodb_lock_wait_timeout = %d, want %d", c.dsn, got, c.want)
		}
	}
}
