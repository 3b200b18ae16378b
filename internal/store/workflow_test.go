package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// workflowSetup is a store whose category "desk" has the stages edit and review,
// and "labels" an overlap of 3.
func workflowSetup(t *testing.T) *bundle {
	t.Helper()
	return setup(t, store.Config{Workflows: map[string]tasks.Workflow{
		"desk":   {Stages: []string{"edit", "review"}, SendBackHold: time.Hour},
		"labels": {Overlap: 3},
	}})
}

// editorWith creates an editor with a capacity and stage limits.
func (b *bundle) editorWith(t *testing.T, name string, capacity int, stages map[string][]string, cats ...string) *tasks.Editor {
	t.Helper()
	_, hash := tasks.NewToken()
	e, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{
		Name: name, Categories: cats, TokenHash: hash, Capacity: capacity, Stages: stages,
	})
	if err != nil {
		t.Fatalf("create editor %s: %v", name, err)
	}
	return e
}

// tryClaim claims a task at its current fence and status for an editor.
func (b *bundle) tryClaim(t *testing.T, id int64, ed *tasks.Editor) (*tasks.Claim, error) {
	t.Helper()
	task := b.task(t, id)
	return b.store.Claim(b.ctx, tasks.ClaimParams{
		TaskID: id, Fence: task.Fence, Status: task.Status, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute,
		Workflow: hasWorkflow(task),
	})
}

// A claim wrong about a task's workflow (ClaimParams.Workflow) keeps the rules:
// one that does not expect it is made the locking way, which reads the checks,
// and one that expects it of a plain task finds nothing to refuse.
func TestClaimsWrongAboutTheWorkflow(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk", "news")
	bob := b.editor(t, "bob", "desk")
	ids := b.insert(t, tasks.NewTask{Category: "desk", Title: "staged"}, tasks.NewTask{Category: "news", Title: "plain"})
	edit := b.claim(t, ids[0], ann.Holder(), ann.ID, time.Minute)
	if _, err := b.submit(t, edit, ann, "", ""); err != nil {
		t.Fatal(err)
	}
	claim := func(id int64, ed *tasks.Editor, workflow bool) (*tasks.Claim, error) {
		task := b.task(t, id)
		return b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status,
			Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute, Workflow: workflow})
	}
	before := b.snapshot(t, ids[0])
	_, err := claim(ids[0], ann, false)
	wantErr(t, "the editor of the edit reviewing it, not expecting a workflow", err, tasks.ErrBarred)
	b.unchanged(t, ids[0], before)
	if c, err := claim(ids[0], bob, false); err != nil || c.Task.StageName() != "review" {
		t.Errorf("bob's review, not expecting a workflow: %+v, %v", c, err)
	}
	if c, err := claim(ids[1], ann, true); err != nil || c.Task.ID != ids[1] {
		t.Errorf("a plain task, expecting a workflow: %+v, %v", c, err)
	}
}

// A claim wrong about its editor's capacity is made the locking way, which keeps
// the editor's own; one right about it is made in its batch.
func TestClaimsWrongAboutTheCapacity(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editorWith(t, "ann", 2, nil, "news")
	bob := b.editor(t, "bob", "news")
	var nts []tasks.NewTask
	for i := range 6 {
		nts = append(nts, tasks.NewTask{Category: "news", Title: fmt.Sprint(i)})
	}
	ids := b.insert(t, nts...)
	claim := func(id int64, ed *tasks.Editor, capacity int) (*tasks.Claim, error) {
		task := b.task(t, id)
		return b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status,
			Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute, Capacity: capacity})
	}
	for i, c := range []struct {
		id       int64
		ed       *tasks.Editor
		capacity int
		want     error
	}{
		{ids[0], ann, 0, nil},                 // ann thought of capacity 1, holding none
		{ids[1], ann, 1, nil},                 // and holding one: her second
		{ids[2], ann, 2, tasks.ErrEditorBusy}, // right, and full
		{ids[2], ann, 0, tasks.ErrEditorBusy}, // wrong, and full
		{ids[3], bob, 3, nil},                 // bob thought of capacity 3
		{ids[4], bob, 3, tasks.ErrEditorBusy}, // still wrong: he holds his one
		{ids[4], bob, 0, tasks.ErrEditorBusy}, // right
		{ids[5], ann, 2, tasks.ErrEditorBusy}, // right, still full
	} {
		before := b.snapshot(t, c.id)
		got, err := claim(c.id, c.ed, c.capacity)
		if c.want != nil {
			wantErr(t, fmt.Sprintf("claim %d", i), err, c.want)
			b.unchanged(t, c.id, before)
			continue
		}
		if err != nil || got.Task.ID != c.id || got.Task.EditorID != c.ed.ID {
			t.Errorf("claim %d: %+v, %v; want task %d for %s", i, got, err, c.id, c.ed.Name)
		}
	}
	for _, ed := range []*tasks.Editor{ann, bob} {
		if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ed.ID); n != max(1, ed.Capacity) {
			t.Errorf("%s holds %d tasks, want %d", ed.Name, n, max(1, ed.Capacity))
		}
	}
}

// A worker's claim of a task sent back, alone or in a batch, ends its
// reservation as an editor's does: it is not left to bar the next stage.
func TestWorkerClaimEndsAReservation(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk")
	bob := b.editor(t, "bob", "desk")
	sentBack := func() tasks.Candidate {
		id := b.insert(t, tasks.NewTask{Category: "desk", Title: "story"})[0]
		edit := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
		if _, err := b.submit(t, edit, ann, "", ""); err != nil {
			t.Fatal(err)
		}
		review := b.claim(t, id, bob.Holder(), bob.ID, time.Minute)
		if _, err := b.submit(t, review, bob, tasks.DecisionSendBack, "again"); err != nil {
			t.Fatal(err)
		}
		task := b.task(t, id)
		if task.ReservedFor != ann.ID {
			t.Fatalf("task %d reserved for %d, want ann", id, task.ReservedFor)
		}
		return tasks.Candidate{ID: id, Fence: task.Fence, Status: task.Status, Workflow: true}
	}
	cleared := func(what string, id int64) {
		t.Helper()
		if task := b.task(t, id); task.Status != tasks.StatusAssigned || task.ReservedFor != 0 || task.ReservedUntil != nil {
			t.Errorf("%s: %s, reserved for %d until %v; want assigned, no reservation", what, task.Status, task.ReservedFor, task.ReservedUntil)
		}
	}

	one := sentBack()
	if _, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: one.ID, Fence: one.Fence, Status: one.Status,
		Holder: "w1", Lease: time.Minute}); err != nil {
		t.Fatalf("worker claim: %v", err)
	}
	cleared("a worker's claim", one.ID)

	two := sentBack()
	res, err := b.store.ClaimBatch(b.ctx, []tasks.ClaimParams{{TaskID: two.ID, Fence: two.Fence, Status: two.Status,
		Holder: "w2", Lease: time.Minute, Workflow: two.Workflow}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("worker batch: %+v, %v", res, err)
	}
	cleared("a worker's batch", two.ID)
}

// submit submits an editor's claim with a decision.
func (b *bundle) submit(t *testing.T, c *tasks.Claim, ed *tasks.Editor, decision, notes string) (*tasks.Ended, error) {
	t.Helper()
	return b.store.Submit(b.ctx, tasks.SubmitParams{
		TaskID: c.Task.ID, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{"by":"` + ed.Name + `"}`),
		Decision: decision, Notes: notes,
	})
}

func TestStagesMoveATaskOnAndKeepEachResult(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk")
	bob := b.editor(t, "bob", "desk")
	id := b.insert(t, tasks.NewTask{Category: "desk", Title: "story"})[0]
	if task := b.task(t, id); !slices.Equal(task.Stages, []string{"edit", "review"}) || task.Stage != 0 || task.StageName() != "edit" {
		t.Fatalf("new task: stages %v at %d (%q), want edit,review at 0", task.Stages, task.Stage, task.StageName())
	}

	c := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
	ended, err := b.submit(t, c, ann, "", "")
	if err != nil {
		t.Fatalf("submit the edit: %v", err)
	}
	if ended.Status != tasks.StatusPending || ended.Stage != "review" || !ended.AssignedAt.Equal(c.AssignedAt) || ended.EndedAt.Before(ended.AssignedAt) {
		t.Errorf("ended = %+v, want pending at review, with the claim's times", ended)
	}
	task := b.task(t, id)
	if task.Status != tasks.StatusPending || task.Stage != 1 || task.Fence != c.Fence || task.Holder != "" || task.EditorID != 0 ||
		task.AssignedAt == nil || !task.AssignedAt.Equal(c.AssignedAt) || task.DoneAt != nil || task.Attempts != 0 {
		t.Errorf("after the edit: %+v, want pending at stage 1, fence %d, no holder, assigned at the edit's claim", task, c.Fence)
	}
	// A late write of the edit's claim is stale.
	_, err = b.submit(t, c, ann, "", "")
	wantErr(t, "submit the edit again", err, tasks.ErrStale)

	// The four-eyes rule: the editor of the edit may not review it.
	before := b.snapshot(t, id)
	_, err = b.tryClaim(t, id, ann)
	wantErr(t, "review by the editor of the edit", err, tasks.ErrBarred)
	b.unchanged(t, id, before)

	r := b.claim(t, id, bob.Holder(), bob.ID, time.Minute)
	if r.Task.StageName() != "review" || r.Fence != c.Fence+1 {
		t.Errorf("review claim: stage %q fence %d, want review at %d", r.Task.StageName(), r.Fence, c.Fence+1)
	}
	ended, err = b.submit(t, r, bob, tasks.DecisionApprove, "fine")
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if ended.Status != tasks.StatusDone || ended.Stage != "" {
		t.Errorf("ended = %+v, want done", ended)
	}
	if task := b.task(t, id); task.Status != tasks.StatusDone || task.Holder != bob.Holder() || task.DoneAt == nil {
		t.Errorf("after the review: %+v, want done, held last by bob", task)
	}

	results, err := b.allResults(id)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		stage           int
		name, decision  string
		editor          int64
		notes           string
		fence, overlapN int64
	}{
		{0, "edit", "", ann.ID, "", c.Fence, 1},
		{1, "review", "approve", bob.ID, "fine", r.Fence, 1},
	}
	if len(results) != len(want) {
		t.Fatalf("results = %+v, want %d", results, len(want))
	}
	for i, w := range want {
		g := results[i]
		if g.Stage != w.stage || g.StageName != w.name || g.Decision != w.decision || g.EditorID != w.editor || g.Notes != w.notes ||
			g.Fence != w.fence || g.Overlap != int(w.overlapN) {
			t.Errorf("result %d = %+v, want %+v", i, g, w)
		}
	}
	evs := b.events(t, id)
	var details []string
	for _, e := range evs {
		if e.Kind == tasks.EventSubmitted {
			details = append(details, e.Detail)
		}
	}
	if !slices.Equal(details, []string{"stage edit", "stage review: approve"}) {
		t.Errorf("submitted events' details = %q", details)
	}
}

func TestSendBackGoesToTheEditorOfTheStageFirst(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk")
	bob := b.editor(t, "bob", "desk")
	cat := b.editor(t, "cat", "desk")
	id := b.insert(t, tasks.NewTask{Category: "desk", Title: "story"})[0]

	edit := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
	if _, err := b.submit(t, edit, ann, "", ""); err != nil {
		t.Fatal(err)
	}
	review := b.claim(t, id, bob.Holder(), bob.ID, time.Minute)
	ended, err := b.submit(t, review, bob, tasks.DecisionSendBack, "the lede is buried")
	if err != nil {
		t.Fatalf("send back: %v", err)
	}
	if ended.Status != tasks.StatusPending || ended.Stage != "edit" {
		t.Errorf("ended = %+v, want pending at edit", ended)
	}
	now := b.now(t)
	task := b.task(t, id)
	if task.Stage != 0 || task.ReservedFor != ann.ID || task.ReservedUntil == nil ||
		task.ReservedUntil.Sub(now) < 59*time.Minute || task.ReservedUntil.Sub(now) > time.Hour {
		t.Errorf("sent back: %+v, want stage 0 reserved for ann (%d) for the category's hour", task, ann.ID)
	}

	// Offered to ann alone: cat is barred, ann's claims list it.
	_, err = b.tryClaim(t, id, cat)
	wantErr(t, "claim of another editor's reserved task", err, tasks.ErrBarred)
	// The refusal says what is left of the hold, on the database's clock, by
	// either way of claiming.
	for _, workflow := range []bool{true, false} {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status,
			Holder: cat.Holder(), EditorID: cat.ID, Lease: time.Minute, Workflow: workflow})
		var be *tasks.BarredError
		if !errors.As(err, &be) || be.For <= 59*time.Minute || be.For > time.Hour {
			t.Errorf("claim expecting a workflow %v: %v (%+v), want a bar for what is left of the hour", workflow, err, be)
		}
	}
	ec, err := b.store.EditorClaims(b.ctx, ann.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ec.Held) != 0 || len(ec.Reserved) != 1 || ec.Reserved[0].ID != id || ec.Reserved[0].Fence != review.Fence {
		t.Errorf("ann's claims = %+v, want task %d reserved at fence %d", ec, id, review.Fence)
	}
	if ec, _ := b.store.EditorClaims(b.ctx, cat.ID); len(ec.Reserved) != 0 {
		t.Errorf("cat's claims = %+v, want nothing reserved", ec)
	}

	again := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
	if task := b.task(t, id); task.ReservedFor != 0 || task.ReservedUntil != nil {
		t.Errorf("claimed: reservation %d until %v, want cleared", task.ReservedFor, task.ReservedUntil)
	}
	if _, err := b.submit(t, again, ann, "", "done"); err != nil {
		t.Fatal(err)
	}
	// Bob reviews again: his own stage.
	final := b.claim(t, id, bob.Holder(), bob.ID, time.Minute)
	if _, err := b.submit(t, final, bob, tasks.DecisionApprove, ""); err != nil {
		t.Fatal(err)
	}
	results, _ := b.allResults(id)
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s/%s/%d", r.StageName, r.Decision, r.EditorID))
	}
	want := []string{
		fmt.Sprintf("edit//%d", ann.ID), fmt.Sprintf("review/send_back/%d", bob.ID),
		fmt.Sprintf("edit//%d", ann.ID), fmt.Sprintf("review/approve/%d", bob.ID),
	}
	if !slices.Equal(got, want) {
		t.Errorf("results = %v, want %v", got, want)
	}

	// Once the hold has passed, anyone who may take the stage does.
	id2 := b.insert(t, tasks.NewTask{Category: "desk", Title: "second"})[0]
	e2 := b.claim(t, id2, ann.Holder(), ann.ID, time.Minute)
	b.submit(t, e2, ann, "", "")
	r2 := b.claim(t, id2, bob.Holder(), bob.ID, time.Minute)
	if _, err := b.submit(t, r2, bob, tasks.DecisionSendBack, ""); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `UPDATE tasks SET reserved_until = NOW(3) - INTERVAL 1 SECOND WHERE id = ?`, id2)
	if _, err := b.tryClaim(t, id2, cat); err != nil {
		t.Errorf("claim after the hold: %v", err)
	}
}

func TestSendBackAtTheFirstStageIsInvalid(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk", "news")
	for _, cat := range []string{"desk", "news"} {
		id := b.insert(t, tasks.NewTask{Category: cat, Title: "story"})[0]
		c := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)
		before := b.snapshot(t, id)
		_, err := b.submit(t, c, ann, tasks.DecisionSendBack, "")
		wantErr(t, cat+": send back at the first stage", err, tasks.ErrInvalid)
		b.unchanged(t, id, before)
		if _, err := b.submit(t, c, ann, "", ""); err != nil {
			t.Errorf("%s: submit after the refused send back: %v", cat, err)
		}
	}
}

func TestEditorsLimitedToAStage(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk")
	rev := b.editorWith(t, "rev", 1, map[string][]string{"desk": {"review"}}, "desk")
	if !slices.Equal(rev.Stages["desk"], []string{"review"}) {
		t.Fatalf("rev's stages = %v", rev.Stages)
	}
	ids := b.insert(t, tasks.NewTask{Category: "desk", Title: "a"}, tasks.NewTask{Category: "desk", Title: "b"})
	before := b.snapshot(t, ids[0])
	_, err := b.tryClaim(t, ids[0], rev)
	wantErr(t, "edit by a reviewer", err, tasks.ErrBarred)
	b.unchanged(t, ids[0], before)

	c := b.claim(t, ids[0], ann.Holder(), ann.ID, time.Minute)
	b.submit(t, c, ann, "", "")
	got := b.candidates(t, tasks.CandidatesParams{Categories: []string{"desk"}, Stage: "review", Limit: 10})
	if !equalIDs(got, []int64{ids[0]}) {
		t.Errorf("review candidates = %v, want [%d]", got, ids[0])
	}
	got = b.candidates(t, tasks.CandidatesParams{Categories: []string{"desk"}, Stage: "edit", Limit: 10})
	if !equalIDs(got, []int64{ids[1]}) {
		t.Errorf("edit candidates = %v, want [%d]", got, ids[1])
	}
	if _, err := b.tryClaim(t, ids[0], rev); err != nil {
		t.Errorf("review by the reviewer: %v", err)
	}
	if _, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"desk"}, Stage: "Review"}); err == nil {
		t.Error("candidates of stage \"Review\": no error")
	}
}

func TestOverlapGivesEachTaskOfAGroupToADifferentEditor(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	eds := []*tasks.Editor{
		b.editorWith(t, "ann", 2, nil, "labels"), b.editor(t, "bob", "labels"), b.editor(t, "cat", "labels"),
	}
	ins, err := b.store.Insert(b.ctx, []tasks.NewTask{{Category: "labels", Title: "photo", Key: "p1"}})
	if err != nil {
		t.Fatal(err)
	}
	lead := ins[0].ID
	var group []int64
	if err := b.db.SelectContext(b.ctx, &group, `SELECT id FROM tasks WHERE group_id = ? ORDER BY id`, lead); err != nil {
		t.Fatal(err)
	}
	if len(group) != 3 || group[0] != lead {
		t.Fatalf("group of %d = %v, want 3 tasks led by it", lead, group)
	}
	for _, id := range group {
		task := b.task(t, id)
		if task.GroupID != lead || task.Overlap != 3 || task.Title != "photo" || (task.Key != "") != (id == lead) {
			t.Errorf("task %d: %+v", id, task)
		}
	}
	// The key names the group's first task: inserting it again makes nothing.
	if again, err := b.store.Insert(b.ctx, []tasks.NewTask{{Category: "labels", Title: "photo", Key: "p1"}}); err != nil || again[0].Created || again[0].ID != lead {
		t.Errorf("insert again = %+v, %v", again, err)
	}

	ann := eds[0]
	c := b.claim(t, group[0], ann.Holder(), ann.ID, time.Minute)
	before := b.snapshot(t, group[1])
	_, err = b.tryClaim(t, group[1], ann)
	wantErr(t, "a second task of the group while holding one", err, tasks.ErrBarred)
	b.unchanged(t, group[1], before)
	b.submit(t, c, ann, "yes", "")
	_, err = b.tryClaim(t, group[1], ann)
	wantErr(t, "a second task of the group after submitting one", err, tasks.ErrBarred)

	// An expired claim goes back alone.
	bc := b.claim(t, group[1], eds[1].Holder(), eds[1].ID, time.Minute)
	b.expireLease(t, group[1])
	cc := b.claim(t, group[1], eds[2].Holder(), eds[2].ID, time.Minute) // a takeover
	if bc.Fence+1 != cc.Fence || b.task(t, group[2]).Status != tasks.StatusPending {
		t.Errorf("takeover: fence %d after %d; the third task %s", cc.Fence, bc.Fence, b.task(t, group[2]).Status)
	}
	b.submit(t, cc, eds[2], "no", "")
	_, err = b.tryClaim(t, group[2], eds[2])
	wantErr(t, "cat's second task of the group", err, tasks.ErrBarred)
	last := b.claim(t, group[2], eds[1].Holder(), eds[1].ID, time.Minute)
	b.submit(t, last, eds[1], "yes", "")

	results, err := b.allResults(group[2])
	if err != nil {
		t.Fatal(err)
	}
	editors := map[int64]bool{}
	for _, r := range results {
		editors[r.EditorID] = true
		if r.GroupID != lead || r.Overlap != 3 {
			t.Errorf("result %+v: want group %d of 3", r, lead)
		}
	}
	if len(results) != 3 || len(editors) != 3 {
		t.Errorf("group results = %+v, want 3 from 3 editors", results)
	}
}

func TestCapacityBoundsAnEditorsClaims(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editorWith(t, "ann", 2, nil, "news")
	if ann.Capacity != 2 {
		t.Fatalf("capacity = %d, want 2", ann.Capacity)
	}
	ids := b.insert(t, tasks.NewTask{Category: "news", Title: "a"}, tasks.NewTask{Category: "news", Title: "b"},
		tasks.NewTask{Category: "news", Title: "c"})
	first := b.claim(t, ids[0], ann.Holder(), ann.ID, time.Minute)
	second := b.claim(t, ids[1], ann.Holder(), ann.ID, time.Minute)
	before := b.snapshot(t, ids[2])
	_, err := b.tryClaim(t, ids[2], ann)
	wantErr(t, "a third claim", err, tasks.ErrEditorBusy)
	b.unchanged(t, ids[2], before)

	ec, err := b.store.EditorClaims(b.ctx, ann.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ec.Held) != 2 || ec.Held[0].Task.ID != first.Task.ID || ec.Held[1].Task.ID != second.Task.ID {
		t.Errorf("held = %+v, want the two claims, oldest first", ec.Held)
	}

	// Listed once, with its oldest claim.
	page, err := b.store.ListEditors(b.ctx, tasks.ListEditorsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Editors) != 1 || page.Editors[0].Claim == nil || page.Editors[0].Claim.TaskID != first.Task.ID {
		t.Errorf("editors = %+v, want ann once, with task %d", page.Editors, first.Task.ID)
	}
	if sum, err := b.store.GetEditorSummary(b.ctx, ann.ID); err != nil || sum.Claim == nil || sum.Claim.TaskID != first.Task.ID {
		t.Errorf("summary = %+v, %v; want task %d", sum, err, first.Task.ID)
	}

	// A claim whose lease passed makes room.
	b.expireLease(t, ids[0])
	if _, err := b.tryClaim(t, ids[2], ann); err != nil {
		t.Errorf("claim with an expired one: %v", err)
	}
	// Disabling the editor revokes both live claims.
	revoked, err := b.store.DisableEditor(b.ctx, ann.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(revoked) != 2 || revoked[0].TaskID != ids[1] || revoked[1].TaskID != ids[2] {
		t.Errorf("revoked = %+v, want tasks %d and %d", revoked, ids[1], ids[2])
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ann.ID); n != 0 {
		t.Errorf("%d tasks still name the disabled editor", n)
	}
}

func TestUpdateEditorWorkflow(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editorWith(t, "ann", 1, map[string][]string{"desk": {"review"}}, "desk", "news")
	three := 3
	ed, err := b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Capacity: &three})
	if err != nil || ed.Capacity != 3 || !slices.Equal(ed.Stages["desk"], []string{"review"}) {
		t.Fatalf("capacity 3: %+v, %v", ed, err)
	}
	// New categories keep the limits of those that stay.
	ed, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Categories: []string{"desk", "sport"}})
	if err != nil || !slices.Equal(ed.Categories, []string{"desk", "sport"}) || !slices.Equal(ed.Stages["desk"], []string{"review"}) {
		t.Fatalf("new categories: %+v, %v", ed, err)
	}
	ed, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Stages: map[string][]string{}})
	if err != nil || ed.Stages != nil {
		t.Fatalf("limits lifted: %+v, %v", ed, err)
	}
	zero, big := 0, tasks.MaxCapacity+1
	for _, bad := range []tasks.UpdateEditorParams{
		{ID: ann.ID, Capacity: &zero},
		{ID: ann.ID, Capacity: &big},
		{ID: ann.ID, Stages: map[string][]string{"news": {"edit"}}},
		{ID: ann.ID, Stages: map[string][]string{"desk": {}}},
		{ID: ann.ID, Stages: map[string][]string{"desk": {"Edit"}}},
		{ID: ann.ID, Categories: []string{"news"}, Stages: map[string][]string{"desk": {"edit"}}},
	} {
		_, err := b.store.UpdateEditor(b.ctx, bad)
		wantErr(t, fmt.Sprintf("update %+v", bad), err, tasks.ErrInvalid)
	}
	if got, _ := b.store.GetEditor(b.ctx, ann.ID); got.Capacity != 3 || !slices.Equal(got.Categories, []string{"desk", "sport"}) || got.Stages != nil {
		t.Errorf("after refused updates: %+v", got)
	}
	for _, bad := range []tasks.CreateEditorParams{
		{Name: "x", Categories: []string{"desk"}, Capacity: -1},
		{Name: "y", Categories: []string{"desk"}, Stages: map[string][]string{"news": {"edit"}}},
	} {
		_, bad.TokenHash = tasks.NewToken()
		_, err := b.store.CreateEditor(b.ctx, bad)
		wantErr(t, fmt.Sprintf("create %+v", bad), err, tasks.ErrInvalid)
	}
}

func TestWorkerCompletionMovesAStagedTaskOn(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	id := b.insert(t, tasks.NewTask{Category: "draft", Title: "t", Stages: []string{"translate", "check"}})[0]
	c := b.claim(t, id, "worker-1", 0, time.Minute)
	if _, err := b.store.Complete(b.ctx, []tasks.Outcome{{
		TaskID: id, Fence: c.Fence, Holder: "worker-1", Result: rawJSON(`{"text":"hola"}`),
	}}); err != nil {
		t.Fatal(err)
	}
	task := b.task(t, id)
	if task.Status != tasks.StatusPending || task.StageName() != "check" {
		t.Errorf("after the worker: %s at %q, want pending at check", task.Status, task.StageName())
	}
	results, _ := b.allResults(id)
	if len(results) != 1 || results[0].StageName != "translate" || results[0].Holder != "worker-1" {
		t.Errorf("results = %+v", results)
	}
}

// Concurrent claims of one editor keep its capacity and never give it two tasks
// of one group, whatever order they commit in.
func TestConcurrentClaimsKeepCapacityAndGroups(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editorWith(t, "ann", 3, nil, "news", "labels")
	var nts []tasks.NewTask
	for i := range 10 {
		nts = append(nts, tasks.NewTask{Category: "news", Title: fmt.Sprint(i)}, tasks.NewTask{Category: "labels", Title: fmt.Sprint(i)})
	}
	b.insert(t, nts...)
	var all []struct {
		ID      int64  `db:"id"`
		Fence   int64  `db:"fence"`
		GroupID *int64 `db:"group_id"`
	}
	if err := b.db.SelectContext(b.ctx, &all, `SELECT id, fence, group_id FROM tasks ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, task := range all {
		wg.Go(func() {
			// Half of them know her capacity: both checks run at once.
			capacity := 0
			if i%2 == 0 {
				capacity = ann.Capacity
			}
			_, err := b.store.Claim(b.ctx, tasks.ClaimParams{
				TaskID: task.ID, Fence: task.Fence, Status: tasks.StatusPending, Holder: ann.Holder(), EditorID: ann.ID, Lease: time.Minute,
				Capacity: capacity,
			})
			if err != nil && !errors.Is(err, tasks.ErrEditorBusy) && !errors.Is(err, tasks.ErrBarred) && !errors.Is(err, tasks.ErrStale) {
				t.Errorf("claim %d: %v", task.ID, err)
			}
		})
	}
	wg.Wait()
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ann.ID); n != 3 {
		t.Errorf("ann holds %d tasks, want her capacity, 3", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM (SELECT group_id FROM tasks WHERE editor_id = ? AND group_id IS NOT NULL
		GROUP BY group_id HAVING COUNT(*) > 1) g`, ann.ID); n != 0 {
		t.Errorf("ann holds two tasks of %d groups", n)
	}
}

// On a Galera cluster, with an editor's claims made on all three nodes at once,
// the editor still holds at most its capacity and one task of a group: the
// claims write the editor's row, which certification orders.
func TestGaleraWorkflowRulesAcrossNodes(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := t.Context()
	wf := map[string]tasks.Workflow{"labels": {Overlap: 3}}
	var stores []*store.Store
	for _, db := range g.Nodes {
		s, err := store.New(db, store.Config{Workflows: wf})
		if err != nil {
			t.Fatal(err)
		}
		askGalera(t, s)
		stores = append(stores, s)
	}
	for round := range 10 {
		_, hash := tasks.NewToken()
		ed, err := stores[0].CreateEditor(ctx, tasks.CreateEditorParams{
			Name: fmt.Sprint("ed", round), Categories: []string{"news", "labels"}, TokenHash: hash, Capacity: 2,
		})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := stores[0].InsertTasks(ctx, []tasks.NewTask{
			{Category: "labels", Title: "a"}, {Category: "news", Title: "b"}, {Category: "news", Title: "c"},
		})
		if err != nil {
			t.Fatal(err)
		}
		var all []int64
		if err := g.Nodes[0].SelectContext(ctx, &all, `SELECT id FROM tasks WHERE id IN (?, ?, ?) OR group_id = ? ORDER BY id`,
			ids[0], ids[1], ids[2], ids[0]); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i, id := range all {
			wg.Go(func() {
				_, err := stores[i%3].Claim(ctx, tasks.ClaimParams{
					TaskID: id, Fence: 0, Status: tasks.StatusPending, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute,
				})
				if err != nil && !errors.Is(err, tasks.ErrEditorBusy) && !errors.Is(err, tasks.ErrBarred) &&
					!errors.Is(err, tasks.ErrStale) && !errors.Is(err, tasks.ErrBusy) {
					t.Errorf("claim %d on node %d: %v", id, i%3+1, err)
				}
			})
		}
		wg.Wait()
		var held, groups int
		g.Nodes[0].GetContext(ctx, &held, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, ed.ID)
		g.Nodes[0].GetContext(ctx, &groups, `SELECT COUNT(*) FROM tasks WHERE editor_id = ? AND group_id IS NOT NULL`, ed.ID)
		if held > 2 || groups > 1 {
			t.Fatalf("round %d: the editor holds %d tasks (capacity 2), %d of one group", round, held, groups)
		}
	}
}
