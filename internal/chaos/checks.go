package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// CheckResult is one invariant checked at the end of a run.
type CheckResult struct {
	Name       string `json:"name"`
	Checked    int    `json:"checked"`
	Violations int    `json:"violations"`
}

// earlyTolerance is how far before its computed lease end a claim may end
// by expiry: the lease end is computed from the 'claimed' or 'heartbeat'
// event's time, which the database takes a statement after the lease's own
// NOW(3).
const earlyTolerance = 500 * time.Millisecond

type event struct {
	ID       int64     `json:"id"`
	TaskID   int64     `json:"task_id"`
	Kind     string    `json:"kind"`
	Fence    int64     `json:"fence"`
	EditorID int64     `json:"editor_id"`
	At       time.Time `json:"at"`
}

// claimHistory is one claim as the audit trail tells it.
type claimHistory struct {
	editor    int64
	claimedAt time.Time
	lastLease time.Time // the claim or its last heartbeat
	end       *event
}

// check reads the database and the editors' records and checks every
// invariant; violations go to the recorder in a phase of their own.
func (h *harness) check(ctx context.Context) error {
	p := h.rec.begin("checks")
	defer h.rec.finish()
	h.checks = nil
	add := func(name string, checked, before int64) {
		h.checks = append(h.checks, CheckResult{Name: name, Checked: int(checked), Violations: int(p.violations.Load() - before)})
	}
	violate := func(check, format string, args ...any) { h.rec.violate(p, check, format, args...) }

	// Tasks and results.
	type taskRow struct {
		fence  int64
		status string
	}
	taskRows := make(map[int64]taskRow)
	rows, err := h.sql.QueryContext(ctx, "SELECT id, fence, status FROM tasks")
	if err != nil {
		return fmt.Errorf("read tasks: %w", err)
	}
	for rows.Next() {
		var id int64
		var t taskRow
		if err := rows.Scan(&id, &t.fence, &t.status); err != nil {
			rows.Close()
			return err
		}
		taskRows[id] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	results := make(map[claimRef]bool)
	perTask := make(map[int64]int)
	rows, err = h.sql.QueryContext(ctx, "SELECT task_id, fence FROM task_results")
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	for rows.Next() {
		var r claimRef
		if err := rows.Scan(&r.Task, &r.Fence); err != nil {
			rows.Close()
			return err
		}
		results[r] = true
		perTask[r.Task]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	v0 := p.violations.Load()
	for id, n := range perTask {
		if n > 1 {
			violate("one accepted result per task", "task %d has %d accepted results", id, n)
		}
	}
	add("one accepted result per task", int64(len(perTask)), v0)

	v0 = p.violations.Load()
	notDone := 0
	for id, t := range taskRows {
		if t.status != "done" && (h.drainedMaxID == 0 || id <= h.drainedMaxID) {
			notDone++
			if notDone <= 10 {
				violate("every task done", "task %d is %s after the drain", id, t.status)
			}
			continue
		}
		if t.status == "done" && !results[claimRef{id, t.fence}] {
			violate("done task has its result", "task %d is done at fence %d without a result for that fence", id, t.fence)
		}
	}
	for r := range results {
		if t := taskRows[r.Task]; t.fence != r.Fence || t.status != "done" {
			violate("done task has its result", "result of task %d fence %d, but the task is %s at fence %d", r.Task, r.Fence, t.status, t.fence)
		}
	}
	add("every task done, with one result at its current fence", int64(len(taskRows)), v0)

	// Every acknowledged submit is in the database, at the task's fence.
	all := append(append([]*editor(nil), h.editors...), h.extra...)
	v0 = p.violations.Load()
	var acked int64
	for _, e := range all {
		for _, a := range e.log.acked {
			acked++
			switch t, ok := taskRows[a.Task]; {
			case !results[a]:
				violate("acknowledged submits kept", "editor %d: submit of task %d fence %d was acknowledged, but there is no such result", e.id, a.Task, a.Fence)
			case !ok || t.fence != a.Fence:
				violate("acknowledged submits kept", "editor %d: submit of task %d fence %d was acknowledged, but the task is at fence %d", e.id, a.Task, a.Fence, t.fence)
			}
		}
	}
	add("every acknowledged submit kept at the task's fence", acked, v0)

	// The audit trail.
	events, err := h.readEvents(ctx)
	if err != nil {
		return err
	}
	claims := make(map[claimRef]*claimHistory)
	open := make(map[int64]claimRef) // editor -> its open claim
	// On Galera, event ids are allocated per node (auto_increment_offset), so
	// the events are read in time order, and two events of one millisecond
	// may come in either order: a claim counts as ended when its end event
	// has the same time as the next claim or an earlier one, or by expiry
	// once its lease passed.
	endedAt, expiredEnd := make(map[claimRef]time.Time), make(map[claimRef]bool)
	firstEnd := make(map[claimRef]*event)
	if h.galera != nil {
		for i := range events {
			ev := &events[i]
			k := claimRef{ev.TaskID, ev.Fence}
			switch ev.Kind {
			case "submitted", "released", "skipped", "expired", "recycled", "failed", "dead":
				if at, ok := endedAt[k]; !ok || ev.At.Before(at) {
					endedAt[k] = ev.At
					expiredEnd[k] = ev.Kind == "expired" || ev.Kind == "recycled"
					firstEnd[k] = ev
				}
			}
		}
	}
	stillHeld := func(prev claimRef, at time.Time) bool {
		if h.galera == nil {
			return true
		}
		if end, ok := endedAt[prev]; ok && !end.After(at) {
			return false
		}
		if c := claims[prev]; c != nil && expiredEnd[prev] && !at.Before(c.lastLease.Add(h.cfg.Lease)) {
			return false
		}
		return true
	}
	v0 = p.violations.Load()
	var claimed int64
	for i := range events {
		ev := &events[i]
		k := claimRef{ev.TaskID, ev.Fence}
		switch ev.Kind {
		case "claimed":
			claimed++
			if _, dup := claims[k]; dup {
				violate("one claim per fence", "task %d fence %d claimed twice", k.Task, k.Fence)
			}
			claims[k] = &claimHistory{editor: ev.EditorID, claimedAt: ev.At, lastLease: ev.At}
			if end := firstEnd[k]; end != nil && !end.At.After(ev.At) {
				// Ended in the same millisecond, listed before (Galera's
				// time order): it ended.
				claims[k].end = end
				continue
			}
			if ev.EditorID == 0 {
				continue
			}
			if prev, ok := open[ev.EditorID]; ok && stillHeld(prev, ev.At) {
				violate("one claim per editor", "editor %d claimed task %d (fence %d, event %d) while holding task %d (fence %d)",
					ev.EditorID, ev.TaskID, ev.Fence, ev.ID, prev.Task, prev.Fence)
			}
			open[ev.EditorID] = k
		case "heartbeat":
			if c := claims[k]; c != nil && c.end == nil && ev.At.After(c.lastLease) {
				c.lastLease = ev.At
			}
		case "submitted", "released", "skipped", "expired", "recycled", "failed", "dead":
			c := claims[k]
			if c == nil || c.end != nil {
				continue
			}
			c.end = ev
			if open[c.editor] == k {
				delete(open, c.editor)
			}
		}
	}
	order := "id order"
	if h.galera != nil {
		order = "time order"
	}
	add("no editor holds two claims (task_events in "+order+")", claimed, v0)

	// The claims the editors got are the audit trail's, each for one editor.
	v0 = p.violations.Load()
	var got int64
	owner := make(map[claimRef]int64)
	for _, e := range all {
		for _, c := range e.log.claims {
			got++
			if o, ok := owner[c]; ok && o != e.id {
				violate("one holder per claim", "task %d fence %d was handed to editors %d and %d", c.Task, c.Fence, o, e.id)
			}
			owner[c] = e.id
			switch h := claims[c]; {
			case h == nil:
				violate("one holder per claim", "editor %d got task %d fence %d, which the audit trail has no claim of", e.id, c.Task, c.Fence)
			case h.editor != e.id:
				violate("one holder per claim", "editor %d got task %d fence %d, claimed by editor %d", e.id, c.Task, c.Fence, h.editor)
			}
		}
	}
	add("every claim an editor got is its own in the audit trail", got, v0)

	// Liveness: a claim that ended by expiry did so within sweep.interval
	// (+ slack) of its lease end, or of the end of a fault that covered it.
	v0 = p.violations.Load()
	windows := append([]window(nil), h.windows...)
	sort.Slice(windows, func(i, j int) bool { return windows[i].start.Before(windows[j].start) })
	bound := h.cfg.SweepInterval + h.cfg.Slack
	var expired int64
	for k, c := range claims {
		if c.end == nil {
			violate("every claim ends", "task %d fence %d (editor %d) never ended", k.Task, k.Fence, c.editor)
			continue
		}
		if c.end.Kind != "expired" && c.end.Kind != "recycled" {
			continue
		}
		expired++
		leaseEnd := c.lastLease.Add(h.cfg.Lease).Add(-h.clockOffset) // on the harness's clock
		endAt := c.end.At.Add(-h.clockOffset)
		// A statement batch that spans a hung server writes its event's time
		// after the resume, later than the lease's own NOW(3): the estimate
		// means nothing for claims made or extended during a fault.
		duringFault := false
		for _, w := range windows {
			if at := c.lastLease.Add(-h.clockOffset); !at.Before(w.start) && at.Before(w.end.Add(time.Second)) {
				duringFault = true
			}
		}
		if !duringFault && endAt.Before(leaseEnd.Add(-earlyTolerance)) {
			violate("no claim ends before its lease", "task %d fence %d %s at %s, %v before its lease end",
				k.Task, k.Fence, c.end.Kind, c.end.At.Format(time.RFC3339Nano), leaseEnd.Sub(endAt))
		}
		from, shadow := leaseEnd, ""
		for _, w := range windows {
			if w.start.Before(from.Add(bound)) && w.end.After(from) {
				from, shadow = w.end, w.name
			}
		}
		if late := endAt.Sub(from.Add(bound)); late > 0 {
			what := "its lease end"
			if shadow != "" {
				what = "the end of fault " + shadow
			}
			violate("abandoned claims back in the pool", "task %d fence %d (editor %d) %s %v after %s; bound sweep.interval %v + slack %v",
				k.Task, k.Fence, c.editor, c.end.Kind, endAt.Sub(from).Round(time.Millisecond), what, h.cfg.SweepInterval, h.cfg.Slack)
		}
	}
	add(fmt.Sprintf("expired claims back in the pool within sweep.interval + %v of the lease end", h.cfg.Slack), expired, v0)

	// Every claim an editor walked away from ended by expiry.
	v0 = p.violations.Load()
	var abandoned int64
	for _, e := range all {
		for _, a := range e.log.abandoned {
			abandoned++
			c := claims[a]
			switch {
			case c == nil:
				violate("abandoned claims expire", "editor %d abandoned task %d fence %d, which the audit trail has no claim of", e.id, a.Task, a.Fence)
			case c.end != nil && c.end.Kind != "expired" && c.end.Kind != "recycled":
				violate("abandoned claims expire", "editor %d abandoned task %d fence %d, which ended %s", e.id, a.Task, a.Fence, c.end.Kind)
			}
		}
	}
	add("abandoned claims ended by expiry", abandoned, v0)

	hv := int64(0)
	for _, pp := range h.rec.phases {
		if pp.name == "hostile" {
			hv = pp.violations.Load()
		}
	}
	h.checks = append(h.checks, CheckResult{Name: "hostile requests refused with 4xx, nothing changed", Checked: h.hostile.Requests, Violations: int(hv)})
	return nil
}

func (h *harness) readEvents(ctx context.Context) ([]event, error) {
	order := "id"
	if h.galera != nil {
		// Ids are per node; within a millisecond, ends before claims.
		order = "`at`, kind = 'claimed', id"
	}
	rows, err := h.sql.QueryContext(ctx, "SELECT id, task_id, kind, fence, COALESCE(editor_id, 0), `at` FROM task_events ORDER BY "+order)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		if err := rows.Scan(&e.ID, &e.TaskID, &e.Kind, &e.Fence, &e.EditorID, &e.At); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func jsonUnmarshalStrict(b []byte, v any) error { return json.Unmarshal(b, v) }
