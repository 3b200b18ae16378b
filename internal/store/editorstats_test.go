package store_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestEditorStats(t *testing.T) {
	t.Parallel()
	// The counts of today are read within one UTC day (see onOneDay).
	var (
		ann, bob *tasks.Editor
		beat     time.Time
		st, bobs *tasks.EditorStats
		ids      []int64
	)
	onOneDay(t, func(b *bundle) {
		ann = b.editor(t, "ann", "news")
		bob = b.editor(t, "bob", "news")

		idle, err := b.store.GetEditorStats(b.ctx, ann.ID)
		if err != nil || !reflect.DeepEqual(*idle, tasks.EditorStats{}) {
			t.Fatalf("stats of an idle editor = %+v, %v; want zeros", idle, err)
		}

		// Three submissions taking 10s, 20s and 60s from claim to submit, the first two
		// yesterday; a release, a skip, a heartbeat, and a claim that expired.
		ids = b.insert(t, tasks.NewTask{Category: "news", Title: "1"}, tasks.NewTask{Category: "news", Title: "2"},
			tasks.NewTask{Category: "news", Title: "3"}, tasks.NewTask{Category: "news", Title: "4"},
			tasks.NewTask{Category: "news", Title: "5"}, tasks.NewTask{Category: "news", Title: "6"})
		for i, took := range []int{10, 20, 60} {
			c := b.claim(t, ids[i], ann.Holder(), ann.ID, time.Minute)
			if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[i], Fence: c.Fence, Holder: ann.Holder(), Result: rawJSON(`1`)}); err != nil {
				t.Fatal(err)
			}
			b.exec(t, `UPDATE tasks SET assigned_at = done_at - INTERVAL ? SECOND WHERE id = ?`, took, ids[i])
			if i < 2 {
				b.exec(t, "UPDATE task_events SET `at` = `at` - INTERVAL 1 DAY WHERE task_id = ?", ids[i])
			}
		}
		c := b.claim(t, ids[3], ann.Holder(), ann.ID, time.Minute)
		if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[3], Fence: c.Fence, Holder: ann.Holder()}); err != nil {
			t.Fatal(err)
		}
		c = b.claim(t, ids[4], ann.Holder(), ann.ID, time.Minute)
		if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[4], Fence: c.Fence, Holder: ann.Holder(), Skip: true}); err != nil {
			t.Fatal(err)
		}
		c = b.claim(t, ids[5], ann.Holder(), ann.ID, time.Minute)
		if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: ids[5], Fence: c.Fence, Holder: ann.Holder(), Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		b.expireLease(t, ids[5])
		b.claim(t, ids[5], bob.Holder(), bob.ID, time.Minute) // takes ann's expired claim over
		// The heartbeat is ann's last act: move it after everything else.
		// (A heartbeat is the editor's last-seen time, not an event.)
		b.exec(t, "UPDATE editor_seen SET last_seen_at = NOW(3) + INTERVAL 1 MINUTE WHERE editor_id = ?", ann.ID)
		if err := b.db.GetContext(b.ctx, &beat, "SELECT last_seen_at FROM editor_seen WHERE editor_id = ?", ann.ID); err != nil {
			t.Fatal(err)
		}

		if st, err = b.store.GetEditorStats(b.ctx, ann.ID); err != nil {
			t.Fatal(err)
		}
		if bobs, err = b.store.GetEditorStats(b.ctx, bob.ID); err != nil {
			t.Fatal(err)
		}
	})
	if want := (tasks.EventCounts{Claimed: 6, Submitted: 3, Released: 1, Skipped: 1, Expired: 1}); st.AllTime != want {
		t.Errorf("all time = %+v, want %+v", st.AllTime, want)
	}
	if want := (tasks.EventCounts{Claimed: 4, Submitted: 1, Released: 1, Skipped: 1, Expired: 1}); st.Today != want {
		t.Errorf("today = %+v, want %+v", st.Today, want)
	}
	if st.MedianOf != 3 || st.MedianClaimToSubmit != 20*time.Second {
		t.Errorf("median = %v over %d, want 20s over 3", st.MedianClaimToSubmit, st.MedianOf)
	}
	if st.LastActiveAt == nil || !st.LastActiveAt.Equal(beat) {
		t.Errorf("last active = %v, want the heartbeat's %v", st.LastActiveAt, beat)
	}
	if want := (tasks.EventCounts{Claimed: 1}); bobs.AllTime != want || bobs.Today != want || bobs.MedianOf != 0 || bobs.LastActiveAt == nil {
		t.Errorf("bob = %+v, want one claim today, no median, a last active time", bobs)
	}
	// Ann's six claims, newest first: each task once, in the order claimed
	// (the first two dated a day back).
	var got []int64
	for _, c := range st.RecentClaims {
		got = append(got, c.TaskID)
		if c.Fence < 1 || c.ClaimedAt.IsZero() || c.TraceID != "" {
			t.Errorf("recent claim %+v: want a fence, a time and no trace (none was traced)", c)
		}
	}
	if want := []int64{ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}; !slices.Equal(got, want) {
		t.Errorf("recent claims of tasks %v, want %v", got, want)
	}
}

// TestEditorMedianIsOverTheLatestSubmissions: of 150 submissions, the latest
// MedianSubmissions (100) took 1s each and the 50 before 100s each: the median is
// 1s, over 100.
func TestEditorMedianIsOverTheLatestSubmissions(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ed", "news")
	b.exec(t, `INSERT INTO tasks (id, category, title, payload, status, fence, holder, assigned_at, done_at)
		SELECT seq, 'news', 't', '{}', 'done', 1, ?,
			NOW(3) - INTERVAL (1000 - seq) SECOND - INTERVAL IF(seq > 50, 1, 100) SECOND,
			NOW(3) - INTERVAL (1000 - seq) SECOND
		FROM seq_1_to_150`, ed.Holder())
	b.exec(t, "INSERT INTO task_events (task_id, kind, fence, holder, editor_id, `at`) SELECT id, 'submitted', 1, holder, ?, done_at FROM tasks", ed.ID)
	// A submission whose task was claimed again since (another fence) is left out.
	b.exec(t, "UPDATE tasks SET fence = 2 WHERE id = 150")
	st, err := b.store.GetEditorStats(b.ctx, ed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.MedianOf != tasks.MedianSubmissions-1 || st.MedianClaimToSubmit != time.Second {
		t.Errorf("median = %v over %d, want 1s over %d", st.MedianClaimToSubmit, st.MedianOf, tasks.MedianSubmissions-1)
	}
	if st.AllTime.Submitted != 150 {
		t.Errorf("submitted = %d, want 150", st.AllTime.Submitted)
	}
}
