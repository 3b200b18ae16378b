package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskd/taskd/tasks"
)

const (
	// recordClaimTimeSQL keeps the active time of an ended claim: its
	// 'claimed' event and the event that ended it (by the task's range of
	// task_events_task, a few rows), the task's category, and the stage
	// of its result (a submit) or of the task (a release, which leaves the
	// stage as it was). The figure kept is the least of what the client
	// reported, the claim's wall time and the heartbeats' bound. Only the
	// claim's own editor's claim is found; a second record of the same
	// claim is ignored. A claim a hedge's takeover made (its 'claimed'
	// event's detail 'hedge', written the moment before its submit) began
	// when the hedge was taken (claimStartSQL).
	recordClaimTimeSQL = `INSERT IGNORE INTO claim_time
	(task_id, fence, editor_id, category, stage, stage_name, outcome, claimed_at, ended_at, active_ms, reported_ms, beats)
SELECT c.task_id, c.fence, c.editor_id, t.category, COALESCE(r.stage, t.stage), IF(r.task_id IS NULL, t.stage_name, r.stage_name),
	?, ` + claimStartSQL + `, e.` + "`at`" + `,
	LEAST(?, ?, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, ` + claimStartSQL + `, e.` + "`at`" + `) DIV 1000)), ?, ?
FROM task_events c FORCE INDEX (task_events_task)
STRAIGHT_JOIN task_events e FORCE INDEX (task_events_task) ON e.task_id = c.task_id AND e.fence = c.fence AND e.kind IN (?, ?)
STRAIGHT_JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = c.task_id
LEFT JOIN task_results r FORCE INDEX (PRIMARY) ON r.task_id = c.task_id AND r.fence = c.fence
WHERE c.task_id = ? AND c.fence = ? AND c.kind = 'claimed' AND c.editor_id = ?
LIMIT 1`

	// claimStartSQL is when the claim of recordClaimTimeSQL began: its
	// 'claimed' event's instant, or for a hedge's takeover the hedge's
	// start, which the takeover gave the task's assigned_at and a submit
	// keeps: read from the task's row while its fence is still the claim's
	// (a claim of the task since, a moment after the submit, leaves the
	// event's instant, which only lowers the bound).
	claimStartSQL = "IF(c.detail = '" + hedgeDetail + "' AND t.fence = c.fence, LEAST(t.assigned_at, c.`at`), c.`at`)"

	// claimTimeRecordedSQL says whether the editor's claim has its time
	// recorded already, by primary key.
	claimTimeRecordedSQL = `SELECT COUNT(*) FROM claim_time FORCE INDEX (PRIMARY) WHERE task_id = ? AND fence = ? AND editor_id = ?`

	// claimTimeKeptSQL reads back, by primary key, what recordClaimTimeSQL
	// has just kept.
	claimTimeKeptSQL = `SELECT category, active_ms FROM claim_time FORCE INDEX (PRIMARY) WHERE task_id = ? AND fence = ?`

	// workingTimeSinceSQL is the first day of a window of ? days, today
	// the last, by the database clock.
	workingTimeSinceSQL = `SELECT TIMESTAMP(UTC_DATE() - INTERVAL ? DAY)`

	// workingTimeSQL reads the editor's measured claims that ended in the
	// window: a range of claim_time_editor. With each submit, the decision
	// of the task's next result at the next stage ('' for one without a
	// decision, NULL for none yet), by task_results' primary key.
	workingTimeSQL = `SELECT ct.category, ct.stage, COALESCE(ct.stage_name, '') AS stage_name, ct.outcome, ct.ended_at, ct.active_ms,
	IF(ct.outcome = 'submitted', (SELECT COALESCE(r.decision, '') FROM task_results r FORCE INDEX (PRIMARY)
		WHERE r.task_id = ct.task_id AND r.fence > ct.fence AND r.stage = ct.stage + 1 ORDER BY r.fence LIMIT 1), NULL) AS reviewed
FROM claim_time ct FORCE INDEX (claim_time_editor)
WHERE ct.editor_id = ? AND ct.ended_at >= ?`
)

// RecordClaimTime keeps the active time of p's claim, which its editor has
// just ended (after the submit or release committed): at most p.Reported, the
// claim's wall time (its 'claimed' event to the event that ended it, by the
// database clock) and p.Bound when set, and returns what it kept (for the
// metrics). It returns tasks.ErrNotFound when the editor has no such ended
// claim (nothing is written), and nil and no error, writing nothing, for a
// claim recorded already. Two round trips: the write, then the read back of
// what it kept, or whether the claim was recorded already.
func (s *Store) RecordClaimTime(ctx context.Context, p tasks.ClaimTimeParams) (*tasks.ClaimTimeRecorded, error) {
	reported := p.Reported.Milliseconds()
	bound := reported
	var beats any
	if p.Bound > 0 {
		bound = p.Bound.Milliseconds()
		beats = p.Beats
	}
	ended := []tasks.EventKind{tasks.EventSubmitted, tasks.EventSubmitted}
	if p.Outcome == tasks.OutcomeReleased {
		ended = []tasks.EventKind{tasks.EventReleased, tasks.EventSkipped}
	}
	res, err := s.db.ExecContext(ctx, recordClaimTimeSQL, p.Outcome, reported, bound, reported, beats,
		ended[0], ended[1], p.TaskID, p.Fence, p.EditorID)
	if err != nil {
		return nil, fmt.Errorf("record claim time of task %d fence %d: %w", p.TaskID, p.Fence, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var found int
		if err := s.db.GetContext(ctx, &found, claimTimeRecordedSQL, p.TaskID, p.Fence, p.EditorID); err != nil {
			return nil, fmt.Errorf("record claim time of task %d fence %d: %w", p.TaskID, p.Fence, err)
		}
		if found == 0 {
			return nil, fmt.Errorf("record claim time of task %d fence %d: %w", p.TaskID, p.Fence, tasks.ErrNotFound)
		}
		return nil, nil
	}
	var kept struct {
		Category string `db:"category"`
		ActiveMS int64  `db:"active_ms"`
	}
	if err := s.db.GetContext(ctx, &kept, claimTimeKeptSQL, p.TaskID, p.Fence); err != nil {
		return nil, fmt.Errorf("record claim time of task %d fence %d: read back: %w", p.TaskID, p.Fence, err)
	}
	return &tasks.ClaimTimeRecorded{Category: kept.Category, Active: time.Duration(kept.ActiveMS) * time.Millisecond}, nil
}

// claimTimeRow is a measured claim as workingTimeSQL reads it.
type claimTimeRow struct {
	Category  string             `db:"category"`
	Stage     int                `db:"stage"`
	StageName string             `db:"stage_name"`
	Outcome   tasks.ClaimOutcome `db:"outcome"`
	EndedAt   time.Time          `db:"ended_at"`
	ActiveMS  int64              `db:"active_ms"`
	// Reviewed is the decision of the next stage on a submit, nil when
	// none has decided yet.
	Reviewed *string `db:"reviewed"`
}

// WorkingTime returns editor's working time over the last days UTC days,
// today included (see tasks.WorkingTime); days is 1..tasks.WorkingTimeDaysMax,
// else an error wrapping tasks.ErrInvalid. An editor that does not exist, or
// measured nothing, has zero figures. Two round trips; the second reads the
// editor's claims that ended in the window, from claim_time_editor.
func (s *Store) WorkingTime(ctx context.Context, editorID int64, days int) (*tasks.WorkingTime, error) {
	if days < 1 || days > tasks.WorkingTimeDaysMax {
		return nil, fmt.Errorf("working time of editor %d: %w: days must be 1..%d", editorID, tasks.ErrInvalid, tasks.WorkingTimeDaysMax)
	}
	var since time.Time
	if err := s.db.GetContext(ctx, &since, workingTimeSinceSQL, days-1); err != nil {
		return nil, fmt.Errorf("working time of editor %d: %w", editorID, err)
	}
	var rows []claimTimeRow
	if err := s.db.SelectContext(ctx, &rows, workingTimeSQL, editorID, since); err != nil {
		return nil, fmt.Errorf("working time of editor %d: %w", editorID, err)
	}
	return summarizeWorkingTime(since, days, rows), nil
}

// summarizeWorkingTime adds rows up into the figures of the window of days
// days from since.
func summarizeWorkingTime(since time.Time, days int, rows []claimTimeRow) *tasks.WorkingTime {
	wt := &tasks.WorkingTime{Since: since, Days: days, Daily: make([]tasks.DayWorkingTime, days)}
	for i := range wt.Daily {
		wt.Daily[i].Day = since.AddDate(0, 0, i)
	}
	type stageKey struct {
		stage int
		name  string
	}
	cats := map[string]*tasks.CategoryWorkingTime{}
	stages := map[string]map[stageKey][]int64{}
	for _, r := range rows {
		c := cats[r.Category]
		if c == nil {
			c = &tasks.CategoryWorkingTime{Category: r.Category}
			cats[r.Category] = c
			stages[r.Category] = map[stageKey][]int64{}
		}
		active := time.Duration(r.ActiveMS) * time.Millisecond
		for _, f := range []*tasks.WorkingFigures{&wt.Total, &c.WorkingFigures} {
			f.Active += active
			if r.Outcome == tasks.OutcomeReleased {
				f.Released++
				continue
			}
			f.Submitted++
			if r.Reviewed != nil {
				f.Reviewed++
				if *r.Reviewed == tasks.DecisionSendBack {
					f.SentBack++
				}
			}
		}
		if d := int(r.EndedAt.Sub(since) / (24 * time.Hour)); d >= 0 && d < days {
			wt.Daily[d].Active += active
			if r.Outcome == tasks.OutcomeSubmitted {
				wt.Daily[d].Submitted++
			}
		}
		if r.Outcome == tasks.OutcomeSubmitted {
			k := stageKey{r.Stage, r.StageName}
			stages[r.Category][k] = append(stages[r.Category][k], r.ActiveMS)
		}
	}
	for name, c := range cats {
		for k, ms := range stages[name] {
			c.Stages = append(c.Stages, tasks.StageWorkingTime{Stage: k.stage, StageName: k.name, Submitted: len(ms),
				Median: median(ms) * time.Millisecond})
		}
		slices.SortFunc(c.Stages, func(a, b tasks.StageWorkingTime) int {
			if a.Stage != b.Stage {
				return a.Stage - b.Stage
			}
			return strings.Compare(a.StageName, b.StageName)
		})
		wt.Categories = append(wt.Categories, *c)
	}
	slices.SortFunc(wt.Categories, func(a, b tasks.CategoryWorkingTime) int { return strings.Compare(a.Category, b.Category) })
	return wt
}
