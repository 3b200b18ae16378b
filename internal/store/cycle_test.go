package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestGroupCyclesAnswerEachOnItsOwn sends, in one group, cycles the store
// accepts and cycles it refuses each for a reason of its own: a disabled
// editor, a skipped task, a paused category, a stale submit with its next
// claim, a next claim whose task moved on, a stale claim, a heartbeat at the
// maximum hold, a stale heartbeat. Each gets its own
// answer, nothing of a refused part is written, every accepted part is, with
// its events, result and outbox record, and the group is not split.
func TestGroupCyclesAnswerEachOnItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	g := newGate(t, b)
	nextA := b.insert(t, tasks.NewTask{Category: "c", Title: "next", Payload: rawJSON(`{"article":7}`)})[0]
	ed := func(name string) *tasks.Editor { return b.editor(t, name, "c", "paused") }
	holding, submitting, disabled, skipping, pausing, staleSubmit, lateNext, staleClaim :=
		ed("holding"), ed("submitting"), ed("disabled"), ed("skipping"), ed("pausing"), ed("staleSubmit"), ed("lateNext"), ed("staleClaim")
	task := func() int64 { return b.insertOne(t, "c", 0) }
	hold := func(e *tasks.Editor) *tasks.Claim { return b.claim(t, task(), e.Holder(), e.ID, time.Minute) }
	heldA, heldB, heldC, heldD := hold(holding), hold(submitting), hold(staleSubmit), hold(lateNext)
	beating, atLimit, staleBeat := ed("beating"), ed("atLimit"), ed("staleBeat")
	heldE, heldF, heldG := hold(beating), hold(atLimit), hold(staleBeat)
	// heldF's lease reaches the maximum hold already.
	b.exec(t, `UPDATE tasks SET assigned_at = lease_expires_at - INTERVAL ? MICROSECOND WHERE id = ?`,
		store.Config{}.WithDefaults().MaxHold.Microseconds(), heldF.Task.ID)
	workerTask, skipped, pausedTask, nextC, nextD, staleTask := task(), task(), b.insertOne(t, "paused", 0), task(), task(), task()
	disabledTask := task()
	if _, err := b.store.DisableEditor(b.ctx, disabled.ID); err != nil {
		t.Fatal(err)
	}
	b.exec(t, "INSERT INTO task_skips (task_id, editor_id, `until`) VALUES (?, ?, NOW(3) + INTERVAL 1 HOUR)", skipped, skipping.ID)
	if _, _, err := b.store.PauseCategory(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	// nextD moves on before the group: another holder claims it.
	b.claim(t, nextD, "w-other", 0, time.Minute)
	b.claim(t, staleTask, "w-other", 0, time.Minute)
	unchanged := map[int64]snapshot{}
	for _, id := range []int64{disabledTask, skipped, pausedTask, heldC.Task.ID, nextC, nextD, staleTask, heldF.Task.ID, heldG.Task.ID} {
		unchanged[id] = b.snapshot(t, id)
	}

	submit := func(c *tasks.Claim, fence int64) tasks.SubmitParams {
		return tasks.SubmitParams{TaskID: c.Task.ID, Fence: fence, Holder: c.Task.Holder, Result: rawJSON(`{"by":"` + c.Task.Holder + `"}`)}
	}
	claim := func(id int64, holder string, editorID int64) tasks.ClaimParams {
		return tasks.ClaimParams{TaskID: id, Fence: 0, Status: tasks.StatusPending, Holder: holder, EditorID: editorID, Lease: time.Minute}
	}
	beat := func(c *tasks.Claim, fence int64) tasks.HeartbeatParams {
		return tasks.HeartbeatParams{TaskID: c.Task.ID, Fence: fence, Holder: c.Task.Holder, Lease: 2 * time.Minute}
	}
	first := b.insertOne(t, "c", 0)
	var (
		beatUntil                                             time.Time
		beatErr, atLimitErr, staleBeatErr                     error
		wg                                                    sync.WaitGroup
		firstErr, workerErr, disabledErr, skipErr, pausedErr  error
		submitErr, staleSubmitErr, lateNextErr, staleClaimErr error
		handA, handD                                          *tasks.Handover
		handAErr                                              error
		workerClaim                                           *tasks.Claim
	)
	g.arm()
	wg.Go(func() { _, firstErr = b.store.Claim(b.ctx, claim(first, "w-first", 0)) })
	g.waitHeld(t)
	writes := []func(){
		func() {
			handA, handAErr = b.store.SubmitAndClaim(b.ctx, submit(heldA, heldA.Fence), claim(nextA, holding.Holder(), holding.ID))
		},
		func() { workerClaim, workerErr = b.store.Claim(b.ctx, claim(workerTask, "w1", 0)) },
		func() { _, disabledErr = b.store.Claim(b.ctx, claim(disabledTask, disabled.Holder(), disabled.ID)) },
		func() { _, skipErr = b.store.Claim(b.ctx, claim(skipped, skipping.Holder(), skipping.ID)) },
		func() { _, pausedErr = b.store.Claim(b.ctx, claim(pausedTask, pausing.Holder(), pausing.ID)) },
		func() { _, submitErr = b.store.Submit(b.ctx, submit(heldB, heldB.Fence)) },
		func() {
			_, staleSubmitErr = b.store.SubmitAndClaim(b.ctx, submit(heldC, heldC.Fence-1), claim(nextC, staleSubmit.Holder(), staleSubmit.ID))
		},
		func() {
			handD, lateNextErr = b.store.SubmitAndClaim(b.ctx, submit(heldD, heldD.Fence), claim(nextD, lateNext.Holder(), lateNext.ID))
		},
		func() { _, staleClaimErr = b.store.Claim(b.ctx, claim(staleTask, staleClaim.Holder(), staleClaim.ID)) },
		func() { beatUntil, beatErr = b.store.Heartbeat(b.ctx, beat(heldE, heldE.Fence)) },
		func() { _, atLimitErr = b.store.Heartbeat(b.ctx, beat(heldF, heldF.Fence)) },
		func() { _, staleBeatErr = b.store.Heartbeat(b.ctx, beat(heldG, heldG.Fence+1)) },
	}
	for i, w := range writes {
		wg.Go(w)
		waitQueued(t, b.store, i+1)
	}
	g.release()
	wg.Wait()

	if firstErr != nil {
		t.Errorf("first claim: %v", firstErr)
	}
	if sizes := g.groupSizes(); len(sizes) != 2 || sizes[1] != len(writes) {
		t.Errorf("group sizes = %v, want [1 %d] (refusals must not split a group)", sizes, len(writes))
	}

	// Accepted.
	if handAErr != nil || handA.Claim == nil || handA.Claim.Task.ID != nextA || handA.Claim.Fence != 1 || handA.Ended == nil {
		t.Errorf("submit and claim: %+v, %v", handA, handAErr)
	}
	if handAErr == nil && handA.Claim != nil {
		if got, want := string(handA.Claim.Task.Payload), string(b.task(t, nextA).Payload); got != want || got == "null" {
			t.Errorf("claimed task's payload = %s, want %s", got, want)
		}
	}
	if workerErr != nil || workerClaim.Task.ID != workerTask || workerClaim.Task.Holder != "w1" {
		t.Errorf("worker's claim: %+v, %v", workerClaim, workerErr)
	}
	if submitErr != nil {
		t.Errorf("submit: %v", submitErr)
	}
	for _, c := range []*tasks.Claim{heldA, heldB, heldD} {
		if got := b.task(t, c.Task.ID); got.Status != tasks.StatusDone || got.EditorID != 0 {
			t.Errorf("submitted task %d: status %s, editor %d; want done, no editor", c.Task.ID, got.Status, got.EditorID)
		}
		if got := kinds(b.events(t, c.Task.ID)); len(got) != 2 || got[1] != tasks.EventSubmitted {
			t.Errorf("submitted task %d's events = %v, want claimed, submitted", c.Task.ID, got)
		}
		if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ? AND fence = ? AND result = ?`, c.Task.ID, c.Fence, `{"by":"`+c.Task.Holder+`"}`); n != 1 {
			t.Errorf("task %d: %d results with its own value, want 1", c.Task.ID, n)
		}
		if n := b.count(t, `SELECT COUNT(*) FROM webhook_outbox WHERE task_id = ? AND fence = ? AND kind = 'submitted'`, c.Task.ID, c.Fence); n != 1 {
			t.Errorf("task %d: %d outbox records, want 1", c.Task.ID, n)
		}
	}
	for id, holder := range map[int64]string{nextA: holding.Holder(), workerTask: "w1"} {
		evs := b.events(t, id)
		if len(evs) != 1 || evs[0].Kind != tasks.EventClaimed || evs[0].Fence != 1 || evs[0].Holder != holder {
			t.Errorf("claimed task %d's events = %+v, want one claimed event at fence 1 by %s", id, evs, holder)
		}
	}

	if beatErr != nil || !beatUntil.After(heldE.LeaseExpiresAt) {
		t.Errorf("heartbeat: lease until %v, %v; want past %v", beatUntil, beatErr, heldE.LeaseExpiresAt)
	} else if got := b.task(t, heldE.Task.ID).LeaseExpiresAt; got == nil || !got.Equal(beatUntil) {
		t.Errorf("extended task's lease = %v, want %v", got, beatUntil)
	}
	if got := kinds(b.events(t, heldE.Task.ID)); len(got) != 1 || got[0] != tasks.EventClaimed {
		t.Errorf("extended task's events = %v, want claimed only (a heartbeat is no event)", got)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM editor_seen WHERE last_seen_at IS NOT NULL AND editor_id = (SELECT editor_id FROM tasks WHERE id = ?)", heldE.Task.ID); n != 1 {
		t.Errorf("heartbeating editor's last-seen rows = %d, want 1", n)
	}

	// Refused, each for its own reason, with nothing written.
	wantErr(t, "heartbeat at the maximum hold", atLimitErr, tasks.ErrHoldLimit)
	wantErr(t, "heartbeat with a wrong fence", staleBeatErr, tasks.ErrStale)
	wantErr(t, "disabled editor's claim", disabledErr, tasks.ErrEditorDisabled)
	wantErr(t, "claim of a skipped task", skipErr, tasks.ErrSkipped)
	wantErr(t, "claim in a paused category", pausedErr, tasks.ErrPaused)
	wantErr(t, "stale submit with its next claim", staleSubmitErr, tasks.ErrStale)
	wantErr(t, "claim of a task claimed since", staleClaimErr, tasks.ErrStale)
	if lateNextErr != nil || handD.Ended == nil || handD.Claim != nil {
		t.Errorf("submit whose next task moved on: %+v, %v; want the submit, no claim", handD, lateNextErr)
	} else {
		wantErr(t, "next claim of a task claimed since", handD.Refused, tasks.ErrStale)
	}
	for id, before := range unchanged {
		b.unchanged(t, id, before)
	}
	for _, e := range []*tasks.Editor{lateNext, staleClaim, skipping, pausing, disabled} {
		if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, e.ID); n != 0 {
			t.Errorf("editor %s: %d tasks name it, want none", e.Name, n)
		}
	}
}

// TestGroupCyclesOfOneEditorGoOneAfterTheOther sends an editor's submit with
// its next claim and a second claim of the same editor in one group: they
// write in rounds, one after the other, so the second sees the editor busy
// with the first's claim, and the editor holds one task.
func TestGroupCyclesOfOneEditorGoOneAfterTheOther(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	e := b.editor(t, "e", "c")
	held := b.claim(t, b.insertOne(t, "c", 0), e.Holder(), e.ID, time.Minute)
	next, other, first := b.insertOne(t, "c", 0), b.insertOne(t, "c", 0), b.insertOne(t, "c", 0)
	claim := func(id int64) tasks.ClaimParams {
		return tasks.ClaimParams{TaskID: id, Status: tasks.StatusPending, Holder: e.Holder(), EditorID: e.ID, Lease: time.Minute}
	}

	var wg sync.WaitGroup
	var firstErr, handErr, secondErr error
	var h *tasks.Handover
	g.arm()
	wg.Go(func() {
		_, firstErr = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: first, Status: tasks.StatusPending, Holder: "w", Lease: time.Minute})
	})
	g.waitHeld(t)
	wg.Go(func() {
		h, handErr = b.store.SubmitAndClaim(b.ctx,
			tasks.SubmitParams{TaskID: held.Task.ID, Fence: held.Fence, Holder: e.Holder(), Result: rawJSON(`1`)}, claim(next))
	})
	waitQueued(t, b.store, 1)
	wg.Go(func() { _, secondErr = b.store.Claim(b.ctx, claim(other)) })
	waitQueued(t, b.store, 2)
	g.release()
	wg.Wait()

	if firstErr != nil {
		t.Errorf("first claim: %v", firstErr)
	}
	if handErr != nil || h.Claim == nil || h.Claim.Task.ID != next {
		t.Fatalf("submit and claim: %+v, %v", h, handErr)
	}
	wantErr(t, "the editor's second claim", secondErr, tasks.ErrEditorBusy)
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, e.ID); n != 1 {
		t.Errorf("%d tasks name the editor, want 1", n)
	}
	if got := b.task(t, other); got.Status != tasks.StatusPending || len(b.events(t, other)) != 0 {
		t.Errorf("the refused claim's task: %+v", got)
	}
	if sizes := g.groupSizes(); len(sizes) != 2 || sizes[1] != 2 {
		t.Errorf("group sizes = %v, want [1 2]", sizes)
	}
}

// TestCycleQueryPlans checks with EXPLAIN that every statement of a group of
// cycles (submits with the next claim, of editors and workers, plain claims and
// heartbeats) reads tasks by its primary key, a range over the cycles' ids, or by
// tasks_editor for the busy check; editors, task_skips and paused_categories by
// their primary keys; no full scan. Run with -v to see the plans.
func TestCycleQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000, WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	nts := make([]tasks.NewTask, 20000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "c", Title: "t"}
	}
	ids := b.insert(t, nts...)
	const n = 50
	var eds []*tasks.Editor
	for i := range n {
		eds = append(eds, b.editor(t, "e"+strings.Repeat("x", i), "c"))
	}
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE id % 10 < 7`)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'w', assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id % 10 = 7`)
	b.exec(t, `ANALYZE TABLE tasks, task_events, task_results, editors, task_skips`)

	var pending, assigned []int64
	for _, id := range ids {
		switch id % 10 {
		case 8, 9:
			pending = append(pending, id)
		case 7:
			assigned = append(assigned, id)
		}
	}
	var submits []*tasks.SubmitParams
	var claims []*tasks.ClaimParams
	for i := range 2 * n {
		w := fmt.Sprintf("w%d", i)
		submits = append(submits, &tasks.SubmitParams{TaskID: assigned[i], Fence: 1, Holder: w, Result: rawJSON(`{"ok":true}`)})
		c := &tasks.ClaimParams{TaskID: pending[i], Status: tasks.StatusPending, Holder: w, Lease: time.Minute}
		if i < n {
			c.Holder, c.EditorID = eds[i].Holder(), eds[i].ID
			submits[i].Holder = c.Holder
			// Some expect a workflow: the round reads their checks; some
			// an editor of more than one claim: the round counts them.
			c.Workflow = i%3 == 0
			if i%4 == 0 {
				c.Capacity = 2
			}
		}
		if i%5 == 4 {
			submits[i] = nil // a claim alone
		}
		claims = append(claims, c)
	}
	var beats []*tasks.HeartbeatParams
	for i := range n {
		beats = append(beats, &tasks.HeartbeatParams{TaskID: assigned[2*n+i], Fence: 1, Holder: fmt.Sprintf("b%d", i), Lease: time.Minute})
	}
	q, args := store.CycleSQL(b.store, submits, claims, beats)

	type stmt struct {
		name  string
		query string
		args  []any
	}
	var stmts []stmt
	for _, s := range strings.Split(q, ";\n") {
		k := strings.Count(s, "?")
		a := args[:k]
		args = args[k:]
		s = strings.ReplaceAll(s, "@taskd_now", "NOW(3)")
		switch {
		case strings.HasPrefix(s, "START TRANSACTION"), strings.HasPrefix(s, "COMMIT"):
		case strings.HasPrefix(s, "SET "), strings.HasPrefix(s, "SELECT COALESCE(("):
			// Each subquery of a SET on its own.
			for rest := s; ; {
				i := strings.Index(rest, "COALESCE((SELECT ")
				if i < 0 {
					break
				}
				rest = rest[i+len("COALESCE(("):]
				j := strings.Index(rest, "), '')")
				sub := rest[:j]
				k := strings.Count(sub, "?")
				stmts = append(stmts, stmt{"SET: " + firstWords(sub), sub, a[:k]})
				a = a[k:]
				rest = rest[j:]
			}
		default:
			stmts = append(stmts, stmt{firstWords(s), s, a})
		}
	}
	if len(args) != 0 {
		t.Fatalf("%d arguments left over after splitting the group", len(args))
	}
	// One round: the editors', the submits' and the heartbeats' locks, the
	// heartbeats' two writes, the submits' four, the skip read, the busy
	// reads (of editors of capacity 1 and of more), the workflow read, the
	// claims and their events, the report.
	if len(stmts) != 16 {
		t.Fatalf("%d statements, want the 16 of one round", len(stmts))
	}
	for _, s := range stmts {
		plan := b.explain(t, s.query, s.args...)
		t.Logf("%s:\n%s", s.name, formatPlan(plan))
		noFullScans(t, s.name, plan)
		for _, r := range plan {
			want := ""
			switch r.Table {
			case "tasks":
				want = "PRIMARY"
				if strings.Contains(s.query, "FORCE INDEX (tasks_editor)") {
					want = "tasks_editor"
				}
			case "editors", "task_skips", "p":
				want = "PRIMARY"
			}
			if want != "" && r.Key != want && !strings.Contains(r.Extra, "const table") {
				t.Errorf("%s: %s read by %q (%s), want %s:\n%s", s.name, r.Table, r.Key, r.Type, want, formatPlan(plan))
			}
		}
	}
}
