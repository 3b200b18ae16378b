package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestPauseAndResumeAreIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	p, paused, err := b.store.PauseCategory(b.ctx, "news")
	if err != nil || !paused || p.Category != "news" || p.PausedAt.IsZero() {
		t.Fatalf("pause = %+v, %v, %v; want news paused now", p, paused, err)
	}
	again, paused, err := b.store.PauseCategory(b.ctx, "news")
	if err != nil || paused || !again.PausedAt.Equal(p.PausedAt) {
		t.Errorf("pause again = %+v, %v, %v; want the first pause, not made again", again, paused, err)
	}
	if _, _, err := b.store.PauseCategory(b.ctx, "sport"); err != nil {
		t.Fatal(err)
	}
	list, err := b.store.PausedCategories(b.ctx)
	if err != nil || len(list) != 2 || list[0].Category != "news" || list[1].Category != "sport" {
		t.Errorf("paused = %+v, %v; want news and sport", list, err)
	}
	st, err := b.store.PoolStats(b.ctx, 0)
	if err != nil || !slices.Equal(st.Paused, []string{"news", "sport"}) {
		t.Errorf("stats paused = %v, %v", st.Paused, err)
	}

	resumed, err := b.store.ResumeCategory(b.ctx, "news")
	if err != nil || !resumed {
		t.Errorf("resume = %v, %v; want resumed", resumed, err)
	}
	resumed, err = b.store.ResumeCategory(b.ctx, "news")
	if err != nil || resumed {
		t.Errorf("resume again = %v, %v; want nothing to do", resumed, err)
	}
	if list, _ := b.store.PausedCategories(b.ctx); len(list) != 1 || list[0].Category != "sport" {
		t.Errorf("paused after resume = %+v, want sport", list)
	}
	for _, bad := range []string{"", " news", string(make([]byte, 65)), "\xff"} {
		_, _, err := b.store.PauseCategory(b.ctx, bad)
		wantErr(t, "pause "+bad, err, tasks.ErrInvalid)
		_, err = b.store.ResumeCategory(b.ctx, bad)
		wantErr(t, "resume "+bad, err, tasks.ErrInvalid)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM paused_categories`); n != 1 {
		t.Errorf("%d paused rows after refused calls, want 1", n)
	}
}

// TestPauseRefusesClaims proves the check is in the claim statements: candidates read
// before the pause are refused on both claim paths, for editors and workers.
func TestPauseRefusesClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news", "sport")
	pending := b.insertOne(t, "news", 5)
	expired := b.insertOne(t, "news", 4)
	sport := b.insertOne(t, "sport", 0)
	b.claim(t, expired, "w0", 0, time.Minute)
	b.expireLease(t, expired)
	cands, err := b.store.Candidates(b.ctx, tasks.CandidatesParams{Categories: []string{"news"}})
	if err != nil || len(cands) != 2 {
		t.Fatalf("candidates before the pause = %+v, %v", cands, err)
	}

	if _, _, err := b.store.PauseCategory(b.ctx, "news"); err != nil {
		t.Fatal(err)
	}
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news", "sport"}, EditorID: ed.ID}); !equalIDs(ids, []int64{sport}) {
		t.Errorf("candidates while news is paused = %v, want only [%d]", ids, sport)
	}
	before := map[int64]snapshot{pending: b.snapshot(t, pending), expired: b.snapshot(t, expired)}
	for _, c := range cands {
		for _, claimant := range []struct {
			holder   string
			editorID int64
		}{{ed.Holder(), ed.ID}, {"w1", 0}} {
			// As read (pending: the batch; assigned: the locking path), and
			// with the status unknown (the locking path).
			for _, status := range []tasks.Status{c.Status, ""} {
				_, err := b.store.Claim(b.ctx, tasks.ClaimParams{
					TaskID: c.ID, Fence: c.Fence, Status: status, Holder: claimant.holder, EditorID: claimant.editorID, Lease: time.Minute,
				})
				wantErr(t, "claim "+string(c.Status)+" as "+claimant.holder+" via "+string(status), err, tasks.ErrPaused)
			}
		}
	}
	for id, snap := range before {
		b.unchanged(t, id, snap)
	}
	b.claim(t, sport, ed.Holder(), ed.ID, time.Minute) // other categories are not paused

	if _, err := b.store.ResumeCategory(b.ctx, "news"); err != nil {
		t.Fatal(err)
	}
	if ids := b.candidates(t, tasks.CandidatesParams{Categories: []string{"news"}}); !equalIDs(ids, []int64{pending, expired}) {
		t.Errorf("candidates after resume = %v, want [%d %d]", ids, pending, expired)
	}
	b.claim(t, pending, "w1", 0, time.Minute)
	if c := b.claim(t, expired, "w2", 0, time.Minute); !c.TookOver {
		t.Errorf("claim of the expired task after resume did not take it over: %+v", c)
	}
}

// TestPauseLetsLiveClaimsFinish pauses a category under live claims: heartbeats,
// submits and releases work as before, and the editor still gets its held claim.
func TestPauseLetsLiveClaimsFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	ids := b.insert(t, tasks.NewTask{Category: "news", Title: "a"}, tasks.NewTask{Category: "news", Title: "b"})
	c1 := b.claim(t, ids[0], ed.Holder(), ed.ID, time.Minute)
	c2 := b.claim(t, ids[1], "w1", 0, time.Minute)
	if _, _, err := b.store.PauseCategory(b.ctx, "news"); err != nil {
		t.Fatal(err)
	}
	held, err := b.store.HeldByEditor(b.ctx, ed.ID)
	if err != nil || held.Task.ID != ids[0] || held.Fence != c1.Fence {
		t.Errorf("held by editor while paused = %+v, %v", held, err)
	}
	if _, err := b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: ids[0], Fence: c1.Fence, Holder: ed.Holder(), Lease: time.Minute}); err != nil {
		t.Errorf("heartbeat while paused: %v", err)
	}
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[0], Fence: c1.Fence, Holder: ed.Holder(), Result: rawJSON(`{"ok":true}`)}); err != nil {
		t.Errorf("submit while paused: %v", err)
	}
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: ids[1], Fence: c2.Fence, Holder: "w1"}); err != nil {
		t.Errorf("release while paused: %v", err)
	}
	// The released task is pending again, and stays unclaimed.
	_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[1], Fence: c2.Fence, Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute})
	wantErr(t, "claim the released task while paused", err, tasks.ErrPaused)
	if got := b.task(t, ids[0]); got.Status != tasks.StatusDone {
		t.Errorf("submitted task is %s", got.Status)
	}
}

// TestClaimPauseCheckPlan checks with EXPLAIN that the claim UPDATE reads the task
// and the pause by primary key, whether or not the category is paused.
func TestClaimPauseCheckPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	for _, pause := range []bool{false, true} {
		if pause {
			if _, _, err := b.store.PauseCategory(b.ctx, "news"); err != nil {
				t.Fatal(err)
			}
		}
		now := b.now(t)
		plan := b.explain(t, store.ClaimSQL, "w1", nil, now, now.Add(time.Minute), nil, now, id, 0)
		t.Logf("claim UPDATE (paused %v):\n%s", pause, formatPlan(plan))
		noFullScans(t, "claim", plan)
		keys := map[string]string{}
		for _, r := range plan {
			keys[r.Table] = r.Key
		}
		if keys["tasks"] != "PRIMARY" || keys["p"] != "PRIMARY" {
			t.Errorf("claim UPDATE (paused %v): want tasks and paused_categories by PRIMARY:\n%s", pause, formatPlan(plan))
		}
	}
}
