package store_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// onOneDay runs build on a fresh database and returns its bundle. A test of
// "today's" counts reads them inside build; when the database's UTC date changed
// while build ran (midnight passed, so its "today" is not one day), build runs once
// more on another fresh database: midnight does not pass twice within one test.
func onOneDay(t *testing.T, build func(b *bundle)) *bundle {
	t.Helper()
	for attempt := 1; ; attempt++ {
		b := setup(t, store.Config{})
		day := b.utcDate(t)
		build(b)
		if b.utcDate(t) == day {
			return b
		}
		if attempt == 2 {
			t.Fatalf("the database's UTC date changed during two runs in a row")
		}
		t.Logf("UTC midnight passed while the test ran; running it again on a fresh database")
	}
}

// utcDate is the database's UTC date, the "today" of the counts.
func (b *bundle) utcDate(t *testing.T) string {
	t.Helper()
	var day string
	if err := b.db.GetContext(b.ctx, &day, `SELECT CAST(UTC_DATE() AS CHAR)`); err != nil {
		t.Fatal(err)
	}
	return day
}

// ageEvents moves events of the editor with kind back by days, out of today.
func (b *bundle) ageEvents(t *testing.T, editorID int64, kind tasks.EventKind, days int) {
	t.Helper()
	b.exec(t, "UPDATE task_events SET `at` = `at` - INTERVAL ? DAY WHERE editor_id = ? AND kind = ?", days, editorID, kind)
}

func TestListEditors(t *testing.T) {
	t.Parallel()
	// The counts of today are read within one UTC day (see onOneDay).
	var (
		ann, bob, cy *tasks.Editor
		ids          []int64
		live         *tasks.Claim
		page         *tasks.EditorPage
		one          *tasks.EditorSummary
	)
	b := onOneDay(t, func(b *bundle) {
		ann = b.editor(t, "ann", "news", "arts")
		bob = b.editor(t, "bob", "sport")
		cy = b.editor(t, "cy", "news")
		b.exec(t, `UPDATE editors SET disabled_at = NOW(3) WHERE id = ?`, cy.ID)

		// ann: two claims submitted (one of them yesterday's), one released, one
		// skipped, one live claim; bob: one claim that expired and was recycled.
		ids = b.insert(t,
			tasks.NewTask{Category: "news", Title: "1"}, tasks.NewTask{Category: "news", Title: "2"},
			tasks.NewTask{Category: "news", Title: "3"}, tasks.NewTask{Category: "news", Title: "4"},
			tasks.NewTask{Category: "arts", Title: "5"}, tasks.NewTask{Category: "sport", Title: "6"})
		for _, id := range ids[:2] {
			c := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
			if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ann.Holder(), Result: rawJSON(`1`)}); err != nil {
				t.Fatal(err)
			}
		}
		b.ageEvents(t, ann.ID, tasks.EventSubmitted, 1)
		b.exec(t, "UPDATE task_events SET `at` = `at` - INTERVAL 1 DAY WHERE editor_id = ? AND kind = 'claimed' AND task_id = ?", ann.ID, ids[0])
		c := b.claim(t, ids[2], ann.Holder(), ann.ID, time.Minute)
		if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[2], Fence: c.Fence, Holder: ann.Holder()}); err != nil {
			t.Fatal(err)
		}
		c = b.claim(t, ids[3], ann.Holder(), ann.ID, time.Minute)
		if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[3], Fence: c.Fence, Holder: ann.Holder(), Skip: true}); err != nil {
			t.Fatal(err)
		}
		live = b.claim(t, ids[4], ann.Holder(), ann.ID, time.Minute)
		b.claim(t, ids[5], bob.Holder(), bob.ID, time.Minute)
		b.expireLease(t, ids[5])
		if _, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{}); err != nil {
			t.Fatal(err)
		}

		var err error
		if page, err = b.store.ListEditors(b.ctx, tasks.ListEditorsParams{}); err != nil {
			t.Fatal(err)
		}
		if one, err = b.store.GetEditorSummary(b.ctx, ann.ID); err != nil {
			t.Fatal(err)
		}
	})
	if page.NextAfterID != 0 || len(page.Editors) != 3 {
		t.Fatalf("page = %+v, want 3 editors and no next", page)
	}
	got := page.Editors
	if got[0].ID != ann.ID || got[1].ID != bob.ID || got[2].ID != cy.ID {
		t.Fatalf("editors %d, %d, %d, want %d, %d, %d in id order", got[0].ID, got[1].ID, got[2].ID, ann.ID, bob.ID, cy.ID)
	}
	if !slices.Equal(got[0].Categories, []string{"arts", "news"}) || !slices.Equal(got[1].Categories, []string{"sport"}) {
		t.Errorf("categories %v, %v", got[0].Categories, got[1].Categories)
	}
	if got[0].Disabled() || got[1].Disabled() || !got[2].Disabled() {
		t.Errorf("disabled: %v %v %v, want false false true", got[0].Disabled(), got[1].Disabled(), got[2].Disabled())
	}
	if cl := got[0].Claim; cl == nil || cl.TaskID != ids[4] || cl.Fence != live.Fence || !cl.LeaseExpiresAt.Equal(live.LeaseExpiresAt) {
		t.Errorf("ann's claim = %+v, want task %d fence %d until %v", cl, ids[4], live.Fence, live.LeaseExpiresAt)
	}
	if got[1].Claim != nil || got[2].Claim != nil {
		t.Errorf("claims of bob and cy: %+v, %+v; want none (bob's expired)", got[1].Claim, got[2].Claim)
	}
	// ann claimed 5 tasks, one of them yesterday; both submits were yesterday.
	if want := (tasks.EventCounts{Claimed: 4, Released: 1, Skipped: 1}); got[0].Today != want {
		t.Errorf("ann today = %+v, want %+v", got[0].Today, want)
	}
	if want := (tasks.EventCounts{Claimed: 1, Expired: 1}); got[1].Today != want {
		t.Errorf("bob today = %+v, want %+v", got[1].Today, want)
	}
	if got[2].Today != (tasks.EventCounts{}) {
		t.Errorf("cy today = %+v, want zeros", got[2].Today)
	}

	// Pages of two.
	p1, err := b.store.ListEditors(b.ctx, tasks.ListEditorsParams{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Editors) != 2 || p1.NextAfterID != bob.ID {
		t.Fatalf("first page of 2: %d editors, next %d; want 2, %d", len(p1.Editors), p1.NextAfterID, bob.ID)
	}
	p2, err := b.store.ListEditors(b.ctx, tasks.ListEditorsParams{Limit: 2, AfterID: p1.NextAfterID})
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Editors) != 1 || p2.Editors[0].ID != cy.ID || p2.NextAfterID != 0 {
		t.Fatalf("second page: %+v, want cy alone and no next", p2)
	}
	if !slices.Equal(p2.Editors[0].Categories, []string{"news"}) {
		t.Errorf("cy's categories on the second page: %v", p2.Editors[0].Categories)
	}
	p3, err := b.store.ListEditors(b.ctx, tasks.ListEditorsParams{AfterID: cy.ID})
	if err != nil || len(p3.Editors) != 0 || p3.NextAfterID != 0 {
		t.Errorf("past the end: %+v, %v; want an empty last page", p3, err)
	}

	for _, p := range []tasks.ListEditorsParams{{Limit: -1}, {Limit: tasks.ListEditorsLimitMax + 1}, {AfterID: -1}} {
		_, err := b.store.ListEditors(b.ctx, p)
		wantErr(t, fmt.Sprintf("list %+v", p), err, tasks.ErrInvalid)
	}

	if one.ID != ann.ID || one.Today != got[0].Today || one.Claim == nil || !slices.Equal(one.Categories, got[0].Categories) {
		t.Errorf("summary of ann = %+v; want as listed: %+v", one, got[0])
	}
	_, err = b.store.GetEditorSummary(b.ctx, cy.ID+100)
	wantErr(t, "summary of an unknown editor", err, tasks.ErrNotFound)
}

// TestEditorCountsReadOnlyTheEditorsEvents proves the counts read the editor's own
// events through task_events_editor: in a trail of 20,000 events of other editors,
// 2,000 heartbeats of the editor's and 1,000 events of its from two days ago, today's
// counts read about today's 50 events and the all-time counts the editor's 1,050
// counted ones, measured with the session's Handler_read_* counters; the plans use
// the key.
func TestEditorCountsReadOnlyTheEditorsEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ed", "news")
	other := b.editor(t, "other", "news")
	id := b.insertOne(t, "news", 0)
	// A big trail of other editors' events, and many heartbeats of ed's.
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, editor_id)
		SELECT ?, ELT(1 + seq % 5, 'claimed', 'submitted', 'released', 'skipped', 'heartbeat'), 1, 'x', ? + seq % 7
		FROM seq_1_to_20000`, id, other.ID+1)
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, editor_id)
		SELECT ?, 'heartbeat', 1, ?, ? FROM seq_1_to_2000`, id, ed.Holder(), ed.ID)
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, editor_id)
		SELECT ?, ELT(1 + seq % 5, 'claimed', 'submitted', 'released', 'skipped', 'expired'), 1, ?, ?
		FROM seq_1_to_50`, id, ed.Holder(), ed.ID)
	// ed's history before today: all-time counts read it, today's must not.
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, editor_id, `+"`at`"+`)
		SELECT ?, ELT(1 + seq % 5, 'claimed', 'submitted', 'released', 'skipped', 'expired'), 1, ?, ?, NOW(3) - INTERVAL 2 DAY
		FROM seq_1_to_1000`, id, ed.Holder(), ed.ID)
	b.exec(t, `ANALYZE TABLE task_events`)

	conn, err := b.db.Connx(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reads := func() int64 {
		t.Helper()
		rows, err := conn.QueryxContext(b.ctx, `SHOW SESSION STATUS LIKE 'Handler_read%'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var n int64
		for rows.Next() {
			var name, value string
			if err := rows.Scan(&name, &value); err != nil {
				t.Fatal(err)
			}
			v, _ := strconv.ParseInt(value, 10, 64)
			n += v
		}
		return n
	}
	for _, c := range []struct {
		name  string
		query string
		args  []any
		max   int64
	}{
		// 50 counted events of ed's, and a few reads per range.
		{"list", store.ListEditorsSQL, []any{ed.ID - 1, 2}, 20},
		{"today's counts", strings.Replace(store.TodayCountsSQL, "IN (?)", "IN (?, ?)", 1), []any{ed.ID, ed.ID + 1}, 100},
		// All time: ed's 1,050 counted events, but none of its heartbeats.
		{"counts", store.EditorCountsSQL, []any{ed.ID, ed.ID}, 1200},
	} {
		before := reads()
		var sink []map[string]any
		rows, err := conn.QueryxContext(b.ctx, c.query, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatal(err)
			}
			sink = append(sink, m)
		}
		rows.Close()
		// SHOW STATUS reads some rows of its own; subtract a second reading's.
		after := reads()
		status := reads() - after
		n := after - before - status
		t.Logf("%s: %d rows, %d handler reads", c.name, len(sink), n)
		if n > c.max {
			t.Errorf("%s read %d rows for an editor with 50 counted events today in a trail of 23,050; want at most %d", c.name, n, c.max)
		}

		plan := b.explain(t, c.query, c.args...)
		t.Logf("%s:\n%s", c.name, formatPlan(plan))
		noFullScans(t, c.name, plan)
		for _, r := range plan {
			if (r.Table == "v" || r.Table == "task_events") && r.Key != "task_events_editor" {
				t.Errorf("%s reads task_events with key %q, want task_events_editor:\n%s", c.name, r.Key, formatPlan(plan))
			}
		}
	}
	plan := b.explain(t, store.ClaimToSubmitSQL, ed.ID, tasks.MedianSubmissions)
	t.Logf("claim to submit:\n%s", formatPlan(plan))
	noFullScans(t, "claim to submit", plan)
	if p := formatPlan(plan); !strings.Contains(p, "| task_events | ref | task_events_editor |") || !strings.Contains(p, "| t | eq_ref | PRIMARY |") {
		t.Errorf("claim to submit: want task_events_editor for the submissions and the tasks by primary key:\n%s", p)
	}
}
