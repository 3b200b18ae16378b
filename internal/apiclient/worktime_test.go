package apiclient_test

import (
	"net/http"
	"testing"

	"github.com/taskd/taskd/internal/apiclient"
)

// TestWorkingTime reports active time with a heartbeat and a submit through
// the generated client, and reads it back as the editor and as the admin: an
// hour reported for a claim of a moment is cut to the claim's wall time.
func TestWorkingTime(t *testing.T) {
	t.Parallel()
	base := startTaskd(t)
	ctx := t.Context()
	admin := bearer(t, base, adminToken)

	ed, err := admin.CreateEditorWithResponse(ctx, apiclient.CreateEditorJSONRequestBody{Name: "ann", Categories: []string{"news"}})
	want(t, "create editor", err, ed, ed.Body, http.StatusCreated)
	ann := bearer(t, base, ed.JSON201.Token)
	add, err := admin.AddTasksWithResponse(ctx, apiclient.AddTasksJSONRequestBody{{Category: "news", Title: "one"}})
	want(t, "add task", err, add, add.Body, http.StatusCreated)

	next, err := ann.NextWithResponse(ctx, apiclient.NextJSONRequestBody{})
	want(t, "next", err, next, next.Body, http.StatusOK)
	a := next.JSON200
	beat, err := ann.HeartbeatWithResponse(ctx, a.Task.Id, apiclient.HeartbeatJSONRequestBody{Fence: a.Fence, ActiveMs: ptr(apiclient.ActiveMS(10))})
	want(t, "heartbeat", err, beat, beat.Body, http.StatusOK)
	sub, err := ann.SubmitWithResponse(ctx, a.Task.Id, apiclient.SubmitJSONRequestBody{Fence: a.Fence, Result: map[string]any{}, ActiveMs: ptr(apiclient.ActiveMS(3_600_000))})
	want(t, "submit", err, sub, sub.Body, http.StatusOK)

	mine, err := ann.MyTimeWithResponse(ctx, nil)
	want(t, "my time", err, mine, mine.Body, http.StatusOK)
	if got := mine.JSON200; got.Days != 14 || len(got.Daily) != 14 || got.Total.Submitted != 1 || got.Total.ActiveMs >= 60_000 || got.Total.GoldAccuracy != nil {
		t.Errorf("my time: %s, want one submit, under a minute", mine.Body)
	}
	theirs, err := admin.EditorTimeWithResponse(ctx, ed.JSON201.Id, &apiclient.EditorTimeParams{Days: ptr(3)})
	want(t, "editor time", err, theirs, theirs.Body, http.StatusOK)
	if got := theirs.JSON200; got.Days != 3 || len(got.Categories) != 1 || got.Categories[0].Category != "news" || got.Total.ActiveMs != mine.JSON200.Total.ActiveMs {
		t.Errorf("ann's time: %s", theirs.Body)
	}
	bad, err := admin.EditorTimeWithResponse(ctx, ed.JSON201.Id, &apiclient.EditorTimeParams{Days: ptr(0)})
	want(t, "days 0", err, bad, bad.Body, http.StatusUnprocessableEntity)
}
