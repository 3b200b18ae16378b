package api_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestTaskDetailShowsSnoozes: GET /v1/tasks/{id} answers a task's snoozes
// and its 'snoozed' events, as the OpenAPI document describes them (every
// answer of the tests is checked against it).
func TestTaskDetailShowsSnoozes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.addN(t, "news", 1)[0]
	if _, err := b.db.Exec(`UPDATE tasks SET fence = 2, attempts = 0, snoozes = 2 WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Exec(`INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT ?, ELT(seq, 'claimed', 'snoozed', 'claimed', 'snoozed'), (seq + 1) DIV 2, 'worker:w:0', IF(seq % 2 = 0, '30s', NULL)
FROM seq_1_to_4`, id); err != nil {
		t.Fatal(err)
	}
	var d taskDetail
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, ""), http.StatusOK, &d)
	if d.Snoozes != 2 || d.Attempts != 0 || len(d.History) != 4 {
		t.Fatalf("detail: %d snoozes, %d attempts, %d events; want 2, 0 and 4", d.Snoozes, d.Attempts, len(d.History))
	}
	for i, ev := range d.History {
		want := []string{"claimed", "snoozed"}[i%2]
		if ev.Kind != want || (want == "snoozed" && (ev.Detail == nil || *ev.Detail != "30s")) {
			t.Errorf("event %d: %s %v, want %s", i, ev.Kind, ev.Detail, want)
		}
	}
}
