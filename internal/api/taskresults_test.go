package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// resultPage is a page of GET /v1/tasks/{id}/results and GET
// /v1/assignments/{task}/earlier.
type resultPage struct {
	Results []resultOut `json:"results"`
	More    bool        `json:"more"`
	Before  *string     `json:"before"`
}

// pageAll reads every page of path (a results route with its query), limit
// results a page, and returns the results oldest first, failing on a page
// that breaks the paging's promises.
func (b *bundle) pageAll(t *testing.T, path, token string, limit int) []resultOut {
	t.Helper()
	var all []resultOut
	before := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("%s: no end after %d pages", path, pages)
		}
		q := fmt.Sprintf("%s&limit=%d", path, limit)
		if before != "" {
			q += "&before=" + url.QueryEscape(before)
		}
		var p resultPage
		wantJSON(t, b.do(t, "GET", q, token, ""), http.StatusOK, &p)
		if len(p.Results) > limit || p.More != (p.Before != nil) || p.More && len(p.Results) != limit {
			t.Fatalf("%s: a page of %d results, more %v, before %v", q, len(p.Results), p.More, p.Before)
		}
		all = append(slices.Clone(p.Results), all...)
		if !p.More {
			return all
		}
		before = *p.Before
	}
}

// resultKeys names results by task and fence.
func resultKeys(rs []resultOut) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%d/%d", r.TaskID, r.Fence)
	}
	return out
}

// A reviewer who sends a task back every time: the answers of the editor's
// next and of GET /v1/tasks/{id} stop growing once they hold a page of
// results, every result is on exactly one page of the routes that page them,
// and the send back past the category's limit is refused, changing nothing.
func TestSendBackLoopAnswersStayBounded(t *testing.T) {
	t.Parallel()
	const rounds = 12
	wf := map[string]tasks.Workflow{"desk": {Stages: []string{"edit", "review"}, MaxSendBacks: rounds}}
	// A lease that outlives the reads of 25 results of 300 KiB, under -race.
	b := setup(t, setupOpts{storeCfg: store.Config{Workflows: wf}, dispatcher: dispatcher.Config{Workflows: wf, Lease: 30 * time.Minute}})
	ed := b.editorWith(t, "ed", 0, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.editorWith(t, "rev", 0, map[string][]string{"desk": {"review"}}, "desk")
	id := b.add(t, newTask{Category: "desk", Title: "story"})[0]
	big := `{"text":"` + strings.Repeat("x", 300<<10) + `"}`
	// A page's worth of results and the rest of the answer.
	bound := tasks.TaskResultsLimitDefault*(len(big)+1024) + 16<<10

	var edSizes, taskSizes []int
	var review flowAssignment
	for round := 1; ; round++ {
		a, raw := b.flowNext(t, ed.Token)
		edSizes = append(edSizes, len(raw))
		if a.Task.ID != id || a.Stage != "edit" || a.Earlier == nil || a.EarlierMore == nil {
			t.Fatalf("round %d: the editor's assignment %+v", round, a.assignment)
		}
		// Every earlier result, up to a page: the edits and send backs.
		want := min(2*(round-1), tasks.TaskResultsLimitDefault)
		if len(*a.Earlier) != want || *a.EarlierMore != (2*(round-1) > want) || (a.EarlierBefore != "") != *a.EarlierMore {
			t.Fatalf("round %d: %d earlier results, more %v, before %q; want %d", round, len(*a.Earlier), *a.EarlierMore, a.EarlierBefore, want)
		}
		if len(raw) > bound {
			t.Errorf("round %d: the editor's next is %d bytes, more than a page of results (%d)", round, len(raw), bound)
		}
		if round > 1 {
			if last := (*a.Earlier)[len(*a.Earlier)-1]; last.Decision != tasks.DecisionSendBack || last.Notes != fmt.Sprintf("again %d", round-1) {
				t.Fatalf("round %d: the latest earlier result %+v, want the last send back", round, last)
			}
		}
		b.flowSubmit(t, ed.Token, a, big, "", "")
		review, _ = b.flowNext(t, rev.Token)
		if review.Task.ID != id || review.Stage != "review" {
			t.Fatalf("round %d: the reviewer's assignment %+v", round, review.assignment)
		}
		_, raw = b.flowTask(t, id)
		taskSizes = append(taskSizes, len(raw))
		if len(raw) > bound {
			t.Errorf("round %d: GET /v1/tasks/%d is %d bytes, more than a page of results (%d)", round, id, len(raw), bound)
		}
		if round > rounds {
			break
		}
		b.flowSubmit(t, rev.Token, review, big, tasks.DecisionSendBack, fmt.Sprintf("again %d", round))
	}
	t.Logf("the editor's next, bytes by round: %v", edSizes)
	t.Logf("GET /v1/tasks/{id}, bytes by round: %v", taskSizes)

	// The send back past the limit: 422, nothing changed, the claim live.
	before := b.snapshot(t)
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), rev.Token,
		mustJSON(t, map[string]any{"fence": review.Fence, "result": json.RawMessage(`{}`), "decision": "send_back", "notes": "once more"}))
	if msg := wantError(t, res, http.StatusUnprocessableEntity, "send_back_limit"); !strings.Contains(msg, fmt.Sprint(rounds)) {
		t.Errorf("the refusal says %q, want the limit %d", msg, rounds)
	}
	b.unchanged(t, before)

	// Every result on exactly one page, in order: the task's, and the
	// reviewer's earlier ones (the same: a task of no group).
	ft, _ := b.flowTask(t, id)
	n := 2*rounds + 1
	if len(ft.Results) != tasks.TaskResultsLimitDefault || ft.ResultsMore == nil || !*ft.ResultsMore || ft.ResultsBefore == "" {
		t.Fatalf("GET /v1/tasks/%d: %d results, more %v, before %q", id, len(ft.Results), ft.ResultsMore, ft.ResultsBefore)
	}
	var want []string
	for fence := 1; fence <= n; fence++ {
		want = append(want, fmt.Sprintf("%d/%d", id, fence))
	}
	for _, limit := range []int{4, 100} {
		all := b.pageAll(t, fmt.Sprintf("/v1/tasks/%d/results?", id), adminToken, limit)
		if got := resultKeys(all); !slices.Equal(got, want) {
			t.Errorf("GET /v1/tasks/%d/results, %d a page: %v, want %v", id, limit, got, want)
		}
		all = b.pageAll(t, fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", id, review.Fence), rev.Token, limit)
		if got := resultKeys(all); !slices.Equal(got, want) {
			t.Errorf("the reviewer's earlier results, %d a page: %v, want %v", limit, got, want)
		}
	}
	// The detail's cursor goes on where its page ends.
	var older resultPage
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d/results?before=%s&limit=100", id, url.QueryEscape(ft.ResultsBefore)), adminToken, ""), http.StatusOK, &older)
	if got := resultKeys(append(older.Results, ft.Results...)); !slices.Equal(got, want) || older.More {
		t.Errorf("the detail's page and the older ones: %v, want %v", got, want)
	}

	// Only the holder of the claim reads its earlier results.
	path := fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", id, review.Fence)
	wantError(t, b.do(t, "GET", path, ed.Token, ""), http.StatusForbidden, "forbidden")
	wantError(t, b.do(t, "GET", fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", id, review.Fence+1), rev.Token, ""), http.StatusForbidden, "forbidden")
	wantError(t, b.do(t, "GET", fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", id, review.Fence-1), ed.Token, ""), http.StatusConflict, "stale_fence")
	wantError(t, b.do(t, "GET", "/v1/assignments/999999/earlier?fence=1", rev.Token, ""), http.StatusNotFound, "not_found")
	wantError(t, b.do(t, "GET", fmt.Sprintf("/v1/assignments/%d/earlier", id), rev.Token, ""), http.StatusUnprocessableEntity, "invalid")
	wantError(t, b.do(t, "GET", path+"&before=bogus", rev.Token, ""), http.StatusUnprocessableEntity, "invalid")
	wantError(t, b.do(t, "GET", path+"&limit=101", rev.Token, ""), http.StatusUnprocessableEntity, "invalid")
	wantError(t, b.do(t, "GET", path+"&after=1", rev.Token, ""), http.StatusBadRequest, "bad_request")
	wantError(t, b.do(t, "GET", path, adminToken, ""), http.StatusForbidden, "forbidden")
	wantError(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d/results?before=", id), adminToken, ""), http.StatusUnprocessableEntity, "invalid")
	wantError(t, b.do(t, "GET", "/v1/tasks/999999/results", adminToken, ""), http.StatusNotFound, "not_found")

	// The reviewer may still approve.
	if next := b.flowSubmit(t, rev.Token, review, `{"ok":true}`, tasks.DecisionApprove, ""); next != nil {
		t.Errorf("the reviewer's next: %+v, want none", next)
	}
	if ft, _ := b.flowTask(t, id); ft.Status != "done" {
		t.Errorf("after the approval: %s, want done", ft.Status)
	}
}

// An earlier result has no cursor until the feed numbers it, then the feed's.
func TestEarlierCursorIsTheFeeds(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ed := b.editorWith(t, "ed", 0, map[string][]string{"desk": {"edit"}}, "desk")
	rev := b.editorWith(t, "rev", 0, map[string][]string{"desk": {"review"}}, "desk")
	id := b.add(t, newTask{Category: "desk", Title: "story"})[0]
	a, _ := b.flowNext(t, ed.Token)
	b.flowSubmit(t, ed.Token, a, `{"text":"v1"}`, "", "")

	r, raw := b.flowNext(t, rev.Token)
	var keys struct {
		Earlier []map[string]json.RawMessage `json:"earlier"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil || len(keys.Earlier) != 1 {
		t.Fatalf("the reviewer's assignment: %s (%v)", raw, err)
	}
	if c, ok := keys.Earlier[0]["cursor"]; ok {
		t.Errorf("an earlier result not in the feed yet has the cursor %s, want none", c)
	}
	res := b.do(t, "GET", "/v1/results", adminToken, "")
	var line resultOut
	if err := json.Unmarshal([]byte(strings.SplitN(string(res.body), "\n", 2)[0]), &line); err != nil || line.TaskID != id || line.Cursor == "" {
		t.Fatalf("the feed's first line: %s (%v)", res.body, err)
	}
	for name, get := range map[string]func() []resultOut{
		"the reviewer's earlier results": func() []resultOut {
			return b.pageAll(t, fmt.Sprintf("/v1/assignments/%d/earlier?fence=%d", id, r.Fence), rev.Token, 10)
		},
		"the task's results": func() []resultOut { ft, _ := b.flowTask(t, id); return ft.Results },
	} {
		if rs := get(); len(rs) != 1 || rs[0].Cursor != line.Cursor || rs[0].Fence != line.Fence {
			t.Errorf("%s after the feed numbered them: %+v, want the cursor %s", name, rs, line.Cursor)
		}
	}
}
