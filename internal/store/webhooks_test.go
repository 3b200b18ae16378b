package store_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// outboxRow is a webhook_outbox row as the tests compare it.
type outboxRow struct {
	Kind     tasks.WebhookEvent `db:"kind"`
	TaskID   int64              `db:"task_id"`
	Fence    int64              `db:"fence"`
	Holder   string             `db:"holder"`
	EditorID int64              `db:"editor_id"`
	Category string             `db:"category"`
	Cause    tasks.WebhookCause `db:"cause"`
	Detail   string             `db:"detail"`
}

func (b *bundle) outbox(t *testing.T) []outboxRow {
	t.Helper()
	rows := []outboxRow{}
	err := b.db.SelectContext(b.ctx, &rows, `SELECT kind, task_id, fence, COALESCE(holder, '') AS holder,
		COALESCE(editor_id, 0) AS editor_id, category, cause, COALESCE(detail, '') AS detail FROM webhook_outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// lifecycle runs every change that can report a webhook event, and some that
// cannot, and returns the rows each webhook event should have written, in order.
func (b *bundle) lifecycle(t *testing.T) []outboxRow {
	t.Helper()
	ed := b.editor(t, "ed", "wh")
	eh := tasks.EditorHolder(ed.ID)
	ids := b.insert(t,
		tasks.NewTask{Category: "wh", Title: "submit"},
		tasks.NewTask{Category: "wh", Title: "dead", MaxAttempts: 2},
		tasks.NewTask{Category: "wh", Title: "release"},
		tasks.NewTask{Category: "wh", Title: "sweep"},
		tasks.NewTask{Category: "wh", Title: "takeover"},
		tasks.NewTask{Category: "wh", Title: "reclaim"},
	)
	var want []outboxRow
	// submitted, after a heartbeat (no event).
	c := b.claim(t, ids[0], eh, ed.ID, time.Minute)
	if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: ids[0], Fence: c.Fence, Holder: eh, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[0], Fence: c.Fence, Holder: eh, Result: rawJSON(`{"ok":1}`)}); err != nil {
		t.Fatal(err)
	}
	want = append(want, outboxRow{tasks.WebhookSubmitted, ids[0], c.Fence, eh, ed.ID, "wh", tasks.WebhookSubmit, ""})
	// A failure with attempts left reports nothing; the last one reports dead.
	c = b.claim(t, ids[1], "w1", 0, time.Minute)
	if _, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: ids[1], Fence: c.Fence, Holder: "w1", Err: "first"}); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, ids[1], "w1", 0, time.Minute)
	if _, err := b.store.Fail(b.ctx, tasks.FailParams{TaskID: ids[1], Fence: c.Fence, Holder: "w1", Err: "boom"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, outboxRow{tasks.WebhookDead, ids[1], c.Fence, "w1", 0, "wh", tasks.WebhookFail, "boom"})
	// Released three ways: by the holder, by a skip, by an operator.
	c = b.claim(t, ids[2], eh, ed.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[2], Fence: c.Fence, Holder: eh, Reason: "later"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, outboxRow{tasks.WebhookReleased, ids[2], c.Fence, eh, ed.ID, "wh", tasks.WebhookRelease, "later"})
	// A release keeps the task from its editor for a while: another skips it.
	ed2 := b.editor(t, "ed2", "wh")
	eh2 := tasks.EditorHolder(ed2.ID)
	c = b.claim(t, ids[2], eh2, ed2.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[2], Fence: c.Fence, Holder: eh2, Skip: true}); err != nil {
		t.Fatal(err)
	}
	want = append(want, outboxRow{tasks.WebhookReleased, ids[2], c.Fence, eh2, ed2.ID, "wh", tasks.WebhookSkip, ""})
	c = b.claim(t, ids[2], "w2", 0, time.Minute)
	if _, err := b.store.ForceRelease(b.ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	want = append(want, outboxRow{tasks.WebhookReleased, ids[2], c.Fence, "w2", 0, "wh", tasks.WebhookForce, "forced"})
	// Expired three ways: a sweep, a takeover, the same editor's next claim.
	c = b.claim(t, ids[3], "w3", 0, time.Minute)
	b.expireLease(t, ids[3])
	if rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{}); err != nil || len(rs) != 1 {
		t.Fatalf("recycle: %v, %v", rs, err)
	}
	want = append(want, outboxRow{tasks.WebhookExpired, ids[3], c.Fence, "w3", 0, "wh", tasks.WebhookSweep, "lease expired"})
	c = b.claim(t, ids[4], "w4", 0, time.Minute)
	b.expireLease(t, ids[4])
	b.claim(t, ids[4], "w5", 0, time.Minute)
	want = append(want, outboxRow{tasks.WebhookExpired, ids[4], c.Fence, "w4", 0, "wh", tasks.WebhookTakeover, "taken over by w5"})
	c = b.claim(t, ids[5], eh, ed.ID, time.Minute)
	b.expireLease(t, ids[5])
	b.claim(t, ids[3], eh, ed.ID, time.Minute)
	want = append(want, outboxRow{tasks.WebhookExpired, ids[5], c.Fence, eh, ed.ID, "wh", tasks.WebhookReclaim,
		"lease expired; freed for the editor's next claim"})
	return want
}

// TestOutboxRecordsEvents checks that each change writes its webhook event,
// and that changes with no webhook event write none.
func TestOutboxRecordsEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: tasks.WebhookEvents()})
	want := b.lifecycle(t)
	if got := b.outbox(t); !reflect.DeepEqual(got, want) {
		t.Errorf("outbox:\n got %+v\nwant %+v", got, want)
	}
}

// TestOutboxOnlySubscribed checks that only the events the store's config
// names are written, and none without webhooks.
func TestOutboxOnlySubscribed(t *testing.T) {
	t.Parallel()
	for _, evs := range [][]tasks.WebhookEvent{nil, {tasks.WebhookDead}, {tasks.WebhookSubmitted, tasks.WebhookReleased}} {
		b := setup(t, store.Config{WebhookEvents: evs})
		var want []outboxRow
		for _, r := range b.lifecycle(t) {
			for _, e := range evs {
				if r.Kind == e {
					want = append(want, r)
				}
			}
		}
		if got := b.outbox(t); len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("events %v: outbox\n got %+v\nwant %+v", evs, got, want)
		}
	}
}

// TestOutboxSameTransaction checks that the outbox's record is written in the
// transaction of the change: when the record cannot be written (the table is
// gone), the change is rolled back too; and a refused change writes none.
func TestOutboxSameTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: tasks.WebhookEvents()})
	ids := b.insert(t, tasks.NewTask{Category: "tx", Title: "a"}, tasks.NewTask{Category: "tx", Title: "b"})
	c0 := b.claim(t, ids[0], "w", 0, time.Minute)
	c1 := b.claim(t, ids[1], "w", 0, time.Minute)
	_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[0], Fence: c0.Fence + 1, Holder: "w", Result: rawJSON(`1`)})
	wantErr(t, "stale submit", err, tasks.ErrStale)
	if n := len(b.outbox(t)); n != 0 {
		t.Fatalf("a stale submit wrote %d outbox records", n)
	}

	b.exec(t, `DROP TABLE webhook_deliveries`)
	b.exec(t, `DROP TABLE webhook_outbox`)
	before0, before1 := b.snapshot(t, ids[0]), b.snapshot(t, ids[1])
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[0], Fence: c0.Fence, Holder: "w", Result: rawJSON(`1`)}); err == nil {
		t.Error("submit without an outbox table: no error")
	}
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[1], Fence: c1.Fence, Holder: "w"}); err == nil {
		t.Error("release without an outbox table: no error")
	}
	b.unchanged(t, ids[0], before0)
	b.unchanged(t, ids[1], before1)
	if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, ids[0]); n != 0 {
		t.Errorf("the failed submit left %d results", n)
	}
}

// TestDeliveries walks deliveries through fan-out, failed and stale attempts,
// success, and running out of attempts, and checks the backlog and the log.
func TestDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: tasks.WebhookEvents()})
	b.lifecycle(t) // 1 submitted, 1 dead, 3 released, 3 expired
	subs := map[tasks.WebhookEvent][]string{
		tasks.WebhookSubmitted: {"a", "b"},
		tasks.WebhookDead:      {"a"},
		tasks.WebhookExpired:   {"b"},
	}
	backlog := func() *tasks.WebhookBacklog {
		t.Helper()
		bl, err := b.store.WebhookBacklog(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return bl
	}
	if bl := backlog(); bl.New != 8 || bl.PendingTotal() != 8 {
		t.Errorf("backlog before fan-out: %+v", bl)
	}
	for _, limit := range []int{3, 3, 3} {
		if _, err := b.store.FanOut(b.ctx, tasks.FanOutParams{Subscribers: subs, Limit: limit}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.store.FanOut(b.ctx, tasks.FanOutParams{Subscribers: subs, Limit: 3}); err != nil || n != 0 {
		t.Fatalf("fan-out of nothing: %d, %v", n, err)
	}
	bl := backlog()
	if bl.New != 0 || bl.Pending["a"] != 2 || bl.Pending["b"] != 4 || bl.PendingTotal() != 6 {
		t.Fatalf("backlog after fan-out: %+v", bl)
	}

	due := func(hook string) []tasks.Delivery {
		t.Helper()
		ds, err := b.store.DueDeliveries(b.ctx, tasks.DueDeliveriesParams{Webhook: hook, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	as := due("a")
	if len(as) != 2 || as[0].Event.Kind != tasks.WebhookSubmitted || string(as[0].Event.Result) != `{"ok": 1}` && string(as[0].Event.Result) != `{"ok":1}` ||
		as[1].Event.Kind != tasks.WebhookDead || as[1].Event.Result != nil || as[1].Event.Detail != "boom" {
		t.Fatalf("due to a: %+v", as)
	}
	sub, dead := as[0], as[1]

	// A failed attempt: pending, not due for an hour, logged.
	st, err := b.store.RecordAttempt(b.ctx, tasks.AttemptParams{EventID: sub.Event.ID, Webhook: "a", Attempt: 1, StatusCode: 500,
		Err: "status 500", Duration: 12 * time.Millisecond, RetryIn: time.Hour, MaxAttempts: 3, MaxAge: time.Hour})
	if err != nil || st != tasks.DeliveryPending {
		t.Fatalf("failed attempt: %v, %v", st, err)
	}
	// The same attempt again (another deliverer): logged, not counted.
	_, err = b.store.RecordAttempt(b.ctx, tasks.AttemptParams{EventID: sub.Event.ID, Webhook: "a", Attempt: 1, Err: "refused",
		RetryIn: 0, MaxAttempts: 3, MaxAge: time.Hour})
	wantErr(t, "second attempt 1", err, tasks.ErrStale)
	if ds := due("a"); len(ds) != 1 || ds[0].Event.ID != dead.Event.ID {
		t.Fatalf("due to a after a failure: %+v", ds)
	}
	log, err := b.store.DeliveryLog(b.ctx, sub.Event.ID, "a")
	if err != nil || len(log) != 2 || log[0].StatusCode != 500 || log[0].DurationMS != 12 || log[1].StatusCode != 0 || log[1].Error != "refused" {
		t.Fatalf("delivery log: %+v, %v", log, err)
	}

	// Delivered at once.
	st, err = b.store.RecordAttempt(b.ctx, tasks.AttemptParams{EventID: dead.Event.ID, Webhook: "a", Attempt: 1, StatusCode: 204,
		Delivered: true, MaxAttempts: 3, MaxAge: time.Hour})
	if err != nil || st != tasks.DeliveryDelivered {
		t.Fatalf("delivered: %v, %v", st, err)
	}
	// Out of attempts: failed, kept.
	b.exec(t, `UPDATE webhook_deliveries SET next_attempt_at = NOW(3) WHERE event_id = ?`, sub.Event.ID)
	for attempt := 2; attempt <= 3; attempt++ {
		st, err = b.store.RecordAttempt(b.ctx, tasks.AttemptParams{EventID: sub.Event.ID, Webhook: "a", Attempt: attempt,
			Err: "connection refused", MaxAttempts: 3, MaxAge: time.Hour})
		if want := map[bool]tasks.DeliveryStatus{false: tasks.DeliveryPending, true: tasks.DeliveryFailed}[attempt == 3]; err != nil || st != want {
			t.Fatalf("attempt %d: %v, %v; want %v", attempt, st, err, want)
		}
	}
	// Out of time: failed at the first failure.
	bs := due("b")
	b.exec(t, `UPDATE webhook_deliveries SET created_at = NOW(3) - INTERVAL 2 HOUR WHERE event_id = ? AND webhook = 'b'`, bs[0].Event.ID)
	st, err = b.store.RecordAttempt(b.ctx, tasks.AttemptParams{EventID: bs[0].Event.ID, Webhook: "b", Attempt: 1,
		Err: "timeout", MaxAttempts: 100, MaxAge: time.Hour})
	if err != nil || st != tasks.DeliveryFailed {
		t.Fatalf("too old: %v, %v", st, err)
	}
	bl = backlog()
	if bl.Pending["a"] != 0 || bl.Failed["a"] != 1 || bl.Pending["b"] != 3 || bl.Failed["b"] != 1 || bl.PendingTotal() != 3 {
		t.Errorf("final backlog: %+v", bl)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE status <> 'pending' AND done_at IS NULL`); n != 0 {
		t.Errorf("%d finished deliveries have no done_at", n)
	}
}

// TestWebhookQueryPlans checks with EXPLAIN that the deliverer's reads use
// their indexes, so that their cost follows the backlog, not the history of
// delivered events.
func TestWebhookQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 20000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "c", Title: "t"}
	}
	b.insert(t, nts...)
	b.exec(t, `INSERT INTO webhook_outbox (kind, task_id, fence, category, cause, fanned_out)
		SELECT 'submitted', id, 1, category, 'submit', id % 100 <> 0 FROM tasks`)
	b.exec(t, `INSERT INTO task_results (task_id, fence, holder, result) SELECT task_id, fence, 'w', '{}' FROM webhook_outbox`)
	b.exec(t, `INSERT INTO webhook_deliveries (event_id, webhook, status)
		SELECT id, 'a', IF(id % 50 = 1, 'pending', IF(id % 97 = 0, 'failed', 'delivered')) FROM webhook_outbox WHERE fanned_out = 1`)
	b.exec(t, `INSERT INTO webhook_deliveries (event_id, webhook, status)
		SELECT id, 'b', IF(id % 40 = 1, 'pending', 'delivered') FROM webhook_outbox WHERE fanned_out = 1`)
	b.exec(t, `ANALYZE TABLE webhook_outbox, webhook_deliveries, task_results`)

	for _, c := range []struct {
		name, query string
		keys        map[string]string // table -> key
		args        []any
	}{
		{"FanOut (lock new events)", store.FanOutLockSQL, map[string]string{"webhook_outbox": "webhook_outbox_new"}, []any{100}},
		{"DueDeliveries", store.DueDeliveriesSQL, map[string]string{"d": "webhook_deliveries_due", "o": "PRIMARY", "r": "PRIMARY", "t": "PRIMARY"}, []any{"a", 100}},
		{"WebhookBacklog (new)", store.BacklogNewSQL, map[string]string{"webhook_outbox": "webhook_outbox_new"}, nil},
		{"WebhookBacklog (deliveries)", store.BacklogSQL, map[string]string{"webhook_deliveries": "webhook_deliveries_status"}, nil},
	} {
		plan := b.explain(t, c.query, c.args...)
		t.Logf("%s:\n%s\n%s", c.name, c.query, formatPlan(plan))
		noFullScans(t, c.name, plan)
		if len(plan) != len(c.keys) {
			t.Errorf("%s: want %d tables read:\n%s", c.name, len(c.keys), formatPlan(plan))
		}
		for _, r := range plan {
			if want, ok := c.keys[r.Table]; !ok || r.Key != want {
				t.Errorf("%s: %s read with key %q, want %q:\n%s", c.name, r.Table, r.Key, want, formatPlan(plan))
			}
			if r.Table == "d" && strings.Contains(r.Extra, "filesort") {
				t.Errorf("%s: due deliveries sorted instead of read in index order:\n%s", c.name, formatPlan(plan))
			}
		}
	}
}

// TestDueDeliveriesCarryTheWorkflow checks that each submit of a task with
// stages is its own event, with the stage it was made at, its decision and
// notes, and the stage it moved the task to, read from the event's own row
// even once the task has moved on; that a grouped task's events name the
// group; and that other tasks' events carry none of it.
func TestDueDeliveriesCarryTheWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: tasks.WebhookEvents(), Workflows: map[string]tasks.Workflow{
		"desk":   {Stages: []string{"edit", "review"}, SendBackHold: time.Hour},
		"labels": {Overlap: 2},
	}})
	ann, bob := b.editor(t, "ann", "desk", "labels", "news"), b.editor(t, "bob", "desk")
	ids := b.insert(t,
		tasks.NewTask{Category: "desk", Title: "story"},
		tasks.NewTask{Category: "labels", Title: "photo"},
		tasks.NewTask{Category: "news", Title: "plain"},
	)
	story, photo, plain := ids[0], ids[1], ids[2]

	// edit, review: send back, edit again, review: approve.
	steps := []struct {
		ed                *tasks.Editor
		decision, notes   string
		stage, nextStage  string
		wantStatusPending bool
	}{
		{ann, "", "", "edit", "review", true},
		{bob, tasks.DecisionSendBack, "fix the lede", "review", "edit", true},
		{ann, tasks.DecisionApprove, "", "edit", "review", true},
		{bob, tasks.DecisionApprove, "fine", "review", "", false},
	}
	fences := make([]int64, len(steps))
	for i, s := range steps {
		c := b.claim(t, story, s.ed.Holder(), s.ed.ID, time.Minute)
		fences[i] = c.Fence
		ended, err := b.submit(t, c, s.ed, s.decision, s.notes)
		if err != nil {
			t.Fatalf("step %d: submit at %s: %v", i, s.stage, err)
		}
		if (ended.Status == tasks.StatusPending) != s.wantStatusPending || ended.Stage != s.nextStage {
			t.Fatalf("step %d: ended %+v, want stage %q", i, ended, s.nextStage)
		}
	}
	c := b.claim(t, photo, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.submit(t, c, ann, "yes", ""); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, plain, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: plain, Fence: c.Fence, Holder: ann.Holder(), Result: rawJSON(`1`)}); err != nil {
		t.Fatal(err)
	}
	// A release of the group's task: the group, but no stage.
	other := b.insert(t, tasks.NewTask{Category: "labels", Title: "photo 2"})[0]
	c = b.claim(t, other, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: other, Fence: c.Fence, Holder: ann.Holder()}); err != nil {
		t.Fatal(err)
	}

	subs := map[tasks.WebhookEvent][]string{tasks.WebhookSubmitted: {"a"}, tasks.WebhookReleased: {"a"}}
	if _, err := b.store.FanOut(b.ctx, tasks.FanOutParams{Subscribers: subs, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	ds, err := b.store.DueDeliveries(b.ctx, tasks.DueDeliveriesParams{Webhook: "a", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(steps)+3 {
		t.Fatalf("%d deliveries, want %d: %+v", len(ds), len(steps)+3, ds)
	}
	for i, s := range steps {
		ev := ds[i].Event
		if ev.TaskID != story || ev.Kind != tasks.WebhookSubmitted || ev.Fence != fences[i] || ev.EditorID != s.ed.ID ||
			ev.StageName != s.stage || ev.Decision != s.decision || ev.Notes != s.notes || ev.NextStage != s.nextStage ||
			ev.GroupID != 0 || ev.Overlap != 0 || string(ev.Result) != `{"by": "`+s.ed.Name+`"}` && string(ev.Result) != `{"by":"`+s.ed.Name+`"}` {
			t.Errorf("step %d: event %+v, want stage %q decision %q notes %q next %q", i, ev, s.stage, s.decision, s.notes, s.nextStage)
		}
	}
	if ev := ds[len(steps)].Event; ev.TaskID != photo || ev.GroupID != photo || ev.Overlap != 2 || ev.Decision != "yes" ||
		ev.StageName != "" || ev.NextStage != "" {
		t.Errorf("grouped task's event: %+v, want group %d of 2, decision yes, no stage", ev, photo)
	}
	if ev := ds[len(steps)+1].Event; ev.TaskID != plain || ev.GroupID != 0 || ev.Overlap != 0 || ev.Decision != "" ||
		ev.Notes != "" || ev.StageName != "" || ev.NextStage != "" || string(ev.Result) != "1" {
		t.Errorf("plain task's event: %+v, want no workflow fields", ev)
	}
	if ev := ds[len(steps)+2].Event; ev.TaskID != other || ev.Kind != tasks.WebhookReleased || ev.GroupID != other || ev.Overlap != 2 ||
		ev.StageName != "" || ev.Decision != "" || ev.Result != nil {
		t.Errorf("grouped task's release: %+v, want group %d of 2, no stage", ev, other)
	}
}
