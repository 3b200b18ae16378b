package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/taskd/taskd/tasks"
)

const (
	// editorCountsSQL counts an editor's events by kind, all time and since midnight
	// UTC, with each kind's latest time: ranges of task_events_editor, read from the
	// index alone. Heartbeats are no events: the second branch reads the latest, the
	// editor's last-seen time, from editor_seen by primary key.
	editorCountsSQL = "SELECT kind, COUNT(*) AS total, COALESCE(SUM(`at` >= UTC_DATE()), 0) AS today, MAX(`at`) AS last_at\n" +
		`FROM task_events FORCE INDEX (task_events_editor)
WHERE editor_id = ? AND kind IN ` + countedKinds + `
GROUP BY kind
UNION ALL
SELECT 'heartbeat', 0, 0, last_seen_at FROM editor_seen FORCE INDEX (PRIMARY) WHERE editor_id = ?`

	// takenOverSQL counts the editor's 'released' events of claims a hedge
	// took over (detail hedgeDetail), all time and today, which
	// EventCounts.Released leaves out: the editor's 'released' range of
	// task_events_editor, each row read by primary key for its detail; run
	// only when a category hedges.
	takenOverSQL = "SELECT COUNT(*) AS total, COALESCE(SUM(`at` >= UTC_DATE()), 0) AS today\n" +
		`FROM task_events FORCE INDEX (task_events_editor)
WHERE editor_id = ? AND kind = 'released' AND detail = '` + hedgeDetail + `'`

	// claimToSubmitSQL is the time from claim to submit of the editor's latest
	// submissions: a backward read of the editor's 'submitted' range, then each task
	// by primary key, which keeps the claim's assigned_at and its done_at once done.
	// The fence ties the task's times to the claim that submitted.
	claimToSubmitSQL = `SELECT TIMESTAMPDIFF(MICROSECOND, t.assigned_at, t.done_at) AS took_us
FROM (SELECT task_id, fence FROM task_events FORCE INDEX (task_events_editor)
	WHERE editor_id = ? AND kind = 'submitted' ORDER BY ` + "`at`" + ` DESC LIMIT ?) s
STRAIGHT_JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = s.task_id AND t.fence = s.fence AND t.status = 'done'`

	// recentClaimsSQL reads the editor's latest claims: a backward read of its
	// 'claimed' range of task_events_editor, then each event by primary key for
	// its trace id.
	recentClaimsSQL = "SELECT task_id, fence, `at`, COALESCE(LOWER(HEX(trace_id)), '') AS trace_id\n" +
		`FROM task_events FORCE INDEX (task_events_editor)
WHERE editor_id = ? AND kind = 'claimed' ORDER BY ` + "`at` DESC, id DESC LIMIT ?"
)

// GetEditorStats returns the editor's stats from the audit trail (see EditorStats).
// An editor that does not exist, or never did anything, has zero stats.
//
// Three queries, and a fourth when a category hedges (the claims a hedge took
// over, left out of the releases). The counts read the editor's events of the
// counted kinds from task_events_editor: the cost grows with the editor's own
// history, never with the trail's. The median reads MedianSubmissions events and their tasks, and the
// recent claims RecentClaimsShown events.
func (s *Store) GetEditorStats(ctx context.Context, id int64) (*tasks.EditorStats, error) {
	var rows []struct {
		Kind   tasks.EventKind `db:"kind"`
		Total  int64           `db:"total"`
		Today  int64           `db:"today"`
		LastAt *time.Time      `db:"last_at"`
	}
	if err := s.db.SelectContext(ctx, &rows, editorCountsSQL, id, id); err != nil {
		return nil, fmt.Errorf("editor stats %d: %w", id, err)
	}
	st := &tasks.EditorStats{}
	for _, r := range rows {
		addCount(&st.AllTime, r.Kind, r.Total)
		addCount(&st.Today, r.Kind, r.Today)
		switch r.Kind {
		case tasks.EventClaimed, tasks.EventHeartbeat, tasks.EventSubmitted, tasks.EventReleased, tasks.EventSkipped:
			if r.LastAt != nil && (st.LastActiveAt == nil || r.LastAt.After(*st.LastActiveAt)) {
				last := *r.LastAt
				st.LastActiveAt = &last
			}
		}
	}
	if s.hedging() {
		var taken struct {
			Total int64 `db:"total"`
			Today int64 `db:"today"`
		}
		if err := s.db.GetContext(ctx, &taken, takenOverSQL, id); err != nil {
			return nil, fmt.Errorf("editor stats %d: %w", id, err)
		}
		st.AllTime.Released = max(st.AllTime.Released-taken.Total, 0)
		st.Today.Released = max(st.Today.Released-taken.Today, 0)
	}
	var took []int64
	if err := s.db.SelectContext(ctx, &took, claimToSubmitSQL, id, tasks.MedianSubmissions); err != nil {
		return nil, fmt.Errorf("editor stats %d: %w", id, err)
	}
	st.MedianOf = len(took)
	st.MedianClaimToSubmit = median(took) * time.Microsecond
	var recent []struct {
		TaskID  int64     `db:"task_id"`
		Fence   int64     `db:"fence"`
		At      time.Time `db:"at"`
		TraceID string    `db:"trace_id"`
	}
	if err := s.db.SelectContext(ctx, &recent, recentClaimsSQL, id, tasks.RecentClaimsShown); err != nil {
		return nil, fmt.Errorf("editor stats %d: %w", id, err)
	}
	for _, r := range recent {
		st.RecentClaims = append(st.RecentClaims, tasks.RecentClaim{TaskID: r.TaskID, Fence: r.Fence, ClaimedAt: r.At, TraceID: r.TraceID})
	}
	return st, nil
}

// median returns the median of xs (the mean of the middle two for an even count),
// or 0 for none. It sorts xs.
func median(xs []int64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return time.Duration(xs[m])
	}
	return time.Duration(xs[m-1] + (xs[m]-xs[m-1])/2)
}
