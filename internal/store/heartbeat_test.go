package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// storageOf counts the rows a claim keeps: its task's events, the rows naming
// its editor, and every row of the tables a heartbeat could write.
func (b *bundle) storageOf(t *testing.T, id, editorID int64) string {
	t.Helper()
	return fmt.Sprintf("task events %d, editor events %d, all events %d, last-seen rows %d, results %d, outbox %d",
		b.count(t, `SELECT COUNT(*) FROM task_events WHERE task_id = ?`, id),
		b.count(t, `SELECT COUNT(*) FROM task_events WHERE editor_id = ?`, editorID),
		b.count(t, `SELECT COUNT(*) FROM task_events`),
		b.count(t, `SELECT COUNT(*) FROM editor_seen`),
		b.count(t, `SELECT COUNT(*) FROM task_results`),
		b.count(t, `SELECT COUNT(*) FROM webhook_outbox`))
}

// TestHeartbeatStorageIsConstant: a claim held through many heartbeats keeps
// as many rows as one held through one, an editor's (Heartbeat) and a
// worker's (Heartbeat and HeartbeatBatch) alike.
func TestHeartbeatStorageIsConstant(t *testing.T) {
	t.Parallel()
	const beats = 40
	t.Run("editor", func(t *testing.T) {
		t.Parallel()
		b := setup(t, store.Config{})
		ed := b.editor(t, "ed", "news")
		id := b.insertOne(t, "news", 0)
		c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
		beat := func() {
			t.Helper()
			if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		beat()
		one := b.storageOf(t, id, ed.ID)
		for range beats - 1 {
			beat()
		}
		if many := b.storageOf(t, id, ed.ID); many != one {
			t.Errorf("after %d heartbeats: %s; after 1: %s", beats, many, one)
		}
	})
	t.Run("worker", func(t *testing.T) {
		t.Parallel()
		b := setup(t, store.Config{})
		id := b.insertOne(t, "jobs", 0)
		c := b.claim(t, id, "worker:w:1", 0, time.Minute)
		p := tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: c.Task.Holder, Lease: time.Minute}
		beat := func() {
			t.Helper()
			if _, err := b.store.Heartbeat(b.ctx, p); err != nil {
				t.Fatal(err)
			}
			res, err := b.store.HeartbeatBatch(b.ctx, []tasks.HeartbeatParams{p})
			if err != nil || res[0].Err != nil {
				t.Fatalf("heartbeat batch: %v %+v", err, res)
			}
		}
		beat()
		one := b.storageOf(t, id, 0)
		for range beats - 1 {
			beat()
		}
		if many := b.storageOf(t, id, 0); many != one {
			t.Errorf("after %d renewals: %s; after 1: %s", beats, many, one)
		}
	})
}

// TestHeartbeatMovesLastSeen: an accepted heartbeat sets its editor's
// last-seen time to the database's now; a refused one leaves it.
func TestHeartbeatMovesLastSeen(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ed", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
	lastSeen := func() (at time.Time) {
		t.Helper()
		if err := b.db.GetContext(b.ctx, &at, `SELECT last_seen_at FROM editor_seen WHERE editor_id = ?`, ed.ID); err != nil {
			t.Fatalf("last seen of editor %d: %v", ed.ID, err)
		}
		return at
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editor_seen`); n != 0 {
		t.Fatalf("%d last-seen rows before any heartbeat, want 0", n)
	}
	for i := range 2 { // the first inserts the row, the second moves it
		if i > 0 {
			b.exec(t, "UPDATE editor_seen SET last_seen_at = last_seen_at - INTERVAL 1 HOUR WHERE editor_id = ?", ed.ID)
		}
		before := b.now(t)
		if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		after := b.now(t)
		if at := lastSeen(); at.Before(before) || at.After(after) {
			t.Errorf("heartbeat %d: last seen %v, want within [%v, %v]", i+1, at, before, after)
		}
	}

	b.exec(t, "UPDATE editor_seen SET last_seen_at = last_seen_at - INTERVAL 1 HOUR WHERE editor_id = ?", ed.ID)
	was := lastSeen()
	_, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence + 1, Holder: ed.Holder(), Lease: time.Minute})
	wantErr(t, "heartbeat with a wrong fence", err, tasks.ErrStale)
	if at := lastSeen(); !at.Equal(was) {
		t.Errorf("refused heartbeat moved last seen from %v to %v", was, at)
	}
}

// TestEditorLastActiveFromHeartbeats: an editor whose last act was a
// heartbeat was last active then, an hour after its claim.
func TestEditorLastActiveFromHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ed", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
	b.exec(t, "UPDATE task_events SET `at` = `at` - INTERVAL 1 HOUR WHERE task_id = ?", id)
	before := b.now(t)
	if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.GetEditorStats(b.ctx, ed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastActiveAt == nil || st.LastActiveAt.Before(before) {
		t.Errorf("last active = %v, want the heartbeat's time, from %v", st.LastActiveAt, before)
	}
	if want := (tasks.EventCounts{Claimed: 1}); st.AllTime != want {
		t.Errorf("all time = %+v, want %+v", st.AllTime, want)
	}
}
