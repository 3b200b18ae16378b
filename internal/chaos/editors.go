package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// assignment is the part of an API assignment the editors use.
type assignment struct {
	Task struct {
		ID       int64  `json:"id"`
		Category string `json:"category"`
	} `json:"task"`
	Fence          int64  `json:"fence"`
	LeaseExpiresAt string `json:"lease_expires_at"`
	// Stage is the claim's stage, where the API gives it (see stageOf).
	Stage json.RawMessage `json:"stage"`
	// Hedge says the assignment is a hedge: the task is held by another
	// editor too (see hedges.go).
	Hedge bool `json:"hedge"`
}

// claimRef names one claim: a task and the fence of that claim.
type claimRef struct {
	Task  int64 `json:"task"`
	Fence int64 `json:"fence"`
}

// editorLog is what one editor saw: every claim it got, every submit
// acknowledged with 200, every claim it walked away from, and every
// heartbeat that extended a lease or may have.
type editorLog struct {
	claims    []claimRef
	acked     []claimRef
	abandoned []claimRef
	beats     []beat
	// doneByOther are the claims (or hedges) whose writes were refused with
	// 409 done_by_other: the other editor of a hedged task submitted first.
	doneByOther []claimRef
	// hedges are the hedges it was offered, apart from its claims: a hedge
	// that never took its task over is no claim (see hedges.go); and
	// abandonedHedges those it walked away from.
	hedges          []claimRef
	abandonedHedges []claimRef
}

// beat is a heartbeat as its editor saw it: a heartbeat writes no event, so
// the lease it gave is known from its answer. leaseEnd is the lease_expires_at
// of a 200 (database clock); unsure, when set, is when an attempt ended with
// no answer (harness clock): it may have extended the lease to up to then +
// the lease.
type beat struct {
	ref      claimRef
	leaseEnd time.Time
	unsure   time.Time
}

// editor is a simulated editor: a real editor of the API with its token.
type editor struct {
	id         int64
	name       string
	token      string
	categories []string
	capacity   int  // claims it may hold at once
	reviewOnly bool // limited to desk's review stage (the workflow pass)
	client     *http.Client
	log        editorLog
	seen       map[claimRef]bool
	// walkedAway are the claims it abandoned and must not touch again
	// (runWorkflowEditor).
	walkedAway map[claimRef]bool
}

// editorMix is how editors treat an assignment, in percent; the rest submit.
type editorMix struct {
	abandon, release, skip, heartbeat int
}

var defaultMix = editorMix{abandon: 2, release: 4, skip: 3, heartbeat: 10}

// worker runs an editor until ctx ends.
func (h *harness) runEditor(ctx context.Context, e *editor) {
	var cur *assignment
	for ctx.Err() == nil {
		if cur == nil {
			cur = h.nextAssignment(ctx, e)
			continue
		}
		roll := rand.IntN(100)
		m := h.mix
		switch {
		case roll < m.abandon:
			cur = h.abandon(ctx, e, cur)
		case roll < m.abandon+m.release:
			cur = h.release(ctx, e, cur, false)
		case roll < m.abandon+m.release+m.skip:
			cur = h.release(ctx, e, cur, true)
		case roll < m.abandon+m.release+m.skip+m.heartbeat:
			if h.heartbeat(ctx, e, cur) {
				cur = h.submit(ctx, e, cur)
			} else {
				cur = nil
			}
		default:
			cur = h.submit(ctx, e, cur)
		}
	}
}

// editorCall sends one editor request to a replica and observes the answer.
func (h *harness) editorCall(ctx context.Context, e *editor, what, path string, body any, wait time.Duration) (response, *phase) {
	base := h.router.pick()
	defer h.router.done(base)
	resp := call(ctx, e.client, base, "POST", path, e.token, body, wait+h.cfg.RequestBound)
	if ctx.Err() != nil {
		return response{}, nil // the run is over: not an answer
	}
	return resp, h.rec.observe(fmt.Sprintf("%s %s (editor %d)", what, base, e.id), resp)
}

// backoff waits a little after a refused or failed request (Retry-After is
// in seconds; the editors retry sooner so the run measures recovery).
func backoff(ctx context.Context) {
	sleepCtx(ctx, time.Duration(50+rand.IntN(200))*time.Millisecond)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// nextAssignment asks for work once, waiting up to 200ms..1.5s; it returns
// nil when there was none.
func (h *harness) nextAssignment(ctx context.Context, e *editor) *assignment {
	return h.nextAssignmentWait(ctx, e, time.Duration(200+rand.IntN(1300))*time.Millisecond)
}

// nextAssignmentWait asks for work once, waiting up to wait.
func (h *harness) nextAssignmentWait(ctx context.Context, e *editor, wait time.Duration) *assignment {
	resp, p := h.editorCall(ctx, e, "next", "/v1/assignments/next", map[string]any{"wait_ms": wait.Milliseconds()}, wait)
	if p == nil {
		return nil
	}
	switch {
	case resp.status == http.StatusOK:
		var a assignment
		if err := json.Unmarshal(resp.body, &a); err != nil || a.Task.ID == 0 || a.Fence < 1 {
			h.rec.violate(p, "well-formed answers", "next (editor %d): bad assignment %s", e.id, trimBody(resp.body))
			return nil
		}
		h.gotClaim(e, p, &a)
		return &a
	case resp.status == http.StatusNoContent:
		return nil
	case resp.status == 0 || resp.status == http.StatusServiceUnavailable:
		backoff(ctx)
		return nil
	default:
		h.rec.violate(p, "expected answers", "next (editor %d): %d %s", e.id, resp.status, trimBody(resp.body))
		backoff(ctx)
		return nil
	}
}

// gotClaim records a claim the editor received (a new one, or the one it
// holds again).
func (h *harness) gotClaim(e *editor, p *phase, a *assignment) {
	ref := claimRef{a.Task.ID, a.Fence}
	if e.seen[ref] {
		return
	}
	e.seen[ref] = true
	if a.Hedge {
		e.log.hedges = append(e.log.hedges, ref)
	} else {
		e.log.claims = append(e.log.claims, ref)
	}
	p.assignments.Add(1)
	h.assignments.Add(1)
}

// submit hands the assignment in and returns the next one (or nil).
// Unanswered and 503 submits are retried with the same fence a few times.
func (h *harness) submit(ctx context.Context, e *editor, a *assignment) *assignment {
	path := "/v1/assignments/" + strconv.FormatInt(a.Task.ID, 10) + "/submit"
	body := h.submitBody(ctx, e, a)
	for range 5 {
		resp, p := h.editorCall(ctx, e, "submit", path, body, 0)
		if p == nil {
			return nil
		}
		switch {
		case resp.status == http.StatusOK:
			e.log.acked = append(e.log.acked, claimRef{a.Task.ID, a.Fence})
			h.counted(body)
			p.submits.Add(1)
			h.submits.Add(1)
			var out struct {
				Next *assignment `json:"next"`
			}
			if err := json.Unmarshal(resp.body, &out); err != nil {
				h.rec.violate(p, "well-formed answers", "submit (editor %d): %v: %s", e.id, err, trimBody(resp.body))
				return nil
			}
			if out.Next != nil {
				h.gotClaim(e, p, out.Next)
			}
			return out.Next
		case resp.status == http.StatusConflict && resp.code() == "stale_fence":
			// The claim was lost (its lease passed during a fault) or an
			// earlier, unanswered try committed it. A lost claim of the
			// editor's own is 409, never 403.
			p.stale.Add(1)
			return nil
		case resp.status == http.StatusConflict && resp.code() == "done_by_other":
			// A hedged task: the other editor submitted first.
			p.stale.Add(1)
			e.log.doneByOther = append(e.log.doneByOther, claimRef{a.Task.ID, a.Fence})
			return nil
		case resp.status == http.StatusNotFound && resp.code() == "not_found":
			// An earlier, unanswered try committed it, or another editor
			// finished the task after the lease passed, and retention
			// purged it since: the checks hold the 404 to a purged task.
			p.stale.Add(1)
			h.noteGone(fmt.Sprintf("submit of task %d fence %d (editor %d)", a.Task.ID, a.Fence, e.id), a.Task.ID)
			return nil
		case resp.status == 0 || resp.status == http.StatusServiceUnavailable:
			backoff(ctx)
		default:
			h.rec.violate(p, "expected answers", "submit task %d fence %d (editor %d): %d %s", a.Task.ID, a.Fence, e.id, resp.status, trimBody(resp.body))
			return nil
		}
	}
	return nil
}

// release gives the assignment back (skip: not offered again for a while).
func (h *harness) release(ctx context.Context, e *editor, a *assignment, skip bool) *assignment {
	path := "/v1/assignments/" + strconv.FormatInt(a.Task.ID, 10) + "/release"
	body := map[string]any{"fence": a.Fence, "reason": "chaos", "skip": skip}
	for range 5 {
		resp, p := h.editorCall(ctx, e, "release", path, body, 0)
		if p == nil {
			return nil
		}
		switch {
		case resp.status == http.StatusNoContent:
			p.releases.Add(1)
			return nil
		case resp.status == http.StatusConflict && resp.code() == "stale_fence":
			p.stale.Add(1)
			return nil
		case resp.status == http.StatusConflict && resp.code() == "done_by_other":
			p.stale.Add(1)
			e.log.doneByOther = append(e.log.doneByOther, claimRef{a.Task.ID, a.Fence})
			return nil
		case resp.status == http.StatusNotFound && resp.code() == "not_found":
			p.stale.Add(1)
			h.noteGone(fmt.Sprintf("release of task %d fence %d (editor %d)", a.Task.ID, a.Fence, e.id), a.Task.ID)
			return nil
		case resp.status == 0 || resp.status == http.StatusServiceUnavailable:
			backoff(ctx)
		default:
			h.rec.violate(p, "expected answers", "release task %d fence %d (editor %d): %d %s", a.Task.ID, a.Fence, e.id, resp.status, trimBody(resp.body))
			return nil
		}
	}
	return nil
}

// heartbeat extends the lease once; false when the claim is gone.
func (h *harness) heartbeat(ctx context.Context, e *editor, a *assignment) bool {
	path := "/v1/assignments/" + strconv.FormatInt(a.Task.ID, 10) + "/heartbeat"
	for range 5 {
		resp, p := h.editorCall(ctx, e, "heartbeat", path, map[string]any{"fence": a.Fence}, 0)
		if p == nil {
			return false
		}
		ref := claimRef{a.Task.ID, a.Fence}
		switch {
		case resp.status == http.StatusOK:
			p.heartbeats.Add(1)
			var got struct {
				LeaseExpiresAt time.Time `json:"lease_expires_at"`
			}
			if err := json.Unmarshal(resp.body, &got); err != nil || got.LeaseExpiresAt.IsZero() {
				h.rec.violate(p, "expected answers", "heartbeat task %d fence %d (editor %d): 200 without a lease: %s", a.Task.ID, a.Fence, e.id, trimBody(resp.body))
				return true
			}
			if !a.Hedge {
				// A hedge's lease is not its fence's claim's (see hedges.go).
				e.log.beats = append(e.log.beats, beat{ref: ref, leaseEnd: got.LeaseExpiresAt})
			}
			return true
		case resp.status == http.StatusConflict:
			// stale_fence, hold_limit, or done_by_other
			p.stale.Add(1)
			if resp.code() == "done_by_other" {
				e.log.doneByOther = append(e.log.doneByOther, ref)
			}
			return false
		case resp.status == http.StatusNotFound && resp.code() == "not_found":
			p.stale.Add(1)
			h.noteGone(fmt.Sprintf("heartbeat of task %d fence %d (editor %d)", a.Task.ID, a.Fence, e.id), a.Task.ID)
			return false
		case resp.status == 0 || resp.status == http.StatusServiceUnavailable:
			// A 503 may come after the store wrote (a timeout): either may
			// have extended the lease.
			if !a.Hedge {
				e.log.beats = append(e.log.beats, beat{ref: ref, unsure: time.Now()})
			}
			backoff(ctx)
		default:
			h.rec.violate(p, "expected answers", "heartbeat task %d fence %d (editor %d): %d %s", a.Task.ID, a.Fence, e.id, resp.status, trimBody(resp.body))
			return false
		}
	}
	return false
}

// abandon walks away from the assignment: the editor sends nothing until
// its lease has passed.
func (h *harness) abandon(ctx context.Context, e *editor, a *assignment) *assignment {
	p := h.rec.phase()
	p.abandons.Add(1)
	e.log.abandoned = append(e.log.abandoned, claimRef{a.Task.ID, a.Fence})
	sleepCtx(ctx, h.cfg.Lease+100*time.Millisecond)
	return nil
}
