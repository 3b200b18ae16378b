package apiclient_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/apiclient"
)

// TestInstructions sets a category's instructions, reads them and their
// versions, and has an editor confirm them through the generated client: the
// editor's claim waits for the confirmation and names the category in the
// Taskd-Instructions-Pending header.
func TestInstructions(t *testing.T) {
	t.Parallel()
	base := startTaskd(t)
	ctx := t.Context()
	admin := bearer(t, base, adminToken)

	set, err := admin.SetInstructionsWithResponse(ctx, "news", apiclient.SetInstructionsJSONRequestBody{Markdown: "Be *kind*."})
	want(t, "set instructions", err, set, set.Body, http.StatusOK)
	if set.JSON200.Version != 1 || !set.JSON200.Changed || !strings.Contains(set.JSON200.Html, "<em>kind</em>") {
		t.Errorf("set: %s, want version 1 rendered", set.Body)
	}
	set, err = admin.SetInstructionsWithResponse(ctx, "news", apiclient.SetInstructionsJSONRequestBody{Markdown: "Be brief."})
	want(t, "set instructions again", err, set, set.Body, http.StatusOK)
	got, err := admin.GetInstructionsWithResponse(ctx, "news", &apiclient.GetInstructionsParams{Version: ptr(1)})
	want(t, "get version 1", err, got, got.Body, http.StatusOK)
	if got.JSON200.Markdown != "Be *kind*." {
		t.Errorf("version 1: %s", got.Body)
	}
	vs, err := admin.InstructionVersionsWithResponse(ctx, "news")
	want(t, "versions", err, vs, vs.Body, http.StatusOK)
	if len(vs.JSON200.Versions) != 2 || vs.JSON200.Versions[0].Version != 2 {
		t.Errorf("versions: %s, want 2 and 1", vs.Body)
	}

	ed, err := admin.CreateEditorWithResponse(ctx, apiclient.CreateEditorJSONRequestBody{Name: "ann", Categories: []string{"news"}})
	want(t, "create editor", err, ed, ed.Body, http.StatusCreated)
	ann := bearer(t, base, ed.JSON201.Token)
	add, err := admin.AddTasksWithResponse(ctx, apiclient.AddTasksJSONRequestBody{{Category: "news", Title: "one"}})
	want(t, "add task", err, add, add.Body, http.StatusCreated)

	next, err := ann.NextWithResponse(ctx, apiclient.NextJSONRequestBody{})
	want(t, "next before confirming", err, next, next.Body, http.StatusNoContent)
	if h := next.HTTPResponse.Header.Get("Taskd-Instructions-Pending"); h != "news" {
		t.Errorf("pending header %q, want news", h)
	}
	mine, err := ann.MyInstructionsWithResponse(ctx)
	want(t, "my instructions", err, mine, mine.Body, http.StatusOK)
	if len(mine.JSON200.Instructions) != 1 || !mine.JSON200.Instructions[0].Pending || mine.JSON200.Instructions[0].Version != 2 {
		t.Fatalf("my instructions: %s, want news version 2 pending", mine.Body)
	}
	old, err := ann.ConfirmInstructionsWithResponse(ctx, "news", apiclient.ConfirmInstructionsJSONRequestBody{Version: 1})
	want(t, "confirm version 1", err, old, old.Body, http.StatusConflict)
	ack, err := ann.ConfirmInstructionsWithResponse(ctx, "news", apiclient.ConfirmInstructionsJSONRequestBody{Version: 2})
	want(t, "confirm version 2", err, ack, ack.Body, http.StatusOK)
	if ack.JSON200.ConfirmedVersion != 2 {
		t.Errorf("confirm: %s", ack.Body)
	}
	next, err = ann.NextWithResponse(ctx, apiclient.NextJSONRequestBody{})
	want(t, "next after confirming", err, next, next.Body, http.StatusOK)
}
