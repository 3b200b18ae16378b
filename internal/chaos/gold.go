package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// Gold tasks in the workflow pass: goldTasks tasks of goldCategory with a
// known answer, mixed into its editors' claims at goldRate. Their copies are
// claimed, heartbeated, released, expired and submitted under the same faults
// as every task; the checks hold that no gold answer is ever a result (so
// never exported, nor in a webhook, review or agreement) and that each editor
// is scored at most once per gold task.
const (
	goldCategory = "plain"
	goldTasks    = 8
	goldRate     = "0.05"
)

// notGoldSQL leaves the gold tasks and their copies out of a read of tasks.
const notGoldSQL = " AND id NOT IN (SELECT task_id FROM gold_tasks) AND id NOT IN (SELECT copy_id FROM gold_copies)"

// goldConfig is goldCategory's gold rule in config.yaml.
const goldConfig = "    gold: {rule: decision, rate: " + goldRate + "}\n"

// addGold inserts the gold tasks.
func (h *harness) addGold(ctx context.Context) error {
	ts := make([]map[string]any, goldTasks)
	for i := range ts {
		s := h.serial.Add(1)
		ts[i] = map[string]any{"category": goldCategory, "title": "chaos task " + strconv.FormatInt(s, 10),
			"payload": map[string]any{"n": s}, "gold": map[string]any{"decision": "approve"}}
	}
	return h.adminCall(ctx, "POST", "/v1/tasks", ts, http.StatusCreated, nil)
}

// goldFacts are the gold tasks and their copies: the tasks the checks of
// real work leave out (a copy is done without a result, or pending for
// nobody once released or expired; a gold task is never claimed itself).
type goldFacts struct {
	tasks  map[int64]bool // gold tasks and copies
	copies map[claimRef]int64
}

func (h *harness) readGold(ctx context.Context) (*goldFacts, error) {
	g := &goldFacts{tasks: make(map[int64]bool), copies: make(map[claimRef]int64)}
	err := h.query(ctx, "read gold tasks", "SELECT task_id FROM gold_tasks", func(scan func(...any) error) error {
		var id int64
		if err := scan(&id); err != nil {
			return err
		}
		g.tasks[id] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = h.query(ctx, "read gold copies", "SELECT copy_id, editor_id FROM gold_copies", func(scan func(...any) error) error {
		var id, editor int64
		if err := scan(&id, &editor); err != nil {
			return err
		}
		g.tasks[id] = true
		g.copies[claimRef{id, 1}] = editor
		return nil
	})
	return g, err
}

// checkGold adds the gold checks: no result of a gold task or a copy, each
// editor's copies of a gold task at most one, and each acknowledged gold
// submit scored as its editor's.
func (h *harness) checkGold(ctx context.Context, g *goldFacts, results []resultRow, acked map[int64][]claimRef,
	violate func(check, format string, args ...any), add func(name string, checked, before int64), violations func() int64) error {
	v0 := violations()
	for _, r := range results {
		if g.tasks[r.Task] {
			violate("gold answers are never results", "task %d fence %d is a gold task or copy, and has a result", r.Task, r.Fence)
		}
	}
	add("gold answers never results (never exported nor sent)", int64(len(results)), v0)

	v0 = violations()
	var twice int64
	err := h.query(ctx, "count gold copies per editor", "SELECT COUNT(*) FROM (SELECT editor_id, gold_id FROM gold_copies GROUP BY editor_id, gold_id HAVING COUNT(*) > 1) d",
		func(scan func(...any) error) error { return scan(&twice) })
	if err != nil {
		return err
	}
	if twice > 0 {
		violate("each editor scored at most once per gold task", "%d (editor, gold task) pairs with several copies", twice)
	}
	var scored int64
	for editor, refs := range acked {
		for _, a := range refs {
			scored++
			var n int64
			err := h.query(ctx, "read a gold score", fmt.Sprintf("SELECT COUNT(*) FROM gold_copies WHERE copy_id = %d AND editor_id = %d AND answered_at IS NOT NULL", a.Task, editor),
				func(scan func(...any) error) error { return scan(&n) })
			if err != nil {
				return err
			}
			if n != 1 {
				violate("acknowledged gold submits scored", "editor %d: gold submit of task %d was acknowledged, but is not scored as its", editor, a.Task)
			}
		}
	}
	add(fmt.Sprintf("each editor scored at most once per gold task (%d copies), acknowledged gold submits scored", len(g.copies)), scored, v0)
	return nil
}
