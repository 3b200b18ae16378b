package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// goldRules is the rules of the gold tests: news by decision, with a floor of
// 50% over the last 2 answers; facts by two fields.
func goldRules(cat string) (tasks.GoldRule, bool) {
	switch cat {
	case "news":
		return tasks.GoldRule{Rule: tasks.GoldRuleDecision, Rate: 0.1, MinAccuracy: 0.5, MinAnswers: 2}, true
	case "facts":
		return tasks.GoldRule{Rule: tasks.GoldRuleFields, Fields: []string{"label", "score"}, Rate: 0.1}, true
	}
	return tasks.GoldRule{}, false
}

// TestGoldCopiesScoredNotResults: a gold task is served to two editors as two
// copies, each a claim of its own (fenced, counted against capacity), never
// twice to one editor; a submit is scored in gold_copies and written to no
// task_results row, so the results feed stays empty.
func TestGoldCopiesScoredNotResults(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	gold := b.insertOne(t, "facts", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Result: rawJSON(`{"label":"spam","score":3}`)}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	if got := b.task(t, gold); !got.RunAfter.Equal(tasks.GoldRunAfter) {
		t.Errorf("gold task's run_after = %v, want it held out of the pool", got.RunAfter)
	}
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"facts"}, Limit: 10}); len(got) != 0 {
		t.Errorf("candidates = %v, want none: a gold task is never handed out as itself", got)
	}
	ann, bob := b.editor(t, "ann", "facts"), b.editor(t, "bob", "facts")
	lease := time.Minute
	ca, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"facts"}, Lease: lease})
	if err != nil {
		t.Fatalf("claim gold for ann: %v", err)
	}
	if ca.Task.ID == gold || ca.Fence != 1 || ca.Task.Title != b.task(t, gold).Title || ca.Task.Status != tasks.StatusAssigned {
		t.Fatalf("ann's copy = %+v, want a new task like the gold one, fence 1, assigned", ca)
	}
	// One claim at a time: ann holds her copy.
	if _, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"facts"}, Lease: lease}); !errors.Is(err, tasks.ErrEditorBusy) {
		t.Errorf("second gold claim while holding one: %v, want ErrEditorBusy", err)
	}
	held, err := b.store.HeldByEditor(b.ctx, ann.ID)
	if err != nil || held.Task.ID != ca.Task.ID {
		t.Errorf("ann holds %+v, %v; want her copy", held, err)
	}
	cb, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: bob.ID, Holder: "editor:bob", Categories: []string{"facts"}, Lease: lease})
	if err != nil || cb.Task.ID == ca.Task.ID {
		t.Fatalf("claim gold for bob: %+v, %v; want a copy of his own", cb, err)
	}
	// A heartbeat is the ordinary one.
	if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: ca.Task.ID, Fence: 1, Holder: "editor:ann", Lease: lease}); err != nil {
		t.Errorf("heartbeat of ann's copy: %v", err)
	}
	// A stale fence is refused, changing nothing.
	if _, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: ca.Task.ID, Fence: 2, Holder: "editor:ann", Result: rawJSON(`{}`)}, goldRules); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("gold submit with a wrong fence: %v, want ErrStale", err)
	}
	sa, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: ca.Task.ID, Fence: 1, Holder: "editor:ann",
		Result: rawJSON(`{"label":" spam ","score":3}`)}, goldRules)
	if err != nil || !sa.Copy.Correct || len(sa.Copy.Differed) != 0 {
		t.Fatalf("ann's gold submit = %+v, %v; want correct (trimmed)", sa, err)
	}
	sb, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: cb.Task.ID, Fence: 1, Holder: "editor:bob",
		Result: rawJSON(`{"label":"ham","score":3}`)}, goldRules)
	if err != nil || sb.Copy.Correct || len(sb.Copy.Differed) != 1 || sb.Copy.Differed[0] != "label" {
		t.Fatalf("bob's gold submit = %+v, %v; want incorrect in label", sb, err)
	}
	if _, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: cb.Task.ID, Fence: 1, Holder: "editor:bob", Result: rawJSON(`{}`)}, goldRules); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("second gold submit: %v, want ErrStale", err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != 0 {
		t.Errorf("%d task_results rows, want none: a gold answer is not a result", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM webhook_outbox`); n != 0 {
		t.Errorf("%d webhook events, want none", n)
	}
	// Each editor at most once: the gold task is not served to ann again.
	if _, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"facts"}, Lease: lease}); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("gold claim after answering the only gold task: %v, want ErrNotFound", err)
	}
	acc, err := b.store.GoldAccuracy(b.ctx, tasks.GoldAccuracyParams{Category: "facts", Since: time.Now().Add(-time.Hour)})
	if err != nil || len(acc) != 2 || acc[0].EditorName != "ann" || acc[0].Correct != 1 || acc[1].Correct != 0 || acc[1].Answers != 1 {
		t.Errorf("accuracy = %+v, %v; want ann 1/1, bob 0/1", acc, err)
	}
	// A submit of a task that is no copy is left to the ordinary submit.
	plain := b.insertOne(t, "facts", 0)
	c := b.claim(t, plain, "editor:ann", ann.ID, lease)
	if _, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: plain, Fence: c.Fence, Holder: "editor:ann", Result: rawJSON(`{}`)}, goldRules); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("gold submit of a plain task: %v, want ErrNotFound", err)
	}
	if got := b.task(t, plain); got.Status != tasks.StatusAssigned {
		t.Errorf("plain task after a refused gold submit: %s, want still assigned", got.Status)
	}
}

// TestGoldCopyNeverToAnother: a copy whose claim expired or was released
// goes to nobody else, by the pending path nor by a takeover.
func TestGoldCopyNeverToAnother(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	gold := b.insertOne(t, "news", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	ann := b.editor(t, "ann", "news")
	c, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"news"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold: %v", err)
	}
	b.expireLease(t, c.Task.ID)
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, Limit: 10}); len(got) != 0 {
		t.Errorf("candidates with the copy expired = %v, want none", got)
	}
	bob := b.editor(t, "bob", "news")
	_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: c.Task.ID, Fence: 1, Status: tasks.StatusAssigned, Holder: "editor:bob", EditorID: bob.ID, Lease: time.Minute})
	if !errors.Is(err, tasks.ErrStale) {
		t.Errorf("takeover of an expired copy: %v, want ErrStale", err)
	}
	if _, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: 10}); err != nil {
		t.Fatalf("recycle: %v", err)
	}
	got := b.task(t, c.Task.ID)
	if got.Status != tasks.StatusPending || !got.RunAfter.Equal(tasks.GoldRunAfter) {
		t.Errorf("recycled copy = %s, run_after %v; want pending for nobody", got.Status, got.RunAfter)
	}
	if got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}, Limit: 10}); len(got) != 0 {
		t.Errorf("candidates with the copy recycled = %v, want none", got)
	}
}

// TestGoldFloorPauses: under the floor over the last MinAnswers answers, the
// editor is paused from the category with a reason; no gold claim of it then;
// a lift ends the pause and the floor judges only later answers.
func TestGoldFloorPauses(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ann := b.editor(t, "ann", "news")
	var golds []int64
	for range 4 {
		id := b.insertOne(t, "news", 0)
		if _, err := b.store.MarkGold(b.ctx, id, tasks.GoldAnswer{Decision: "reject"}, goldRules); err != nil {
			t.Fatalf("mark gold: %v", err)
		}
		golds = append(golds, id)
	}
	answer := func(decision string) *tasks.GoldScored {
		t.Helper()
		c, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"news"}, Lease: time.Minute})
		if err != nil {
			t.Fatalf("claim gold: %v", err)
		}
		s, err := b.store.SubmitGold(b.ctx, tasks.SubmitParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: "editor:ann",
			Result: rawJSON(`{}`), Decision: decision}, goldRules)
		if err != nil {
			t.Fatalf("submit gold: %v", err)
		}
		return s
	}
	if s := answer("approve"); s.Copy.Correct || s.Paused != nil {
		t.Fatalf("first wrong answer = %+v; want incorrect, not judged on one answer", s)
	}
	s := answer("approve")
	if s.Paused == nil || s.Paused.Reason != "gold accuracy 0% < 50% over last 2" {
		t.Fatalf("second wrong answer = %+v; want a pause with its reason", s)
	}
	pauses, err := b.store.EditorGoldPauses(b.ctx, ann.ID)
	if err != nil || len(pauses) != 1 || pauses[0] != "news" {
		t.Errorf("ann's pauses = %v, %v; want news", pauses, err)
	}
	if _, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"news"}, Lease: time.Minute}); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("gold claim while paused: %v, want ErrNotFound", err)
	}
	all, err := b.store.GoldPauses(b.ctx, "")
	if err != nil || len(all) != 1 || all[0].EditorName != "ann" {
		t.Errorf("pauses = %+v, %v; want ann's", all, err)
	}
	if lifted, err := b.store.LiftGoldPause(b.ctx, ann.ID, "news"); err != nil || !lifted {
		t.Fatalf("lift = %v, %v", lifted, err)
	}
	if lifted, err := b.store.LiftGoldPause(b.ctx, ann.ID, "news"); err != nil || lifted {
		t.Errorf("second lift = %v, %v; want nothing to lift", lifted, err)
	}
	// After the lift, one more wrong answer is not judged with the old ones.
	if s := answer("approve"); s.Paused != nil {
		t.Errorf("wrong answer after the lift = %+v; want not judged yet", s)
	}
	if s := answer("reject"); !s.Copy.Correct || s.Paused != nil {
		t.Errorf("right answer = %+v; want correct, 1/2 is not under 50%%", s)
	}
	_ = golds
}

// TestMarkGoldRefuses: a task without a rule, an answer the rule cannot
// compare with, a held task, a slot of an overlap group and a copy are
// refused, changing nothing.
func TestMarkGoldRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	other := b.insertOne(t, "misc", 0)
	if _, err := b.store.MarkGold(b.ctx, other, tasks.GoldAnswer{Decision: "approve"}, goldRules); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("mark a task of a category without a rule: %v, want ErrInvalid", err)
	}
	facts := b.insertOne(t, "facts", 0)
	if _, err := b.store.MarkGold(b.ctx, facts, tasks.GoldAnswer{Result: rawJSON(`{"label":"x"}`)}, goldRules); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("mark with a result lacking a field: %v, want ErrInvalid", err)
	}
	if got := b.task(t, facts); got.RunAfter.Equal(tasks.GoldRunAfter) {
		t.Errorf("refused mark held the task out of the pool")
	}
	ann := b.editor(t, "ann", "facts")
	b.claim(t, facts, "editor:ann", ann.ID, time.Minute)
	if _, err := b.store.MarkGold(b.ctx, facts, tasks.GoldAnswer{Result: rawJSON(`{"label":"x","score":1}`)}, goldRules); !errors.Is(err, tasks.ErrGoldHeld) {
		t.Errorf("mark a held task: %v, want ErrGoldHeld", err)
	}
	slot := b.insertOne(t, "news", 0)
	b.exec(t, `UPDATE tasks SET group_id = id, overlap = 2 WHERE id = ?`, slot)
	if _, err := b.store.MarkGold(b.ctx, slot, tasks.GoldAnswer{Decision: "approve"}, goldRules); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("mark a slot of an overlap group: %v, want ErrInvalid", err)
	}
	if got := b.task(t, slot); got.RunAfter.Equal(tasks.GoldRunAfter) {
		t.Errorf("refused mark held the group's slot out of the pool")
	}
	if _, err := b.store.MarkGold(b.ctx, 1<<40, tasks.GoldAnswer{Decision: "approve"}, goldRules); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("mark no task: %v, want ErrNotFound", err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM gold_tasks`); n != 0 {
		t.Errorf("%d gold tasks after refusals, want 0", n)
	}
}

// TestGoldCopyNotSubmitted: the ordinary submit of a gold copy, alone or with
// the next claim, is refused as stale and writes no result: a copy's answer is
// SubmitGold's only.
func TestGoldCopyNotSubmitted(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	gold := b.insertOne(t, "news", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	next := b.insertOne(t, "news", 0)
	ann := b.editor(t, "ann", "news")
	cp, err := b.store.ClaimGold(b.ctx, tasks.GoldClaimParams{EditorID: ann.ID, Holder: "editor:ann", Categories: []string{"news"}, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim gold: %v", err)
	}
	sp := tasks.SubmitParams{TaskID: cp.Task.ID, Fence: 1, Holder: "editor:ann", Result: rawJSON(`{"ok":true}`)}
	if _, err := b.store.Submit(b.ctx, sp); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("ordinary submit of a copy: %v, want ErrStale", err)
	}
	if _, err := b.store.SubmitAndClaim(b.ctx, sp, tasks.ClaimParams{TaskID: next, Fence: 0, Holder: "editor:ann", EditorID: ann.ID,
		Status: tasks.StatusPending, Lease: time.Minute}); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("ordinary submit and claim of a copy: %v, want ErrStale", err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != 0 {
		t.Errorf("%d task_results rows, want none", n)
	}
	if got := b.task(t, cp.Task.ID); got.Status != tasks.StatusAssigned {
		t.Errorf("copy after refused submits: %s, want still assigned", got.Status)
	}
	if got := b.task(t, next); got.Status != tasks.StatusPending {
		t.Errorf("next task after a refused handover: %s, want pending", got.Status)
	}
	if _, err := b.store.SubmitGold(b.ctx, sp, goldRules); err != nil {
		t.Errorf("gold submit after the refusals: %v", err)
	}
}

// TestGoldCopyTakesLimitRoom: a gold copy is a task of its category in
// flight: with MaxInFlight 1 and the one allowed task held, no copy is
// claimed; once the task is submitted, the copy takes the room.
func TestGoldCopyTakesLimitRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{Workflows: map[string]tasks.Workflow{"news": {MaxInFlight: 1}}})
	gold := b.insertOne(t, "news", 0)
	if _, err := b.store.MarkGold(b.ctx, gold, tasks.GoldAnswer{Decision: "approve"}, goldRules); err != nil {
		t.Fatalf("mark gold: %v", err)
	}
	plain := b.insertOne(t, "news", 0)
	ann, bob := b.editor(t, "ann", "news"), b.editor(t, "bob", "news")
	c := b.claim(t, plain, "editor:ann", ann.ID, time.Minute)
	gp := tasks.GoldClaimParams{EditorID: bob.ID, Holder: "editor:bob", Categories: []string{"news"}, Lease: time.Minute}
	if _, err := b.store.ClaimGold(b.ctx, gp); !errors.Is(err, tasks.ErrLimited) {
		t.Errorf("gold claim with the category's room taken: %v, want ErrLimited", err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned' AND category = 'news'`); n != 1 {
		t.Errorf("%d news tasks assigned, want 1: the limit", n)
	}
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: plain, Fence: c.Fence, Holder: "editor:ann", Result: rawJSON(`{}`)}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if _, err := b.store.ClaimGold(b.ctx, gp); err != nil {
		t.Errorf("gold claim with room: %v", err)
	}
}
