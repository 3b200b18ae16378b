package store

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Cycles. A claimant's submit, claim of a pending task, submit with the next claim,
// or heartbeat is a cycle, and a group writes its cycles together: one statement
// per kind of write for all of them (one INSERT of the results, one of the
// 'submitted' events, one UPDATE to done, one fenced UPDATE for the claims, one
// INSERT of the 'claimed' events, one upsert of the heartbeating editors' last-seen
// times and one UPDATE of the leases), not one per cycle, so that the server's cost
// of a group hardly grows with its size. Each cycle keeps its own promise inside
// them, as the worker batches' members do (see ClaimBatch and Complete): each row is
// written under its own fence and holder, a refused cycle changes nothing and
// refuses nothing else, and the report says what happened to each.
//
// The statements of a round of cycles, in the project's lock order:
//
//  1. in one SET: the rows of the claiming editors, locked (in primary-key
//     order), which serializes each editor's claims and reads which editors are
//     disabled (@taskd_editors: the enabled editors' ids, a disabled one's as
//     "d<id>"); then the submitted tasks' rows, locked if live at the round's
//     instant (@taskd_live: their ids); then the heartbeats' rows, locked if live
//     and short of the maximum hold (@taskd_beat: their ids);
//  2. the submits' result rows, 'submitted' events, outbox records and UPDATE to
//     done, and the heartbeats' upsert of their editors' editor_seen rows (in
//     editor_id order; no event: a heartbeat is not history) and UPDATE of the
//     lease, each guarded by the same predicate as the SET's lock of its rows;
//  3. under the editors' locks, after the submits cleared their editor_id: the
//     tasks the claimants skipped (@taskd_skipped), the editors that hold as many
//     tasks as their capacity (@taskd_busy; their live hedges count too when
//     some category hedges), and the tasks the workflow's checks
//     bar to their claimant (@taskd_barred: see workflow.go; read only for the
//     claims that expect a workflow), in one SELECT ... INTO, which reads without
//     locking (a SET's subqueries would take shared locks);
//  4. the fenced UPDATE of the claims, each guarded by its own checks: its editor
//     enabled and not busy, its task not skipped by it nor barred to it (or, for
//     a claim that expects no workflow, with no stages, group or reservation),
//     its submit (if any) in @taskd_live, its category not paused; then the
//     'claimed' events of the rows the UPDATE claimed;
//  5. the report: the rows of the round's tasks, with the answers of the checks.
//
// An editor's capacity (one task by default) holds because an editor has at most
// one claim in a round and its busy check reads, under its row's lock, every
// claim committed before and every claim of the rounds before in this
// transaction; so do the workflow's checks. Cycles that share a
// task, a holder or an editor therefore go in rounds of their own, one after the
// other in the order they came (see rounds): each round sees the rows as the
// rounds before it left them.

// cycle is one claimant's write in a group: a submit, a claim of a pending task,
// both (the claim then made only if the submit is accepted), or a heartbeat.
type cycle struct {
	// beat, when not nil, is a heartbeat (and the cycle nothing else), its
	// lease checked.
	beat *tasks.HeartbeatParams

	// submit, when not nil, is the submit, its result checked.
	submit *tasks.SubmitParams
	// claim, when not nil, is the claim of a pending task, and lease its
	// checked lease.
	claim *tasks.ClaimParams
	lease time.Duration
	// trace is the trace id of the claimant's sampled span (traceOf), which
	// the cycle's events keep: each member of a group its own.
	trace any

	// The answer, set by the scans of the group's reports: set, not
	// accumulated, as a group sent again is scanned again.
	submitted      submittedRow
	foundSubmitted bool
	claimed        claimedRow
	foundClaimed   bool
	beaten         beatRow
}

// beatRow is what a cycle's report says of its heartbeat.
type beatRow struct {
	// Beat says the lease was extended, to LeaseExpiresAt.
	Beat           bool
	LeaseExpiresAt *time.Time
	// HoldLimit says the claim is live but its lease reaches the maximum
	// hold already.
	HoldLimit bool
}

// cycleKey is something two cycles of a round must not share: a task (kind
// 't'), a holder ('h') or an editor ('e').
type cycleKey struct {
	kind byte
	id   int64
	s    string
}

// keys are c's tasks, its holder and its editor.
func (c *cycle) keys() []cycleKey {
	var ks []cycleKey
	if c.beat != nil {
		ks = append(ks, cycleKey{kind: 't', id: c.beat.TaskID}, cycleKey{kind: 'h', s: c.beat.Holder})
	}
	if c.submit != nil {
		ks = append(ks, cycleKey{kind: 't', id: c.submit.TaskID}, cycleKey{kind: 'h', s: c.submit.Holder})
	}
	if c.claim != nil {
		ks = append(ks, cycleKey{kind: 't', id: c.claim.TaskID}, cycleKey{kind: 'h', s: c.claim.Holder})
		if c.claim.EditorID != 0 {
			ks = append(ks, cycleKey{kind: 'e', id: c.claim.EditorID})
		}
	}
	return ks
}

// rounds splits cs into rounds in which no two cycles share a key, each cycle in
// the round after the last one holding a key of it, so that cycles that share
// one keep their order.
func rounds(cs []*cycle) [][]*cycle {
	var out [][]*cycle
	last := make(map[cycleKey]int, 3*len(cs))
	for _, c := range cs {
		ks := c.keys()
		r := 0
		for _, k := range ks {
			if n, ok := last[k]; ok && n+1 > r {
				r = n + 1
			}
		}
		if r == len(out) {
			out = append(out, nil)
		}
		out[r] = append(out[r], c)
		for _, k := range ks {
			last[k] = r
		}
	}
	return out
}

// roundSQL writes the statements of a round of cycles to q (see Cycles) and
// returns their arguments and the scan of the round's report.
func (s *Store) roundSQL(q *strings.Builder, cs []*cycle) ([]any, func(*sqlx.Rows) error) {
	var subs, claims, editors, beats []*cycle
	for _, c := range cs {
		if c.beat != nil {
			beats = append(beats, c)
		}
		if c.submit != nil {
			subs = append(subs, c)
		}
		if c.claim != nil {
			claims = append(claims, c)
			if c.claim.EditorID != 0 {
				editors = append(editors, c)
			}
		}
	}
	var args []any

	// 1. Every variable the round reads is set here first, so that it never
	// sees a value of a round or batch before it on the connection. The
	// expressions of a SET are evaluated in order, and see the variables as
	// they were before it: the submits' lock reads NOW(3), the statement's
	// instant, which @taskd_now is set to.
	q.WriteString("SET @taskd_now = NOW(3), @taskd_skipped = '', @taskd_busy = '', @taskd_barred = '',\n\t@taskd_editors = ")
	if len(editors) == 0 {
		q.WriteString("''")
	} else {
		q.WriteString("COALESCE((SELECT GROUP_CONCAT(" + editorStateSQL + ") FROM editors FORCE INDEX (PRIMARY) WHERE id IN (")
		args = append(args, listSQL(q, "?", editors, func(i int) []any { return []any{editors[i].claim.EditorID} })...)
		q.WriteString(") FOR UPDATE), '')")
	}
	q.WriteString(",\n\t@taskd_live = ")
	var ids, fences, backs []int64
	var holders, results []string
	var straces, decisions, notes []any
	for _, c := range subs {
		ids, fences, holders = append(ids, c.submit.TaskID), append(fences, c.submit.Fence), append(holders, c.submit.Holder)
		straces = append(straces, c.trace)
		// A string, not bytes: MySQL refuses binary strings in JSON columns.
		results = append(results, string(c.submit.Result))
		decisions, notes = append(decisions, nullString(c.submit.Decision)), append(notes, nullString(c.submit.Notes))
		if c.submit.Decision == tasks.DecisionSendBack {
			backs = append(backs, c.submit.TaskID)
		}
	}
	// A send back is refused at a task's first stage: there is nothing to send
	// it back to (see scanReport).
	// A gold copy's submit is SubmitGold's, never a result (notGoldCopySQL).
	members := func(q *strings.Builder) []any {
		args := membersSQL(q, ids, fences, holders)
		q.WriteString(notGoldCopySQL)
		if len(backs) > 0 {
			q.WriteString(" AND NOT (stage = 0 AND id IN (")
			args = append(args, listSQL(q, "?", backs, func(i int) []any { return []any{backs[i]} })...)
			q.WriteString("))")
		}
		return args
	}
	live := func() { args = append(args, members(q)...) }
	if len(subs) == 0 {
		q.WriteString("''")
	} else {
		var lock strings.Builder
		args = append(args, members(&lock)...)
		q.WriteString("COALESCE((SELECT GROUP_CONCAT(id) FROM tasks FORCE INDEX (PRIMARY)" +
			strings.ReplaceAll(lock.String(), "@taskd_now", "NOW(3)") + " FOR UPDATE), '')")
	}
	q.WriteString(",\n\t@taskd_beat = ")
	hold := micros(s.cfg.MaxHold)
	belowLimit := " AND lease_expires_at < assigned_at + INTERVAL ? MICROSECOND"
	var bids, bfences, bleases []int64
	var bholders []string
	for _, c := range beats {
		bids, bfences, bholders = append(bids, c.beat.TaskID), append(bfences, c.beat.Fence), append(bholders, c.beat.Holder)
		bleases = append(bleases, micros(c.lease))
	}
	beating := func() { args = append(args, membersSQL(q, bids, bfences, bholders)...) }
	if len(beats) == 0 {
		q.WriteString("''")
	} else {
		var lock strings.Builder
		args = append(args, membersSQL(&lock, bids, bfences, bholders)...)
		q.WriteString("COALESCE((SELECT GROUP_CONCAT(id) FROM tasks FORCE INDEX (PRIMARY)" +
			strings.ReplaceAll(lock.String(), "@taskd_now", "NOW(3)") + belowLimit + " FOR UPDATE), '')")
		args = append(args, hold)
	}
	q.WriteString(";\n")
	if len(editors) > 0 && s.galera.Load() != galeraOff {
		// On Galera, the claiming editors' rows are written, not only locked:
		// see 0010_editor_claims.sql.
		q.WriteString("UPDATE editors SET claims = claims + 1 WHERE id IN (")
		args = append(args, listSQL(q, "?", editors, func(i int) []any { return []any{editors[i].claim.EditorID} })...)
		q.WriteString(")")
		s.endWrite(q)
	}

	// 2. The heartbeats: the new lease is now + the lease, never shorter than
	// it is and never past assigned_at + the maximum hold.
	if len(beats) > 0 {
		// The editors' last-seen times, not an event: a claim's rows do not
		// grow with how long it is held. editor_seen is locked by nothing
		// that claims (see 0014_heartbeats_are_not_history.sql), and its rows
		// are taken in key order, so that no two groups deadlock on them.
		q.WriteString("INSERT INTO editor_seen (editor_id, last_seen_at)\n\tSELECT editor_id, @taskd_now FROM tasks FORCE INDEX (PRIMARY)")
		beating()
		args = append(args, hold)
		q.WriteString(belowLimit + " AND editor_id IS NOT NULL")
		s.guardWrite(q)
		q.WriteString(" ORDER BY editor_id\n\tON DUPLICATE KEY UPDATE last_seen_at = GREATEST(last_seen_at, VALUES(last_seen_at));\n")
		q.WriteString("UPDATE tasks FORCE INDEX (PRIMARY) SET lease_expires_at = LEAST(GREATEST(@taskd_now + INTERVAL ")
		args = append(args, valuesSQL(q, bids, bleases)...)
		q.WriteString(" MICROSECOND, lease_expires_at), assigned_at + INTERVAL ? MICROSECOND)")
		args = append(args, hold)
		beating()
		q.WriteString(belowLimit)
		s.endWrite(q)
		args = append(args, hold)
	}

	// The submits.
	if len(subs) > 0 {
		// A reviewer's decision and notes, when the round has any.
		reviewed := slices.ContainsFunc(decisions, func(d any) bool { return d != nil }) ||
			slices.ContainsFunc(notes, func(n any) bool { return n != nil })
		// A claim made without a 'claimed' event (a worker's: see
		// logClaimsSQL) has its result as the record of the claim and the
		// submit, and no 'submitted' event.
		q.WriteString("INSERT INTO task_results (task_id, fence, holder, editor_id, result, stage, stage_name, " + resultClaimColumns)
		if reviewed {
			q.WriteString(", decision, notes")
		}
		q.WriteString(")\n\tSELECT id, fence, holder, editor_id, ")
		args = append(args, valuesSQL(q, ids, results)...)
		q.WriteString(", stage, stage_name, ")
		args = append(args, writeUnloggedResultSQL(q, func(q *strings.Builder) []any { return tracesSQL(q, ids, straces) })...)
		if reviewed {
			q.WriteString(", ")
			args = append(args, valuesSQL(q, ids, decisions)...)
			q.WriteString(", ")
			args = append(args, valuesSQL(q, ids, notes)...)
		}
		q.WriteString(" FROM tasks FORCE INDEX (PRIMARY)")
		live()
		s.endWrite(q)
		q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, trace_id, `at`, detail)\n\tSELECT id, 'submitted', fence, holder, editor_id, ")
		args = append(args, tracesSQL(q, ids, straces)...)
		// A stage's submit says which, and its decision (stage_name is NULL
		// for a task without stages).
		q.WriteString(", @taskd_now, CONCAT('stage ', stage_name")
		if reviewed {
			q.WriteString(", COALESCE(CONCAT(': ', ")
			args = append(args, valuesSQL(q, ids, decisions)...)
			q.WriteString("), '')")
		}
		q.WriteString(") FROM tasks FORCE INDEX (PRIMARY)")
		live()
		q.WriteString(loggedSQL)
		s.endWrite(q)
		if s.outbox[tasks.WebhookSubmitted] {
			q.WriteString("INSERT INTO webhook_outbox (kind, task_id, fence, holder, editor_id, category, cause, created_at, stage_name, decision)\n\tSELECT 'submitted', id, fence, holder, editor_id, category, 'submit', @taskd_now, stage_name, ")
			args = append(args, valuesSQL(q, ids, decisions)...)
			q.WriteString(" FROM tasks FORCE INDEX (PRIMARY)")
			live()
			s.endWrite(q)
		}
		args = append(args, s.submitSetSQL(q, tasksByKeySQL, backs)...)
		live()
		s.endWrite(q)
	}

	// 3 and 4. The claims.
	if len(claims) > 0 {
		if len(editors) > 0 {
			// A SELECT ... INTO, not a SET: MariaDB runs a SET's subqueries
			// as locking reads (shared locks), which would hold the claimed
			// tasks' rows against the writes of others until the commit.
			q.WriteString("SELECT COALESCE((SELECT GROUP_CONCAT(task_id) FROM task_skips FORCE INDEX (PRIMARY) WHERE task_id IN (")
			args = append(args, listSQL(q, "?", editors, func(i int) []any { return []any{editors[i].claim.TaskID} })...)
			q.WriteString(") AND (task_id, editor_id) IN (")
			args = append(args, listSQL(q, "(?, ?)", editors, func(i int) []any { return []any{editors[i].claim.TaskID, editors[i].claim.EditorID} })...)
			q.WriteString(") AND `until` > @taskd_now), ''),\n\t")
			args = append(args, busySetSQL(q, editors, s.hedging())...)
			q.WriteString(",\n\t")
			args = append(args, barredSetSQL(q, editors)...)
			q.WriteString("\n\tINTO @taskd_skipped, @taskd_busy, @taskd_barred;\n")
		}
		ids := make([]int64, len(claims))
		fences := make([]int64, len(claims))
		bumped := make([]int64, len(claims))
		holders := make([]string, len(claims))
		editorIDs := make([]any, len(claims))
		leases := make([]int64, len(claims))
		traces := make([]any, len(claims))
		traceIDs := make([]any, len(claims))
		for i, c := range claims {
			p := c.claim
			ids[i], fences[i], bumped[i], holders[i] = p.TaskID, p.Fence, p.Fence+1, p.Holder
			editorIDs[i], leases[i], traces[i] = nullID(p.EditorID), micros(c.lease), nullString(p.TraceContext)
			traceIDs[i] = c.trace
		}
		// run_after first: when the task became claimable (see claimableSinceSQL).
		q.WriteString("UPDATE tasks FORCE INDEX (PRIMARY) SET run_after = " + claimableSinceSQL + ", status = 'assigned', fence = fence + 1, holder = ")
		args = append(args, valuesSQL(q, ids, holders)...)
		q.WriteString(", editor_id = ")
		args = append(args, valuesSQL(q, ids, editorIDs)...)
		q.WriteString(",\n\tassigned_at = @taskd_now, lease_expires_at = @taskd_now + INTERVAL ")
		args = append(args, valuesSQL(q, ids, leases)...)
		q.WriteString(" MICROSECOND,\n\tattempts = attempts + 1, ")
		if !allUnchecked(claims) {
			// A task reserved for its editor is reserved no more (a claim
			// guarded by uncheckedSQL takes none).
			q.WriteString("reserved_for = NULL, reserved_until = NULL, ")
		}
		// Its claims write their 'claimed' events (see logClaimsSQL).
		q.WriteString("claim_unlogged = 0, trace_context = ")
		args = append(args, valuesSQL(q, ids, traces)...)
		q.WriteString("\nWHERE id IN (")
		args = append(args, listSQL(q, "?", ids, func(i int) []any { return []any{ids[i]} })...)
		q.WriteString(") AND (id, fence) IN (")
		args = append(args, listSQL(q, "(?, ?)", ids, func(i int) []any { return []any{ids[i], fences[i]} })...)
		q.WriteString(") AND status = 'pending' AND run_after <= @taskd_now")
		args = append(args, guardsSQL(q, claims)...)
		q.WriteString(notPausedSQL)
		args = append(args, s.notLimitedSQL(q)...)
		s.endWrite(q)
		q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, trace_id, `at`)\n\tSELECT id, 'claimed', fence, holder, editor_id, ")
		args = append(args, tracesSQL(q, ids, traceIDs)...)
		q.WriteString(", @taskd_now FROM tasks FORCE INDEX (PRIMARY)")
		// The claims the UPDATE made: the row shows the claimant, its fence
		// bumped, assigned at this round's instant.
		args = append(args, membersSQL(q, ids, bumped, holders)...)
		q.WriteString(" AND assigned_at = @taskd_now")
		s.endWrite(q)
	}

	// 5. The report.
	q.WriteString("SELECT FIND_IN_SET(id, @taskd_live) > 0 AS submitted, assigned_at <=> @taskd_now AS this_round,\n\t" +
		"FIND_IN_SET(id, @taskd_skipped) > 0 AS skipped, EXISTS (SELECT 1 FROM paused_categories p WHERE p.category = tasks.category) AS paused,\n\t" +
		"@taskd_editors AS editors, @taskd_busy AS busy_editors, FIND_IN_SET(id, @taskd_beat) > 0 AS beat,\n\t")
	if expectWorkflow(claims) {
		q.WriteString("FIND_IN_SET(id, @taskd_barred) > 0 AS barred,\n\t" +
			"COALESCE(TIMESTAMPDIFF(MICROSECOND, @taskd_now, reserved_until), 0) AS reserved_left, ")
	}
	q.WriteString("COALESCE(lease_expires_at >= @taskd_now AND lease_expires_at >= assigned_at + INTERVAL ? MICROSECOND, 0) AS at_limit,\n\t" +
		reportColumns + " FROM tasks FORCE INDEX (PRIMARY) WHERE id IN (")
	args = append(args, hold)
	var all []int64
	for _, c := range cs {
		if c.beat != nil {
			all = append(all, c.beat.TaskID)
		}
		if c.submit != nil {
			all = append(all, c.submit.TaskID)
		}
		if c.claim != nil {
			all = append(all, c.claim.TaskID)
		}
	}
	args = append(args, listSQL(q, "?", all, func(i int) []any { return []any{all[i]} })...)
	q.WriteString(");\n")
	return args, scanReport(cs)
}

// submitSetSQL writes the SET of the UPDATE that ends the round's submitted
// claims, and returns its arguments. A submit at a stage before the last, or a
// send back (its task in backs), puts the task back in the pool at the next
// stage, or at the one before, reserved for the editor who did it for the
// category's send-back hold; any other submit makes the task done. Either way
// the claim is no longer unlogged (see logClaimsSQL), assigned_at keeps the time
// of the claim the submit ended, and a task put back
// in the pool is claimable from now on (run_after: see claimableSinceSQL). Every expression
// reads the row as it was: stage, which they read, is set last. table is what the
// UPDATE updates: tasksByKeySQL, or a join of the members and tasks.
func (s *Store) submitSetSQL(q *strings.Builder, table string, backs []int64) []any {
	if len(backs) == 0 {
		// No send back: the short form.
		q.WriteString("UPDATE " + table + " SET run_after = IF(" + advancesSQL + ", GREATEST(run_after, @taskd_now), run_after),\n\t" +
			"done_at = IF(" + advancesSQL + ", NULL, @taskd_now),\n\t" +
			"holder = IF(" + advancesSQL + ", NULL, holder), attempts = IF(" + advancesSQL + ", 0, attempts),\n\t" +
			"status = IF(" + advancesSQL + ", 'pending', 'done'), editor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0,\n\t" +
			"stage = stage + (" + advancesSQL + ")")
		return nil
	}
	var args []any
	// back writes whether the row's task is sent back.
	back := func() {
		q.WriteString("id IN (")
		args = append(args, listSQL(q, "?", backs, func(i int) []any { return []any{backs[i]} })...)
		q.WriteString(")")
	}
	// moves writes whether the row's task goes to another stage.
	moves := func() {
		q.WriteString("(" + advancesSQL + " OR ")
		back()
		q.WriteString(")")
	}
	q.WriteString("UPDATE " + table + " SET run_after = IF(")
	moves()
	q.WriteString(", GREATEST(run_after, @taskd_now), run_after),\n\tdone_at = IF(")
	moves()
	q.WriteString(", NULL, @taskd_now),\n\tholder = IF(")
	moves()
	q.WriteString(", NULL, holder), attempts = IF(")
	moves()
	q.WriteString(", 0, attempts),\n\treserved_for = IF(")
	back()
	q.WriteString(", (SELECT r.editor_id FROM task_results r FORCE INDEX (PRIMARY)\n\t\t" +
		"WHERE r.task_id = tasks.id AND r.stage = CAST(tasks.stage AS SIGNED) - 1 ORDER BY r.fence DESC LIMIT 1), NULL),\n\treserved_until = IF(")
	back()
	q.WriteString(", @taskd_now + INTERVAL ")
	args = append(args, s.sendBackHoldSQL(q)...)
	q.WriteString(" MICROSECOND, NULL),\n\tstatus = IF(")
	moves()
	q.WriteString(", 'pending', 'done'), editor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0,\n\tstage = IF(")
	back()
	q.WriteString(", stage - 1, IF(" + advancesSQL + ", stage + 1, stage))")
	return args
}

// advancesSQL says whether a submit moves the row's task to its next stage.
const advancesSQL = "stage + 1 < stage_count"

// reportColumns are taskColumns but for the payload of a task the round
// submitted or extended, which nobody reads: JSON null instead.
var reportColumns = strings.Replace(taskColumns, " payload,",
	" IF(FIND_IN_SET(id, @taskd_live) OR FIND_IN_SET(id, @taskd_beat), 'null', payload) AS payload,", 1)

// guardsSQL writes the claims' own checks, for the WHERE of their UPDATE, and
// returns their arguments: the task not skipped by its editor nor barred to it
// (barredSetSQL) or, for an editor's claim that expects no workflow, without
// one (uncheckedSQL), and per claim "CASE id WHEN <task> THEN <checks> ... END"
// with its editor enabled and not busy and its submit accepted. A worker's
// claim without a submit has none. Only what the round's claims need is
// written: a round of claims without workflows carries no workflow check but
// uncheckedSQL, once.
func guardsSQL(q *strings.Builder, claims []*cycle) []any {
	var args []any
	editors, guarded := false, false
	for _, c := range claims {
		editors = editors || c.claim.EditorID != 0
		guarded = guarded || c.claim.EditorID != 0 || c.submit != nil
	}
	if editors {
		q.WriteString(" AND NOT FIND_IN_SET(id, @taskd_skipped)")
	}
	if expectWorkflow(claims) {
		q.WriteString(" AND NOT FIND_IN_SET(id, @taskd_barred)")
	}
	// An editor's claim that expects no workflow is guarded by uncheckedSQL:
	// once for the round when every claim is one.
	uncheckedAll := allUnchecked(claims)
	if uncheckedAll {
		q.WriteString(" AND " + uncheckedSQL)
	}
	if !guarded {
		return nil
	}
	q.WriteString("\n\tAND CASE id")
	for _, c := range claims {
		q.WriteString(" WHEN ? THEN ")
		args = append(args, c.claim.TaskID)
		var checks []string
		if c.claim.EditorID != 0 {
			checks = append(checks, "FIND_IN_SET(?, @taskd_editors) AND NOT FIND_IN_SET(?, @taskd_busy)")
			args = append(args, editorKey(c.claim), c.claim.EditorID)
			if unchecked(c.claim) && !uncheckedAll {
				checks = append(checks, uncheckedSQL)
			}
		}
		if c.submit != nil {
			checks = append(checks, "FIND_IN_SET(?, @taskd_live)")
			args = append(args, c.submit.TaskID)
		}
		if len(checks) == 0 {
			checks = append(checks, "TRUE")
		}
		q.WriteString(strings.Join(checks, " AND "))
	}
	q.WriteString(" END")
	return args
}

// unchecked says whether p is an editor's claim that expects no workflow, which
// uncheckedSQL guards.
func unchecked(p *tasks.ClaimParams) bool { return p.EditorID != 0 && !p.Workflow }

// allUnchecked says whether every one of claims is guarded by uncheckedSQL.
func allUnchecked(claims []*cycle) bool {
	return len(claims) > 0 && !slices.ContainsFunc(claims, func(c *cycle) bool { return !unchecked(c.claim) })
}

// expectWorkflow says whether some of claims expect a workflow (ClaimParams.Workflow).
func expectWorkflow(claims []*cycle) bool {
	return slices.ContainsFunc(claims, func(c *cycle) bool { return c.claim.Workflow })
}

// valuesSQL writes the value of each of ids for a SET or a SELECT list: one
// placeholder when all of vals are the same, else caseSQL's CASE. It returns
// the arguments.
func valuesSQL[T comparable](q *strings.Builder, ids []int64, vals []T) []any {
	for _, v := range vals[1:] {
		if v != vals[0] {
			return caseSQL(q, ids, vals)
		}
	}
	q.WriteString("?")
	return []any{vals[0]}
}

// scanReport returns the scan of a round's report.
func scanReport(cs []*cycle) func(*sqlx.Rows) error {
	type row struct {
		Submitted int64 `db:"submitted"`
		ThisRound bool  `db:"this_round"`
		Skipped   bool  `db:"skipped"`
		Paused    bool  `db:"paused"`
		// Editors and BusyEditors are @taskd_editors and @taskd_busy.
		Editors     string `db:"editors"`
		BusyEditors string `db:"busy_editors"`
		Beat        bool   `db:"beat"`
		AtLimit     bool   `db:"at_limit"`
		// Barred and ReservedLeft (microseconds from the round's instant to
		// the task's reserved_until) are read only for rounds with claims
		// that expect a workflow.
		Barred       bool  `db:"barred"`
		ReservedLeft int64 `db:"reserved_left"`
		tasks.Task
	}
	byID := make(map[int64]row, 2*len(cs))
	scan := scanByID(byID, func(r *row) int64 { return r.ID })
	return func(rows *sqlx.Rows) error {
		if err := scan(rows); err != nil {
			return err
		}
		var editors, busy map[string]bool
		for _, r := range byID {
			editors, busy = setOf(r.Editors), setOf(r.BusyEditors)
			break
		}
		for _, c := range cs {
			if bp := c.beat; bp != nil {
				r, ok := byID[bp.TaskID]
				c.beaten = beatRow{
					Beat:           ok && r.Beat && r.LeaseExpiresAt != nil,
					LeaseExpiresAt: r.LeaseExpiresAt,
					HoldLimit: ok && r.AtLimit && r.Fence == bp.Fence && r.Holder == bp.Holder &&
						r.Status == tasks.StatusAssigned,
				}
			}
			if sp := c.submit; sp != nil {
				r, ok := byID[sp.TaskID]
				c.foundSubmitted = ok
				c.submitted = submittedRow{
					Submitted: r.Submitted, Category: r.Category, AssignedAt: r.AssignedAt,
					DoneAt: r.DoneAt, TraceContext: r.TraceContext, MovedAt: r.UpdatedAt,
					Status: r.Status, Stage: r.Stage, Stages: r.Stages,
					FirstStage: r.Stage == 0 && r.Fence == sp.Fence && r.Holder == sp.Holder && r.Status == tasks.StatusAssigned,
				}
			}
			p := c.claim
			if p == nil {
				continue
			}
			r, ok := byID[p.TaskID]
			c.foundClaimed = ok
			c.claimed = claimedRow{Skipped: r.Skipped, Paused: r.Paused, Barred: r.Barred, Task: r.Task,
				Unchecked: p.EditorID != 0 && !p.Workflow && (r.Stages != nil || r.GroupID != 0 || r.ReservedFor != 0)}
			if r.Barred {
				c.claimed.BarredFor = heldFor(&r.Task, p.EditorID, time.Duration(r.ReservedLeft)*time.Microsecond)
			}
			if ok && r.ThisRound && r.Status == tasks.StatusAssigned && r.Fence == p.Fence+1 && r.Holder == p.Holder {
				c.claimed.Claimed = 1
			}
			if p.EditorID != 0 {
				id := strconv.FormatInt(p.EditorID, 10)
				c.claimed.Disabled = editors["d"+id]
				// An editor of another capacity than the claim expected
				// counts as busy: the locking way reads its capacity.
				c.claimed.Busy = !editors[editorKey(p)] || busy[id]
			}
		}
		return nil
	}
}

// setOf is the set of the items of a comma-separated list.
func setOf(list string) map[string]bool {
	set := map[string]bool{}
	for item := range strings.SplitSeq(list, ",") {
		if item != "" {
			set[item] = true
		}
	}
	return set
}
