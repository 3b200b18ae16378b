package apiclient_test

import (
	"net/http"
	"testing"

	"github.com/taskd/taskd/internal/apiclient"
)

// TestGold marks a task gold, has an editor answer its copy, reads the
// accuracy and the pause the answer caused, and lifts the pause, through the
// generated client.
func TestGold(t *testing.T) {
	t.Parallel()
	base := startTaskdConfig(t, "categories:\n  - name: news\n    gold: {rule: decision, rate: 1, min_accuracy: 0.5, min_answers: 1}\n")
	ctx := t.Context()
	admin := bearer(t, base, adminToken)

	add, err := admin.AddTasksWithResponse(ctx, apiclient.AddTasksJSONRequestBody{{Category: "news", Title: "known"}})
	want(t, "add task", err, add, add.Body, http.StatusCreated)
	id := add.JSON201.Ids[0]
	decision := "reject"
	mark, err := admin.MarkGoldWithResponse(ctx, id, apiclient.MarkGoldJSONRequestBody{Decision: &decision})
	want(t, "mark gold", err, mark, mark.Body, http.StatusOK)
	if mark.JSON200.TaskId != id || mark.JSON200.Category != "news" {
		t.Errorf("mark gold: %s", mark.Body)
	}

	ed, err := admin.CreateEditorWithResponse(ctx, apiclient.CreateEditorJSONRequestBody{Name: "ann", Categories: []string{"news"}})
	want(t, "create editor", err, ed, ed.Body, http.StatusCreated)
	ann := bearer(t, base, ed.JSON201.Token)
	next, err := ann.NextWithResponse(ctx, apiclient.NextJSONRequestBody{})
	want(t, "next", err, next, next.Body, http.StatusOK)
	if next.JSON200.Task.Id == id || next.JSON200.Task.Title != "known" {
		t.Fatalf("next: %s, want a copy of the gold task", next.Body)
	}
	sub, err := ann.SubmitWithResponse(ctx, next.JSON200.Task.Id, apiclient.SubmitJSONRequestBody{Fence: next.JSON200.Fence, Result: map[string]any{"ok": true}})
	want(t, "submit", err, sub, sub.Body, http.StatusOK)

	acc, err := admin.GoldAccuracyWithResponse(ctx, &apiclient.GoldAccuracyParams{Category: ptr("news")})
	want(t, "gold accuracy", err, acc, acc.Body, http.StatusOK)
	if len(acc.JSON200.Editors) != 1 || acc.JSON200.Editors[0].Answers != 1 || acc.JSON200.Editors[0].Correct != 0 || len(acc.JSON200.Pauses) != 1 {
		t.Fatalf("gold accuracy: %s, want ann 0/1, paused", acc.Body)
	}
	lift, err := admin.LiftGoldPauseWithResponse(ctx, ed.JSON201.Id, "news")
	want(t, "lift", err, lift, lift.Body, http.StatusNoContent)
}
