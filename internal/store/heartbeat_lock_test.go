package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// innodbStatus reads a counter of the server's global status.
func (b *bundle) innodbStatus(t *testing.T, name string) int64 {
	t.Helper()
	var row struct {
		Name  string `db:"Variable_name"`
		Value int64  `db:"Value"`
	}
	if err := b.db.GetContext(b.ctx, &row, "SHOW GLOBAL STATUS LIKE '"+name+"'"); err != nil {
		t.Fatalf("status %s: %v", name, err)
	}
	return row.Value
}

// TestHeartbeatsNeverDeadlockWithClaims: an editor's heartbeat of its task
// and its submit of the same task with the next claim, sent at once through
// two stores (two replicas, so in two transactions), never deadlock: the
// heartbeat's last-seen row is one no claim locks. Not parallel: it reads the
// server's deadlock counter, which the other tests of the package would move.
func TestHeartbeatsNeverDeadlockWithClaims(t *testing.T) {
	b := setup(t, store.Config{})
	other, err := store.New(b.db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, other)
	ed := b.editor(t, "ed", "news")
	const rounds = 150
	ids := make([]int64, rounds+1)
	for i := range ids {
		ids[i] = b.insertOne(t, "news", 0)
	}
	c := b.claim(t, ids[0], ed.Holder(), ed.ID, time.Minute)
	deadlocks, waits := b.innodbStatus(t, "Innodb_deadlocks"), b.innodbStatus(t, "Innodb_row_lock_waits")
	start := time.Now()
	var beats int
	for i := range rounds {
		var wg sync.WaitGroup
		var beatErr, subErr error
		var h *tasks.Handover
		wg.Go(func() {
			_, beatErr = other.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: ids[i], Fence: c.Fence, Holder: ed.Holder(), Lease: time.Minute})
		})
		wg.Go(func() {
			h, subErr = b.store.SubmitAndClaim(b.ctx,
				tasks.SubmitParams{TaskID: ids[i], Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`1`)},
				tasks.ClaimParams{TaskID: ids[i+1], Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
		})
		wg.Wait()
		if subErr != nil || h.Claim == nil {
			t.Fatalf("round %d: submit and claim: %+v, %v", i, h, subErr)
		}
		if beatErr == nil {
			beats++
		} else {
			wantErr(t, "heartbeat of a task submitted at once", beatErr, tasks.ErrStale)
		}
		c = h.Claim
	}
	took := time.Since(start)
	gotDeadlocks, gotWaits := b.innodbStatus(t, "Innodb_deadlocks")-deadlocks, b.innodbStatus(t, "Innodb_row_lock_waits")-waits
	t.Logf("%d rounds in %v: %d heartbeats accepted, %d deadlocks, %d row lock waits", rounds, took.Round(time.Millisecond), beats, gotDeadlocks, gotWaits)
	if gotDeadlocks != 0 {
		t.Errorf("%d deadlocks between heartbeats and submits with claims of one editor, want 0", gotDeadlocks)
	}
	if beats == 0 {
		t.Errorf("no heartbeat was accepted in %d rounds: nothing raced", rounds)
	}
}

// TestGaleraHeartbeatMovesLastSeen: on a Galera cluster, whose statement
// batches carry a guard in each write, an editor's heartbeats on two nodes
// move its last-seen time, seen from the third, and write no event.
func TestGaleraHeartbeatMovesLastSeen(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := t.Context()
	var stores []*store.Store
	for _, db := range g.Nodes[:2] {
		s, err := store.New(db, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		askGalera(t, s)
		stores = append(stores, s)
	}
	_, hash := tasks.NewToken()
	ed, err := stores[0].CreateEditor(ctx, tasks.CreateEditorParams{Name: "ed", Categories: []string{"news"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := stores[0].InsertTasks(ctx, []tasks.NewTask{{Category: "news", Title: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stores[0].Claim(ctx, tasks.ClaimParams{TaskID: ids[0], Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if i > 0 {
			if _, err := g.Nodes[2].ExecContext(ctx, "UPDATE editor_seen SET last_seen_at = last_seen_at - INTERVAL 1 HOUR"); err != nil {
				t.Fatal(err)
			}
		}
		var before, seen time.Time
		if err := g.Nodes[2].GetContext(ctx, &before, "SELECT NOW(3)"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Heartbeat(ctx, tasks.HeartbeatParams{TaskID: ids[0], Fence: c.Fence, Holder: ed.Holder(), Lease: time.Minute}); err != nil {
			t.Fatalf("heartbeat on node %d: %v", i, err)
		}
		if err := g.Nodes[2].GetContext(ctx, &seen, "SELECT last_seen_at FROM editor_seen WHERE editor_id = ?", ed.ID); err != nil {
			t.Fatalf("last seen after the heartbeat on node %d: %v", i, err)
		}
		if seen.Before(before.Add(-time.Second)) {
			t.Errorf("heartbeat on node %d: last seen %v, want from about %v", i, seen, before)
		}
	}
	var events int
	if err := g.Nodes[2].GetContext(ctx, &events, "SELECT COUNT(*) FROM task_events WHERE task_id = ?", ids[0]); err != nil || events != 1 {
		t.Errorf("task's events = %d, %v; want 1 (the claim)", events, err)
	}
}
