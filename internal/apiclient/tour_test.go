package apiclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/taskd/taskd/internal/apiclient"
)

// bearer returns a client of base that sends token.
func bearer(t *testing.T, base, token string) *apiclient.ClientWithResponses {
	t.Helper()
	c, err := apiclient.NewClientWithResponses(base, apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// want fails the test unless a call succeeded with status.
func want(t *testing.T, what string, err error, res interface{ StatusCode() int }, body []byte, status int) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if res.StatusCode() != status {
		t.Fatalf("%s: status %d, want %d: %s", what, res.StatusCode(), status, body)
	}
}

// The README's tour, through the client generated from the OpenAPI document
// and nothing else: an operator creates an editor and adds tasks; the editor
// takes one, keeps it, submits it and gets the next, gives that back, takes
// and submits the last; the operator reads the results feed and the stats.
func TestTour(t *testing.T) {
	t.Parallel()
	base := startTaskd(t)
	ctx := t.Context()
	admin := bearer(t, base, adminToken)

	// Operators: an editor, and tasks for it.
	ed, err := admin.CreateEditorWithResponse(ctx, apiclient.CreateEditorJSONRequestBody{Name: "kim", Categories: []string{"sports", "politics"}})
	want(t, "create editor", err, ed, ed.Body, http.StatusCreated)
	kim := bearer(t, base, ed.JSON201.Token)

	key := "debate-1"
	high, mid, low := 5, 3, 1
	payload := apiclient.JSONObject{"text": "…"}
	add, err := admin.AddTasksWithResponse(ctx, apiclient.AddTasksJSONRequestBody{
		{Category: "sports", Priority: ptr(int32(high)), Title: "Match report", Payload: &payload},
		{Category: "politics", Priority: ptr(int32(mid)), Title: "Debate", Key: &key},
		{Category: "sports", Priority: ptr(int32(low)), Title: "Transfer news"},
	})
	want(t, "add tasks", err, add, add.Body, http.StatusCreated)
	if add.JSON201.Created != 3 || len(add.JSON201.Ids) != 3 {
		t.Fatalf("add tasks: %s", add.Body)
	}
	ids := add.JSON201.Ids

	// The editor holds nothing yet.
	me, err := kim.MeWithResponse(ctx)
	want(t, "me", err, me, me.Body, http.StatusOK)
	if me.JSON200.Assignment != nil || me.JSON200.MedianClaimToSubmitMs != nil || me.JSON200.Id != ed.JSON201.Id {
		t.Errorf("me before a claim: %s", me.Body)
	}

	// The editor asks for work (waiting up to 30s; there is some) and gets the
	// highest priority; /v1/me shows the same claim.
	next, err := kim.NextWithResponse(ctx, apiclient.NextJSONRequestBody{WaitMs: ptr(int64(30000))})
	want(t, "next", err, next, next.Body, http.StatusOK)
	a := next.JSON200
	if a.Task.Id != ids[0] || a.Task.Title != "Match report" || !reflect.DeepEqual(a.Task.Payload, payload) || a.Fence < 1 {
		t.Fatalf("next: %s, want task %d", next.Body, ids[0])
	}
	me, err = kim.MeWithResponse(ctx)
	want(t, "me", err, me, me.Body, http.StatusOK)
	if me.JSON200.Assignment == nil || me.JSON200.Assignment.Task.Id != a.Task.Id || me.JSON200.Assignment.Fence != a.Fence {
		t.Errorf("me with a claim: %s, want task %d fence %d", me.Body, a.Task.Id, a.Fence)
	}

	// It keeps it while working on it.
	hb, err := kim.HeartbeatWithResponse(ctx, a.Task.Id, apiclient.HeartbeatJSONRequestBody{Fence: a.Fence})
	want(t, "heartbeat", err, hb, hb.Body, http.StatusOK)
	if hb.JSON200.LeaseExpiresAt.Before(a.LeaseExpiresAt) {
		t.Errorf("heartbeat: the lease ends %v, before %v", hb.JSON200.LeaseExpiresAt, a.LeaseExpiresAt)
	}

	// It hands it in; the answer carries the next assignment.
	sub, err := kim.SubmitWithResponse(ctx, a.Task.Id, apiclient.SubmitJSONRequestBody{Fence: a.Fence, Result: map[string]any{"approved": true}})
	want(t, "submit", err, sub, sub.Body, http.StatusOK)
	b := sub.JSON200.Next
	if b == nil || b.Task.Id != ids[1] {
		t.Fatalf("submit: %s, want the next assignment, task %d", sub.Body, ids[1])
	}

	// It gives that one back (skip: not offered to it again for a while).
	rel, err := kim.ReleaseWithResponse(ctx, b.Task.Id, apiclient.ReleaseJSONRequestBody{Fence: b.Fence, Reason: ptr("not my beat"), Skip: ptr(true)})
	want(t, "release", err, rel, rel.Body, http.StatusNoContent)

	// It takes the last one and submits it: nothing else is claimable for it,
	// so next is null.
	next, err = kim.NextWithResponse(ctx, apiclient.NextJSONRequestBody{})
	want(t, "next", err, next, next.Body, http.StatusOK)
	c := next.JSON200
	if c.Task.Id != ids[2] {
		t.Fatalf("next after the skip: %s, want task %d", next.Body, ids[2])
	}
	sub, err = kim.SubmitWithResponse(ctx, c.Task.Id, apiclient.SubmitJSONRequestBody{Fence: c.Fence, Result: "filed"})
	want(t, "submit", err, sub, sub.Body, http.StatusOK)
	if sub.JSON200.Next != nil {
		t.Errorf("the last submit: %s, want next null", sub.Body)
	}

	// The released task is back in the pool, held by no one, with no result.
	task, err := admin.GetTaskWithResponse(ctx, ids[1])
	want(t, "get task", err, task, task.Body, http.StatusOK)
	if d := task.JSON200; d.Status != apiclient.StatusPending || d.EditorId != nil || d.Holder != nil || d.Result != nil || d.Key == nil || *d.Key != key {
		t.Errorf("the released task: %s", task.Body)
	}

	// The results feed, line by line: the two results in order, then the end.
	lines, end := results(t, admin, "0")
	if len(lines) != 2 || end.Count != 2 || end.More {
		t.Fatalf("results: %d lines, end %+v; want 2 and the end", len(lines), end)
	}
	for i, w := range []struct {
		task   int64
		result any
	}{{ids[0], map[string]any{"approved": true}}, {ids[2], "filed"}} {
		l := lines[i]
		if l.TaskId != w.task || !reflect.DeepEqual(l.Result, w.result) || l.EditorId == nil || *l.EditorId != ed.JSON201.Id || l.Key != nil {
			t.Errorf("results line %d: %+v, want task %d, result %v, editor %d, no key", i+1, l, w.task, w.result, ed.JSON201.Id)
		}
	}
	// A line of the feed always has its cursor.
	if lines[1].Cursor == nil || end.NextCursor != *lines[1].Cursor {
		t.Errorf("results: next_cursor %q, want the last line's cursor %v", end.NextCursor, lines[1].Cursor)
	}
	// Asking again after the cursor: nothing new.
	if again, end2 := results(t, admin, end.NextCursor); len(again) != 0 || end2.Count != 0 || end2.NextCursor != end.NextCursor {
		t.Errorf("results after %s: %d lines, end %+v; want none", end.NextCursor, len(again), end2)
	}

	// The pool.
	st, err := admin.StatsWithResponse(ctx)
	want(t, "stats", err, st, st.Body, http.StatusOK)
	if s := st.JSON200; s.ByStatus.Done != 2 || s.ByStatus.Pending != 1 || s.ByStatus.Assigned != 0 || s.Live != 0 ||
		s.ByCategory["sports"].Done != 2 || s.ByCategory["politics"].Pending != 1 {
		t.Errorf("stats: %s", st.Body)
	}
}

// results reads GET /v1/results after the cursor, decoding each line
// strictly (no field the generated types lack): the results, then the end.
func results(t *testing.T, c *apiclient.ClientWithResponses, after string) ([]apiclient.ResultLine, apiclient.ResultsEnd) {
	t.Helper()
	res, err := c.Results(t.Context(), &apiclient.ResultsParams{After: &after})
	if err != nil {
		t.Fatalf("results: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("results: status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var raw [][]byte
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		raw = append(raw, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("results: read: %v", err)
	}
	if len(raw) == 0 {
		t.Fatal("results: no lines, not even the last")
	}
	var lines []apiclient.ResultLine
	for _, l := range raw[:len(raw)-1] {
		var line apiclient.ResultLine
		strict(t, l, &line)
		lines = append(lines, line)
	}
	var end apiclient.ResultsEnd
	strict(t, raw[len(raw)-1], &end)
	return lines, end
}

// strict decodes data into v, refusing unknown fields and trailing data.
func strict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		t.Fatalf("decode %s into %T: %v", data, v, err)
	}
}

func ptr[T any](v T) *T { return &v }
