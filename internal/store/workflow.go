package store

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/taskd/taskd/tasks"
)

// Workflows: stages, groups, reservations and capacity (see schema.sql's header).
//
// A claim's workflow checks are read, like its busy check, under the lock of the
// claiming editor's row, which every claim of the editor takes first; on a Galera
// cluster, where a row lock holds on one node only, every claim also writes that row
// (see 0010_editor_claims.sql), so two claims of one editor are ordered by
// certification. So the checks see every claim and every submit of the editor that
// committed before, and the claim's own transaction's: an editor cannot hold two tasks
// of one group, nor take a stage of a task whose other stage it did, however its
// requests race on any replica. A task with no stages, group or reservation skips
// them at its first test, reading nothing more.

// barredWhereSQL is true when the editor whose id the six placeholders give may not
// take task t at its current stage (tasks.ErrBarred): the task is reserved for
// another editor until after %[1]s, the instant of the claim; or the editor's
// categories do not give it the stage; or it did another stage of the task; or it
// holds or did another task of the group, or holds a live hedge on one (the
// hedge's task under the holder's fence, as hedgeLiveSQL says: a hedge may
// become the task's claim, and then its result).
const barredWhereSQL = `(t.stages IS NOT NULL OR t.group_id IS NOT NULL OR t.reserved_for IS NOT NULL) AND (
	(t.reserved_until > %[1]s AND t.reserved_for <> ?)
	OR (t.stages IS NOT NULL AND NOT EXISTS (SELECT 1 FROM editor_categories ec FORCE INDEX (PRIMARY)
		WHERE ec.editor_id = ? AND ec.category = t.category AND (ec.stages IS NULL OR FIND_IN_SET(t.stage_name, ec.stages))))
	OR (t.stages IS NOT NULL AND EXISTS (SELECT 1 FROM task_results r FORCE INDEX (PRIMARY)
		WHERE r.task_id = t.id AND r.editor_id = ? AND r.stage <> t.stage))
	OR (t.group_id IS NOT NULL AND EXISTS (SELECT 1 FROM tasks g FORCE INDEX (tasks_group)
		LEFT JOIN task_results r FORCE INDEX (PRIMARY) ON r.task_id = g.id AND r.editor_id = ?
		WHERE g.group_id = t.group_id AND g.id <> t.id AND (g.editor_id = ? OR r.task_id IS NOT NULL)))
	OR (t.group_id IS NOT NULL AND EXISTS (SELECT 1 FROM task_hedges gh FORCE INDEX (task_hedges_editor)
		JOIN tasks g FORCE INDEX (PRIMARY) ON g.id = gh.task_id
		WHERE gh.editor_id = ? AND gh.expires_at > %[1]s AND g.group_id = t.group_id AND g.id <> t.id
			AND g.fence = gh.fence - 1 AND (g.status = 'assigned'
				OR (g.status = 'pending' AND g.stage = gh.stage AND g.reserved_for IS NULL AND g.run_after <= %[1]s)))))`

// barredArgs are the arguments of barredWhereSQL for an editor.
func barredArgs(editorID int64) []any {
	return []any{editorID, editorID, editorID, editorID, editorID, editorID}
}

// barredSQL reads whether the editor may not take the task (tasks.ErrBarred), for
// the claims that lock the task's row themselves (claimLocked).
var barredSQL = `SELECT EXISTS (SELECT 1 FROM tasks t FORCE INDEX (PRIMARY) WHERE t.id = ? AND ` +
	fmt.Sprintf(barredWhereSQL, "NOW(3)") + `)`

// barredSetSQL writes, for a cycle round's SELECT ... INTO, the ids of the tasks
// claims is claiming for editors that may not take them, comma-separated, and
// returns the arguments. Only the claims that expect a workflow
// (ClaimParams.Workflow) are read: the others are guarded by uncheckedSQL.
func barredSetSQL(q *strings.Builder, claims []*cycle) []any {
	claims = slices.DeleteFunc(slices.Clone(claims), func(c *cycle) bool { return !c.claim.Workflow })
	if len(claims) == 0 {
		q.WriteString("''")
		return nil
	}
	var args []any
	where := fmt.Sprintf(barredWhereSQL, "@taskd_now")
	q.WriteString("COALESCE((SELECT GROUP_CONCAT(b.id) FROM (")
	for i, c := range claims {
		if i > 0 {
			q.WriteString("\n\t\tUNION ALL ")
		}
		q.WriteString("SELECT t.id FROM tasks t FORCE INDEX (PRIMARY) WHERE t.id = ? AND ")
		q.WriteString(where)
		args = append(args, c.claim.TaskID)
		args = append(args, barredArgs(c.claim.EditorID)...)
	}
	q.WriteString(") b), '')")
	return args
}

// uncheckedSQL is the guard of an editor's claim that does not expect a
// workflow: the task has none, so none of its checks applies. A claim refused by
// it is made again the locking way (errWorkflowTask).
const uncheckedSQL = "stages IS NULL AND group_id IS NULL AND reserved_for IS NULL"

// editorStateSQL is an editor's entry in @taskd_editors, read under the editor's
// lock: its id if it is enabled and of capacity 1, "m" and its id if it is
// enabled and may hold more (editors.capacity), "d" and its id if it is disabled.
// A claim's guard looks for the entry its claim expects (editorKey), so that a
// claim wrong about its editor's capacity is refused as busy and made again the
// locking way.
const editorStateSQL = "IF(disabled_at IS NULL, IF(capacity = 1, id, CONCAT('m', id)), CONCAT('d', id))"

// editorKey is the entry of an enabled editor in @taskd_editors that claim p
// expects (see editorStateSQL).
func editorKey(p *tasks.ClaimParams) string {
	if p.Capacity > 1 {
		return "m" + strconv.FormatInt(p.EditorID, 10)
	}
	return strconv.FormatInt(p.EditorID, 10)
}

// busySetSQL writes, for a cycle round's SELECT ... INTO, the ids of the
// editors of claims that hold as many tasks as their capacity, comma-separated,
// and returns the arguments. For the editors of capacity 1 (as their claims
// expect: see editorKey) that is the editors some task names, one range of
// tasks_editor; for the others, the tasks that name each are counted. With
// hedging (some category's Workflow.Hedge is on), an editor's live hedges
// count as its tasks do (see hedge.go): one range of task_hedges_editor more
// for the editors of capacity 1, a count more for the others. Without, the
// statement is the one it always was.
func busySetSQL(q *strings.Builder, editors []*cycle, hedging bool) []any {
	var one, many []int64
	for _, c := range editors {
		if c.claim.Capacity > 1 {
			many = append(many, c.claim.EditorID)
		} else {
			one = append(one, c.claim.EditorID)
		}
	}
	// Each read a COALESCE((SELECT GROUP_CONCAT(...)), ''); all, joined.
	var reads []string
	var args []any
	read := func(query string, ids []int64, tail string) {
		var r strings.Builder
		r.WriteString(query)
		args = append(args, listSQL(&r, "?", ids, func(i int) []any { return []any{ids[i]} })...)
		reads = append(reads, r.String()+tail)
	}
	if len(one) > 0 {
		read("COALESCE((SELECT GROUP_CONCAT(editor_id) FROM tasks FORCE INDEX (tasks_editor) WHERE editor_id IN (", one, ")), '')")
		if hedging {
			read("COALESCE((SELECT GROUP_CONCAT(h.editor_id) FROM "+hedgesOfSQL+" WHERE h.editor_id IN (", one,
				") AND "+hedgeLiveSQL+"), '')")
		}
	}
	if len(many) > 0 {
		held := "(SELECT COUNT(*) FROM tasks t FORCE INDEX (tasks_editor) WHERE t.editor_id = e.id)"
		if hedging {
			held = "(" + held + "\n\t\t+ (SELECT COUNT(*) FROM " + hedgesOfSQL + " WHERE h.editor_id = e.id AND " + hedgeLiveSQL + "))"
		}
		read("COALESCE((SELECT GROUP_CONCAT(e.id) FROM editors e FORCE INDEX (PRIMARY) WHERE e.id IN (", many,
			")\n\t\tAND e.capacity <= "+held+"), '')")
	}
	if len(reads) == 1 {
		q.WriteString(reads[0])
	} else {
		q.WriteString("CONCAT_WS(',', " + strings.Join(reads, ", ") + ")")
	}
	return args
}

// sendBackHoldSQL writes the send-back hold of a task, in microseconds, by its
// category: the workflows' SendBackHold, else tasks.SendBackHoldDefault.
func (s *Store) sendBackHoldSQL(q *strings.Builder) []any {
	var args []any
	for _, cat := range slices.Sorted(maps.Keys(s.cfg.Workflows)) {
		if hold := s.cfg.Workflows[cat].SendBackHold; hold > 0 && hold != tasks.SendBackHoldDefault {
			if len(args) == 0 {
				q.WriteString("CASE category")
			}
			q.WriteString(" WHEN ? THEN ?")
			args = append(args, cat, micros(hold))
		}
	}
	if len(args) == 0 {
		q.WriteString("?")
	} else {
		q.WriteString(" ELSE ? END")
	}
	return append(args, micros(tasks.SendBackHoldDefault))
}
