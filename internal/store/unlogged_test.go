package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// workerClaim claims ids for holder with one ClaimBatch under ctx, whose span
// (spanCtx's, trace id tid) the claims' TraceContext names, as a worker's
// dispatcher does.
func (b *bundle) workerClaim(t *testing.T, ctx context.Context, tid, holder string, ids ...int64) []*tasks.Claim {
	t.Helper()
	ps := b.claimParams(t, ids...)
	for i := range ps {
		ps[i].Holder, ps[i].Workflow = holder, true
		if tid != "" {
			ps[i].TraceContext = "00-" + tid + "-" + strings.Repeat("0", 14) + "01-01"
		}
	}
	res, err := b.store.ClaimBatch(ctx, ps)
	if err != nil {
		t.Fatalf("claim batch: %v", err)
	}
	out := make([]*tasks.Claim, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("claim batch member %d: %v", i, r.Err)
		}
		out[i] = r.Claim
	}
	return out
}

// workerComplete ends the claims with one Complete under ctx: a result for each
// with ok set, else a failure (retried after no backoff).
func (b *bundle) workerComplete(t *testing.T, ctx context.Context, cs []*tasks.Claim, ok ...bool) {
	t.Helper()
	os := make([]tasks.Outcome, len(cs))
	for i, c := range cs {
		os[i] = tasks.Outcome{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder}
		if ok[i] {
			os[i].Result = rawJSON(fmt.Sprintf(`{"fence":%d}`, c.Fence))
		} else {
			os[i].Err = "boom"
		}
	}
	res, err := b.store.Complete(ctx, os)
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("complete member %d: %v", i, r.Err)
		}
	}
}

// eventRows counts the task_events rows of task id.
func (b *bundle) eventRows(t *testing.T, id int64) int {
	t.Helper()
	return b.count(t, "SELECT COUNT(*) FROM task_events WHERE task_id = ?", id)
}

// wantHistory fails unless the task's history is want, compared by kind,
// fence, holder, editor, detail and trace id, each event at its time when
// want gives one.
func wantHistory(t *testing.T, b *bundle, id int64, want ...tasks.Event) []tasks.Event {
	t.Helper()
	got := b.events(t, id)
	if len(got) != len(want) {
		t.Fatalf("task %d history %v, want %v", id, got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.TaskID != id || g.Kind != w.Kind || g.Fence != w.Fence || g.Holder != w.Holder || g.EditorID != w.EditorID ||
			g.Detail != w.Detail || g.TraceID != w.TraceID || (!w.At.IsZero() && !g.At.Equal(w.At)) {
			t.Fatalf("task %d event %d: %+v, want %+v", id, i, g, w)
		}
	}
	return got
}

// TestWorkerFirstClaimSuccessWritesNoEvents: a worker's job that succeeds on
// its first claim leaves no task_events row, its result row records the
// claim (time, holder, fence, trace ids), and its history, holder and
// webhook are what they were when the events were written.
func TestWorkerFirstClaimSuccessWritesNoEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	ids := b.insert(t, tasks.NewTask{Category: "jobs", Title: "traced"}, tasks.NewTask{Category: "jobs", Title: "untraced"})
	claimCtx, claimTrace := spanCtx(b.ctx, 0xc1, true)
	submitCtx, submitTrace := spanCtx(b.ctx, 0x51, true)
	traced := b.workerClaim(t, claimCtx, claimTrace, "worker:a", ids[0])[0]
	untraced := b.workerClaim(t, b.ctx, "", "worker:b", ids[1])[0]

	// Live: no row, the claim shown from the task's row.
	for _, c := range []*tasks.Claim{traced, untraced} {
		if n := b.eventRows(t, c.Task.ID); n != 0 {
			t.Fatalf("task %d: %d task_events rows after its worker's claim, want none", c.Task.ID, n)
		}
		if h, err := b.store.ClaimHolder(b.ctx, c.Task.ID, c.Fence); err != nil || h != c.Task.Holder {
			t.Fatalf("claim holder of live task %d: %q, %v, want %q", c.Task.ID, h, err, c.Task.Holder)
		}
	}
	wantHistory(t, b, ids[0], tasks.Event{Kind: tasks.EventClaimed, Fence: 1, Holder: "worker:a", TraceID: claimTrace, At: traced.AssignedAt})
	wantHistory(t, b, ids[1], tasks.Event{Kind: tasks.EventClaimed, Fence: 1, Holder: "worker:b", At: untraced.AssignedAt})

	b.workerComplete(t, submitCtx, []*tasks.Claim{traced}, true)
	b.workerComplete(t, b.ctx, []*tasks.Claim{untraced}, true)
	for _, c := range []*tasks.Claim{traced, untraced} {
		id := c.Task.ID
		if n := b.eventRows(t, id); n != 0 {
			t.Fatalf("task %d: %d task_events rows after its first claim succeeded, want none", id, n)
		}
		var r struct {
			Holder    string     `db:"holder"`
			ClaimedAt *time.Time `db:"claimed_at"`
			Submitted time.Time  `db:"submitted_at"`
			Unlogged  bool       `db:"claim_unlogged"`
			DoneAt    time.Time  `db:"done_at"`
		}
		if err := b.db.GetContext(b.ctx, &r, `SELECT r.holder, r.claimed_at, r.submitted_at, t.claim_unlogged, t.done_at
FROM task_results r JOIN tasks t ON t.id = r.task_id WHERE r.task_id = ? AND r.fence = ?`, id, c.Fence); err != nil {
			t.Fatal(err)
		}
		if r.Holder != c.Task.Holder || r.ClaimedAt == nil || !r.ClaimedAt.Equal(c.AssignedAt) || r.Unlogged || !r.Submitted.Equal(r.DoneAt) {
			t.Fatalf("task %d result %+v, want the claim's holder and time %v, submitted when done, the mark cleared", id, r, c.AssignedAt)
		}
		if h, err := b.store.ClaimHolder(b.ctx, id, c.Fence); err != nil || h != c.Task.Holder {
			t.Fatalf("claim holder of done task %d: %q, %v, want %q", id, h, err, c.Task.Holder)
		}
		if _, err := b.store.ClaimHolder(b.ctx, id, c.Fence+1); err == nil {
			t.Fatalf("claim holder of task %d fence %d, which never was: no error", id, c.Fence+1)
		}
	}
	done := b.task(t, ids[0])
	evs := wantHistory(t, b, ids[0],
		tasks.Event{Kind: tasks.EventClaimed, Fence: 1, Holder: "worker:a", TraceID: claimTrace, At: traced.AssignedAt},
		tasks.Event{Kind: tasks.EventSubmitted, Fence: 1, Holder: "worker:a", TraceID: submitTrace, At: *done.DoneAt})
	if evs[0].ID != store.DerivedEventID(1, false) || evs[1].ID != store.DerivedEventID(1, true) {
		t.Fatalf("derived events' ids %d, %d", evs[0].ID, evs[1].ID)
	}
	wantHistory(t, b, ids[1],
		tasks.Event{Kind: tasks.EventClaimed, Fence: 1, Holder: "worker:b", At: untraced.AssignedAt},
		tasks.Event{Kind: tasks.EventSubmitted, Fence: 1, Holder: "worker:b", At: *b.task(t, ids[1]).DoneAt})
	// The webhooks are told as before.
	if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE kind = 'submitted' AND task_id IN (?, ?) AND fence = 1", ids[0], ids[1]); n != 2 {
		t.Fatalf("%d submitted webhook records, want 2", n)
	}
}

// TestWorkerClaimWithAnotherTraceIsLogged: a batch claim whose ctx's span is
// not the one its TraceContext names writes its events at once, each with the
// span's trace id, as before.
func TestWorkerClaimWithAnotherTraceIsLogged(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "jobs", 0)
	ctx, tid := spanCtx(b.ctx, 0xd4, true)
	c := b.workerClaim(t, ctx, "", "worker:a", id)[0]
	if n := b.eventRows(t, id); n != 1 {
		t.Fatalf("%d task_events rows, want the claim's", n)
	}
	b.workerComplete(t, ctx, []*tasks.Claim{c}, true)
	wantHistory(t, b, id,
		tasks.Event{Kind: tasks.EventClaimed, Fence: 1, Holder: "worker:a", TraceID: tid, At: c.AssignedAt},
		tasks.Event{Kind: tasks.EventSubmitted, Fence: 1, Holder: "worker:a", TraceID: tid})
	if n := b.eventRows(t, id) + b.count(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ? AND claimed_at IS NOT NULL", id); n != 2 {
		t.Fatalf("%d events and results standing for events, want the 2 events", n)
	}
}

// TestWorkerClaimEndsWriteItsClaimedEvent: every end of a worker's claim but
// its success writes the 'claimed' event the claim did not, once, at the
// claim's time, with its trace id, before its own event.
func TestWorkerClaimEndsWriteItsClaimedEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ctx, tid := spanCtx(b.ctx, 0xe5, true)
	claimed := func(c *tasks.Claim) tasks.Event {
		return tasks.Event{Kind: tasks.EventClaimed, Fence: c.Fence, Holder: c.Task.Holder, TraceID: tid, At: c.AssignedAt}
	}
	expire := func(id int64) {
		b.exec(t, "UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?", id)
	}
	ends := []struct {
		name string
		end  func(c *tasks.Claim) []tasks.Event // the events after the claimed one
	}{
		{"failed, then succeeded", func(c *tasks.Claim) []tasks.Event {
			b.workerComplete(t, ctx, []*tasks.Claim{c}, false)
			c2 := b.workerClaim(t, ctx, tid, "worker:b", c.Task.ID)[0]
			b.workerComplete(t, ctx, []*tasks.Claim{c2}, true)
			return []tasks.Event{
				{Kind: tasks.EventFailed, Fence: 1, Holder: c.Task.Holder, Detail: "boom", TraceID: tid},
				claimed(c2),
				{Kind: tasks.EventSubmitted, Fence: 2, Holder: "worker:b", TraceID: tid},
			}
		}},
		{"dead", func(c *tasks.Claim) []tasks.Event {
			_, err := b.store.Complete(ctx, []tasks.Outcome{{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Err: "no", Dead: true}})
			if err != nil {
				t.Fatal(err)
			}
			return []tasks.Event{{Kind: tasks.EventDead, Fence: 1, Holder: c.Task.Holder, Detail: "no", TraceID: tid}}
		}},
		{"failed alone", func(c *tasks.Claim) []tasks.Event {
			if _, err := b.store.Fail(ctx, tasks.FailParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Err: "x"}); err != nil {
				t.Fatal(err)
			}
			return []tasks.Event{{Kind: tasks.EventFailed, Fence: 1, Holder: c.Task.Holder, Detail: "x", TraceID: tid}}
		}},
		{"released", func(c *tasks.Claim) []tasks.Event {
			if _, err := b.store.Release(ctx, tasks.ReleaseParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Reason: "shutdown"}); err != nil {
				t.Fatal(err)
			}
			return []tasks.Event{{Kind: tasks.EventReleased, Fence: 1, Holder: c.Task.Holder, Detail: "shutdown", TraceID: tid}}
		}},
		{"force released", func(c *tasks.Claim) []tasks.Event {
			if _, err := b.store.ForceRelease(ctx, c.Task.ID); err != nil {
				t.Fatal(err)
			}
			return []tasks.Event{{Kind: tasks.EventReleased, Fence: 1, Holder: c.Task.Holder, Detail: "forced", TraceID: tid}}
		}},
		{"recycled", func(c *tasks.Claim) []tasks.Event {
			expire(c.Task.ID)
			if _, err := b.store.RecycleExpired(ctx, tasks.RecycleParams{}); err != nil {
				t.Fatal(err)
			}
			return []tasks.Event{{Kind: tasks.EventRecycled, Fence: 1, Holder: c.Task.Holder, Detail: "lease expired", TraceID: tid}}
		}},
		{"taken over", func(c *tasks.Claim) []tasks.Event {
			expire(c.Task.ID)
			task := b.task(t, c.Task.ID)
			c2, err := b.store.Claim(ctx, tasks.ClaimParams{TaskID: task.ID, Fence: task.Fence, Status: task.Status, Holder: "worker:t", Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			return []tasks.Event{
				{Kind: tasks.EventExpired, Fence: 1, Holder: c.Task.Holder, Detail: "taken over by worker:t", TraceID: tid},
				{Kind: tasks.EventClaimed, Fence: 2, Holder: c2.Task.Holder, TraceID: tid},
			}
		}},
	}
	for _, e := range ends {
		t.Run(strings.ReplaceAll(e.name, " ", "_"), func(t *testing.T) { endWritesClaimed(t, b, ctx, tid, e.name, claimed, e.end) })
	}
}

// endWritesClaimed checks one end of TestWorkerClaimEndsWriteItsClaimedEvent.
func endWritesClaimed(t *testing.T, b *bundle, ctx context.Context, tid, name string, claimed func(*tasks.Claim) tasks.Event, end func(*tasks.Claim) []tasks.Event) {
	t.Helper()
	id := b.insert(t, tasks.NewTask{Category: "ends", Title: name})[0]
	c := b.workerClaim(t, ctx, tid, "worker:a", id)[0]
	after := end(c)
	wantHistory(t, b, id, append([]tasks.Event{claimed(c)}, after...)...)
	// Every event but the derived ones of a success is a row.
	rows := len(after) + 1
	if name == "failed, then succeeded" {
		rows = 2
	}
	if n := b.eventRows(t, id); n != rows {
		t.Errorf("%s: %d task_events rows, want %d", name, n, rows)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM tasks WHERE id = ? AND claim_unlogged = 1", id); n != 0 {
		t.Errorf("%s: the claim is still marked as unlogged", name)
	}
	if h, err := b.store.ClaimHolder(b.ctx, id, 1); err != nil || h != "worker:a" {
		t.Errorf("%s: claim holder of fence 1: %q, %v", name, h, err)
	}
}

// TestTaskEventsPagesThroughDerivedEvents: a history with derived events
// between real ones reads the same, page by page, whatever the page's size,
// and each derived event's id is a cursor.
func TestTaskEventsPagesThroughDerivedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ctx, tid := spanCtx(b.ctx, 0xf6, true)
	id := b.insert(t, tasks.NewTask{Category: "staged", Title: "t", Stages: []string{"first", "second"}})[0]
	// Fence 1 succeeds (stage first), fence 2 fails, fence 3 succeeds:
	// derived, real, derived.
	for i, ok := range []bool{true, false, true} {
		c := b.workerClaim(t, ctx, tid, fmt.Sprintf("worker:%d", i), id)[0]
		b.workerComplete(t, ctx, []*tasks.Claim{c}, ok)
	}
	if _, err := b.store.Cancel(b.ctx, tasks.ChangeParams{TaskID: id}); err == nil {
		t.Fatal("cancel of a done task: no error")
	}
	all := b.events(t, id)
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventSubmitted, tasks.EventClaimed, tasks.EventFailed, tasks.EventClaimed, tasks.EventSubmitted}
	if got := kinds(all); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	for i, f := range []int64{1, 1, 2, 2, 3, 3} {
		if all[i].Fence != f {
			t.Fatalf("event %d: fence %d, want %d: %+v", i, all[i].Fence, f, all)
		}
	}
	if n := b.eventRows(t, id); n != 2 {
		t.Fatalf("%d task_events rows, want fence 2's", n)
	}
	for limit := 1; limit <= len(all)+1; limit++ {
		var got []tasks.Event
		before := int64(0)
		for range len(all) + 1 {
			page, err := b.store.TaskEvents(b.ctx, tasks.TaskEventsParams{TaskID: id, Before: before, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Events) == 0 || len(page.Events) > limit {
				t.Fatalf("limit %d: a page of %d events", limit, len(page.Events))
			}
			got = append(slices.Clone(page.Events), got...)
			if !page.More {
				break
			}
			if page.Before != page.Events[0].ID {
				t.Fatalf("limit %d: cursor %d, want the oldest event's id %d", limit, page.Before, page.Events[0].ID)
			}
			before = page.Before
		}
		if !slices.EqualFunc(got, all, func(a, b tasks.Event) bool { return a.ID == b.ID && a.Kind == b.Kind && a.At.Equal(b.At) }) {
			t.Fatalf("limit %d: pages read %v, want %v", limit, got, all)
		}
	}
}
