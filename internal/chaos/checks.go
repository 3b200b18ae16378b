package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// CheckResult is one invariant checked at the end of a run.
type CheckResult struct {
	Name       string `json:"name"`
	Checked    int    `json:"checked"`
	Violations int    `json:"violations"`
}

// earlyTolerance is how far before its computed lease end a claim may end
// by expiry: the lease end is computed from the 'claimed' event's time (or a
// 'heartbeat' event's, written before heartbeats stopped writing events),
// which the database takes a statement after the lease's own NOW(3), or
// from the lease a heartbeat answered. A sent-back task's first claim may come as early before the end of
// its hold, for the same reason.
const earlyTolerance = 500 * time.Millisecond

type event struct {
	ID       int64     `json:"id"`
	TaskID   int64     `json:"task_id"`
	Kind     string    `json:"kind"`
	Fence    int64     `json:"fence"`
	EditorID int64     `json:"editor_id"`
	At       time.Time `json:"at"`
	// Detail is the event's detail: "hedge" for the 'released' and
	// 'claimed' events of a takeover by a hedge (see tasks.Hedge).
	Detail string `json:"detail,omitempty"`
}

// hedgeDetail is the detail of the events a hedge's takeover writes.
const hedgeDetail = "hedge"

// hedgedAway says whether ev ended its claim by a hedge's takeover.
func hedgedAway(ev *event) bool {
	return ev != nil && ev.Kind == "released" && ev.Detail == hedgeDetail
}

// endKind says whether an event of kind ends the claim of its fence (a
// 'cancelled' event about a pending task names a fence whose claim ended
// before).
func endKind(kind string) bool {
	switch kind {
	case "submitted", "released", "skipped", "expired", "recycled", "failed", "dead", "snoozed", "cancelled":
		return true
	}
	return false
}

// taskRow is a task as the checks read it.
type taskRow struct {
	fence      int64
	status     string
	category   string
	stage      int
	stageCount int
	stages     []string // the stages' names, none for a task of one stage
	group      int64    // group_id; 0 for a task that asks for one result
}

// resultRow is an accepted result as the checks read it.
type resultRow struct {
	claimRef
	editor   int64
	stage    int
	decision string
	at       time.Time // submitted_at, on the database clock
}

// finding is a violation a check function found, before it is recorded.
type finding struct {
	check, what string
}

func found(check, format string, args ...any) finding {
	return finding{check: check, what: fmt.Sprintf(format, args...)}
}

// groupOf is the group a task belongs to: its group_id, or itself.
func groupOf(tasks map[int64]taskRow, id int64) int64 {
	if g := tasks[id].group; g != 0 {
		return g
	}
	return id
}

// claimHistory is one claim as the audit trail tells it.
type claimHistory struct {
	editor    int64
	claimedAt time.Time
	lastLease time.Time // the claim or its last heartbeat (database clock)
	// lastTry is lastLease or later: the end of the last heartbeat whose
	// answer did not come, which may have extended the lease then (database
	// clock; zero when none).
	lastTry time.Time
	end     *event
	// takeover says the claim began as a hedge that took the task over:
	// its lease is the hedge's, which began before its 'claimed' event.
	takeover bool
}

// trail is the audit trail read back: every claim, and what the walk found.
type trail struct {
	claims   map[claimRef]*claimHistory
	claimed  int64 // 'claimed' events
	beside   int64 // claims an editor took while it held another
	findings []finding
}

// auditTrail walks task_events in order and checks, at each claim, that the
// fence was not claimed before, that the editor then holds fewer claims than
// its capacity (1 when capacity has no entry), and that none of the claims
// it holds, nor any task it submitted, is another task of the same group. With inTimeOrder (Galera: event ids are
// allocated per node, so events come in time order, and two events of one
// millisecond may come in either order) a claim counts as ended when its end
// event has the same time as the next claim or an earlier one, or by expiry
// once its lease passed.
func auditTrail(events []event, tasks map[int64]taskRow, capacity map[int64]int, inTimeOrder bool, lease time.Duration) *trail {
	tr := &trail{claims: make(map[claimRef]*claimHistory)}
	claims := tr.claims
	open := make(map[int64]map[claimRef]bool) // editor -> its open claims
	type edGroup struct{ editor, group int64 }
	submitted := make(map[edGroup]int64) // an editor's submitted task of a group
	endedAt, expiredEnd := make(map[claimRef]time.Time), make(map[claimRef]bool)
	firstEnd := make(map[claimRef]*event)
	if inTimeOrder {
		for i := range events {
			ev := &events[i]
			k := claimRef{ev.TaskID, ev.Fence}
			if !endKind(ev.Kind) {
				continue
			}
			if at, ok := endedAt[k]; !ok || ev.At.Before(at) {
				endedAt[k] = ev.At
				expiredEnd[k] = ev.Kind == "expired" || ev.Kind == "recycled"
				firstEnd[k] = ev
			}
		}
	}
	stillHeld := func(prev claimRef, at time.Time) bool {
		if !inTimeOrder {
			return true
		}
		if end, ok := endedAt[prev]; ok && !end.After(at) {
			return false
		}
		if c := claims[prev]; c != nil && expiredEnd[prev] && !at.Before(c.lastLease.Add(lease)) {
			return false
		}
		return true
	}
	for i := range events {
		ev := &events[i]
		k := claimRef{ev.TaskID, ev.Fence}
		switch {
		case ev.Kind == "claimed":
			tr.claimed++
			if _, dup := claims[k]; dup {
				tr.findings = append(tr.findings, found("one claim per fence", "task %d fence %d claimed twice", k.Task, k.Fence))
			}
			claims[k] = &claimHistory{editor: ev.EditorID, claimedAt: ev.At, lastLease: ev.At, takeover: ev.Detail == hedgeDetail}
			if end := firstEnd[k]; end != nil && !end.At.After(ev.At) {
				// Ended in the same millisecond, listed before (Galera's
				// time order): it ended.
				claims[k].end = end
				continue
			}
			if ev.EditorID == 0 {
				continue
			}
			held := open[ev.EditorID]
			if held == nil {
				held = make(map[claimRef]bool)
				open[ev.EditorID] = held
			}
			for prev := range held {
				if !stillHeld(prev, ev.At) {
					delete(held, prev)
				}
			}
			if len(held) > 0 {
				tr.beside++
			}
			capOf := max(1, capacity[ev.EditorID])
			if len(held) >= capOf {
				prev := make([]claimRef, 0, len(held))
				for p := range held {
					prev = append(prev, p)
				}
				sort.Slice(prev, func(i, j int) bool { return prev[i].Task < prev[j].Task })
				tr.findings = append(tr.findings, found("editor within its capacity",
					"editor %d (capacity %d) claimed task %d (fence %d, event %d) while holding %v",
					ev.EditorID, capOf, ev.TaskID, ev.Fence, ev.ID, prev))
			}
			g := groupOf(tasks, ev.TaskID)
			if t, ok := submitted[edGroup{ev.EditorID, g}]; ok && t != ev.TaskID {
				tr.findings = append(tr.findings, found("one slot of a group per editor",
					"editor %d claimed task %d (fence %d, event %d) after it submitted task %d of the same group %d",
					ev.EditorID, ev.TaskID, ev.Fence, ev.ID, t, g))
			}
			for prev := range held {
				if prev.Task != ev.TaskID && groupOf(tasks, prev.Task) == g {
					tr.findings = append(tr.findings, found("one slot of a group per editor",
						"editor %d claimed task %d (fence %d, event %d) while holding task %d (fence %d) of the same group %d",
						ev.EditorID, ev.TaskID, ev.Fence, ev.ID, prev.Task, prev.Fence, g))
				}
			}
			held[k] = true
		case ev.Kind == "heartbeat":
			if c := claims[k]; c != nil && c.end == nil && ev.At.After(c.lastLease) {
				c.lastLease = ev.At
			}
		case endKind(ev.Kind):
			c := claims[k]
			if c == nil || c.end != nil {
				continue
			}
			c.end = ev
			delete(open[c.editor], k)
			if ev.Kind == "submitted" && c.editor != 0 {
				submitted[edGroup{c.editor, groupOf(tasks, k.Task)}] = k.Task
			}
		}
	}
	return tr
}

// applyBeats moves the claims' lease times by an editor's heartbeats: a
// heartbeat writes no event, so what each lease became is in its answers. A
// 200's lease is the last heartbeat's time + lease (lastLease); an attempt
// that got no answer may have extended it from its end (lastTry, moved to the
// database clock by clockOffset).
func applyBeats(claims map[claimRef]*claimHistory, beats []beat, lease, clockOffset time.Duration) {
	for _, b := range beats {
		c := claims[b.ref]
		switch {
		case c == nil:
		case !b.leaseEnd.IsZero():
			if at := b.leaseEnd.Add(-lease); at.After(c.lastLease) {
				c.lastLease = at
			}
		case b.unsure.Add(clockOffset).After(c.lastTry):
			c.lastTry = b.unsure.Add(clockOffset)
		}
	}
}

// resultsByTask returns the results of each task in fence order.
func resultsByTask(results []resultRow) map[int64][]resultRow {
	by := make(map[int64][]resultRow)
	for _, r := range results {
		by[r.Task] = append(by[r.Task], r)
	}
	for _, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Fence < rs[j].Fence })
	}
	return by
}

// checkResultHolders checks that each result's claim is in the audit trail,
// claimed by the editor the result names: task_results' key (task_id, fence)
// makes one result per claim a database fact, and this makes it the
// holder's.
func checkResultHolders(results []resultRow, claims map[claimRef]*claimHistory) (int64, []finding) {
	const name = "each result by the holder of its claim"
	var fs []finding
	for _, r := range results {
		switch c := claims[r.claimRef]; {
		case c == nil:
			fs = append(fs, found(name, "result of task %d fence %d (editor %d), a claim the audit trail does not have", r.Task, r.Fence, r.editor))
		case c.editor != r.editor:
			fs = append(fs, found(name, "result of task %d fence %d by editor %d, but editor %d claimed it", r.Task, r.Fence, r.editor, c.editor))
		}
	}
	return int64(len(results)), fs
}

// checkStageOrder checks each task's results in fence order against its
// workflow: the first at stage 0, each next one stage on after an approve
// (or any decision but send_back), one stage back after a send_back (never
// from stage 0), none past the last stage; so each visit of a stage has one
// result. A done task's last result is at its last stage, not a send_back,
// and at the task's current fence; a task not done is at the stage its
// results lead to, and has no result at a fence above its own.
func checkStageOrder(tasks map[int64]taskRow, byTask map[int64][]resultRow) (int64, []finding) {
	const name = "one result per stage visit, in workflow order"
	var fs []finding
	for id, t := range tasks {
		rs := byTask[id]
		stages := max(1, t.stageCount)
		want := 0 // the stage the next result must be at
		ok := true
		for i, r := range rs {
			if r.stage != want {
				fs = append(fs, found(name, "task %d: result %d (fence %d, editor %d) at stage %d, want stage %d", id, i+1, r.Fence, r.editor, r.stage, want))
				ok = false
				break
			}
			if r.Fence > t.fence {
				fs = append(fs, found(name, "task %d: result at fence %d, above the task's fence %d", id, r.Fence, t.fence))
				ok = false
				break
			}
			if r.decision == "send_back" {
				if want == 0 {
					fs = append(fs, found(name, "task %d: sent back from its first stage (fence %d)", id, r.Fence))
					ok = false
					break
				}
				want--
			} else {
				want++
			}
			if want >= stages && i < len(rs)-1 {
				fs = append(fs, found(name, "task %d: %d results after its last stage (from fence %d on)", id, len(rs)-1-i, rs[i+1].Fence))
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		switch {
		case t.status == "done" && want != stages:
			fs = append(fs, found(name, "task %d is done, but its results end before its last stage (%d results, next stage %d of %d)", id, len(rs), want, stages))
		case t.status == "done" && rs[len(rs)-1].Fence != t.fence:
			fs = append(fs, found(name, "task %d is done at fence %d, but its last result is at fence %d", id, t.fence, rs[len(rs)-1].Fence))
		case t.status != "done" && want == stages:
			fs = append(fs, found(name, "task %d is %s, but has a result at its last stage", id, t.status))
		case t.status != "done" && t.status != "dead" && t.status != "cancelled" && want != t.stage:
			fs = append(fs, found(name, "task %d is %s at stage %d, but its results lead to stage %d", id, t.status, t.stage, want))
		}
	}
	return int64(len(tasks)), fs
}

// checkFourEyes checks that no editor has results at two different stages
// of one task.
func checkFourEyes(byTask map[int64][]resultRow) (int64, []finding) {
	const name = "four eyes: no editor at two stages of a task"
	var fs []finding
	var n int64
	for id, rs := range byTask {
		stageOf := make(map[int64]int)
		for _, r := range rs {
			n++
			if s, ok := stageOf[r.editor]; ok && s != r.stage && r.editor != 0 {
				fs = append(fs, found(name, "task %d: editor %d has results at stages %d and %d", id, r.editor, s, r.stage))
			}
			stageOf[r.editor] = r.stage
		}
	}
	return n, fs
}

// checkGroupResults checks that no editor has results in two tasks of one
// group (the N results of an overlapped task come from N editors).
func checkGroupResults(tasks map[int64]taskRow, results []resultRow) (int64, []finding) {
	const name = "one slot of a group per editor"
	var fs []finding
	type key struct{ group, editor int64 }
	first := make(map[key]int64)
	var n int64
	for _, r := range results {
		if tasks[r.Task].group == 0 || r.editor == 0 {
			continue
		}
		n++
		k := key{tasks[r.Task].group, r.editor}
		if t, ok := first[k]; ok && t != r.Task {
			fs = append(fs, found(name, "editor %d has results in tasks %d and %d of group %d", r.editor, t, r.Task, k.group))
			continue
		}
		first[k] = r.Task
	}
	return n, fs
}

// editorCategory names an editor's category.
type editorCategory struct {
	editor   int64
	category string
}

// checkClaimStages checks each claim of a task with stages at the claim's
// stage, the stage the task's results before the claim's fence lead to: the
// editor's categories give it that stage (limits has the editor's stages of
// the category, none for every stage), and it has no result at another
// stage of the task before (four eyes, as the claim saw it).
func checkClaimStages(tasks map[int64]taskRow, byTask map[int64][]resultRow, claims map[claimRef]*claimHistory, limits map[editorCategory][]string) (int64, []finding) {
	var fs []finding
	var n int64
	for k, c := range claims {
		t := tasks[k.Task]
		if len(t.stages) == 0 || c.editor == 0 {
			continue
		}
		n++
		stage := 0
		for _, r := range byTask[k.Task] {
			if r.Fence >= k.Fence {
				break
			}
			if r.decision == "send_back" {
				stage = max(0, r.stage-1)
			} else {
				stage = r.stage + 1
			}
		}
		if stage >= len(t.stages) {
			continue // past the last stage: checkStageOrder says so
		}
		name := t.stages[stage]
		if l, ok := limits[editorCategory{c.editor, t.category}]; ok && len(l) > 0 && !slices.Contains(l, name) {
			fs = append(fs, found("claims at a stage the editor may take", "editor %d claimed task %d fence %d at stage %s; its stages of %s are %v",
				c.editor, k.Task, k.Fence, name, t.category, l))
		}
		for _, r := range byTask[k.Task] {
			if r.Fence < k.Fence && r.editor == c.editor && r.stage != stage {
				fs = append(fs, found("four eyes: no editor at two stages of a task", "editor %d claimed task %d fence %d at stage %d after its result at stage %d (fence %d)",
					c.editor, k.Task, k.Fence, stage, r.stage, r.Fence))
				break
			}
		}
	}
	return n, fs
}

// agreement counts the groups with a result in every task, and those of
// them whose results' decisions are all equal.
func agreement(tasks map[int64]taskRow, results []resultRow) (groups, agreeing int64) {
	size := make(map[int64]int)
	for _, t := range tasks {
		if t.group != 0 {
			size[t.group]++
		}
	}
	decisions := make(map[int64][]string)
	for _, r := range results {
		if g := tasks[r.Task].group; g != 0 {
			decisions[g] = append(decisions[g], r.decision)
		}
	}
	for g, ds := range decisions {
		if len(ds) != size[g] {
			continue
		}
		groups++
		if !slices.ContainsFunc(ds, func(d string) bool { return d != ds[0] }) {
			agreeing++
		}
	}
	return groups, agreeing
}

// checkSentBack checks that a task sent back was claimed first by the
// editor of the latest result at the stage it went back to, or not before
// the category's hold had passed (less earlyTolerance).
func checkSentBack(tasks map[int64]taskRow, byTask map[int64][]resultRow, claims map[claimRef]*claimHistory, hold map[string]time.Duration) (int64, []finding) {
	const name = "sent back: the editor of the stage first, or anyone after the hold"
	fences := make(map[int64][]int64) // task -> claimed fences, ascending
	for k := range claims {
		fences[k.Task] = append(fences[k.Task], k.Fence)
	}
	for _, fs := range fences {
		sort.Slice(fs, func(i, j int) bool { return fs[i] < fs[j] })
	}
	var fs []finding
	var n int64
	for id, rs := range byTask {
		for i, r := range rs {
			if r.decision != "send_back" {
				continue
			}
			n++
			var reserved int64
			for j := i - 1; j >= 0; j-- {
				if rs[j].stage == r.stage-1 {
					reserved = rs[j].editor
					break
				}
			}
			var next claimRef
			for _, f := range fences[id] {
				if f > r.Fence {
					next = claimRef{id, f}
					break
				}
			}
			c := claims[next]
			if c == nil {
				continue // not claimed again (a task not done says so elsewhere)
			}
			h, ok := hold[tasks[id].category]
			if !ok {
				h = sendBackHoldDefault
			}
			if c.editor != reserved && c.claimedAt.Before(r.at.Add(h-earlyTolerance)) {
				fs = append(fs, found(name, "task %d sent back at fence %d (reserved for editor %d for %v) was claimed by editor %d %v later",
					id, r.Fence, reserved, h, c.editor, c.claimedAt.Sub(r.at).Round(time.Millisecond)))
			}
		}
	}
	return n, fs
}

// sendBackHoldDefault is tasks.SendBackHoldDefault, for a category the run
// did not configure.
const sendBackHoldDefault = 10 * time.Minute

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
	addFound := func(name string, checked int64, fs []finding) {
		v0 := p.violations.Load()
		for _, f := range fs {
			h.rec.violate(p, f.check, "%s", f.what)
		}
		add(name, checked, v0)
	}

	f, err := h.readFacts(ctx)
	if err != nil {
		return err
	}
	taskRows, results := f.tasks, f.results
	gold, err := h.readGold(ctx)
	if err != nil {
		return err
	}
	// The checks of real work leave the gold tasks and copies out (see
	// goldFacts); the audit trail keeps them: a copy is a claim as any.
	allRows := taskRows
	taskRows = make(map[int64]taskRow, len(allRows))
	for id, t := range allRows {
		if !gold.tasks[id] {
			taskRows[id] = t
		}
	}
	resultAt := make(map[claimRef]resultRow, len(results))
	for _, r := range results {
		resultAt[r.claimRef] = r
	}
	byTask := resultsByTask(results)

	v0 := p.violations.Load()
	notDone := 0
	for id, t := range taskRows {
		if t.status != "done" && (h.drainedMaxID == 0 || id <= h.drainedMaxID) {
			notDone++
			if notDone <= 10 {
				violate("every task done", "task %d is %s after the drain", id, t.status)
			}
			continue
		}
		if _, ok := resultAt[claimRef{id, t.fence}]; t.status == "done" && !ok {
			violate("done task has its result", "task %d is done at fence %d without a result for that fence", id, t.fence)
		}
	}
	add("every task done, with a result at its current fence", int64(len(taskRows)), v0)

	n, fs := checkStageOrder(taskRows, byTask)
	addFound("one result per stage visit, in workflow order (a done task's last at its fence)", n, fs)

	// Every acknowledged submit is in the database, as the editor's.
	all := append(append([]*editor(nil), h.editors...), h.extra...)
	v0 = p.violations.Load()
	var acked int64
	goldAcked := make(map[int64][]claimRef)
	for _, e := range all {
		for _, a := range e.log.acked {
			if gold.tasks[a.Task] {
				goldAcked[e.id] = append(goldAcked[e.id], a)
				continue
			}
			acked++
			switch r, ok := resultAt[a]; {
			case !ok:
				violate("acknowledged submits kept", "editor %d: submit of task %d fence %d was acknowledged, but there is no such result", e.id, a.Task, a.Fence)
			case r.editor != e.id:
				violate("acknowledged submits kept", "editor %d: submit of task %d fence %d was acknowledged, but the result is editor %d's", e.id, a.Task, a.Fence, r.editor)
			}
		}
	}
	add("every acknowledged submit kept", acked, v0)
	if err := h.checkGold(ctx, gold, results, goldAcked, violate, add, p.violations.Load); err != nil {
		return err
	}

	// The audit trail.
	events, err := h.readEvents(ctx)
	if err != nil {
		return err
	}
	tr := auditTrail(events, allRows, f.capacity, h.galera != nil, h.cfg.Lease)
	claims := tr.claims
	for _, e := range all {
		applyBeats(claims, e.log.beats, h.cfg.Lease, h.clockOffset)
	}
	h.beside = tr.beside
	order := "id order"
	if h.galera != nil {
		order = "time order"
	}
	addFound("no editor above its capacity, no fence claimed twice (task_events in "+order+")", tr.claimed, tr.findings)

	if c := h.inFlight; c != nil {
		var fs []finding
		c.Claims, c.Max, fs = checkInFlight(claims, allRows, c.Category, c.Limit, h.cfg.Lease)
		c.Over = len(fs)
		addFound(fmt.Sprintf("no more than max_in_flight %d claims of %s live at once (task_events in time order)", c.Limit, c.Category), c.Claims, fs)
	}

	n, fs = checkResultHolders(results, claims)
	addFound("each result by the holder of its claim", n, fs)

	// Hedged tasks (see hedges.go): each hedge taken over by its own
	// editor only, one accepted result per hedged slot, and every write
	// refused as done by another lost to the other side's result (or
	// takeover) beside it.
	hs := hedgeFacts(all, claims, resultAt)
	h.hedged = hs.counts
	addFound("hedges: taken over only by their editor, one result per hedged slot", hs.checked, hs.findings)
	n, fs = checkDoneByOther(hs.refusals, resultAt, claims)
	addFound("done_by_other only when the other editor of a hedged task won the slot", n, fs)
	n, fs = checkFourEyes(byTask)
	addFound("four eyes: no editor with results at two stages of a task", n, fs)
	n, fs = checkClaimStages(taskRows, byTask, claims, f.limits)
	addFound("claims of a staged task at a stage the editor may take, four eyes held", n, fs)
	h.groups, h.agreeing = agreement(taskRows, results)
	n, fs = checkGroupResults(taskRows, results)
	addFound("one slot of a group per editor (results)", n, fs)
	if h.cfg.Workflow {
		n, fs = checkSentBack(taskRows, byTask, claims, h.holds)
		addFound("sent back: first claimed by the editor of the stage, or after the hold", n, fs)
	}

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
		lastTry := c.lastLease
		if c.lastTry.After(lastTry) {
			lastTry = c.lastTry
		}
		endAt := c.end.At.Add(-h.clockOffset)
		// A statement batch that spans a hung server writes its event's time
		// after the resume, later than the lease's own NOW(3): the estimate
		// means nothing for claims made or extended during a fault.
		duringFault := false
		for _, w := range windows {
			for _, at := range []time.Time{c.lastLease.Add(-h.clockOffset), lastTry.Add(-h.clockOffset)} {
				if !at.Before(w.start) && at.Before(w.end.Add(time.Second)) {
					duringFault = true
				}
			}
		}
		// A takeover's lease is its hedge's, which began before its
		// 'claimed' event: its end is not known from the trail.
		if !duringFault && !c.takeover && endAt.Before(leaseEnd.Add(-earlyTolerance)) {
			violate("no claim ends before its lease", "task %d fence %d %s at %s, %v before its lease end",
				k.Task, k.Fence, c.end.Kind, c.end.At.Format(time.RFC3339Nano), leaseEnd.Sub(endAt))
		}
		from, shadow := lastTry.Add(h.cfg.Lease).Add(-h.clockOffset), ""
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
			case c.end != nil && c.end.Kind != "expired" && c.end.Kind != "recycled" && !hedgedAway(c.end):
				// A hedge of its task took it over, or it expired.
				violate("abandoned claims expire", "editor %d abandoned task %d fence %d, which ended %s", e.id, a.Task, a.Fence, c.end.Kind)
			}
		}
	}
	for _, e := range all {
		for _, a := range e.log.abandonedHedges {
			abandoned++
			if c := claims[a]; c != nil && c.takeover && c.editor == e.id {
				violate("abandoned claims expire", "editor %d abandoned its hedge of task %d fence %d, which took the task over", e.id, a.Task, a.Fence)
			}
		}
	}
	add("abandoned claims ended by expiry or a hedge's takeover; abandoned hedges never took over", abandoned, v0)

	hv := int64(0)
	for _, pp := range h.rec.phases {
		if pp.name == "hostile" {
			hv = pp.violations.Load()
		}
	}
	h.checks = append(h.checks, CheckResult{Name: "hostile requests refused with 4xx, nothing changed", Checked: h.hostile.Requests, Violations: int(hv)})
	return h.checkPurge(ctx, addFound)
}

// facts are the tables the checks read.
type facts struct {
	tasks    map[int64]taskRow
	results  []resultRow // in (task_id, fence) order
	capacity map[int64]int
	limits   map[editorCategory][]string // editor_categories.stages, where set
}

// readFacts reads the tasks, the results, the editors' capacities and their
// stage limits.
func (h *harness) readFacts(ctx context.Context) (*facts, error) {
	f := &facts{tasks: make(map[int64]taskRow), capacity: make(map[int64]int), limits: make(map[editorCategory][]string)}
	err := h.query(ctx, "read tasks", allTasksSQL,
		func(scan func(...any) error) error {
			var id int64
			var t taskRow
			var stages string
			if err := scan(&id, &t.fence, &t.status, &t.category, &t.stage, &t.stageCount, &stages, &t.group); err != nil {
				return err
			}
			if stages != "" {
				t.stages = strings.Split(stages, ",")
			}
			f.tasks[id] = t
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = h.query(ctx, "read results", allResultsSQL,
		func(scan func(...any) error) error {
			var r resultRow
			if err := scan(&r.Task, &r.Fence, &r.editor, &r.stage, &r.decision, &r.at); err != nil {
				return err
			}
			f.results = append(f.results, r)
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = h.query(ctx, "read editors", "SELECT id, capacity FROM editors", func(scan func(...any) error) error {
		var id int64
		var c int
		if err := scan(&id, &c); err != nil {
			return err
		}
		f.capacity[id] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = h.query(ctx, "read editors' stages", "SELECT editor_id, category, stages FROM editor_categories WHERE stages IS NOT NULL",
		func(scan func(...any) error) error {
			var k editorCategory
			var stages string
			if err := scan(&k.editor, &k.category, &stages); err != nil {
				return err
			}
			f.limits[k] = strings.Split(stages, ",")
			return nil
		})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// query runs a query and calls row for each row it returns.
func (h *harness) query(ctx context.Context, what, query string, row func(scan func(...any) error) error) error {
	rows, err := h.sql.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (h *harness) readEvents(ctx context.Context) ([]event, error) {
	order := "id"
	if h.galera != nil {
		// Ids are per node; within a millisecond, ends before claims.
		order = "`at`, kind = 'claimed', id"
	}
	rows, err := h.sql.QueryContext(ctx, allEventsSQL+order)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		if err := rows.Scan(&e.ID, &e.TaskID, &e.Kind, &e.Fence, &e.EditorID, &e.At, &e.Detail); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func jsonUnmarshalStrict(b []byte, v any) error { return json.Unmarshal(b, v) }
