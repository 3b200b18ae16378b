package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// membersSQL writes the live-claim predicate of members to q, at the batch's
// instant, and returns its arguments: the rows named by id, each with its
// member's fence and holder. Statements using it force the primary key: the
// optimizer would otherwise read (and, in a locking statement, lock) every
// assigned row through the status index. Ids and fences are integers, written
// as literals; holders, the caller's strings, are arguments, and a batch of
// one holder (a worker process's, the usual case) names it once.
func membersSQL(q *strings.Builder, ids []int64, fences []int64, holders []string) []any {
	q.WriteString(" WHERE id IN (")
	intsSQL(q, ids)
	var args []any
	if len(holders) > 0 && !slices.ContainsFunc(holders, func(h string) bool { return h != holders[0] }) {
		q.WriteString(") AND holder = ? AND (id, fence) IN (")
		args = []any{holders[0]}
		pairsSQL(q, ids, fences)
	} else {
		q.WriteString(") AND (id, fence, holder) IN (")
		args = make([]any, 0, len(ids))
		for i := range ids {
			if i > 0 {
				q.WriteString(", ")
			}
			var buf [48]byte
			b := append(buf[:0], '(')
			b = strconv.AppendInt(b, ids[i], 10)
			b = append(b, ", "...)
			b = strconv.AppendInt(b, fences[i], 10)
			q.Write(append(b, ", ?)"...))
			args = append(args, holders[i])
		}
	}
	q.WriteString(") AND status = 'assigned' AND lease_expires_at >= @taskd_now")
	return args
}

// tasksByKeySQL is tasks read by its primary key. Statements naming their
// rows by id force it: the optimizer would otherwise read (and, in a locking
// statement, lock) every assigned row through the status index.
const tasksByKeySQL = "tasks FORCE INDEX (PRIMARY)"

// memberEnd is how a completion ends a member of its batch: the m_end of its
// row in the member table (membersTableSQL). A claim's members have endFailed.
type memberEnd int8

const (
	endFailed  memberEnd = 0
	endDone    memberEnd = 1
	endSnoozed memberEnd = 2
)

// Which members of a batch's member table (membersTableSQL) a statement
// joins: all, or only those a completion ends as done, as failed or as
// snoozed.
const (
	membersAll     = ""
	membersDone    = " AND m.m_end = 1"
	membersFailed  = " AND m.m_end = 0"
	membersSnoozed = " AND m.m_end = 2"
)

// membersTableSQL is the member table of a statement batch: the members of
// @taskd_members (membersJSON's, set once at the batch's start), each a row
// (m_id, m_fence, m_holder, m_end), joined to tasks by membersJoinSQL.
const membersTableSQL = "JSON_TABLE(@taskd_members, '$[*]' COLUMNS (m_id BIGINT PATH '$[0]', m_fence BIGINT PATH '$[1]',\n\t" +
	"m_holder VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]', m_end TINYINT PATH '$[3]')) m"

// membersJoinSQL is the member table joined to the rows of tasks it names,
// read by primary key, the member table first. Its tasks' columns keep their
// names: the member table's all start with m_.
const membersJoinSQL = membersTableSQL + " STRAIGHT_JOIN " + tasksByKeySQL + " ON tasks.id = m.m_id"

// membersLiveSQL is the live-claim predicate of membersJoinSQL's rows at the
// batch's instant: the row has the member's fence and holder, and the claim
// is assigned and its lease not passed.
const membersLiveSQL = "tasks.fence = m.m_fence AND tasks.holder = m.m_holder AND tasks.status = 'assigned' AND tasks.lease_expires_at >= @taskd_now"

// membersFromSQL writes the FROM and WHERE of a statement reading the live
// claims of which (membersAll, membersDone, membersFailed or membersSnoozed)
// of the batch's members to q.
func membersFromSQL(q *strings.Builder, which string) {
	q.WriteString(" FROM " + membersJoinSQL + " WHERE " + membersLiveSQL + which)
}

// membersJSON encodes the members (ids[i], fences[i], holders[i], ends[i])
// as the JSON array membersTableSQL reads: one bound argument, holders
// encoded by encoding/json, never written into the statement.
func membersJSON(ids, fences []int64, holders []string, ends []memberEnd) (string, error) {
	m := make([][4]any, len(ids))
	for i := range ids {
		m[i] = [4]any{ids[i], fences[i], holders[i], ends[i]}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode the members: %w", err)
	}
	return string(b), nil
}

// intsSQL writes ids to q as integer literals, comma-separated: integers
// are safe to name in the statement, which spares the driver and the server
// an argument each.
func intsSQL(q *strings.Builder, ids []int64) {
	var buf [24]byte
	for i, id := range ids {
		if i > 0 {
			q.WriteString(", ")
		}
		q.Write(strconv.AppendInt(buf[:0], id, 10))
	}
}

// pairsSQL writes the pairs (as[i], bs[i]) to q as integer literals,
// comma-separated.
func pairsSQL(q *strings.Builder, as, bs []int64) {
	var buf [48]byte
	for i := range as {
		if i > 0 {
			q.WriteString(", ")
		}
		b := append(buf[:0], '(')
		b = strconv.AppendInt(b, as[i], 10)
		b = append(b, ", "...)
		b = strconv.AppendInt(b, bs[i], 10)
		q.Write(append(b, ')'))
	}
}

// listSQL writes one item per member of vs to q, comma-separated, and returns
// the arguments of each, in order.
func listSQL[T any](q *strings.Builder, item string, vs []T, itemArgs func(i int) []any) []any {
	args := make([]any, 0, strings.Count(item, "?")*len(vs))
	for i := range vs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(item)
		args = append(args, itemArgs(i)...)
	}
	return args
}

// caseSQL writes "CASE id WHEN <id> THEN ? ... END" to q for the values of
// ids, the ids as integer literals, and returns its arguments: the values.
func caseSQL[T any](q *strings.Builder, ids []int64, vals []T) []any {
	args := make([]any, 0, len(ids))
	q.WriteString("CASE id")
	var buf [32]byte
	for i, id := range ids {
		b := append(buf[:0], " WHEN "...)
		b = strconv.AppendInt(b, id, 10)
		q.Write(append(b, " THEN ?"...))
		args = append(args, vals[i])
	}
	q.WriteString(" END")
	return args
}

// literalCaseSQL writes the SQL literals lits of ids to q: the literal alone
// when every member has the same, else "CASE id WHEN <id> THEN <literal> ...
// END", the ids as integer literals too. The literals must be the store's own
// (integers, strings of known characters), never a caller's text.
func literalCaseSQL(q *strings.Builder, ids []int64, lits []string) {
	if !slices.ContainsFunc(lits, func(l string) bool { return l != lits[0] }) {
		q.WriteString(lits[0])
		return
	}
	q.WriteString("CASE id")
	var buf [32]byte
	for i, id := range ids {
		b := append(buf[:0], " WHEN "...)
		b = strconv.AppendInt(b, id, 10)
		q.Write(append(b, " THEN "...))
		q.WriteString(lits[i])
	}
	q.WriteString(" END")
}

// checkBatch returns an error wrapping ErrInvalid for a batch of n members
// with a task named twice.
func checkBatch(n int, id func(i int) int64) error {
	if n > tasks.BatchMax {
		return fmt.Errorf("%w: at most %d members, got %d", tasks.ErrInvalid, tasks.BatchMax, n)
	}
	seen := make(map[int64]bool, n)
	for i := range n {
		if seen[id(i)] {
			return fmt.Errorf("%w: task %d appears twice", tasks.ErrInvalid, id(i))
		}
		seen[id(i)] = true
	}
	return nil
}

// ClaimBatch claims many pending tasks for workers in one statement batch (one round
// trip, one commit): one fenced UPDATE moves every member whose row still has the
// fence and status its caller saw (pending, run_after passed, category not paused) to
// assigned, bumping each row's fence and setting each its own holder and a lease from
// the database clock. It writes no 'claimed' events: it marks the claims
// (claim_unlogged), and a claim's successful submit leaves its result row as the record
// of the claim and the submit, while any other end of it writes its 'claimed' event
// then (see logClaimsSQL). Only when ctx's sampled span is not the one TraceContext
// names, which the events keep, are the 'claimed' events written now, one INSERT.
// Each member is claimed or refused on its own, and the answer says which, in the
// order of ps: a member a limit in flight had no room for is refused with
// ErrLimited (see limits.go).
//
// Every member must be a worker's (EditorID 0) claim of a pending task (Status
// StatusPending) with the same Lease and TraceContext; a claim taking over an expired
// lease goes through Claim. It returns an error wrapping ErrInvalid, claiming nothing,
// for bad params, and the error of the batch when it failed as a whole (nothing was
// claimed then).
func (s *Store) ClaimBatch(ctx context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	fail := func(err error) ([]tasks.ClaimResult, error) { return nil, fmt.Errorf("claim batch: %w", err) }
	query, args, err := s.claimBatchSQL(ps, traceOf(ctx))
	if err != nil {
		return fail(err)
	}
	a := s.newClaimAnswer(ps)
	if err := s.batch(ctx, query, args, a.scan); err != nil {
		return fail(lostRace(err))
	}
	return a.results(), nil
}

// claimAnswer reads a ClaimBatch's answer: the members' rows, scanned
// directly (the batch's hundreds of rows of 26 columns were sqlx's
// reflection's).
type claimAnswer struct {
	ps   []tasks.ClaimParams
	byID map[int64]claimRow
	// limited says the rows have the limited column (limitsReportSQL).
	limited bool
}

// claimRow is the row of a member of a ClaimBatch.
type claimRow struct {
	ThisBatch bool
	Paused    bool
	Limited   bool
	tasks.Task
}

func (s *Store) newClaimAnswer(ps []tasks.ClaimParams) *claimAnswer {
	return &claimAnswer{ps: ps, byID: make(map[int64]claimRow, len(ps)), limited: s.limits != nil}
}

// scan reads the rows of the batch's SELECT; it sets, not accumulates (a
// deadlock victim's batch runs again).
func (a *claimAnswer) scan(rows *sqlx.Rows) error {
	clear(a.byID)
	for rows.Next() {
		var r claimRow
		dest := []any{&r.ThisBatch, &r.Paused}
		if a.limited {
			dest = append(dest, &r.Limited)
		}
		dest = append(dest, taskFields(&r.Task)...)
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		a.byID[r.ID] = r
	}
	return rows.Err()
}

// results returns what happened to each member, in the order of ps.
func (a *claimAnswer) results() []tasks.ClaimResult {
	out := make([]tasks.ClaimResult, len(a.ps))
	for i, p := range a.ps {
		r, ok := a.byID[p.TaskID]
		switch {
		case ok && r.ThisBatch && r.Status == tasks.StatusAssigned && r.Fence == p.Fence+1 && r.Holder == p.Holder:
			out[i].Claim = claimOf(r.Task)
		case ok && r.Paused && r.Status == tasks.StatusPending && r.Fence == p.Fence:
			out[i].Err = fmt.Errorf("claim task %d: %w", p.TaskID, tasks.ErrPaused)
		case ok && r.Limited && r.Status == tasks.StatusPending && r.Fence == p.Fence:
			out[i].Err = fmt.Errorf("claim task %d: %w", p.TaskID, tasks.ErrLimited)
		default:
			out[i].Err = fmt.Errorf("claim task %d: %w", p.TaskID, tasks.ErrStale)
		}
	}
	return out
}

// claimBatchSQL checks the members of a ClaimBatch and writes its statement
// batch, its events with traceID (traceOf's).
func (s *Store) claimBatchSQL(ps []tasks.ClaimParams, traceID any) (string, []any, error) {
	if err := checkBatch(len(ps), func(i int) int64 { return ps[i].TaskID }); err != nil {
		return "", nil, err
	}
	lease, err := s.checkClaimParams(ps[0])
	if err != nil {
		return "", nil, err
	}
	ids := make([]int64, len(ps))
	fences := make([]int64, len(ps))
	holders := make([]string, len(ps))
	for i, p := range ps {
		if _, err := s.checkClaimParams(p); err != nil {
			return "", nil, fmt.Errorf("task %d: %w", p.TaskID, err)
		}
		switch {
		case p.EditorID != 0:
			return "", nil, fmt.Errorf("%w: task %d: only workers claim in batches", tasks.ErrInvalid, p.TaskID)
		case p.Status != tasks.StatusPending:
			return "", nil, fmt.Errorf("%w: task %d: the task must be pending, not %q", tasks.ErrInvalid, p.TaskID, p.Status)
		case p.Lease != ps[0].Lease || p.TraceContext != ps[0].TraceContext:
			return "", nil, fmt.Errorf("%w: task %d: the members' leases and trace contexts differ", tasks.ErrInvalid, p.TaskID)
		}
		ids[i], fences[i], holders[i] = p.TaskID, p.Fence, p.Holder
	}

	members, err := membersJSON(ids, fences, holders, make([]memberEnd, len(ids)))
	if err != nil {
		return "", nil, err
	}
	var q strings.Builder
	// The members, named once: the UPDATE joins them, and sets each its
	// holder from them.
	args := []any{members}
	// run_after first: when the task became claimable (see claimableSinceSQL).
	q.WriteString(workerBatchHead + strings.TrimSuffix(membersSetSQL, ";\n"))
	largs, err := s.limitsSQL(&q, ps)
	if err != nil {
		return "", nil, err
	}
	args = append(args, largs...)
	q.WriteString("UPDATE " + membersJoinSQL + " SET run_after = " + claimableSinceSQL + ", status = 'assigned', fence = fence + 1, holder = m.m_holder")
	q.WriteString(",\n\teditor_id = NULL, assigned_at = @taskd_now, lease_expires_at = @taskd_now + INTERVAL ? MICROSECOND,\n\tattempts = attempts + 1, ")
	if slices.ContainsFunc(ps, func(p tasks.ClaimParams) bool { return p.Workflow }) {
		// A task sent back and reserved for an editor is reserved no more.
		q.WriteString("reserved_for = NULL, reserved_until = NULL, ")
	}
	// The claims' events are left to their ends (see logClaimsSQL) when
	// those can write them as now: with the trace id trace_context names.
	unlogged := claimTraceIs(ps[0].TraceContext, traceID)
	q.WriteString("trace_context = ?, claim_unlogged = ")
	if unlogged {
		q.WriteString("1")
	} else {
		q.WriteString("0")
	}
	q.WriteString("\nWHERE tasks.fence = m.m_fence AND tasks.status = 'pending' AND tasks.run_after <= @taskd_now" + notPausedSQL)
	s.limitsWhereSQL(&q)
	args = append(args, micros(lease), nullString(ps[0].TraceContext))
	s.endWrite(&q)

	if !unlogged {
		// The events of the claims the UPDATE made: the row shows the
		// member's holder, its fence bumped, assigned at this batch's instant.
		bumped := make([]int64, len(fences))
		for i, f := range fences {
			bumped[i] = f + 1
		}
		q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, trace_id, `at`)\n\tSELECT id, 'claimed', fence, holder, editor_id, ")
		args = append(args, traceSQL(&q, traceID)...)
		q.WriteString(", @taskd_now FROM tasks FORCE INDEX (PRIMARY)")
		args = append(args, membersSQL(&q, ids, bumped, holders)...)
		q.WriteString(" AND assigned_at = @taskd_now")
		s.endWrite(&q)
	}

	q.WriteString("SELECT assigned_at <=> @taskd_now AS this_batch,\n\tEXISTS (SELECT 1 FROM paused_categories p WHERE p.category = tasks.category) AS paused, " +
		s.limitsReportSQL() + taskColumns + " FROM tasks WHERE id IN (")
	intsSQL(&q, ids)
	q.WriteString(");\nCOMMIT")
	return q.String(), args, nil
}

// HeartbeatBatch extends the leases of many live claims, each as Heartbeat does (to
// now + lease on the database clock, never beyond assigned_at + Config.MaxHold and
// never shorter than it is), in one statement batch: one round trip and one commit for
// all of them. A renewal writes the lease only: no event (a claim's rows do not grow with
// how long it is held), and, this being the workers' renewal, no editor's last-seen time
// (Heartbeat moves that for an editor's claim). Each member is extended or refused on
// its own, and the answer says which, in the order of ps: a refused member's error
// wraps ErrStale, and ErrCancelled too when a cancel ended its claim (one more read,
// of the refused members only). Every member must have the same Lease.
//
// It returns an error wrapping ErrInvalid, changing nothing, for bad params, and the
// error of the batch when it failed as a whole (nothing was extended then).
func (s *Store) HeartbeatBatch(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	fail := func(err error) ([]tasks.Renewed, error) { return nil, fmt.Errorf("heartbeat batch: %w", err) }
	query, args, err := s.heartbeatBatchSQL(ps)
	if err != nil {
		return fail(err)
	}
	type row struct {
		ID      int64     `db:"id"`
		Expires time.Time `db:"expires"`
		AtLimit bool      `db:"at_limit"`
	}
	byID := make(map[int64]row, len(ps))
	scan := scanByID(byID, func(r *row) int64 { return r.ID })
	if err := s.batch(ctx, query, args, scan); err != nil {
		return fail(err)
	}
	var refused []claimRef
	for _, p := range ps {
		if _, ok := byID[p.TaskID]; !ok {
			refused = append(refused, claimRef{p.TaskID, p.Fence, p.Holder})
		}
	}
	var cancelled map[claimRef]bool
	if len(refused) > 0 {
		// Which a cancel ended: an error here leaves them stale, which
		// they are.
		cancelled, _ = s.cancelledClaims(ctx, refused)
	}
	out := make([]tasks.Renewed, len(ps))
	for i, p := range ps {
		r, ok := byID[p.TaskID]
		switch {
		case !ok && cancelled[claimRef{p.TaskID, p.Fence, p.Holder}]:
			out[i].Err = fmt.Errorf("heartbeat task %d: %w", p.TaskID, errClaimCancelled)
		case !ok:
			out[i].Err = fmt.Errorf("heartbeat task %d: %w", p.TaskID, tasks.ErrStale)
		case r.AtLimit:
			out[i].Err = fmt.Errorf("heartbeat task %d: %w", p.TaskID, tasks.ErrHoldLimit)
		default:
			out[i].LeaseExpiresAt = r.Expires
		}
	}
	return out, nil
}

// heartbeatBatchSQL checks the members of a HeartbeatBatch and writes its
// statement batch.
func (s *Store) heartbeatBatchSQL(ps []tasks.HeartbeatParams) (string, []any, error) {
	if err := checkBatch(len(ps), func(i int) int64 { return ps[i].TaskID }); err != nil {
		return "", nil, err
	}
	lease, err := s.checkLease(ps[0].Lease)
	if err != nil {
		return "", nil, err
	}
	ids := make([]int64, len(ps))
	fences := make([]int64, len(ps))
	holders := make([]string, len(ps))
	for i, p := range ps {
		if p.Lease != ps[0].Lease {
			return "", nil, fmt.Errorf("%w: task %d: the members' leases differ", tasks.ErrInvalid, p.TaskID)
		}
		if err := checkHolder(p.Holder); err != nil {
			return "", nil, fmt.Errorf("task %d: %w", p.TaskID, err)
		}
		ids[i], fences[i], holders[i] = p.TaskID, p.Fence, p.Holder
	}
	hold := micros(s.cfg.MaxHold)
	newLease := `LEAST(GREATEST(@taskd_now + INTERVAL ? MICROSECOND, lease_expires_at), assigned_at + INTERVAL ? MICROSECOND)`
	belowLimit := ` AND lease_expires_at < assigned_at + INTERVAL ? MICROSECOND`

	var q strings.Builder
	var args []any
	// The report, which also locks the members' rows: those it shows are
	// live, and the writes below take exactly them (but those at the limit).
	q.WriteString("START TRANSACTION;\nSET @taskd_now = NOW(3);\nSELECT id, " + newLease + " AS expires,\n\tlease_expires_at >= assigned_at + INTERVAL ? MICROSECOND AS at_limit FROM tasks FORCE INDEX (PRIMARY)")
	args = append(args, micros(lease), hold, hold)
	live := membersSQL(&q, ids, fences, holders)
	args = append(args, live...)
	q.WriteString(" FOR UPDATE;\nUPDATE tasks FORCE INDEX (PRIMARY) SET lease_expires_at = " + newLease)
	args = append(args, micros(lease), hold)
	args = append(args, membersSQL(&q, ids, fences, holders)...)
	q.WriteString(belowLimit)
	s.endWrite(&q)
	q.WriteString("COMMIT")
	args = append(args, hold)
	return q.String(), args, nil
}

// Complete ends many live claims in one statement batch (one round trip, one
// commit): the members with a Result as Submit does (the result row, the 'submitted'
// event, the outbox's record when webhooks subscribe to it, the task done; for a claim
// ClaimBatch made without a 'claimed' event, the result row with the claim's time and
// no event: see logClaimsSQL), those with a Snooze as tasks.Snooze says (a 'snoozed'
// event and the task back in the pool after Snooze.For, its attempt not counted; or,
// at the task's limit of snoozes, a 'dead' event and the task dead), the others as
// Fail does (a 'failed' event and the task back in the pool after its Backoff, or,
// with Dead or no attempts left, a 'dead' event and the task dead); those ended
// otherwise than by a result each after the 'claimed' event of a claim made without
// one. Each statement writes all members of its kind whose claim is live at the
// batch's instant, and a first locking read reports which those are: a stale member
// changes nothing and the others commit. The answer says what happened to each, in the order of os:
// a refused member's error wraps ErrStale, and ErrCancelled too when a cancel ended its
// claim (one more read, when a member was refused).
//
// It returns an error wrapping ErrInvalid, changing nothing, for bad params; and the
// error of the batch when it failed as a whole (nothing was written then): a caller
// splits a batch the server refused (ErrInvalid, ErrBusy) to find the member at fault.
func (s *Store) Complete(ctx context.Context, os []tasks.Outcome) ([]tasks.Completed, error) {
	if len(os) == 0 {
		return nil, nil
	}
	fail := func(err error) ([]tasks.Completed, error) { return nil, fmt.Errorf("complete batch: %w", err) }
	query, args, dead, err := s.completeSQL(os, traceOf(ctx))
	if err != nil {
		return fail(err)
	}
	a := newCompleteAnswer(os, dead)
	if err := s.batch(ctx, query, args, a.scan); err != nil {
		return fail(err)
	}
	return s.markCancelled(ctx, os, a.results()), nil
}

// completeAnswer reads a Complete's answer: the live members' rows, each
// with the batch's instant.
type completeAnswer struct {
	os   []tasks.Outcome
	dead map[int64]bool // the members that die whatever their attempts
	byID map[int64]completeRow
	now  time.Time
}

// completeRow is the row of a live member of a Complete.
type completeRow struct {
	ID           int64
	Category     string
	AssignedAt   time.Time
	TraceContext string
	LastAttempt  bool
	Snoozes      int
}

func newCompleteAnswer(os []tasks.Outcome, dead []int64) *completeAnswer {
	a := &completeAnswer{os: os, dead: make(map[int64]bool, len(dead)), byID: make(map[int64]completeRow, len(os))}
	for _, id := range dead {
		a.dead[id] = true
	}
	return a
}

// scan reads the rows of the batch's report, leaving rows at its result;
// it sets, not accumulates (a deadlock victim's batch runs again). With no
// member live, no row carries the instant, and no answer needs it.
func (a *completeAnswer) scan(rows *sqlx.Rows) error {
	clear(a.byID)
	for rows.Next() {
		var r completeRow
		if err := rows.Scan(&r.ID, &r.Category, &r.AssignedAt, &r.TraceContext, &r.LastAttempt, &r.Snoozes, &a.now); err != nil {
			return err
		}
		a.byID[r.ID] = r
	}
	return rows.Err()
}

// results returns what happened to each member, in the order of os.
func (a *completeAnswer) results() []tasks.Completed {
	out := make([]tasks.Completed, len(a.os))
	for i, o := range a.os {
		r, ok := a.byID[o.TaskID]
		if !ok {
			out[i].Err = fmt.Errorf("complete task %d: %w", o.TaskID, tasks.ErrStale)
			continue
		}
		status := tasks.StatusDone
		switch {
		case o.Result != nil:
		case o.Snooze != nil:
			status = tasks.StatusPending
			if r.Snoozes >= o.Snooze.Max {
				status = tasks.StatusDead
			}
		default:
			status = tasks.StatusPending
			if a.dead[o.TaskID] || r.LastAttempt {
				status = tasks.StatusDead
			}
		}
		out[i].Ended = &tasks.Ended{
			TaskID: o.TaskID, Holder: o.Holder, Category: r.Category, Status: status,
			AssignedAt: r.AssignedAt, EndedAt: a.now, TraceContext: r.TraceContext,
		}
	}
	return out
}

// completeSQL checks the members of a Complete and writes its statement
// batch, its events with traceID (traceOf's); dead are the members that die
// whatever their attempts.
func (s *Store) completeSQL(os []tasks.Outcome, traceID any) (string, []any, []int64, error) {
	if err := checkBatch(len(os), func(i int) int64 { return os[i].TaskID }); err != nil {
		return "", nil, nil, err
	}
	var all struct {
		ids     []int64
		fences  []int64
		holders []string
		ends    []memberEnd
	}
	// The ids of the members ended as done and as failed, for the values
	// each has of its own.
	var doneIDs, failedIDs []int64
	var results, lastErrs, details []string
	var backoffs []int64
	var dead []int64
	var snoozed snoozedMembers
	for _, o := range os {
		if err := checkHolder(o.Holder); err != nil {
			return "", nil, nil, fmt.Errorf("task %d: %w", o.TaskID, err)
		}
		all.ids, all.fences, all.holders = append(all.ids, o.TaskID), append(all.fences, o.Fence), append(all.holders, o.Holder)
		switch {
		case o.Result != nil && o.Snooze != nil:
			return "", nil, nil, fmt.Errorf("%w: task %d: a result and a snooze", tasks.ErrInvalid, o.TaskID)
		case o.Result != nil:
			all.ends = append(all.ends, endDone)
			if err := tasks.CheckResult(o.Result); err != nil {
				return "", nil, nil, fmt.Errorf("task %d: %w", o.TaskID, err)
			}
			doneIDs = append(doneIDs, o.TaskID)
			results = append(results, string(o.Result))
			continue
		case o.Snooze != nil:
			all.ends = append(all.ends, endSnoozed)
			if err := snoozed.add(o.TaskID, *o.Snooze); err != nil {
				return "", nil, nil, err
			}
			continue
		}
		all.ends = append(all.ends, endFailed)
		if o.Backoff < 0 {
			return "", nil, nil, fmt.Errorf("%w: task %d: backoff must not be negative", tasks.ErrInvalid, o.TaskID)
		}
		failedIDs = append(failedIDs, o.TaskID)
		lastErrs = append(lastErrs, truncate(o.Err, maxLastErrorLen))
		details = append(details, truncate(o.Err, maxDetailLen))
		backoffs = append(backoffs, micros(o.Backoff.Truncate(time.Millisecond)))
		if o.Dead {
			dead = append(dead, o.TaskID)
		}
	}

	members, err := membersJSON(all.ids, all.fences, all.holders, all.ends)
	if err != nil {
		return "", nil, nil, err
	}
	var q strings.Builder
	// The members, named once: each statement joins them (membersFromSQL).
	args := []any{members}
	// The report, which also locks the members' rows: those it shows are
	// live, and the writes below take exactly them. Each row carries the
	// batch's instant, the end of the claims it reports.
	q.WriteString(workerBatchHead + membersSetSQL + "SELECT id, category, assigned_at, COALESCE(trace_context, '') AS trace_context,\n\tattempts >= max_attempts AS last_attempt, snoozes, CAST(@taskd_now AS DATETIME(3)) AS now")
	membersFromSQL(&q, membersAll)
	q.WriteString(" FOR UPDATE;\n")

	if len(doneIDs) > 0 {
		// A claim without a 'claimed' event has its result as the record of
		// the claim and the submit, submitted at the batch's instant as the
		// event would have been, and no 'submitted' event.
		q.WriteString("INSERT INTO task_results (task_id, fence, holder, editor_id, result, stage, stage_name, submitted_at, " + resultClaimColumns + ")\n\tSELECT id, fence, holder, editor_id, ")
		// Strings, not bytes: MySQL refuses binary strings in JSON columns.
		args = append(args, caseSQL(&q, doneIDs, results)...)
		q.WriteString(", stage, stage_name, @taskd_now, ")
		args = append(args, writeUnloggedResultSQL(&q, func(q *strings.Builder) []any { return traceSQL(q, traceID) })...)
		membersFromSQL(&q, membersDone)
		s.endWrite(&q)
		q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, trace_id, `at`)\n\tSELECT id, 'submitted', fence, holder, editor_id, ")
		args = append(args, traceSQL(&q, traceID)...)
		q.WriteString(", @taskd_now")
		membersFromSQL(&q, membersDone)
		q.WriteString(loggedSQL)
		s.endWrite(&q)
		if s.outbox[tasks.WebhookSubmitted] {
			q.WriteString("INSERT INTO webhook_outbox (kind, task_id, fence, holder, editor_id, category, cause, created_at, stage_name)\n\tSELECT 'submitted', id, fence, holder, editor_id, category, 'submit', @taskd_now, stage_name")
			membersFromSQL(&q, membersDone)
			s.endWrite(&q)
		}
		// A task with stages goes on to its next, as an editor's submit
		// takes it.
		args = append(args, s.submitSetSQL(&q, membersJoinSQL, nil)...)
		q.WriteString(" WHERE " + membersLiveSQL + membersDone)
		s.endWrite(&q)
	}

	if len(failedIDs) > 0 {
		// deadSQL is true for a member that dies: Dead set, or no attempts left.
		// It reads no column the UPDATE below sets, so it says the same before
		// and during the UPDATE.
		var deadSQL strings.Builder
		deadSQL.WriteString("(attempts >= max_attempts")
		if len(dead) > 0 {
			deadSQL.WriteString(" OR id IN (")
			intsSQL(&deadSQL, dead)
			deadSQL.WriteString(")")
		}
		deadSQL.WriteString(")")
		isDead := deadSQL.String()

		// The 'claimed' events of the claims made without one, first.
		q.WriteString(logClaimsSelectSQL)
		membersFromSQL(&q, membersFailed)
		q.WriteString(" AND claim_unlogged = 1")
		s.endWrite(&q)
		q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, detail, trace_id, `at`)\n\tSELECT id, IF(" + isDead + ", 'dead', 'failed'), fence, holder, editor_id, ")
		args = append(args, caseSQL(&q, failedIDs, details)...)
		q.WriteString(", ")
		args = append(args, traceSQL(&q, traceID)...)
		q.WriteString(", @taskd_now")
		membersFromSQL(&q, membersFailed)
		s.endWrite(&q)
		if s.outbox[tasks.WebhookDead] {
			q.WriteString("INSERT INTO webhook_outbox (kind, task_id, fence, holder, editor_id, category, cause, detail, created_at)\n\tSELECT 'dead', id, fence, holder, editor_id, category, 'fail', ")
			args = append(args, caseSQL(&q, failedIDs, details)...)
			q.WriteString(", @taskd_now")
			membersFromSQL(&q, membersFailed)
			q.WriteString(" AND " + isDead)
			s.endWrite(&q)
		}
		// A dead task keeps its holder and assigned_at as a record, as Fail's.
		q.WriteString("UPDATE " + membersJoinSQL + " SET last_error = ")
		args = append(args, caseSQL(&q, failedIDs, lastErrs)...)
		q.WriteString(",\n\trun_after = IF(" + isDead + ", run_after, @taskd_now + INTERVAL ")
		args = append(args, caseSQL(&q, failedIDs, backoffs)...)
		q.WriteString(" MICROSECOND),\n\tdone_at = IF(" + isDead + ", @taskd_now, done_at),\n\tholder = IF(" + isDead + ", holder, NULL),\n\tassigned_at = IF(" + isDead + ", assigned_at, NULL),\n\tstatus = IF(" + isDead + ", 'dead', 'pending'),\n\teditor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0")
		q.WriteString(" WHERE " + membersLiveSQL + membersFailed)
		s.endWrite(&q)
	}
	if len(snoozed.ids) > 0 {
		args = append(args, s.snoozeSQL(&q, &snoozed, traceID)...)
	}
	q.WriteString("COMMIT")
	return q.String(), args, dead, nil
}

// snoozedMembers are the members of a Complete ended by a snooze, each with
// its values as SQL literals: the store's own integers and strings of known
// characters, never a caller's text, so that a snooze costs its batch no
// argument.
type snoozedMembers struct {
	ids     []int64
	delays  []string // Snooze.For in microseconds
	details []string // Snooze.For as the 'snoozed' event's detail, quoted
	limits  []string // Snooze.Max
}

// add adds the member of task id with snooze sn, or returns an error
// wrapping ErrInvalid for values out of range.
func (m *snoozedMembers) add(id int64, sn tasks.Snooze) error {
	switch {
	case sn.For < 0 || sn.For > tasks.SnoozeMax:
		return fmt.Errorf("%w: task %d: a snooze must be 0..%v, got %v", tasks.ErrInvalid, id, tasks.SnoozeMax, sn.For)
	case sn.Max < 1:
		return fmt.Errorf("%w: task %d: a snooze's limit must be at least 1, got %d", tasks.ErrInvalid, id, sn.Max)
	}
	d := sn.For.Truncate(time.Millisecond)
	m.ids = append(m.ids, id)
	m.delays = append(m.delays, strconv.FormatInt(micros(d), 10))
	// A Duration's String has digits, '.' and the units h, m, s and ms
	// alone once truncated to the millisecond: nothing to escape.
	m.details = append(m.details, "'"+d.String()+"'")
	m.limits = append(m.limits, strconv.Itoa(sn.Max))
	return nil
}

// snoozeLimitSQL is the last_error of a task dead of a snooze past its limit,
// and the detail of its 'dead' event and webhook: its snoozes, which the
// statements that write it do not change.
const snoozeLimitSQL = "CONCAT('snoozed ', snoozes, ' times, the limit')"

// snoozeSQL writes the statements of a Complete that end its snoozed members
// to q, their events with traceID, and returns their arguments: the 'claimed'
// events of the claims made without one, first; then each member's 'snoozed'
// event, or its 'dead' event when its task has snoozed its limit already (the
// 'dead' webhook event too, when subscribed); then the tasks at their limit
// dead, and the others back in the pool after their delays. Neither UPDATE
// counts the claim's attempt. Whether a member is at its limit reads
// snoozes, which only the last statement sets, on the members the others
// left live.
func (s *Store) snoozeSQL(q *strings.Builder, m *snoozedMembers, traceID any) []any {
	var limit strings.Builder
	limit.WriteString("snoozes >= ")
	literalCaseSQL(&limit, m.ids, m.limits)
	atLimit := limit.String()

	q.WriteString(logClaimsSelectSQL)
	membersFromSQL(q, membersSnoozed)
	q.WriteString(" AND claim_unlogged = 1")
	s.endWrite(q)

	q.WriteString("INSERT INTO task_events (task_id, kind, fence, holder, editor_id, detail, trace_id, `at`)\n\tSELECT id, IF(" +
		atLimit + ", 'dead', 'snoozed'), fence, holder, editor_id, IF(" + atLimit + ", " + snoozeLimitSQL + ", ")
	literalCaseSQL(q, m.ids, m.details)
	q.WriteString("), ")
	args := traceSQL(q, traceID)
	q.WriteString(", @taskd_now")
	membersFromSQL(q, membersSnoozed)
	s.endWrite(q)

	if s.outbox[tasks.WebhookDead] {
		q.WriteString("INSERT INTO webhook_outbox (kind, task_id, fence, holder, editor_id, category, cause, detail, created_at)\n\tSELECT 'dead', id, fence, holder, editor_id, category, '" +
			string(tasks.WebhookSnooze) + "', " + snoozeLimitSQL + ", @taskd_now")
		membersFromSQL(q, membersSnoozed)
		q.WriteString(" AND " + atLimit)
		s.endWrite(q)
	}

	// A dead task keeps its holder and assigned_at as a record, as Fail's.
	q.WriteString("UPDATE " + membersJoinSQL + " SET last_error = " + snoozeLimitSQL + ", done_at = @taskd_now, status = 'dead',\n\t" +
		"attempts = attempts - 1, editor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0")
	q.WriteString(" WHERE " + membersLiveSQL + membersSnoozed + " AND " + atLimit)
	s.endWrite(q)

	// run_after: when the task is claimable again (see claimableSinceSQL).
	q.WriteString("UPDATE " + membersJoinSQL + " SET run_after = @taskd_now + INTERVAL ")
	literalCaseSQL(q, m.ids, m.delays)
	q.WriteString(" MICROSECOND,\n\tstatus = 'pending', holder = NULL, assigned_at = NULL, attempts = attempts - 1, snoozes = snoozes + 1,\n\t" +
		"editor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0")
	q.WriteString(" WHERE " + membersLiveSQL + membersSnoozed)
	s.endWrite(q)
	return args
}
