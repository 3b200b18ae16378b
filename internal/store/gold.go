package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Gold tasks. A gold task is a task whose answer is known (gold_tasks). It is
// served to an editor as a copy: a new tasks row, inserted already assigned to
// the editor in the transaction that picks the gold task, with fence 1 and a
// lease from the database clock, and a gold_copies row naming the gold task
// and the editor (UNIQUE per editor and gold task: each editor gets a gold
// task at most once, and the gold task is never consumed).
//
// Why a copy, and not the gold task's own row reopened for each editor: a copy
// is a task like any other to everything an editor touches. Its id is a fresh
// one from the same sequence; its heartbeats, fences, lease, maximum hold,
// release and the one-claim-at-a-time rule are the ordinary ones, kept by the
// ordinary statements, because the copy names the editor in tasks.editor_id
// (a claim of a copy locks the editor's row and counts its claims first, as
// every claim does: see lockEditor). Reopening one row would give many editors
// the same task id, fence sequence and lease at once, which the fencing model
// forbids. The cost is one row per answer, which is what an answer is anyway.
//
// A copy never reaches anyone else: its run_after is tasks.GoldRunAfter, in the
// far future, which every claim statement checks for a pending task and, by
// goldTakeoverSQL, for an expired one. So a copy released, skipped, expired or
// force-released stays pending for nobody; its editor is not served that gold
// task again (its gold_copies row stays, unanswered). Its submit goes through
// SubmitGold, never the store's Submit: its result is written to gold_copies
// with its score and to no task_results row, so it is never in the results
// feed, the export, a webhook, a review stage or agreement. Its events are the
// ordinary 'claimed' and 'submitted', so that an editor's own counts grow as
// for any task.

// goldTakeoverSQL is the one condition gold tasks add to the claim statements: an
// assigned task whose lease has passed is taken over only if its run_after has
// passed too. Every claim stores in run_after the moment the attempt became
// claimable (see claimableSinceSQL), always past, so only a gold copy
// (tasks.GoldRunAfter) is left out. candidateGoldTakeoverSQL is the same on the
// candidate read's alias t.
const (
	goldTakeoverSQL = " AND run_after <= NOW(3)"
	// goldCopyColumnSQL says, in the locking read of a claim that is ending,
	// whether the task is a copy of a gold task (its run_after is
	// tasks.GoldRunAfter; every other claim's is past, see claimableSinceSQL),
	// so that its end writes no webhook outbox record (see event.goldCopy): a
	// column of the row already read.
	goldCopyColumnSQL        = `run_after >= TIMESTAMP'9999-01-01 00:00:00' AS gold_copy`
	candidateGoldTakeoverSQL = " AND t.run_after <= NOW(3)"
	// notGoldCopySQL keeps a gold copy out of the ordinary submit (Submit,
	// SubmitAndClaim and the group's cycles): their live-claim predicate
	// carries it, so a copy's submit there is refused as stale and writes no
	// task_results row, event or webhook, whatever the caller's configuration
	// says (its submit is SubmitGold's). A comparison of a column of the row
	// the predicate reads by primary key anyway: nothing for a deployment
	// without gold tasks.
	notGoldCopySQL = " AND run_after < TIMESTAMP'9999-01-01 00:00:00'"
)

const (
	// goldPickSQL picks a gold task of the categories (IN list appended) for the
	// editor: one it was never served, whose task it did not submit itself, of a
	// category it has (at the gold task's first stage, when its categories limit
	// its stages), not paused, and from which the editor is not paused by the
	// floor. ORDER BY RAND(): a category's gold set is small (it is read through
	// gold_tasks_category), and each editor should meet its gold tasks in no
	// fixed order. The pauses are anti-joins by primary key (LEFT JOIN ... IS
	// NULL): as NOT EXISTS, MariaDB materializes them, reading every pause.
	goldPickSQL = `SELECT g.task_id, g.category FROM gold_tasks g FORCE INDEX (gold_tasks_category)
JOIN editor_categories ec ON ec.editor_id = ? AND ec.category = g.category
JOIN tasks t ON t.id = g.task_id
LEFT JOIN paused_categories p FORCE INDEX (PRIMARY) ON p.category = g.category
LEFT JOIN gold_pauses gp FORCE INDEX (PRIMARY) ON gp.editor_id = ec.editor_id AND gp.category = g.category AND gp.lifted_at IS NULL
WHERE NOT EXISTS (SELECT 1 FROM gold_copies c WHERE c.editor_id = ec.editor_id AND c.gold_id = g.task_id)
	AND NOT EXISTS (SELECT 1 FROM task_results r WHERE r.task_id = g.task_id AND r.editor_id = ec.editor_id)
	AND p.category IS NULL AND gp.editor_id IS NULL
	AND (ec.stages IS NULL OR t.stages IS NULL OR FIND_IN_SET(SUBSTRING_INDEX(t.stages, ',', 1), ec.stages) > 0)
	AND g.category IN (?)
ORDER BY RAND() LIMIT 1`

	// goldCopySQL inserts the copy of a gold task, assigned to the editor: at its
	// first stage, with the gold task's content, fence 1 and one attempt, as a
	// first claim has.
	goldCopySQL = `INSERT INTO tasks (category, priority, title, payload, status, fence, holder, editor_id,
	assigned_at, lease_expires_at, attempts, max_attempts, run_after, stages, stage, stage_count, overlap)
SELECT category, priority, title, payload, 'assigned', 1, ?, ?,
	NOW(3), NOW(3) + INTERVAL ? MICROSECOND, 1, max_attempts, ?, stages, 0, stage_count, 1
FROM tasks WHERE id = ?`

	goldCopyRowSQL = `INSERT INTO gold_copies (copy_id, gold_id, editor_id, category) VALUES (?, ?, ?, ?)`

	goldClaimedEventSQL = "INSERT INTO task_events (task_id, kind, fence, holder, editor_id) VALUES (?, 'claimed', 1, ?, ?)"

	goldClaimReadSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`
)

// ClaimGold claims, for an editor, a copy of a gold task of p.Categories (see
// the comment above): under the lock of the editor's row it checks that the
// editor is enabled and below its capacity, picks a gold task (goldPickSQL) and
// inserts the copy assigned to the editor, its gold_copies row and its
// 'claimed' event, in one transaction. It returns tasks.ErrNotFound when no
// gold task is left for the editor, tasks.ErrEditorBusy when the editor holds
// as many claims as it may (a claim whose lease passed included: the ordinary
// claim frees it; a live hedge counts as a claim), tasks.ErrLimited when the
// picked gold task's category has a MaxInFlight and as many tasks assigned
// (a copy is a task in flight of its category: it takes room as any claim,
// under the category's lock), tasks.ErrEditorDisabled, and tasks.ErrInvalid
// for bad params. Round trips: BEGIN, the editor's lock, the pick, three
// inserts, a read, COMMIT (and the claims count on Galera; the category's
// lock and count in a limited category).
func (s *Store) ClaimGold(ctx context.Context, p tasks.GoldClaimParams) (*tasks.Claim, error) {
	if p.EditorID <= 0 || p.Holder == "" || p.Lease <= 0 {
		return nil, fmt.Errorf("claim gold: %w: editor, holder and lease are required", tasks.ErrInvalid)
	}
	if len(p.Categories) == 0 {
		return nil, fmt.Errorf("claim gold: %w", tasks.ErrNotFound)
	}
	galera := s.onGalera(ctx)
	var claim *tasks.Claim
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		ed, err := s.lockEditor(ctx, tx, p.EditorID)
		if err != nil {
			return err
		}
		if ed.Disabled {
			return tasks.ErrEditorDisabled
		}
		if ed.full() {
			return tasks.ErrEditorBusy
		}
		q, args, err := sqlx.In(goldPickSQL, p.EditorID, p.Categories)
		if err != nil {
			return err
		}
		var pick struct {
			GoldID   int64  `db:"task_id"`
			Category string `db:"category"`
		}
		if err := tx.GetContext(ctx, &pick, q, args...); err != nil {
			return notFound(err)
		}
		goldID := pick.GoldID
		// A copy is a task of its category in flight like any other: in a
		// limited category it takes room under the category's lock, after
		// the editor's (the lock order of every claim).
		if w, ok := s.limitsOf()[pick.Category]; ok && w.MaxInFlight > 0 {
			if _, err := tx.ExecContext(ctx, lockCategorySQL, pick.Category); err != nil {
				return err
			}
			if err := limitRoom(ctx, tx, tasks.Workflow{MaxInFlight: w.MaxInFlight}, tasks.Task{Category: pick.Category}); err != nil {
				return err
			}
		}
		if galera {
			if _, err := tx.ExecContext(ctx, countClaimSQL, p.EditorID); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, goldCopySQL, p.Holder, p.EditorID, p.Lease.Microseconds(), tasks.GoldRunAfter, goldID)
		if err != nil {
			return err
		}
		copyID, err := res.LastInsertId()
		if err != nil {
			return err
		}
		var t tasks.Task
		if err := tx.GetContext(ctx, &t, goldClaimReadSQL, copyID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, goldCopyRowSQL, copyID, goldID, p.EditorID, t.Category); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, goldClaimedEventSQL, copyID, p.Holder, p.EditorID); err != nil {
			return err
		}
		claim = claimOf(t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim gold for editor %d: %w", p.EditorID, err)
	}
	return claim, nil
}

const (
	// goldMarkLockSQL locks the task to mark and says whether it is a copy.
	goldMarkLockSQL = `SELECT status, category, EXISTS (SELECT 1 FROM gold_copies c WHERE c.copy_id = t.id) AS copy,
	group_id IS NOT NULL OR overlap > 1 AS grouped
FROM tasks t WHERE id = ? FOR UPDATE`
	// goldHoldOutSQL takes a pending gold task out of the pool for good.
	goldHoldOutSQL = `UPDATE tasks SET run_after = ? WHERE id = ? AND status = 'pending'`
	goldMarkSQL    = `INSERT INTO gold_tasks (task_id, category, answer) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE answer = VALUES(answer)`
	goldTaskSQL = `SELECT task_id, category, answer, created_at FROM gold_tasks WHERE task_id = ?`
)

// MarkGold makes task id a gold task with answer a, or gives a gold task a
// new answer, checked against its category's rule (rules returns it, false
// when the category has none). A pending task is taken out of the pool for
// good (its run_after becomes tasks.GoldRunAfter); a done, dead or cancelled
// one stays as it is. Copies of it already answered keep their scores. It
// returns tasks.ErrNotFound for no such task, ErrGoldHeld for an assigned
// one, and tasks.ErrInvalid for a copy of a gold task, a slot of an overlap
// group (as an insert refuses gold with overlap), a category without a rule or
// an answer the rule cannot compare with. Round trips: BEGIN, the
// locked read, up to two writes, the read back, COMMIT.
func (s *Store) MarkGold(ctx context.Context, id int64, a tasks.GoldAnswer, rules func(category string) (tasks.GoldRule, bool)) (*tasks.GoldTask, error) {
	var out tasks.GoldTask
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var row struct {
			Status   tasks.Status `db:"status"`
			Category string       `db:"category"`
			Copy     bool         `db:"copy"`
			Grouped  bool         `db:"grouped"`
		}
		if err := tx.GetContext(ctx, &row, goldMarkLockSQL, id); err != nil {
			return notFound(err)
		}
		if row.Copy {
			return fmt.Errorf("%w: task %d is a copy of a gold task", tasks.ErrInvalid, id)
		}
		if row.Grouped {
			// As at insert: a slot held out of the pool would leave its group
			// short of its results for good.
			return fmt.Errorf("%w: task %d is a slot of an overlap group, which cannot be gold", tasks.ErrInvalid, id)
		}
		rule, ok := rules(row.Category)
		if !ok {
			return fmt.Errorf("%w: category %q has no gold rule in the configuration", tasks.ErrInvalid, row.Category)
		}
		if err := rule.CheckAnswer(a); err != nil {
			return err
		}
		if row.Status == tasks.StatusAssigned {
			return tasks.ErrGoldHeld
		}
		answer, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("%w: %w", tasks.ErrInvalid, err)
		}
		if _, err := tx.ExecContext(ctx, goldHoldOutSQL, tasks.GoldRunAfter, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, goldMarkSQL, id, row.Category, answer); err != nil {
			return err
		}
		return scanGoldTask(tx.QueryRowxContext(ctx, goldTaskSQL, id), &out)
	})
	if err != nil {
		return nil, fmt.Errorf("mark task %d gold: %w", id, err)
	}
	return &out, nil
}

// GoldTask returns the gold task of task id, or tasks.ErrNotFound when it is
// not one.
func (s *Store) GoldTask(ctx context.Context, id int64) (*tasks.GoldTask, error) {
	var out tasks.GoldTask
	if err := scanGoldTask(s.db.QueryRowxContext(ctx, goldTaskSQL, id), &out); err != nil {
		return nil, fmt.Errorf("gold task %d: %w", id, notFound(err))
	}
	return &out, nil
}

func scanGoldTask(row *sqlx.Row, out *tasks.GoldTask) error {
	var answer []byte
	if err := row.Scan(&out.TaskID, &out.Category, &answer, &out.CreatedAt); err != nil {
		return err
	}
	return json.Unmarshal(answer, &out.Answer)
}

const (
	// goldCopyOfSQL reads the copy a submit names; not locking: whether a task is
	// a copy never changes.
	goldCopyOfSQL = `SELECT c.gold_id, c.editor_id, c.category, g.answer FROM gold_copies c
JOIN gold_tasks g ON g.task_id = c.gold_id WHERE c.copy_id = ?`
	// goldSubmitSQL ends the copy's claim as a submit ends any: fenced, done, the
	// holder kept.
	goldSubmitSQL = `UPDATE tasks SET status = 'done', done_at = NOW(3), editor_id = NULL, lease_expires_at = NULL, claim_unlogged = 0
WHERE id = ? AND fence = ? AND status = 'assigned' AND holder = ? AND lease_expires_at >= NOW(3)`
	goldScoreSQL = `UPDATE gold_copies SET answered_at = NOW(3), correct = ?, differed = ?, result = ?, decision = ?
WHERE copy_id = ? AND answered_at IS NULL`
	goldSubmittedEventSQL = "INSERT INTO task_events (task_id, kind, fence, holder, editor_id) VALUES (?, 'submitted', ?, ?, ?)"
	// goldLastAnswersSQL reads the editor's last answers in the category since
	// its last pause was lifted, newest first.
	goldLastAnswersSQL = `SELECT c.correct FROM gold_copies c FORCE INDEX (gold_copies_editor)
WHERE c.editor_id = ? AND c.category = ? AND c.answered_at IS NOT NULL
	AND c.answered_at > COALESCE((SELECT gp.lifted_at FROM gold_pauses gp WHERE gp.editor_id = c.editor_id AND gp.category = c.category), TIMESTAMP'1000-01-01 00:00:00')
ORDER BY c.answered_at DESC, c.copy_id DESC LIMIT ?`
	goldPauseSQL = `INSERT INTO gold_pauses (editor_id, category, reason) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE reason = VALUES(reason), paused_at = NOW(3), lifted_at = NULL`
)

// SubmitGold submits p when its task is a copy of a gold task: it ends the
// claim (fenced as any submit: tasks.ErrStale when p is not the live claim),
// scores the result under the category's rule (rules; a category without
// one now is scored by the answer's decision, or every field of its result)
// and writes the score, with the result, to gold_copies, never to
// task_results; it writes the 'submitted' event; and when the rule has a floor
// and the editor's last MinAnswers answers since its last pause fall under
// it, it pauses the editor from the category (GoldScored.Paused). All in one
// transaction. It returns tasks.ErrNotFound, changing nothing, when the task
// is not a copy: the caller submits it as any other. Round trips: the copy's
// read (the only one for any other task), then BEGIN, three writes, the
// floor's read and write when it has one, COMMIT.
func (s *Store) SubmitGold(ctx context.Context, p tasks.SubmitParams, rules func(category string) (tasks.GoldRule, bool)) (*tasks.GoldScored, error) {
	var cp struct {
		GoldID   int64  `db:"gold_id"`
		EditorID int64  `db:"editor_id"`
		Category string `db:"category"`
		Answer   []byte `db:"answer"`
	}
	if err := s.db.GetContext(ctx, &cp, goldCopyOfSQL, p.TaskID); err != nil {
		return nil, fmt.Errorf("submit gold task %d: %w", p.TaskID, notFound(err))
	}
	if err := tasks.CheckSubmission(p.Result, p.Decision, p.Notes); err != nil {
		return nil, fmt.Errorf("submit gold task %d: %w", p.TaskID, err)
	}
	var answer tasks.GoldAnswer
	if err := json.Unmarshal(cp.Answer, &answer); err != nil {
		return nil, fmt.Errorf("submit gold task %d: answer: %w", p.TaskID, err)
	}
	rule, ok := rules(cp.Category)
	if !ok {
		rule = fallbackRule(answer)
	}
	correct, differed := rule.Score(answer, p.Result, p.Decision)
	out := &tasks.GoldScored{Copy: tasks.GoldCopy{CopyID: p.TaskID, GoldID: cp.GoldID, EditorID: cp.EditorID,
		Category: cp.Category, Answered: true, Correct: correct, Differed: differed}}
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		out.Paused = nil
		res, err := tx.ExecContext(ctx, goldSubmitSQL, p.TaskID, p.Fence, p.Holder)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return tasks.ErrStale
		}
		var decision any
		if p.Decision != "" {
			decision = p.Decision
		}
		if _, err := tx.ExecContext(ctx, goldScoreSQL, correct, nullString(strings.Join(differed, ",")),
			[]byte(p.Result), decision, p.TaskID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, goldSubmittedEventSQL, p.TaskID, p.Fence, p.Holder, cp.EditorID); err != nil {
			return err
		}
		if rule.MinAccuracy <= 0 {
			return nil
		}
		var last []bool
		if err := tx.SelectContext(ctx, &last, goldLastAnswersSQL, cp.EditorID, cp.Category, rule.MinAnswers); err != nil {
			return err
		}
		if len(last) < rule.MinAnswers {
			return nil
		}
		right := 0
		for _, c := range last {
			if c {
				right++
			}
		}
		if float64(right) >= rule.MinAccuracy*float64(len(last)) {
			return nil
		}
		reason := tasks.GoldPauseReason(right, len(last), rule.MinAccuracy)
		if _, err := tx.ExecContext(ctx, goldPauseSQL, cp.EditorID, cp.Category, reason); err != nil {
			return err
		}
		out.Paused = &tasks.GoldPause{EditorID: cp.EditorID, Category: cp.Category, Reason: reason}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("submit gold task %d: %w", p.TaskID, s.refusal(ctx, claimRef{p.TaskID, p.Fence, p.Holder}, err))
	}
	return out, nil
}

// fallbackRule scores an answer whose category has no rule any more: by its
// decision, or by every field of its result.
func fallbackRule(a tasks.GoldAnswer) tasks.GoldRule {
	if a.Decision != "" {
		return tasks.GoldRule{Rule: tasks.GoldRuleDecision}
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(a.Result, &m)
	r := tasks.GoldRule{Rule: tasks.GoldRuleFields}
	for f := range m {
		r.Fields = append(r.Fields, f)
	}
	return r
}

const (
	// goldAccuracySQL counts the answers per editor and category since a time,
	// of the categories of the IN list: one range of gold_copies_answered per
	// category, the window's answers only.
	goldAccuracySQL = `SELECT c.editor_id, COALESCE(e.name, '') AS editor_name, c.category,
	COUNT(*) AS answers, COALESCE(SUM(c.correct), 0) AS correct
FROM gold_copies c FORCE INDEX (gold_copies_answered) LEFT JOIN editors e ON e.id = c.editor_id
WHERE c.category IN (?) AND c.answered_at >= ?
GROUP BY c.editor_id, c.category`
	goldPausesSQL = `SELECT gp.editor_id, COALESCE(e.name, '') AS editor_name, gp.category, gp.reason, gp.paused_at
FROM gold_pauses gp LEFT JOIN editors e ON e.id = gp.editor_id WHERE gp.lifted_at IS NULL%s
ORDER BY gp.category, gp.editor_id`
	editorGoldPausesSQL = `SELECT category FROM gold_pauses WHERE editor_id = ? AND lifted_at IS NULL`
	liftGoldPauseSQL    = `UPDATE gold_pauses SET lifted_at = NOW(3) WHERE editor_id = ? AND category = ? AND lifted_at IS NULL`
)

// GoldAccuracy returns every editor's gold answers and correct ones per
// category answered since p.Since (of p.Category only, when set), ordered by
// category and editor name.
func (s *Store) GoldAccuracy(ctx context.Context, p tasks.GoldAccuracyParams) ([]tasks.GoldAccuracy, error) {
	cats := []string{p.Category}
	if p.Category == "" {
		// Every category with gold tasks, named: one range of the index per
		// category, not a scan of every answer ever given.
		cats = nil
		if err := s.db.SelectContext(ctx, &cats, goldCategoriesSQL); err != nil {
			return nil, fmt.Errorf("gold accuracy: %w", err)
		}
		if len(cats) == 0 {
			return nil, nil
		}
	}
	q, args, err := sqlx.In(goldAccuracySQL, cats, p.Since.UTC())
	if err != nil {
		return nil, fmt.Errorf("gold accuracy: %w", err)
	}
	var rows []tasks.GoldAccuracy
	if err := s.db.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("gold accuracy: %w", err)
	}
	tasks.SortGoldAccuracy(rows)
	return rows, nil
}

// GoldPauses returns the pauses in force (of category only, when set).
func (s *Store) GoldPauses(ctx context.Context, category string) ([]tasks.GoldPause, error) {
	where, args := "", []any(nil)
	if category != "" {
		where, args = " AND gp.category = ?", []any{category}
	}
	rows, err := s.db.QueryxContext(ctx, fmt.Sprintf(goldPausesSQL, where), args...)
	if err != nil {
		return nil, fmt.Errorf("gold pauses: %w", err)
	}
	defer rows.Close()
	var out []tasks.GoldPause
	for rows.Next() {
		var gp tasks.GoldPause
		if err := rows.Scan(&gp.EditorID, &gp.EditorName, &gp.Category, &gp.Reason, &gp.PausedAt); err != nil {
			return nil, fmt.Errorf("gold pauses: %w", err)
		}
		out = append(out, gp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("gold pauses: %w", err)
	}
	return out, nil
}

// EditorGoldPauses returns the categories the editor is paused from by its
// gold accuracy: its claims leave them out.
func (s *Store) EditorGoldPauses(ctx context.Context, editorID int64) ([]string, error) {
	var cats []string
	if err := s.db.SelectContext(ctx, &cats, editorGoldPausesSQL, editorID); err != nil {
		return nil, fmt.Errorf("gold pauses of editor %d: %w", editorID, err)
	}
	return cats, nil
}

// LiftGoldPause lifts the editor's pause from category: its next claims may
// take the category again, and the floor judges only answers given from now
// on. It reports whether a pause was in force.
func (s *Store) LiftGoldPause(ctx context.Context, editorID int64, category string) (bool, error) {
	res, err := s.db.ExecContext(ctx, liftGoldPauseSQL, editorID, category)
	if err != nil {
		return false, fmt.Errorf("lift gold pause of editor %d from %q: %w", editorID, category, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lift gold pause of editor %d from %q: %w", editorID, category, err)
	}
	return n == 1, nil
}

// goldInsertSQL names the gold tasks an insert made: one row per task, the
// values appended.
const goldInsertSQL = `INSERT INTO gold_tasks (task_id, category, answer) VALUES `

// goldInsertBatch bounds the rows of one goldInsertSQL.
const goldInsertBatch = 1000

// insertGold writes, in the insert's transaction, the gold_tasks rows of the
// rows inserted with a gold answer (ids[i] is rows[i]'s id): nothing for an
// insert without one.
func insertGold(ctx context.Context, tx Querier, rows []newTaskRow, ids []int64) error {
	var q strings.Builder
	var args []any
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, q.String(), args...)
		q.Reset()
		args = args[:0]
		return err
	}
	for i, r := range rows {
		if r.gold == nil {
			continue
		}
		if len(args) == 0 {
			q.WriteString(goldInsertSQL)
		} else {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?)")
		args = append(args, ids[i], r.category, r.gold)
		if len(args) == 3*goldInsertBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
