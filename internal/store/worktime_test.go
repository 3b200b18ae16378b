package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// spanClaim moves the 'claimed' event of task id's claim fence to wall before
// the event that ended it, so that the claim's wall time is exactly wall.
func (b *bundle) spanClaim(t *testing.T, id, fence int64, wall time.Duration) {
	t.Helper()
	b.exec(t, "UPDATE task_events c JOIN task_events e ON e.task_id = c.task_id AND e.fence = c.fence AND e.kind IN ('submitted', 'released', 'skipped')\n"+
		"SET c.`at` = e.`at` - INTERVAL ? MICROSECOND WHERE c.task_id = ? AND c.fence = ? AND c.kind = 'claimed'", wall.Microseconds(), id, fence)
}

// record records the claim's time after spanning it an hour, unless wall says
// otherwise.
func (b *bundle) record(t *testing.T, c *tasks.Claim, ed *tasks.Editor, outcome tasks.ClaimOutcome, reported time.Duration) {
	t.Helper()
	b.spanClaim(t, c.Task.ID, c.Fence, time.Hour)
	if _, err := b.store.RecordClaimTime(b.ctx, tasks.ClaimTimeParams{TaskID: c.Task.ID, Fence: c.Fence, EditorID: ed.ID,
		Outcome: outcome, Reported: reported}); err != nil {
		t.Fatal(err)
	}
}

// TestWorkingTimeFigures records claims by hand-picked active times and checks
// every figure against its hand-computed value: active time, submits and
// releases, tasks per active hour, the median per stage, the send-back rate
// (ann's first edit of A sent back, her second approved, B not reviewed yet),
// the days, and the bounds: a report above the claim's wall time is cut to it,
// one above what its heartbeats allow to that.
func TestWorkingTimeFigures(t *testing.T) {
	t.Parallel()
	var wt, wb, w1 *tasks.WorkingTime
	for attempt := 1; ; attempt++ {
		b := setup(t, store.Config{Workflows: map[string]tasks.Workflow{"desk": {Stages: []string{"edit", "review"}}}})
		day := b.utcDate(t)
		wt, wb, w1 = recordWorkingTimes(t, b)
		if b.utcDate(t) == day {
			break
		}
		if attempt == 2 {
			t.Fatalf("the database's UTC date changed during two runs in a row")
		}
	}
	if wt.Days != 14 || len(wt.Daily) != 14 || !wt.Daily[13].Day.Equal(wt.Since.AddDate(0, 0, 13)) {
		t.Fatalf("window: %d days from %v, %d daily", wt.Days, wt.Since, len(wt.Daily))
	}
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	wantFigures := func(what string, f tasks.WorkingFigures, active time.Duration, submitted, released, reviewed, sentBack int, perHour float64) {
		t.Helper()
		if f.Active != active || f.Submitted != submitted || f.Released != released || f.Reviewed != reviewed || f.SentBack != sentBack || f.GoldAccuracy != nil {
			t.Errorf("%s: %+v; want active %v, %d submitted, %d released, %d reviewed, %d sent back", what, f, active, submitted, released, reviewed, sentBack)
		}
		if got, ok := f.TasksPerActiveHour(); !ok || got < perHour-1e-9 || got > perHour+1e-9 {
			t.Errorf("%s: %v tasks per active hour, want %v", what, got, perHour)
		}
	}
	// desk: 60 + 30 + 90 s, 3 submits in 180 s = 60 an hour; A's first edit
	// sent back, its second approved: half sent back.
	// news: 20 + 50 + 30 s, 2 submits in 100 s = 72 an hour.
	wantFigures("total", wt.Total, sec(280), 5, 1, 2, 1, 5/(280.0/3600))
	if len(wt.Categories) != 2 || wt.Categories[0].Category != "desk" || wt.Categories[1].Category != "news" {
		t.Fatalf("categories %+v, want desk and news", wt.Categories)
	}
	desk, news := wt.Categories[0], wt.Categories[1]
	wantFigures("desk", desk.WorkingFigures, sec(180), 3, 0, 2, 1, 60)
	wantFigures("news", news.WorkingFigures, sec(100), 2, 1, 0, 0, 72)
	if r, ok := desk.SendBackRate(); !ok || r != 0.5 {
		t.Errorf("desk send-back rate %v %v, want 0.5", r, ok)
	}
	if _, ok := news.SendBackRate(); ok {
		t.Errorf("news has a send-back rate with nothing reviewed")
	}
	if want := []tasks.StageWorkingTime{{Stage: 0, StageName: "edit", Submitted: 3, Median: sec(60)}}; len(desk.Stages) != 1 || desk.Stages[0] != want[0] {
		t.Errorf("desk stages %+v, want %+v", desk.Stages, want)
	}
	if want := (tasks.StageWorkingTime{Stage: 0, Submitted: 2, Median: sec(40)}); len(news.Stages) != 1 || news.Stages[0] != want {
		t.Errorf("news stages %+v, want %+v", news.Stages, want)
	}
	if d := wt.Daily[13]; d.Active != sec(260) || d.Submitted != 5 {
		t.Errorf("today %+v, want 260s and 5 submits", d)
	}
	if d := wt.Daily[12]; d.Active != sec(20) || d.Submitted != 0 {
		t.Errorf("yesterday %+v, want 20s and no submit", d)
	}

	// bob reviewed: stage 1, medians of 10 and 20 s.
	if len(wb.Categories) != 1 || len(wb.Categories[0].Stages) != 1 ||
		wb.Categories[0].Stages[0] != (tasks.StageWorkingTime{Stage: 1, StageName: "review", Submitted: 2, Median: sec(15)}) {
		t.Errorf("bob %+v, want a review median of 15s over 2", wb.Categories)
	}
	// One day: C, yesterday's, is out.
	if w1.Total.Active != sec(260) || w1.Total.Released != 0 || len(w1.Daily) != 1 {
		t.Errorf("one day: %+v, want 260s, no release", w1.Total)
	}
}

// recordWorkingTimes records ann's and bob's claims of TestWorkingTimeFigures
// and reads their figures: ann's over 14 days, bob's and ann's over one.
func recordWorkingTimes(t *testing.T, b *bundle) (wt, wb, w1 *tasks.WorkingTime) {
	t.Helper()
	ann := b.editor(t, "ann", "desk", "news")
	bob := b.editor(t, "bob", "desk")
	ids := b.insert(t, tasks.NewTask{Category: "desk", Title: "A"}, tasks.NewTask{Category: "desk", Title: "B"},
		tasks.NewTask{Category: "news", Title: "C"}, tasks.NewTask{Category: "news", Title: "D"}, tasks.NewTask{Category: "news", Title: "E"})
	a, bt, c, d, e := ids[0], ids[1], ids[2], ids[3], ids[4]

	submit := func(id int64, ed *tasks.Editor, decision string, reported time.Duration) *tasks.Claim {
		t.Helper()
		cl := b.claim(t, id, ed.Holder(), ed.ID, time.Minute)
		if _, err := b.submit(t, cl, ed, decision, "n"); err != nil {
			t.Fatal(err)
		}
		b.record(t, cl, ed, tasks.OutcomeSubmitted, reported)
		return cl
	}
	submit(a, ann, "", 60*time.Second)
	submit(a, bob, tasks.DecisionSendBack, 10*time.Second)
	submit(a, ann, "", 30*time.Second)
	submit(a, bob, tasks.DecisionApprove, 20*time.Second)
	submit(bt, ann, "", 90*time.Second)

	cl := b.claim(t, c, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: c, Fence: cl.Fence, Holder: ann.Holder()}); err != nil {
		t.Fatal(err)
	}
	b.record(t, cl, ann, tasks.OutcomeReleased, 20*time.Second)
	// C ended yesterday.
	b.exec(t, "UPDATE claim_time SET ended_at = ended_at - INTERVAL 1 DAY WHERE task_id = ?", c)

	// D: 10 hours reported for a claim of 50 seconds: 50 seconds kept.
	cl = b.claim(t, d, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.submit(t, cl, ann, "", ""); err != nil {
		t.Fatal(err)
	}
	b.spanClaim(t, d, cl.Fence, 50*time.Second)
	if got, err := b.store.RecordClaimTime(b.ctx, tasks.ClaimTimeParams{TaskID: d, Fence: cl.Fence, EditorID: ann.ID,
		Outcome: tasks.OutcomeSubmitted, Reported: 10 * time.Hour}); err != nil {
		t.Fatal(err)
	} else if got == nil || got.Active != 50*time.Second || got.Category == "" {
		t.Errorf("D recorded %+v, want 50 s kept and its category", got)
	}
	// E: 100 seconds reported in a claim of 200, with one heartbeat counted
	// every 10 seconds: 30 seconds kept.
	cl = b.claim(t, e, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.submit(t, cl, ann, "", ""); err != nil {
		t.Fatal(err)
	}
	b.spanClaim(t, e, cl.Fence, 200*time.Second)
	p := tasks.ClaimTimeParams{TaskID: e, Fence: cl.Fence, EditorID: ann.ID, Outcome: tasks.OutcomeSubmitted,
		Reported: 100 * time.Second, Beats: 1, Bound: tasks.ActiveBound(1, 10*time.Second)}
	if got, err := b.store.RecordClaimTime(b.ctx, p); err != nil {
		t.Fatal(err)
	} else if got == nil || got.Active != 30*time.Second {
		t.Errorf("E recorded %+v, want 30 s kept", got)
	}
	var kept struct {
		Active   int64 `db:"active_ms"`
		Reported int64 `db:"reported_ms"`
		Beats    *int  `db:"beats"`
	}
	if err := b.db.GetContext(b.ctx, &kept, "SELECT active_ms, reported_ms, beats FROM claim_time WHERE task_id = ?", e); err != nil {
		t.Fatal(err)
	}
	if kept.Active != 30000 || kept.Reported != 100000 || kept.Beats == nil || *kept.Beats != 1 {
		t.Errorf("E kept %+v, want 30000 of 100000 reported, 1 beat", kept)
	}
	// A second record of a claim changes nothing; another editor's claim is
	// not found.
	p.Reported = time.Second
	if got, err := b.store.RecordClaimTime(b.ctx, p); err != nil || got != nil {
		t.Errorf("second record: %+v, %v; want nothing kept, no error", got, err)
	}
	p.EditorID = bob.ID
	if _, err := b.store.RecordClaimTime(b.ctx, p); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("record of another editor's claim: %v, want ErrNotFound", err)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM claim_time WHERE task_id = ? AND active_ms = 30000", e); n != 1 {
		t.Errorf("E has %d rows of 30000 ms after the refused records, want 1", n)
	}

	wt, err := b.store.WorkingTime(b.ctx, ann.ID, 14)
	if err != nil {
		t.Fatal(err)
	}
	// bob reviewed: stage 1.
	wb, err = b.store.WorkingTime(b.ctx, bob.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	w1, err = b.store.WorkingTime(b.ctx, ann.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, days := range []int{0, -1, tasks.WorkingTimeDaysMax + 1} {
		if _, err := b.store.WorkingTime(b.ctx, ann.ID, days); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("days %d: %v, want ErrInvalid", days, err)
		}
	}
	return wt, wb, w1
}

// TestWorkingTimePlans checks with EXPLAIN that recording a claim's time reads
// the task's events and rows by key, and that the figures read one range of
// claim_time_editor and each next result by primary key: no full scan, with
// other editors' rows and other tasks' events around.
func TestWorkingTimePlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ann", "news")
	nts := make([]tasks.NewTask, 200)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: "t"}
	}
	ids := b.insert(t, nts...)
	b.exec(t, "INSERT INTO task_events (task_id, kind, fence, editor_id) SELECT id, 'claimed', 1, id % 7 + 1 FROM tasks")
	b.exec(t, "INSERT INTO task_events (task_id, kind, fence, editor_id) SELECT id, 'submitted', 1, id % 7 + 1 FROM tasks")
	b.exec(t, `INSERT INTO claim_time (task_id, fence, editor_id, category, outcome, claimed_at, ended_at, active_ms, reported_ms)
		SELECT id, 1, id % 7 + 1, 'news', 'submitted', NOW(3) - INTERVAL id MINUTE, NOW(3) - INTERVAL id MINUTE, 1000, 1000 FROM tasks`)
	b.exec(t, "ANALYZE TABLE claim_time, task_events")
	plan := b.explain(t, store.RecordClaimTimeSQL, "submitted", 1, 1, 1, nil, "submitted", "submitted", ids[5], 1, ed.ID)
	t.Logf("record claim time:\n%s", formatPlan(plan))
	noFullScans(t, "record claim time", plan)
	plan = b.explain(t, store.WorkingTimeSQL, ed.ID, time.Now().Add(-24*time.Hour))
	t.Logf("working time:\n%s", formatPlan(plan))
	noFullScans(t, "working time", plan)
	for _, r := range plan {
		if r.Table == "ct" && r.Key != "claim_time_editor" {
			t.Errorf("claim_time read with key %q, want claim_time_editor:\n%s", r.Key, formatPlan(plan))
		}
	}
}
