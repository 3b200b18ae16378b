package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Candidate query parts. The query is a UNION ALL of two branches per category, each
// an index range read that already yields rows in the branch's order, so LIMIT stops
// it after a few rows: one for pending tasks, from tasks_candidate (pool_status,
// category, priority DESC, due_order, id), whose cost does not depend on the size of
// the pool; and one for claims whose lease has passed, from tasks_expiry (status,
// category, lease_expires_at), the category's claims expired longest ago, whose cost
// is its LIMIT whatever the claims or the expired claims waiting for a sweep. A final
// ORDER BY ... LIMIT merges the branches in priority order. (Tasks with stages read
// both branches from tasks_stage_candidate, in priority order: see stageBranch.)
//
// Skip memory is an anti-join (LEFT JOIN ... IS NULL) on the task_skips primary key:
// one eq_ref lookup per row read. (NOT EXISTS lets the optimizer materialize every
// unexpired skip of every editor instead.) The index hints pin these plans: the
// optimizer may otherwise prefer another index when statistics are skewed, for
// example in a fresh, small table. internal/store/EXPLAIN.md shows the plans.
const (
	candidatePendingSQL = `(SELECT t.id, t.fence, t.priority, t.due_order, t.status, ` + candidateWorkflowSQL + `, ` + candidateKeySQL + ` FROM tasks t FORCE INDEX (tasks_candidate)%s
	WHERE t.pool_status = 'pending' AND t.category = ? AND t.run_after <= NOW(3)%s` + candidateNotPausedSQL + `
	ORDER BY t.priority DESC, t.due_order, t.id LIMIT ?)`
	candidateExpiredSQL = `(SELECT t.id, t.fence, t.priority, t.due_order, t.status, ` + candidateWorkflowSQL + `, ` + candidateKeySQL + ` FROM tasks t FORCE INDEX (tasks_expiry)%s
	WHERE t.status = 'assigned' AND t.category = ? AND t.lease_expires_at < NOW(3)` + candidateGoldTakeoverSQL + `%s` + candidateNotPausedSQL + `
	ORDER BY t.lease_expires_at LIMIT ?)`
	// candidateWorkflowSQL is Candidate.Workflow.
	candidateWorkflowSQL = `(t.stages IS NOT NULL OR t.group_id IS NOT NULL OR t.reserved_for IS NOT NULL) AS workflow`
	// candidateKeySQL is Candidate.LimitKey.
	candidateKeySQL = `COALESCE(t.limit_key, '') AS limit_key`
	// candidateNotPausedSQL leaves out a paused category: one primary-key lookup per
	// branch, whose argument is the branch's category. Claims check the pause
	// themselves; this only spares them candidates they would be refused.
	candidateNotPausedSQL = `
	AND NOT EXISTS (SELECT 1 FROM paused_categories p WHERE p.category = ?)`
	candidateSkipJoinSQL = `
	LEFT JOIN task_skips s FORCE INDEX (PRIMARY) ON s.task_id = t.id AND s.editor_id = ? AND s.until > NOW(3)`
	candidateNotSkippedSQL = ` AND s.task_id IS NULL`
	candidateOrderSQL      = `
ORDER BY priority DESC, due_order, id LIMIT ?`
)

// stageBranch turns a branch of the candidate query into its form for one stage:
// a range of tasks_stage_candidate (stage_status, category, stage_name, priority
// DESC, due_order, id), in the order of tasks_candidate, for both branches: the
// expired branch reads the stage's assigned rows until it has found LIMIT whose
// lease has passed, a cost bounded by the stage's claims.
var stageBranch = strings.NewReplacer(
	"FORCE INDEX (tasks_candidate)", "FORCE INDEX (tasks_stage_candidate)",
	"FORCE INDEX (tasks_expiry)", "FORCE INDEX (tasks_stage_candidate)",
	"t.pool_status = 'pending' AND t.category = ?", "t.stage_status = 'pending' AND t.category = ? AND t.stage_name = ?",
	"t.status = 'assigned' AND t.category = ?", "t.stage_status = 'assigned' AND t.category = ? AND t.stage_name = ?",
	"ORDER BY t.lease_expires_at LIMIT", "ORDER BY t.priority DESC, t.due_order, t.id LIMIT",
)

// candidatesQuery builds the candidate query for normalized categories, of tasks
// at stage only unless it is empty.
// A category's limits in flight (lims) leave out of the pending branch what
// has no room: all of it when the category is at its MaxInFlight, and the
// tasks of a key at its KeyLimit, so that a key with many tasks does not take
// every candidate of its category while its own are refused.
//
// keys are the limit keys of the keyed categories' pending tasks to read
// (keysOf's): the pending branch of a category with a KeyLimit reads the
// first tasks of each, as many as its room.
func candidatesQuery(cats []string, editorID int64, limit int, stage string, lims map[string]tasks.Workflow, keys map[string][]string) (string, []any) {
	join, notSkipped := "", ""
	var skipArgs []any
	if editorID != 0 {
		join, notSkipped = candidateSkipJoinSQL, candidateNotSkippedSQL
		skipArgs = []any{editorID}
	}
	var q strings.Builder
	var args []any
	pending := fmt.Sprintf(candidatePendingSQL, join, notSkipped)
	expired := fmt.Sprintf(candidateExpiredSQL, join, notSkipped)
	if stage != "" {
		pending, expired = stageBranch.Replace(pending), stageBranch.Replace(expired)
	}
	for i, c := range cats {
		if i > 0 {
			q.WriteString("\nUNION ALL\n")
		}
		w := lims[c]
		if w.Limited() {
			filter, _ := limitFilterSQL(w, stage != "")
			branch := fmt.Sprintf(candidatePendingSQL, join, notSkipped+filter)
			if stage != "" {
				branch = stageBranch.Replace(branch)
			}
			q.WriteString(branch)
		} else {
			q.WriteString(pending)
		}
		q.WriteString("\nUNION ALL\n")
		q.WriteString(expired)
		for branch := range 2 {
			args = append(args, skipArgs...)
			args = append(args, c)
			if stage != "" {
				args = append(args, stage)
			}
			if branch == 0 && w.Limited() {
				_, fargs := limitFilterSQL(w, stage != "")
				args = append(args, fargs(c)...)
			}
			args = append(args, c, limit)
		}
		if ks := keys[c]; w.KeyLimit > 0 && stage == "" && len(ks) > 0 {
			// The tasks with a key: each key's first, as many as its room.
			q.WriteString("\nUNION ALL\n")
			args = append(args, keyedBranchSQL(&q, c, ks, w, join, notSkipped, skipArgs, limit)...)
		}
	}
	q.WriteString(candidateOrderSQL)
	args = append(args, limit)
	return q.String(), args
}

// Candidates returns up to Limit tasks that are claimable now in the given categories:
// pending tasks whose run_after has passed, and assigned tasks whose lease has passed
// (claimable even before a sweep recycles them). Tasks the editor skipped are left out
// until the skip passes, and paused categories altogether. Highest priority first;
// within a priority, tasks with a due_at first, earliest first, then the others; then
// oldest (lowest id) first. Of a category's expired claims it takes those expired
// longest ago (up to Limit) and orders them with the pending tasks; the sweeper
// returns the others to the pool.
//
// A candidate is a hint, not a reservation: pass its fence to Claim, which refuses
// with ErrStale if someone else got there first. Candidates returns ErrInvalid for a
// bad limit or category, or more than MaxCategories categories.
func (s *Store) Candidates(ctx context.Context, p tasks.CandidatesParams) ([]tasks.Candidate, error) {
	limit := p.Limit
	if limit == 0 {
		limit = tasks.CandidatesLimitDefault
	}
	if limit < 1 || limit > tasks.CandidatesLimitMax {
		return nil, fmt.Errorf("candidates: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.CandidatesLimitMax)
	}
	cats, err := normalizeCategories(p.Categories)
	if err != nil {
		return nil, fmt.Errorf("candidates: %w", err)
	}
	if len(cats) == 0 {
		return []tasks.Candidate{}, nil
	}
	if p.Stage != "" {
		if err := tasks.CheckStage(p.Stage); err != nil {
			return nil, fmt.Errorf("candidates: %w", err)
		}
	}
	var keys map[string][]string
	if p.Stage == "" {
		if keys, err = s.keysOf(ctx, cats); err != nil {
			return nil, fmt.Errorf("candidates: %w", err)
		}
	}
	q, args := candidatesQuery(cats, p.EditorID, limit, p.Stage, endingLimits(s.limitsOf(), p.Ending), keys)
	var out []tasks.Candidate
	read := func(ctx context.Context, db *sqlx.DB) error {
		out = []tasks.Candidate{}
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c tasks.Candidate
			if err := rows.Scan(&c.ID, &c.Fence, &c.Priority, &c.Due, &c.Status, &c.Workflow, &c.LimitKey); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	}
	onReplica, err := s.read(ctx, p.Primary, read)
	if err == nil && onReplica && len(out) == 0 {
		// The replica may not have the newest tasks yet.
		err = read(ctx, s.db)
	}
	if err != nil {
		return nil, fmt.Errorf("candidates: %w", err)
	}
	return out, nil
}

// endingLimits returns lims with room for ending more assigned tasks in
// each category with a MaxInFlight: the limits a candidate read for a claim
// that first ends ending claims of its own filters by
// (tasks.CandidatesParams.Ending). lims itself when ending is 0.
func endingLimits(lims map[string]tasks.Workflow, ending int) map[string]tasks.Workflow {
	if ending <= 0 || lims == nil {
		return lims
	}
	out := make(map[string]tasks.Workflow, len(lims))
	for c, w := range lims {
		if w.MaxInFlight > 0 {
			w.MaxInFlight += ending
		}
		out[c] = w
	}
	return out
}

// limitFilterSQL is the condition of a pending branch of the candidate query
// that leaves out what a category's limits w have no room for, and a
// function of the category returning its arguments.
//
// In a category with a KeyLimit, the pending branch takes the tasks without a
// key, and candidateKeyedSQL those with one; withKeyed (the branch of a
// stage, which candidateKeyedSQL does not read) takes those of a key with
// room too.
func limitFilterSQL(w tasks.Workflow, withKeyed bool) (string, func(cat string) []any) {
	var f strings.Builder
	if w.MaxInFlight > 0 {
		f.WriteString("\n\tAND " + fmt.Sprintf(assignedInCategorySQL, "?") + " < ?")
	}
	switch {
	case w.KeyLimit > 0 && withKeyed:
		f.WriteString("\n\tAND (t.limit_key IS NULL OR " + fmt.Sprintf(assignedOfKeySQL, "t.category", "t.limit_key") + " < ?)")
	case w.KeyLimit > 0:
		f.WriteString("\n\tAND t.limit_key IS NULL")
	}
	return f.String(), func(cat string) []any {
		var args []any
		if w.MaxInFlight > 0 {
			args = append(args, cat, w.MaxInFlight)
		}
		if w.KeyLimit > 0 && withKeyed {
			args = append(args, w.KeyLimit)
		}
		return args
	}
}

// Parts of the pending branch of a category with a KeyLimit, for its tasks
// with a key: per key of keysOf's (candidateKeySQL), a range of tasks_limit
// in candidate order, as many as the key may have assigned; of those, each
// key's first as many as its room (KeyLimit less its assigned tasks), so that
// one key with many tasks ahead of the others' does not fill the candidates
// with tasks whose claims its limit refuses. Its cost is a short range per
// key, whatever the tasks of each.
const (
	candidateKeyedHeadSQL = `(SELECT k.id, k.fence, k.priority, k.due_order, k.status, k.workflow, k.limit_key FROM (
	SELECT u.*, ROW_NUMBER() OVER (PARTITION BY u.limit_key ORDER BY u.priority DESC, u.due_order, u.id) AS key_rank FROM (`
	candidateKeyBranchSQL = `(SELECT t.id, t.fence, t.priority, t.due_order, t.status, ` + candidateWorkflowSQL + `, t.limit_key
		FROM tasks t FORCE INDEX (tasks_limit)%s
		WHERE t.limit_status = 'pending' AND t.category = ? AND t.limit_key = ? AND t.run_after <= NOW(3)%s
		ORDER BY t.priority DESC, t.due_order, t.id LIMIT ?)`
	candidateKeyedTailSQL = `) u) k
	WHERE k.key_rank <= ? - ` + "(SELECT COUNT(*) FROM tasks a FORCE INDEX (tasks_limit) WHERE a.limit_status = 'assigned' AND a.category = ? AND a.limit_key = k.limit_key)%s" +
		candidateNotPausedSQL + `
	ORDER BY k.priority DESC, k.due_order, k.id LIMIT ?)`
)

// keyedBranchSQL writes the pending branch of category c's tasks with a key
// to q, for keys ks, and returns its arguments.
func keyedBranchSQL(q *strings.Builder, c string, ks []string, w tasks.Workflow, join, notSkipped string, skipArgs []any, limit int) []any {
	var args []any
	q.WriteString(candidateKeyedHeadSQL)
	branch := fmt.Sprintf(candidateKeyBranchSQL, join, notSkipped)
	per := min(w.KeyLimit, limit)
	for i, k := range ks {
		if i > 0 {
			q.WriteString("\n\tUNION ALL ")
		}
		q.WriteString(branch)
		args = append(args, skipArgs...)
		args = append(args, c, k, per)
	}
	filter, fargs := limitFilterSQL(tasks.Workflow{MaxInFlight: w.MaxInFlight}, false)
	q.WriteString(fmt.Sprintf(candidateKeyedTailSQL, filter))
	args = append(args, w.KeyLimit, c)
	args = append(args, fargs(c)...)
	return append(args, c, limit)
}
