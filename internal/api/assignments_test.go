package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

func TestNextShapeAndIdempotence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	payload := `{"body":"` + payloadMarker + `","words":[1,2]}`
	ids := b.add(t,
		newTask{Category: "news", Priority: 1, Title: "low"},
		newTask{Category: "news", Priority: 7, Title: "high", Payload: json.RawMessage(payload)},
		newTask{Category: "sports", Priority: 9, Title: "other category"},
	)

	res := b.do(t, "POST", "/v1/assignments/next", e.Token, "")
	var a assignment
	wantJSON(t, res, http.StatusOK, &a)
	wantKeys(t, res.body, "task", "fence", "assigned_at", "lease_expires_at")
	var raw struct {
		Task json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(res.body, &raw); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, raw.Task, "id", "category", "priority", "title", "payload")

	if a.Task.ID != ids[1] || a.Task.Category != "news" || a.Task.Priority != 7 || a.Task.Title != "high" {
		t.Fatalf("assigned %+v, want task %d (news, 7, high)", a.Task, ids[1])
	}
	var got, want any
	if err := json.Unmarshal(a.Task.Payload, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(payload), &want)
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Fatalf("payload = %s, want %s", a.Task.Payload, payload)
	}
	if a.Fence != 1 {
		t.Fatalf("fence = %d, want 1", a.Fence)
	}
	assigned, lease := parseTime(t, a.AssignedAt), parseTime(t, a.LeaseExpiresAt)
	row := b.task(t, ids[1])
	if !assigned.Equal(*row.AssignedAt) || !lease.Equal(*row.LeaseExpiresAt) {
		t.Fatalf("times %v, %v; the row has %v, %v", assigned, lease, row.AssignedAt, row.LeaseExpiresAt)
	}
	if d := lease.Sub(assigned); d != b.d.Config().Lease {
		t.Fatalf("lease - assigned = %v, want %v", d, b.d.Config().Lease)
	}

	again := b.next(t, e.Token)
	if mustJSON(t, again) != mustJSON(t, a) {
		t.Fatalf("second next = %+v, want the same assignment %+v", again, a)
	}
	if row := b.task(t, ids[1]); row.Fence != 1 || row.Attempts != 1 {
		t.Fatalf("after asking twice: fence %d attempts %d, want 1 and 1", row.Fence, row.Attempts)
	}
	if row := b.task(t, ids[0]); row.Status != tasks.StatusPending {
		t.Fatalf("the other task is %s, want pending", row.Status)
	}
}

func TestNextConcurrentEditorsGetDistinctTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const editors, pool = 12, 5
	ids := b.addN(t, "news", pool)
	tokens := make([]string, editors)
	for i := range tokens {
		tokens[i] = b.editor(t, fmt.Sprintf("e%d", i), "news").Token
	}

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  = map[int64]int{}
		none int
		errs []string
	)
	for _, tok := range tokens {
		wg.Go(func() {
			for range 3 { // asking again must return the same task
				res, err := b.doCtx(t.Context(), "POST", "/v1/assignments/next", tok, "")
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case res.status == http.StatusNoContent:
					none++
				case res.status == http.StatusOK:
					var a assignment
					if err := json.Unmarshal(res.body, &a); err != nil {
						errs = append(errs, err.Error())
					}
					got[a.Task.ID]++
				default:
					errs = append(errs, fmt.Sprintf("status %d: %s", res.status, res.body))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(got) != pool || none != 3*(editors-pool) {
		t.Fatalf("assigned %v and %d empty answers; want each of %d tasks 3 times and %d empty answers", got, none, pool, 3*(editors-pool))
	}
	for id, n := range got {
		if n != 3 {
			t.Fatalf("task %d was answered %d times, want 3 (one editor asking 3 times): %v", id, n, got)
		}
	}
	holders := map[string]bool{}
	for _, id := range ids {
		row := b.task(t, id)
		if row.Status != tasks.StatusAssigned || row.Fence != 1 || holders[row.Holder] {
			t.Fatalf("task %d: %s fence %d holder %q (seen: %v)", id, row.Status, row.Fence, row.Holder, holders)
		}
		holders[row.Holder] = true
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	a := b.next(t, e.Token)

	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), e.Token, `{"fence":1}`)
	var hb struct {
		LeaseExpiresAt string `json:"lease_expires_at"`
	}
	wantJSON(t, res, http.StatusOK, &hb)
	wantKeys(t, res.body, "lease_expires_at")
	lease := parseTime(t, hb.LeaseExpiresAt)
	if before := parseTime(t, a.LeaseExpiresAt); lease.Before(before) {
		t.Fatalf("heartbeat moved the lease back: %v < %v", lease, before)
	}
	row := b.task(t, id)
	if !lease.Equal(*row.LeaseExpiresAt) {
		t.Fatalf("answered lease %v, row has %v", lease, row.LeaseExpiresAt)
	}
	hist := b.history(t, id)
	// A heartbeat is not history: the claim is its one event still.
	if len(hist) != 1 || hist[0].Kind != tasks.EventClaimed || hist[0].Fence != 1 {
		t.Fatalf("history = %+v, want the claim only", hist)
	}
}

func TestSubmitReturnsNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	ids := b.add(t,
		newTask{Category: "news", Priority: 5, Title: "first"},
		newTask{Category: "news", Priority: 1, Title: "second"},
	)
	a := b.next(t, e.Token)
	if a.Task.ID != ids[0] {
		t.Fatalf("first assignment is task %d, want %d", a.Task.ID, ids[0])
	}

	result := `{"verdict":"` + payloadMarker + `"}`
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", ids[0]), e.Token,
		fmt.Sprintf(`{"fence":%d,"result":%s}`, a.Fence, result))
	var out struct {
		Next *assignment `json:"next"`
	}
	wantJSON(t, res, http.StatusOK, &out)
	wantKeys(t, res.body, "next")
	if out.Next == nil || out.Next.Task.ID != ids[1] || out.Next.Fence != 1 || out.Next.Task.Title != "second" {
		t.Fatalf("next = %+v, want task %d with fence 1", out.Next, ids[1])
	}
	parseTime(t, out.Next.AssignedAt)
	parseTime(t, out.Next.LeaseExpiresAt)

	if row := b.task(t, ids[0]); row.Status != tasks.StatusDone || row.DoneAt == nil {
		t.Fatalf("submitted task is %s (done_at %v), want done", row.Status, row.DoneAt)
	}
	var stored string
	if err := b.db.GetContext(t.Context(), &stored, "SELECT result FROM task_results WHERE task_id = ? AND fence = ?", ids[0], a.Fence); err != nil {
		t.Fatalf("read result: %v", err)
	}
	if !strings.Contains(stored, payloadMarker) {
		t.Fatalf("stored result = %s, want %s", stored, result)
	}
	if row := b.task(t, ids[1]); row.Status != tasks.StatusAssigned || row.Holder != tasks.EditorHolder(e.ID) {
		t.Fatalf("next task is %s held by %q", row.Status, row.Holder)
	}

	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", ids[1]), e.Token, `{"fence":1,"result":"fine"}`)
	wantJSON(t, res, http.StatusOK, &out)
	if out.Next != nil || strings.TrimSpace(string(res.body)) != `{"next":null}` {
		t.Fatalf("last submit answered %s, want {\"next\":null}", res.body)
	}
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", e.Token, ""), http.StatusNoContent)

	// Submitting again is stale: the claim is over.
	before := b.snapshot(t)
	wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", ids[1]), e.Token, `{"fence":1,"result":"again"}`),
		http.StatusConflict, "stale_fence")
	b.unchanged(t, before)
}

func TestRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	a := b.next(t, e.Token)

	path := fmt.Sprintf("/v1/assignments/%d/release", id)
	wantStatus(t, b.do(t, "POST", path, e.Token, fmt.Sprintf(`{"fence":%d,"reason":"need coffee"}`, a.Fence)), http.StatusNoContent)
	row := b.task(t, id)
	if row.Status != tasks.StatusPending || row.Holder != "" || row.EditorID != 0 {
		t.Fatalf("released task: %s holder %q editor %d, want pending without holder", row.Status, row.Holder, row.EditorID)
	}
	hist := b.history(t, id)
	if last := hist[len(hist)-1]; last.Kind != tasks.EventReleased || last.Detail != "need coffee" || last.Fence != a.Fence {
		t.Fatalf("last event = %+v, want released with the reason", last)
	}

	// The same release again is stale, and the editor's own: 409.
	before := b.snapshot(t)
	wantError(t, b.do(t, "POST", path, e.Token, fmt.Sprintf(`{"fence":%d}`, a.Fence)), http.StatusConflict, "stale_fence")
	b.unchanged(t, before)

	// A release keeps the task from this editor for the release cooldown;
	// another editor gets it at once.
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", e.Token, `{}`), http.StatusNoContent)
	bob := b.editor(t, "bob", "news")
	a = b.next(t, bob.Token)
	if a.Task.ID != id || a.Fence != 2 {
		t.Fatalf("claimed again: task %d fence %d, want %d and 2", a.Task.ID, a.Fence, id)
	}

	// A skip keeps the task from this editor for a while.
	wantStatus(t, b.do(t, "POST", path, bob.Token, `{"fence":2,"skip":true}`), http.StatusNoContent)
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", bob.Token, `{}`), http.StatusNoContent)
	if row := b.task(t, id); row.Status != tasks.StatusPending {
		t.Fatalf("skipped task is %s, want pending", row.Status)
	}
	other := b.editor(t, "cy", "news")
	if a := b.next(t, other.Token); a.Task.ID != id {
		t.Fatalf("another editor got task %d, want the skipped %d", a.Task.ID, id)
	}
}

// TestReleaseLoopIsBounded: an editor that releases its task with a long
// reason and asks for the next one, a thousand times over, gets that task
// once per release cooldown, not once per release; a reason of control
// characters is refused. The task's history grows by one claim and one
// release, and its detail stays small.
func TestReleaseLoopIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	controls := strings.Repeat(`\u0001`, api.MaxReasonLen)
	reason := strings.Repeat("r", api.MaxReasonLen)
	const cycles = 1000
	claims := 0
	for range cycles {
		res := b.do(t, "POST", "/v1/assignments/next", e.Token, `{}`)
		if res.status == http.StatusNoContent {
			continue
		}
		var a assignment
		wantJSON(t, res, http.StatusOK, &a)
		if a.Task.ID != id {
			t.Fatalf("got task %d, want %d", a.Task.ID, id)
		}
		claims++
		path := fmt.Sprintf("/v1/assignments/%d/release", id)
		wantError(t, b.do(t, "POST", path, e.Token, fmt.Sprintf(`{"fence":%d,"reason":"%s"}`, a.Fence, controls)),
			http.StatusUnprocessableEntity, "invalid")
		wantStatus(t, b.do(t, "POST", path, e.Token, mustJSON(t, map[string]any{"fence": a.Fence, "reason": reason})), http.StatusNoContent)
	}
	if claims != 1 {
		t.Fatalf("%d claims of one task by one editor in %d release/next cycles, want 1", claims, cycles)
	}
	if hist := b.history(t, id); len(hist) != 2 {
		t.Fatalf("%d events, want 2 (claimed, released)", len(hist))
	}
	res := b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "")
	var d taskDetail
	wantJSON(t, res, http.StatusOK, &d)
	t.Logf("%d release/next cycles: %d claims; GET /v1/tasks/%d answers %d bytes with %d events", cycles, claims, id, len(res.body), len(d.History))
}

// TestReasonControlCharacters: a reason is one line of text: a control
// character (C0 with line breaks and tabs, DEL, C1), a line or paragraph
// separator or a bidi control in the reason of a release, a skip, a requeue
// or a cancel, one task or by filter, is 422 and changes nothing.
func TestReasonControlCharacters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 2)[0]
	a := b.next(t, e.Token)
	for _, bad := range []string{`a\u0000b`, `two\nlines`, `tab\there`, `bell\u0007`, `del\u007f`, `c1\u0085`, `csi\u009b2J`, `\r`,
		`line\u2028sep`, `para\u2029sep`, `x\u202ey`, `\u202aembed`, `\u2066isolate`, `pop\u2069`} {
		before := b.snapshot(t)
		for _, c := range []struct{ path, token, body string }{
			{fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), e.Token, fmt.Sprintf(`{"fence":%d,"reason":"%s"}`, a.Fence, bad)},
			{fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), e.Token, fmt.Sprintf(`{"fence":%d,"skip":true,"reason":"%s"}`, a.Fence, bad)},
			{fmt.Sprintf("/v1/admin/tasks/%d/cancel", id+1), adminToken, fmt.Sprintf(`{"reason":"%s"}`, bad)},
			{fmt.Sprintf("/v1/admin/tasks/%d/requeue", id+1), adminToken, fmt.Sprintf(`{"reason":"%s"}`, bad)},
			{"/v1/admin/tasks/cancel", adminToken, fmt.Sprintf(`{"category":"news","reason":"%s"}`, bad)},
			{"/v1/admin/tasks/requeue", adminToken, fmt.Sprintf(`{"category":"news","reason":"%s"}`, bad)},
		} {
			res := b.do(t, "POST", c.path, c.token, c.body)
			wantError(t, res, http.StatusUnprocessableEntity, "invalid")
			if !strings.Contains(string(res.body), "reason must not hold U+") {
				t.Errorf("%s %s: %s", c.path, bad, res.body)
			}
		}
		b.unchanged(t, before)
	}
	// Text, quotes, markup and characters beyond Latin-1 are fine.
	wantStatus(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), e.Token,
		fmt.Sprintf(`{"fence":%d,"reason":"zu lang – \"<b>\" ✓ 日本"}`, a.Fence)), http.StatusNoContent)
	if hist := b.history(t, a.Task.ID); hist[len(hist)-1].Detail != `zu lang – "<b>" ✓ 日本` {
		t.Errorf("reason kept as %q", hist[len(hist)-1].Detail)
	}
}

func TestFenceNeverHeldIsForbidden(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	a := b.next(t, e.Token)

	before := b.snapshot(t)
	for _, c := range []struct{ action, body string }{
		{"heartbeat", `{"fence":2}`},
		{"submit", `{"fence":2,"result":{}}`},
		{"release", `{"fence":2}`},
		{"heartbeat", `{"fence":7}`},
	} {
		res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/%s", id, c.action), e.Token, c.body)
		wantError(t, res, http.StatusForbidden, "forbidden")
	}
	b.unchanged(t, before)
	if row := b.task(t, id); row.Status != tasks.StatusAssigned || row.Fence != a.Fence {
		t.Fatalf("task is %s with fence %d, want assigned with %d", row.Status, row.Fence, a.Fence)
	}
	if n := b.d.Stats().RefusedWrites; n != 4 {
		t.Fatalf("refused writes = %d, want 4", n)
	}
}

// TestLostClaimIsConflict: whatever became of a claim the editor once held, a
// write naming it is 409 stale_fence, so a client treats "my claim is gone" as
// one answer. The same write by an editor who never held it is 403.
func TestLostClaimIsConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ada := b.editor(t, "ada", "news")
	bob := b.editor(t, "bob", "news")
	id := b.addN(t, "news", 1)[0]
	lost := b.next(t, ada.Token)

	writes := func(fence int64) []struct{ action, body string } {
		return []struct{ action, body string }{
			{"heartbeat", fmt.Sprintf(`{"fence":%d}`, fence)},
			{"submit", fmt.Sprintf(`{"fence":%d,"result":{"late":true}}`, fence)},
			{"release", fmt.Sprintf(`{"fence":%d,"skip":true}`, fence)},
		}
	}
	check := func(stage string, token string, fence int64, status int, code string) {
		t.Helper()
		before := b.snapshot(t)
		for _, c := range writes(fence) {
			t.Logf("%s: %s with fence %d", stage, c.action, fence)
			wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/%s", id, c.action), token, c.body), status, code)
		}
		b.unchanged(t, before)
	}

	// Revoked, then pending.
	wantStatus(t, b.do(t, "POST", fmt.Sprintf("/v1/admin/tasks/%d/release", id), adminToken, ""), http.StatusNoContent)
	check("pending", ada.Token, lost.Fence, http.StatusConflict, "stale_fence")
	check("pending, never held", bob.Token, lost.Fence, http.StatusForbidden, "forbidden")

	// Now another editor holds it.
	taken := b.next(t, bob.Token)
	if taken.Task.ID != id {
		t.Fatalf("bob got task %d, want %d", taken.Task.ID, id)
	}
	check("held by another", ada.Token, lost.Fence, http.StatusConflict, "stale_fence")
	check("someone else's live claim", ada.Token, taken.Fence, http.StatusForbidden, "forbidden")

	// And once it is done.
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), bob.Token,
		fmt.Sprintf(`{"fence":%d,"result":{"ok":true}}`, taken.Fence)), http.StatusOK, nil)
	check("done", ada.Token, lost.Fence, http.StatusConflict, "stale_fence")
	check("submitted twice", bob.Token, taken.Fence, http.StatusConflict, "stale_fence")
}

func TestAnotherEditorsClaimIsForbidden(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ada := b.editor(t, "ada", "news")
	bob := b.editor(t, "bob", "news")
	id := b.addN(t, "news", 1)[0]
	a := b.next(t, ada.Token)

	before := b.snapshot(t)
	for _, c := range []struct{ action, body string }{
		{"heartbeat", fmt.Sprintf(`{"fence":%d}`, a.Fence)},
		{"submit", fmt.Sprintf(`{"fence":%d,"result":{"stolen":true}}`, a.Fence)},
		{"release", fmt.Sprintf(`{"fence":%d,"skip":true}`, a.Fence)},
		{"release", `{"fence":99}`},
	} {
		res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/%s", id, c.action), bob.Token, c.body)
		wantError(t, res, http.StatusForbidden, "forbidden")
	}
	b.unchanged(t, before)

	// The claim is still Ada's and works.
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), ada.Token, `{"fence":1}`), http.StatusOK, nil)
}

func TestUnknownTaskIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 1)
	b.next(t, e.Token)

	before := b.snapshot(t)
	for _, c := range []struct{ method, path, token, body string }{
		{"POST", "/v1/assignments/999999/heartbeat", e.Token, `{"fence":1}`},
		{"POST", "/v1/assignments/999999/submit", e.Token, `{"fence":1,"result":1}`},
		{"POST", "/v1/assignments/999999/release", e.Token, `{"fence":1}`},
		{"GET", "/v1/tasks/999999", adminToken, ""},
		{"POST", "/v1/admin/tasks/999999/release", adminToken, ""},
	} {
		wantError(t, b.do(t, c.method, c.path, c.token, c.body), http.StatusNotFound, "not_found")
	}
	b.unchanged(t, before)
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	a := b.next(t, e.Token)
	path := fmt.Sprintf("/v1/admin/tasks/%d/release", id)

	// Only the admin may.
	before := b.snapshot(t)
	wantError(t, b.do(t, "POST", path, e.Token, ""), http.StatusForbidden, "forbidden")
	b.unchanged(t, before)

	wantStatus(t, b.do(t, "POST", path, adminToken, ""), http.StatusNoContent)
	row := b.task(t, id)
	if row.Status != tasks.StatusPending || row.Fence != a.Fence+1 || row.Holder != "" {
		t.Fatalf("after force release: %s fence %d holder %q, want pending, fence %d, no holder",
			row.Status, row.Fence, row.Holder, a.Fence+1)
	}

	// The old holder is refused: its claim is over, and was its own.
	before = b.snapshot(t)
	wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), e.Token,
		fmt.Sprintf(`{"fence":%d,"result":{"late":true}}`, a.Fence)), http.StatusConflict, "stale_fence")
	wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), e.Token,
		fmt.Sprintf(`{"fence":%d}`, a.Fence)), http.StatusConflict, "stale_fence")
	// Nobody holds it now.
	wantError(t, b.do(t, "POST", path, adminToken, `{}`), http.StatusConflict, "not_assigned")
	b.unchanged(t, before)

	// The task is claimable again, under a new fence.
	if again := b.next(t, e.Token); again.Task.ID != id || again.Fence != a.Fence+2 {
		t.Fatalf("claimed again: task %d fence %d, want %d and %d", again.Task.ID, again.Fence, id, a.Fence+2)
	}
}

func TestGetTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.add(t, newTask{Category: "news", Priority: 3, Title: "t", Payload: json.RawMessage(`{"k":"v"}`)})[0]

	res := b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "")
	var d taskDetail
	wantJSON(t, res, http.StatusOK, &d)
	wantKeys(t, res.body, "task", "status", "fence", "holder", "editor_id", "assigned_at", "lease_expires_at",
		"attempts", "max_attempts", "snoozes", "run_after", "due_at", "key", "limit_key", "last_error", "created_at", "updated_at", "done_at",
		"result", "history", "history_more", "history_before")
	if d.Task.ID != id || d.Status != "pending" || d.Fence != 0 || d.Holder != nil || d.EditorID != nil ||
		d.AssignedAt != nil || d.LeaseExpiresAt != nil || d.Attempts != 0 || d.MaxAttempts != tasks.MaxAttemptsDefault ||
		len(d.History) != 0 || string(d.Task.Payload) != `{"k":"v"}` || d.Result != nil || d.Key != nil || d.DueAt != nil {
		t.Fatalf("pending task = %s", res.body)
	}
	parseTime(t, d.RunAfter)
	parseTime(t, d.CreatedAt)

	a := b.next(t, e.Token)
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), e.Token, `{"fence":1}`), http.StatusOK, nil)
	res = b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "")
	d = taskDetail{}
	wantJSON(t, res, http.StatusOK, &d)
	holder := tasks.EditorHolder(e.ID)
	if d.Status != "assigned" || d.Fence != 1 || d.Holder == nil || *d.Holder != holder ||
		d.EditorID == nil || *d.EditorID != e.ID || d.AssignedAt == nil || *d.AssignedAt != a.AssignedAt ||
		d.LeaseExpiresAt == nil || d.Attempts != 1 {
		t.Fatalf("assigned task = %s", res.body)
	}
	// The heartbeat moved the lease; it is not history.
	if len(d.History) != 1 || d.History[0].Kind != "claimed" ||
		d.History[0].Fence != 1 || d.History[0].Holder == nil || *d.History[0].Holder != holder {
		t.Fatalf("history = %s", res.body)
	}
	parseTime(t, d.History[0].At)
	if d.Result != nil {
		t.Fatalf("assigned task has a result: %s", res.body)
	}

	// Submitted: the accepted result is there, with its claim.
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), e.Token, `{"fence":1,"result":{"verdict":"ok","n":[1,2]}}`), http.StatusOK, nil)
	res = b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, "")
	d = taskDetail{}
	wantJSON(t, res, http.StatusOK, &d)
	if d.Status != "done" || d.Result == nil || d.Result.Fence != 1 || d.Result.Holder != holder ||
		d.Result.EditorID == nil || *d.Result.EditorID != e.ID {
		t.Fatalf("done task = %s", res.body)
	}
	var got map[string]any
	if err := json.Unmarshal(d.Result.Result, &got); err != nil || got["verdict"] != "ok" || len(got["n"].([]any)) != 2 {
		t.Fatalf("result = %s (%v)", d.Result.Result, err)
	}
	wantKeys(t, d.Result.Result, "verdict", "n")
	parseTime(t, d.Result.SubmittedAt)
}

// taskDetail is the JSON of GET /v1/tasks/{id}.
type taskDetail struct {
	Task struct {
		ID       int64           `json:"id"`
		Category string          `json:"category"`
		Priority int             `json:"priority"`
		Title    string          `json:"title"`
		Payload  json.RawMessage `json:"payload"`
	} `json:"task"`
	Status         string  `json:"status"`
	Fence          int64   `json:"fence"`
	Holder         *string `json:"holder"`
	EditorID       *int64  `json:"editor_id"`
	AssignedAt     *string `json:"assigned_at"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
	Attempts       int     `json:"attempts"`
	MaxAttempts    int     `json:"max_attempts"`
	Snoozes        int     `json:"snoozes"`
	RunAfter       string  `json:"run_after"`
	DueAt          *string `json:"due_at"`
	Key            *string `json:"key"`
	LimitKey       *string `json:"limit_key"`
	LastError      *string `json:"last_error"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
	DoneAt         *string `json:"done_at"`
	Result         *struct {
		Fence       int64           `json:"fence"`
		Holder      string          `json:"holder"`
		EditorID    *int64          `json:"editor_id"`
		SubmittedAt string          `json:"submitted_at"`
		Result      json.RawMessage `json:"result"`
	} `json:"result"`
	History       []event `json:"history"`
	HistoryMore   bool    `json:"history_more"`
	HistoryBefore *int64  `json:"history_before"`
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 3)
	b.addN(t, "sports", 1)
	b.next(t, e.Token)

	res := b.do(t, "GET", "/v1/stats", adminToken, "")
	var st struct {
		ByStatus         map[string]int64            `json:"by_status"`
		ByCategory       map[string]map[string]int64 `json:"by_category"`
		Holders          int64                       `json:"holders"`
		Live             int64                       `json:"live"`
		Expired          int64                       `json:"expired"`
		ExpiringSoon     int64                       `json:"expiring_soon"`
		ExpiringWithinMS int64                       `json:"expiring_within_ms"`
		Paused           []string                    `json:"paused"`
		Dispatcher       struct {
			Assignments   int64 `json:"assignments"`
			Conflicts     int64 `json:"conflicts"`
			RefusedClaims int64 `json:"refused_claims"`
			RefusedWrites int64 `json:"refused_writes"`
		} `json:"dispatcher"`
	}
	wantJSON(t, res, http.StatusOK, &st)
	wantKeys(t, res.body, "by_status", "by_category", "holders", "live", "expired", "expiring_soon", "expiring_within_ms", "paused", "dispatcher")
	want := map[string]int64{"pending": 3, "assigned": 1, "done": 0, "dead": 0, "cancelled": 0}
	if mustJSON(t, st.ByStatus) != mustJSON(t, want) {
		t.Fatalf("by_status = %v, want %v", st.ByStatus, want)
	}
	wantCats := map[string]map[string]int64{
		"news":   {"pending": 2, "assigned": 1, "done": 0, "dead": 0, "cancelled": 0},
		"sports": {"pending": 1, "assigned": 0, "done": 0, "dead": 0, "cancelled": 0},
	}
	if mustJSON(t, st.ByCategory) != mustJSON(t, wantCats) {
		t.Fatalf("by_category = %v, want %v", st.ByCategory, wantCats)
	}
	// The lease (30s) passes within the window (1m).
	if st.Holders != 1 || st.Live != 1 || st.Expired != 0 || st.ExpiringSoon != 1 ||
		st.ExpiringWithinMS != tasks.ExpiringWithinDefault.Milliseconds() || st.Dispatcher.Assignments != 1 {
		t.Fatalf("stats = %s", res.body)
	}
}

func TestLongPollEmptyPool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	b.addN(t, "sports", 1) // not the editor's category

	start := time.Now()
	res := b.do(t, "POST", "/v1/assignments/next", e.Token, `{"wait_ms":200}`)
	took := time.Since(start)
	wantStatus(t, res, http.StatusNoContent)
	if took < 200*time.Millisecond {
		t.Fatalf("answered after %v, want at least the 200ms wait", took)
	}
}

func TestLongPollWakesOnNewTask(t *testing.T) {
	t.Parallel()
	// Waiters poll only every ten minutes and wait as long: an answer with
	// the task within the minutes below is the wake-up of POST /v1/tasks.
	const wait = 10 * time.Minute
	b := setup(t, setupOpts{
		dispatcher: dispatcher.Config{PollInterval: wait, MaxWait: wait},
		api:        api.Config{MaxWait: wait},
	})
	e := b.editor(t, "ada", "news")

	type result struct {
		res  response
		err  error
		took time.Time
	}
	done := make(chan result, 1)
	go func() {
		res, err := b.doCtx(t.Context(), "POST", "/v1/assignments/next", e.Token, fmt.Sprintf(`{"wait_ms":%d}`, wait.Milliseconds()))
		done <- result{res, err, time.Now()}
	}()
	testenv.Eventually(t, 5*time.Second, "the editor waits", func() bool { return b.d.Stats().Waiting > 0 })

	added := time.Now()
	id := b.addN(t, "news", 1)[0]
	var r result
	select {
	case r = <-done:
	case <-time.After(wait / 2):
		t.Fatalf("no answer %v after the task was added", wait/2)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	var a assignment
	wantJSON(t, r.res, http.StatusOK, &a)
	if a.Task.ID != id {
		t.Fatalf("got task %d, want %d", a.Task.ID, id)
	}
	t.Logf("answered %v after the task was added", r.took.Sub(added))
}

func TestSubmitIsInWhenFindingTheNextFails(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	b := setup(t, setupOpts{redis: srv.Client()})
	e := b.editor(t, "ada", "news")
	ids := b.addN(t, "news", 2)
	a := b.next(t, e.Token)

	// Redis goes away after the claim: the submission commits in MySQL, and
	// claiming the next task fails.
	srv.Stop()
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token,
		fmt.Sprintf(`{"fence":%d,"result":{"ok":true}}`, a.Fence))
	var out struct {
		Next *assignment `json:"next"`
	}
	wantJSON(t, res, http.StatusOK, &out)
	if out.Next != nil {
		t.Fatalf("next = %+v, want null", out.Next)
	}
	if row := b.task(t, a.Task.ID); row.Status != tasks.StatusDone {
		t.Fatalf("submitted task is %s, want done", row.Status)
	}

	// Asking for the next assignment is unavailable until Redis is back.
	wantError(t, b.do(t, "POST", "/v1/assignments/next", e.Token, ""), http.StatusServiceUnavailable, "unavailable")
	srv.Start()
	other := ids[0]
	if other == a.Task.ID {
		other = ids[1]
	}
	if n := b.next(t, e.Token); n.Task.ID != other {
		t.Fatalf("next is task %d, want %d", n.Task.ID, other)
	}
}

func TestHeartbeatAtHoldLimit(t *testing.T) {
	t.Parallel()
	// The first lease already reaches the maximum hold.
	b := setup(t, setupOpts{
		storeCfg:   store.Config{MaxHold: time.Minute},
		dispatcher: dispatcher.Config{Lease: time.Minute},
	})
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	a := b.next(t, e.Token)

	before := b.snapshot(t)
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), e.Token, fmt.Sprintf(`{"fence":%d}`, a.Fence))
	wantError(t, res, http.StatusConflict, "hold_limit")
	b.unchanged(t, before)
	// The claim is still good for a submit.
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", id), e.Token, fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence)),
		http.StatusOK, nil)
}
