package store

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// TestRoundsKeepSharedKeysApart checks that cycles sharing a task, a holder or
// an editor go in different rounds, in the order they came, and that the
// others share the first round.
func TestRoundsKeepSharedKeysApart(t *testing.T) {
	submit := func(task int64, holder string) *tasks.SubmitParams {
		return &tasks.SubmitParams{TaskID: task, Holder: holder}
	}
	claim := func(task int64, holder string, editor int64) *tasks.ClaimParams {
		return &tasks.ClaimParams{TaskID: task, Holder: holder, EditorID: editor}
	}
	cs := []*cycle{
		{submit: submit(1, "editor:1"), claim: claim(2, "editor:1", 1)}, // 0: round 0
		{claim: claim(3, "editor:2", 2)},                                // 1: round 0
		{claim: claim(4, "editor:1", 1)},                                // 2: editor 1 again: round 1
		{claim: claim(2, "editor:3", 3)},                                // 3: task 2 again: round 1
		{submit: submit(5, "w")},                                        // 4: round 0
		{claim: claim(6, "w", 0)},                                       // 5: holder w again: round 1
		{claim: claim(7, "editor:1", 9)},                                // 6: holder editor:1 again, after round 1: round 2
		{claim: claim(8, "w2", 0)},                                      // 7: round 0
	}
	want := [][]int{{0, 1, 4, 7}, {2, 3, 5}, {6}}
	got := rounds(cs)
	if len(got) != len(want) {
		t.Fatalf("%d rounds, want %d", len(got), len(want))
	}
	for r, round := range got {
		var idx []int
		for _, c := range round {
			idx = append(idx, slices.Index(cs, c))
		}
		if !slices.Equal(idx, want[r]) {
			t.Errorf("round %d holds cycles %v, want %v", r, idx, want[r])
		}
	}
}

// TestValuesSQL checks that equal values take one placeholder and different
// ones a CASE.
func TestValuesSQL(t *testing.T) {
	for _, tc := range []struct {
		vals     []any
		sql      string
		argCount int
	}{
		{[]any{nil, nil, nil}, "?", 1},
		{[]any{int64(5)}, "?", 1},
		{[]any{"a", "b"}, "CASE id WHEN 1 THEN ? WHEN 2 THEN ? END", 2},
	} {
		var q strings.Builder
		args := valuesSQL(&q, []int64{1, 2, 3}[:len(tc.vals)], tc.vals)
		if q.String() != tc.sql || len(args) != tc.argCount {
			t.Errorf("valuesSQL(%v) = %q with %d arguments, want %q with %d", tc.vals, q.String(), len(args), tc.sql, tc.argCount)
		}
	}
}

// TestSetOf checks the parsing of the lists the cycles' report reads.
func TestSetOf(t *testing.T) {
	set := setOf("1,d5,12")
	for _, k := range []string{"1", "d5", "12"} {
		if !set[k] {
			t.Errorf("%q missing from %v", k, set)
		}
	}
	if set["5"] || set[""] || len(set) != 3 {
		t.Errorf("set = %v, want exactly 1, d5 and 12", set)
	}
	if len(setOf("")) != 0 {
		t.Errorf("setOf(\"\") = %v, want empty", setOf(""))
	}
}

// TestReportColumnsLeaveOutSubmittedPayloads checks that the report reads
// every task column, the payload only of tasks the round did not submit or
// extend.
func TestReportColumnsLeaveOutSubmittedPayloads(t *testing.T) {
	if reportColumns == taskColumns || !strings.Contains(reportColumns, "IF(FIND_IN_SET(id, @taskd_live) OR FIND_IN_SET(id, @taskd_beat), 'null', payload) AS payload,") {
		t.Errorf("reportColumns = %q, want taskColumns with the payload of submitted and extended tasks left out", reportColumns)
	}
	if strings.Count(reportColumns, ",") != strings.Count(taskColumns, ",")+4 {
		t.Errorf("reportColumns has %d commas, taskColumns %d: want four more (in the IF)", strings.Count(reportColumns, ","), strings.Count(taskColumns, ","))
	}
}

// TestBusyCountsHedgesOnlyWhenHedging checks that a round of claims reads the
// editors' live hedges only when some category hedges, and that without hedges
// its busy check is the statement it always was.
func TestBusyCountsHedgesOnlyWhenHedging(t *testing.T) {
	claims := []*cycle{
		{claim: &tasks.ClaimParams{TaskID: 1, Holder: "editor:7", EditorID: 7}, lease: time.Minute},
		{claim: &tasks.ClaimParams{TaskID: 2, Holder: "editor:8", EditorID: 8, Capacity: 3}, lease: time.Minute},
	}
	var busy strings.Builder
	busySetSQL(&busy, claims, false)
	const want = "CONCAT_WS(',', COALESCE((SELECT GROUP_CONCAT(editor_id) FROM tasks FORCE INDEX (tasks_editor) WHERE editor_id IN (?)), ''), " +
		"COALESCE((SELECT GROUP_CONCAT(e.id) FROM editors e FORCE INDEX (PRIMARY) WHERE e.id IN (?)\n\t\t" +
		"AND e.capacity <= (SELECT COUNT(*) FROM tasks t FORCE INDEX (tasks_editor) WHERE t.editor_id = e.id)), ''))"
	if busy.String() != want {
		t.Errorf("busy check without hedges:\n%s\nwant\n%s", busy.String(), want)
	}
	for _, hedging := range []bool{false, true} {
		cfg := Config{Workflows: map[string]tasks.Workflow{"news": {}}}
		if hedging {
			cfg.Workflows["news"] = tasks.Workflow{Hedge: tasks.Hedge{BeforeDue: time.Hour, InactiveFor: time.Minute}}
		}
		s := &Store{cfg: cfg}
		var q strings.Builder
		args, _ := s.roundSQL(&q, claims)
		if got := strings.Contains(q.String(), "task_hedges"); got != hedging {
			t.Errorf("hedging %v: the round reads task_hedges: %v\n%s", hedging, got, q.String())
		}
		if n := strings.Count(q.String(), "?"); n != len(args) {
			t.Errorf("hedging %v: %d placeholders, %d arguments", hedging, n, len(args))
		}
	}
	if strings.Contains(lockEditorTaskSQL, "task_hedges") || !strings.Contains(lockEditorHedgingSQL, "task_hedges") {
		t.Errorf("the editor's lock reads task_hedges without hedges, or not with them")
	}
}
