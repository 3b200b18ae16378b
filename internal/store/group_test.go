package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// gate records the size of every group a store sends and, when armed, holds
// the next group until it is opened: the writes that arrive meanwhile queue
// for the group after it.
type gate struct {
	mu    sync.Mutex
	sizes []int
	// held is closed when an armed gate holds a group; open lets it go.
	held, open chan struct{}
	armed      bool
	opened     sync.Once
}

// newGate installs a gate on the store of b, before any write, and lets the
// store have one group in flight at a time, so that a held group holds every
// write after it.
func newGate(t *testing.T, b *bundle) *gate {
	store.SetGroupFlights(b.store, 1)
	g := &gate{}
	store.BeforeGroup(b.store, func(n int) {
		g.mu.Lock()
		g.sizes = append(g.sizes, n)
		armed, held, open := g.armed, g.held, g.open
		g.armed = false
		g.mu.Unlock()
		if armed {
			close(held)
			<-open
		}
	})
	// A failing test must not leave a group, and the store, hanging.
	t.Cleanup(g.release)
	return g
}

// arm makes the gate hold the next group sent, and forgets the sizes of
// those sent before.
func (g *gate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sizes = nil
	g.armed, g.held, g.open, g.opened = true, make(chan struct{}), make(chan struct{}), sync.Once{}
}

// release lets a held group go.
func (g *gate) release() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if open != nil {
		g.opened.Do(func() { close(open) })
	}
}

// waitHeld waits until the armed gate holds a group.
func (g *gate) waitHeld(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no group was sent")
	}
}

func (g *gate) groupSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

// waitQueued waits until n writes wait for a group.
func waitQueued(t *testing.T, s *store.Store, n int) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d writes queued", n), func() bool { return store.GroupQueued(s) == n })
}

// claimParams are the params of a claim of pending task id by editor e.
func claimParams(b *bundle, t *testing.T, id int64, e *tasks.Editor) tasks.ClaimParams {
	return tasks.ClaimParams{
		TaskID: id, Fence: b.task(t, id).Fence, Status: tasks.StatusPending,
		Holder: tasks.EditorHolder(e.ID), EditorID: e.ID, Lease: time.Minute,
	}
}

// editorsAndTasks creates n editors of category "c" and n pending tasks.
func editorsAndTasks(t *testing.T, b *bundle, n int) ([]*tasks.Editor, []int64) {
	eds := make([]*tasks.Editor, n)
	nts := make([]tasks.NewTask, n)
	for i := range n {
		eds[i] = b.editor(t, fmt.Sprintf("ed%d", i), "c")
		nts[i] = tasks.NewTask{Category: "c", Title: fmt.Sprintf("t%d", i)}
	}
	return eds, b.insert(t, nts...)
}

// TestGroupCommitSendsConcurrentWritesAsOneTransaction holds a first claim's
// group on its way and checks that the claims that arrive meanwhile go
// together as one group, which commits once.
func TestGroupCommitSendsConcurrentWritesAsOneTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	const n = 8
	eds, ids := editorsAndTasks(t, b, n+1)
	ps := make([]tasks.ClaimParams, n+1)
	for i := range ps {
		ps[i] = claimParams(b, t, ids[i], eds[i])
	}

	errs := make([]error, n+1)
	var wg sync.WaitGroup
	g.arm()
	wg.Go(func() { _, errs[0] = b.store.Claim(b.ctx, ps[0]) })
	g.waitHeld(t)
	for i := 1; i <= n; i++ {
		wg.Go(func() { _, errs[i] = b.store.Claim(b.ctx, ps[i]) })
	}
	waitQueued(t, b.store, n)
	g.release()
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
		if task := b.task(t, ids[i]); task.Status != tasks.StatusAssigned || task.EditorID != eds[i].ID {
			t.Errorf("task %d: status %s, editor %d; want assigned to %d", ids[i], task.Status, task.EditorID, eds[i].ID)
		}
	}
	if got, want := g.groupSizes(), []int{1, n}; !slices.Equal(got, want) {
		t.Errorf("group sizes = %v, want %v", got, want)
	}
	want := store.GroupCounts{Sent: 2, Committed: 2, Led: 1, Waited: n}
	if got := store.GroupCountsOf(b.store); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}

// TestGroupCommitRefusesOnlyTheStaleMember sends submits (with and without
// the next claim) and a heartbeat in one group, one submit with a stale
// fence: only that one is refused, and the group is not split for it.
func TestGroupCommitRefusesOnlyTheStaleMember(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	const n = 6
	eds, ids := editorsAndTasks(t, b, 2*n)
	claims := make([]*tasks.Claim, n)
	for i := range n {
		claims[i] = b.claim(t, ids[i], tasks.EditorHolder(eds[i].ID), eds[i].ID, time.Minute)
	}
	next := make([]tasks.ClaimParams, n)
	for i := range n {
		next[i] = claimParams(b, t, ids[n+i], eds[i])
	}
	submit := func(i int, fence int64) tasks.SubmitParams {
		return tasks.SubmitParams{TaskID: ids[i], Fence: fence, Holder: tasks.EditorHolder(eds[i].ID), Result: rawJSON(`{"i":1}`)}
	}
	const stale = 2
	staleBefore := b.snapshot(t, ids[stale])
	stale2Before := b.snapshot(t, ids[n+stale])

	var wg sync.WaitGroup
	var firstErr, staleErr, beatErr error
	handovers := make([]*tasks.Handover, n)
	handoverErrs := make([]error, n)
	g.arm()
	wg.Go(func() { _, firstErr = b.store.Submit(b.ctx, submit(0, claims[0].Fence)) })
	g.waitHeld(t)
	for i := 1; i < n-1; i++ {
		if i == stale {
			wg.Go(func() { handovers[i], staleErr = b.store.SubmitAndClaim(b.ctx, submit(i, claims[i].Fence-1), next[i]) })
			continue
		}
		wg.Go(func() {
			handovers[i], handoverErrs[i] = b.store.SubmitAndClaim(b.ctx, submit(i, claims[i].Fence), next[i])
		})
	}
	wg.Go(func() {
		_, beatErr = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{
			TaskID: ids[n-1], Fence: claims[n-1].Fence, Holder: tasks.EditorHolder(eds[n-1].ID), Lease: 2 * time.Minute,
		})
	})
	waitQueued(t, b.store, n-1)
	g.release()
	wg.Wait()

	if firstErr != nil {
		t.Errorf("first submit: %v", firstErr)
	}
	wantErr(t, "stale submit", staleErr, tasks.ErrStale)
	b.unchanged(t, ids[stale], staleBefore)
	b.unchanged(t, ids[n+stale], stale2Before)
	if beatErr != nil {
		t.Errorf("heartbeat: %v", beatErr)
	}
	for i := 1; i < n-1; i++ {
		if i == stale {
			continue
		}
		if handoverErrs[i] != nil || handovers[i].Claim == nil {
			t.Errorf("submit and claim %d: %+v, %v", i, handovers[i], handoverErrs[i])
			continue
		}
		if s := b.task(t, ids[i]).Status; s != tasks.StatusDone {
			t.Errorf("submitted task %d is %s, want done", ids[i], s)
		}
		if task := b.task(t, ids[n+i]); task.EditorID != eds[i].ID {
			t.Errorf("next task %d names editor %d, want %d", ids[n+i], task.EditorID, eds[i].ID)
		}
	}
	if got, want := g.groupSizes(), []int{1, n - 1}; !slices.Equal(got, want) {
		t.Errorf("group sizes = %v, want %v (a refusal must not split a group)", got, want)
	}
}

// TestGroupCommitSplitsAroundAFailingMember puts a submit whose result the
// server refuses into a group of claims: it alone fails, with nothing of it
// written, and the claims are made.
func TestGroupCommitSplitsAroundAFailingMember(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	const n = 6
	eds, ids := editorsAndTasks(t, b, n+1)
	// The submit's result passes the store's checks; the server refuses it.
	b.exec(t, `ALTER TABLE task_results ADD CONSTRAINT result_short CHECK (JSON_LENGTH(result) <= 1)`)
	victimEd := b.editor(t, "victim", "other")
	victim := b.insertOne(t, "other", 0)
	vc := b.claim(t, victim, victimEd.Holder(), victimEd.ID, time.Minute)
	before := b.snapshot(t, victim)
	bad := tasks.SubmitParams{TaskID: victim, Fence: vc.Fence, Holder: victimEd.Holder(), Result: rawJSON(`[1,2]`)}
	ps := make([]tasks.ClaimParams, n+1)
	for i := range ps {
		ps[i] = claimParams(b, t, ids[i], eds[i])
	}

	errs := make([]error, n+1)
	var badErr error
	var wg sync.WaitGroup
	g.arm()
	wg.Go(func() { _, errs[0] = b.store.Claim(b.ctx, ps[0]) })
	g.waitHeld(t)
	for i := 1; i <= n; i++ {
		wg.Go(func() { _, errs[i] = b.store.Claim(b.ctx, ps[i]) })
		if i == n/2 {
			waitQueued(t, b.store, i)
			wg.Go(func() { _, badErr = b.store.Submit(b.ctx, bad) })
			waitQueued(t, b.store, i+1)
		}
	}
	waitQueued(t, b.store, n+1)
	g.release()
	wg.Wait()

	wantErr(t, "the refused member", badErr, tasks.ErrInvalid)
	b.unchanged(t, victim, before)
	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
		if task := b.task(t, ids[i]); task.EditorID != eds[i].ID {
			t.Errorf("task %d names editor %d, want %d", ids[i], task.EditorID, eds[i].ID)
		}
	}
	sizes := g.groupSizes()
	if len(sizes) < 4 || sizes[1] != n+1 || !slices.Contains(sizes[2:], 1) {
		t.Errorf("group sizes = %v, want 1, %d, then splits down to the failing member alone", sizes, n+1)
	}
}

// TestGroupCommitCanceledMember cancels one member while it waits for a
// group, which leaves it out, and one while its group is in flight, which
// answers it at once while its part still commits.
func TestGroupCommitCanceledMember(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	eds, ids := editorsAndTasks(t, b, 4)
	ps := make([]tasks.ClaimParams, len(ids))
	for i := range ps {
		ps[i] = claimParams(b, t, ids[i], eds[i])
	}

	// Waiting: canceled before its group is sent.
	var wg sync.WaitGroup
	var firstErr, otherErr error
	g.arm()
	wg.Go(func() { _, firstErr = b.store.Claim(b.ctx, ps[0]) })
	g.waitHeld(t)
	ctx, cancel := context.WithCancel(b.ctx)
	queuedErr := make(chan error, 1)
	go func() {
		_, err := b.store.Claim(ctx, ps[1])
		queuedErr <- err
	}()
	waitQueued(t, b.store, 1)
	wg.Go(func() { _, otherErr = b.store.Claim(b.ctx, ps[2]) })
	waitQueued(t, b.store, 2)
	cancel()
	// Answered while the group ahead is still held.
	wantErr(t, "claim canceled while queued", <-queuedErr, context.Canceled)
	g.release()
	wg.Wait()
	if firstErr != nil || otherErr != nil {
		t.Fatalf("claims: %v, %v", firstErr, otherErr)
	}
	if task := b.task(t, ids[1]); task.Status != tasks.StatusPending {
		t.Errorf("the claim canceled before its group was sent was made: %s", task.Status)
	}

	// In flight: canceled while its group is held.
	g.arm()
	ctx, cancel = context.WithCancel(b.ctx)
	defer cancel()
	flyingErr := make(chan error, 1)
	go func() {
		_, err := b.store.Claim(ctx, ps[3])
		flyingErr <- err
	}()
	g.waitHeld(t)
	cancel()
	wantErr(t, "claim canceled in flight", <-flyingErr, context.Canceled)
	g.release()
	testenv.Eventually(t, time.Minute, "the group of the canceled claim commits", func() bool {
		return store.GroupCountsOf(b.store).Committed >= 3
	})
	if task := b.task(t, ids[3]); task.EditorID != eds[3].ID {
		t.Errorf("the claim canceled in flight did not commit: task names editor %d", task.EditorID)
	}
}

// TestGroupCommitLoneWriterNeverWaits runs an editor's cycles one after the
// other: every write goes at once, as a group of its own.
func TestGroupCommitLoneWriterNeverWaits(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const n = 5
	e := b.editor(t, "alone", "c")
	nts := make([]tasks.NewTask, n+1)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "c", Title: fmt.Sprintf("t%d", i)}
	}
	ids := b.insert(t, nts...)
	holder := tasks.EditorHolder(e.ID)
	c := b.claim(t, ids[0], holder, e.ID, time.Minute)
	writes := int64(1)
	for i := 1; i <= n; i++ {
		if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: holder, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		h, err := b.store.SubmitAndClaim(b.ctx,
			tasks.SubmitParams{TaskID: c.Task.ID, Fence: c.Fence, Holder: holder, Result: rawJSON(`1`)},
			claimParams(b, t, ids[i], e))
		if err != nil || h.Claim == nil {
			t.Fatalf("cycle %d: %+v, %v", i, h, err)
		}
		c = h.Claim
		writes += 2
	}
	want := store.GroupCounts{Sent: writes, Committed: writes, Led: writes, Waited: 0}
	if got := store.GroupCountsOf(b.store); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}

// TestGroupCommitOneTaskPerEditor sends two claims of one editor in one group
// with others': the editor gets one task.
func TestGroupCommitOneTaskPerEditor(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	eds, ids := editorsAndTasks(t, b, 5)
	twice := b.insertOne(t, "c", 0)
	ps := make([]tasks.ClaimParams, len(ids))
	for i := range ps {
		ps[i] = claimParams(b, t, ids[i], eds[i])
	}
	second := claimParams(b, t, twice, eds[1])

	errs := make([]error, len(ids))
	var secondErr error
	var wg sync.WaitGroup
	g.arm()
	wg.Go(func() { _, errs[0] = b.store.Claim(b.ctx, ps[0]) })
	g.waitHeld(t)
	for i := 1; i < len(ids); i++ {
		wg.Go(func() { _, errs[i] = b.store.Claim(b.ctx, ps[i]) })
	}
	wg.Go(func() { _, secondErr = b.store.Claim(b.ctx, second) })
	waitQueued(t, b.store, len(ids))
	g.release()
	wg.Wait()

	won := 0
	for _, err := range []error{errs[1], secondErr} {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, tasks.ErrEditorBusy):
			t.Errorf("the editor's losing claim: %v, want ErrEditorBusy", err)
		}
	}
	if won != 1 {
		t.Errorf("%d of the editor's two claims were made, want 1", won)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE editor_id = ?`, eds[1].ID); n != 1 {
		t.Errorf("%d tasks name the editor, want 1", n)
	}
	for i, err := range errs {
		if i != 1 && err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
	}
	if sizes := g.groupSizes(); len(sizes) != 2 || sizes[1] != len(ids) {
		t.Errorf("group sizes = %v, want [1 %d]", sizes, len(ids))
	}
}

// TestGroupCommitSecondFlight holds a group in flight: with two flights
// allowed, a write that arrives meanwhile goes at once in the second.
func TestGroupCommitSecondFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	g := newGate(t, b)
	store.SetGroupFlights(b.store, 2)
	eds, ids := editorsAndTasks(t, b, 2)
	ps := []tasks.ClaimParams{claimParams(b, t, ids[0], eds[0]), claimParams(b, t, ids[1], eds[1])}

	g.arm()
	held := make(chan error, 1)
	go func() {
		_, err := b.store.Claim(b.ctx, ps[0])
		held <- err
	}()
	g.waitHeld(t)
	if _, err := b.store.Claim(b.ctx, ps[1]); err != nil {
		t.Errorf("claim beside a held group: %v", err)
	}
	select {
	case err := <-held:
		t.Fatalf("the held group answered before it was let go: %v", err)
	default:
	}
	g.release()
	if err := <-held; err != nil {
		t.Errorf("held claim: %v", err)
	}
	want := store.GroupCounts{Sent: 2, Committed: 2, Led: 2, Waited: 0}
	if got := store.GroupCountsOf(b.store); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}

// TestGroupCommitConfig checks the knob's default, and that 1 sends each
// write alone, without a committer. Its bounds are the engine's to check
// (dispatch.group_commit).
func TestGroupCommitConfig(t *testing.T) {
	t.Parallel()
	if got := (store.Config{}).WithDefaults().GroupCommit; got != store.GroupCommitDefault {
		t.Errorf("default GroupCommit = %d, want %d", got, store.GroupCommitDefault)
	}
	b := setup(t, store.Config{GroupCommit: 1})
	e := b.editor(t, "e", "c")
	id := b.insertOne(t, "c", 0)
	c := b.claim(t, id, tasks.EditorHolder(e.ID), e.ID, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: tasks.EditorHolder(e.ID), Result: rawJSON(`1`)}); err != nil {
		t.Fatal(err)
	}
	if got := store.GroupCountsOf(b.store); got != (store.GroupCounts{}) {
		t.Errorf("GroupCommit 1 grouped: %+v", got)
	}
}
