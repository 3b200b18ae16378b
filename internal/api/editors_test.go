package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// countsOut is an editor's counts in answers.
type countsOut struct {
	Claimed   int64 `json:"claimed"`
	Submitted int64 `json:"submitted"`
	Released  int64 `json:"released"`
	Skipped   int64 `json:"skipped"`
	Expired   int64 `json:"expired"`
}

// editorOut is an editor as GET /v1/editors lists it.
type editorOut struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	Categories []string `json:"categories"`
	Disabled   bool     `json:"disabled"`
	DisabledAt *string  `json:"disabled_at"`
	CreatedAt  string   `json:"created_at"`
	Claim      *struct {
		TaskID         int64   `json:"task_id"`
		Fence          int64   `json:"fence"`
		LeaseExpiresAt string  `json:"lease_expires_at"`
		TraceID        *string `json:"trace_id"`
	} `json:"claim"`
	Today    countsOut           `json:"today"`
	Capacity int                 `json:"capacity"`
	Stages   map[string][]string `json:"stages"`
	Holding  int                 `json:"holding"`
}

type editorPage struct {
	Editors    []editorOut `json:"editors"`
	NextCursor *string     `json:"next_cursor"`
}

// listEditors reads a page of GET /v1/editors.
func (b *bundle) listEditors(t *testing.T, query string) editorPage {
	t.Helper()
	var p editorPage
	wantJSON(t, b.do(t, "GET", "/v1/editors"+query, adminToken, ""), http.StatusOK, &p)
	return p
}

func TestListEditors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editor(t, "ann", "news", "arts")
	bob := b.editor(t, "bob", "sport")
	cy := b.editor(t, "cy", "news")
	b.addN(t, "news", 3)

	// ann submits one, skips one and holds one; bob and cy do nothing.
	a := b.next(t, ann.Token)
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence))
	var sub struct {
		Next *assignment `json:"next"`
	}
	wantJSON(t, res, http.StatusOK, &sub)
	if sub.Next == nil {
		t.Fatal("no next assignment after the submit")
	}
	wantStatus(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/release", sub.Next.Task.ID), ann.Token,
		fmt.Sprintf(`{"fence":%d,"skip":true}`, sub.Next.Fence)), http.StatusNoContent)
	held := b.next(t, ann.Token)

	p := b.listEditors(t, "")
	if p.NextCursor != nil || len(p.Editors) != 3 {
		t.Fatalf("page = %+v, want 3 editors and a null next_cursor", p)
	}
	wantKeys(t, b.do(t, "GET", "/v1/editors?limit=1", adminToken, "").body, "editors", "next_cursor")
	e := p.Editors[0]
	if e.ID != ann.ID || e.Name != "ann" || !slices.Equal(e.Categories, []string{"arts", "news"}) || e.Disabled || e.DisabledAt != nil {
		t.Errorf("ann = %+v", e)
	}
	parseTime(t, e.CreatedAt)
	if e.Claim == nil || e.Claim.TaskID != held.Task.ID || e.Claim.Fence != held.Fence || e.Claim.LeaseExpiresAt != held.LeaseExpiresAt {
		t.Errorf("ann's claim = %+v, want task %d fence %d until %s", e.Claim, held.Task.ID, held.Fence, held.LeaseExpiresAt)
	}
	if want := (countsOut{Claimed: 3, Submitted: 1, Skipped: 1}); e.Today != want {
		t.Errorf("ann today = %+v, want %+v", e.Today, want)
	}
	if p.Editors[1].ID != bob.ID || p.Editors[2].ID != cy.ID || p.Editors[1].Claim != nil || p.Editors[1].Today != (countsOut{}) {
		t.Errorf("bob, cy = %+v, %+v", p.Editors[1], p.Editors[2])
	}

	// Pages of one, following next_cursor.
	var ids []int64
	cursor := ""
	for range 4 {
		q := "?limit=1"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p := b.listEditors(t, q)
		for _, e := range p.Editors {
			ids = append(ids, e.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if !slices.Equal(ids, []int64{ann.ID, bob.ID, cy.ID}) {
		t.Errorf("pages of one gave %v, want %v", ids, []int64{ann.ID, bob.ID, cy.ID})
	}

	// Refused: no change, 400 for what is malformed, 422 for a bad limit.
	before := b.snapshot(t)
	for _, q := range []string{"?limit=x", "?limit=1.5", "?cursor=x", "?cursor=0", "?cursor=-1", "?cursor=%2B1",
		"?limit=1&limit=2", "?page=2", "?limit=1;x", "?cursor=99999999999999999999"} {
		wantError(t, b.do(t, "GET", "/v1/editors"+q, adminToken, ""), http.StatusBadRequest, "bad_request")
	}
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=501"} {
		wantError(t, b.do(t, "GET", "/v1/editors"+q, adminToken, ""), http.StatusUnprocessableEntity, "invalid")
	}
	if p := b.listEditors(t, "?limit=500"); len(p.Editors) != 3 {
		t.Errorf("limit 500: %d editors", len(p.Editors))
	}
	wantError(t, b.do(t, "GET", "/v1/editors", "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/editors", "wrong-token", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/editors", ann.Token, ""), http.StatusForbidden, "forbidden")
	b.unchanged(t, before)
}

// editorDetailOut is an editor as GET /v1/editors/{id} shows it.
type editorDetailOut struct {
	editorOut
	AllTime               countsOut `json:"all_time"`
	MedianClaimToSubmitMS *int64    `json:"median_claim_to_submit_ms"`
	MedianOf              int       `json:"median_of"`
	LastActiveAt          *string   `json:"last_active_at"`
	RecentClaims          []struct {
		TaskID    int64   `json:"task_id"`
		Fence     int64   `json:"fence"`
		ClaimedAt string  `json:"claimed_at"`
		TraceID   *string `json:"trace_id"`
	} `json:"recent_claims"`
	Claims []struct {
		TaskID         int64   `json:"task_id"`
		Fence          int64   `json:"fence"`
		LeaseExpiresAt string  `json:"lease_expires_at"`
		TraceID        *string `json:"trace_id"`
	} `json:"claims"`
}

// getEditor reads GET /v1/editors/{id}.
func (b *bundle) getEditor(t *testing.T, id int64) editorDetailOut {
	t.Helper()
	var d editorDetailOut
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/editors/%d", id), adminToken, ""), http.StatusOK, &d)
	return d
}

func TestGetEditor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editor(t, "ann", "news")
	bob := b.editor(t, "bob", "news")
	ids := b.addN(t, "news", 3)

	d := b.getEditor(t, bob.ID)
	if d.ID != bob.ID || d.Name != "bob" || d.Claim != nil || d.AllTime != (countsOut{}) || d.Today != (countsOut{}) ||
		d.MedianClaimToSubmitMS != nil || d.MedianOf != 0 || d.LastActiveAt != nil {
		t.Errorf("idle bob = %+v; want no claim, zero counts, null median and last active", d)
	}

	// ann submits two tasks, taking 4s and 8s (moved in the database), and holds a third.
	for _, took := range []int{4, 8} {
		a := b.next(t, ann.Token)
		wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token,
			fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence)), http.StatusOK, nil)
		if _, err := b.db.Exec(`UPDATE tasks SET assigned_at = done_at - INTERVAL ? SECOND WHERE id = ?`, took, a.Task.ID); err != nil {
			t.Fatal(err)
		}
	}
	held := b.next(t, ann.Token)
	if held.Task.ID != ids[2] {
		t.Fatalf("ann holds task %d, want %d", held.Task.ID, ids[2])
	}
	d = b.getEditor(t, ann.ID)
	wantKeys(t, b.do(t, "GET", fmt.Sprintf("/v1/editors/%d", ann.ID), adminToken, "").body,
		"id", "name", "categories", "disabled", "disabled_at", "created_at", "claim", "today", "capacity",
		"all_time", "median_claim_to_submit_ms", "median_of", "last_active_at", "recent_claims")
	if d.Claim == nil || d.Claim.TaskID != held.Task.ID || d.Claim.Fence != held.Fence {
		t.Errorf("ann's claim = %+v, want task %d fence %d", d.Claim, held.Task.ID, held.Fence)
	}
	if want := (countsOut{Claimed: 3, Submitted: 2}); d.AllTime != want || d.Today != want {
		t.Errorf("ann all time %+v, today %+v; want %+v both", d.AllTime, d.Today, want)
	}
	if d.MedianOf != 2 || d.MedianClaimToSubmitMS == nil || *d.MedianClaimToSubmitMS != 6000 {
		t.Errorf("median = %v over %d, want 6000 ms over 2", d.MedianClaimToSubmitMS, d.MedianOf)
	}
	if d.LastActiveAt == nil || parseTime(t, *d.LastActiveAt).Before(parseTime(t, held.AssignedAt)) {
		t.Errorf("last active %v, want at least the last claim's %s", d.LastActiveAt, held.AssignedAt)
	}
	var recent []int64
	for _, c := range d.RecentClaims {
		recent = append(recent, c.TaskID)
	}
	if want := []int64{ids[2], ids[1], ids[0]}; !slices.Equal(recent, want) || d.RecentClaims[0].Fence != held.Fence ||
		d.RecentClaims[0].ClaimedAt != held.AssignedAt {
		t.Errorf("ann's recent claims %+v, want tasks %v, the newest at fence %d, %s", d.RecentClaims, want, held.Fence, held.AssignedAt)
	}

	before := b.snapshot(t)
	wantError(t, b.do(t, "GET", fmt.Sprintf("/v1/editors/%d", bob.ID+100), adminToken, ""), http.StatusNotFound, "not_found")
	for _, path := range []string{"/v1/editors/x", "/v1/editors/0", "/v1/editors/-1", "/v1/editors/+1",
		"/v1/editors/99999999999999999999", fmt.Sprintf("/v1/editors/%d?x=1", ann.ID)} {
		wantError(t, b.do(t, "GET", path, adminToken, ""), http.StatusBadRequest, "bad_request")
	}
	path := fmt.Sprintf("/v1/editors/%d", ann.ID)
	wantError(t, b.do(t, "GET", path, "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", path, "wrong-token", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", path, ann.Token, ""), http.StatusForbidden, "forbidden")
	b.unchanged(t, before)
}

func TestUpdateEditor(t *testing.T) {
	t.Parallel()
	// A long cache: what the test sees at once is this process forgetting the
	// editor, not the entry's time running out.
	b := setup(t, setupOpts{api: api.Config{EditorCacheTTL: time.Hour}})
	ann := b.editor(t, "ann", "news")
	b.editor(t, "bob", "news")
	sport := b.addN(t, "sport", 1)[0]
	path := fmt.Sprintf("/v1/editors/%d", ann.ID)

	// ann's token is remembered with her categories: nothing for her in news.
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusNoContent)

	var d editorDetailOut
	wantJSON(t, b.do(t, "PATCH", path, adminToken, `{"categories":["sport","arts","sport"]}`), http.StatusOK, &d)
	if d.ID != ann.ID || d.Name != "ann" || !slices.Equal(d.Categories, []string{"arts", "sport"}) {
		t.Errorf("after new categories: %+v", d)
	}
	// Her next claim, on this process, takes the new categories at once.
	if a := b.next(t, ann.Token); a.Task.ID != sport {
		t.Errorf("next after the change got task %d, want the sport task %d", a.Task.ID, sport)
	}

	wantJSON(t, b.do(t, "PATCH", path, adminToken, `{"name":"Annie"}`), http.StatusOK, &d)
	if d.Name != "Annie" || !slices.Equal(d.Categories, []string{"arts", "sport"}) || d.Claim == nil || d.Claim.TaskID != sport {
		t.Errorf("after a new name: %+v; want the categories and the claim kept", d)
	}
	wantJSON(t, b.do(t, "PATCH", path, adminToken, `{"name":"Ann B.","categories":["news"]}`), http.StatusOK, &d)
	if d.Name != "Ann B." || !slices.Equal(d.Categories, []string{"news"}) {
		t.Errorf("after both: %+v", d)
	}

	before := b.snapshot(t)
	for _, body := range []string{"", "{", `{"name":1}`, `{"categories":"news"}`, `{"nickname":"x"}`, `{"name":"x"} {}`, `[]`} {
		wantError(t, b.do(t, "PATCH", path, adminToken, body), http.StatusBadRequest, "bad_request")
	}
	many := make([]string, tasks.MaxCategories+1)
	for i := range many {
		many[i] = fmt.Sprint("c", i)
	}
	for _, body := range []string{`{}`, `{"name":""}`, mustJSON(t, map[string]string{"name": strings.Repeat("x", 129)}),
		`{"name":"a\ud800"}`, `{"categories":[]}`, `{"categories":[" news"]}`, `{"categories":[""]}`,
		mustJSON(t, map[string]any{"categories": many}), `{"name":"fine","categories":[""]}`} {
		wantError(t, b.do(t, "PATCH", path, adminToken, body), http.StatusUnprocessableEntity, "invalid")
	}
	wantError(t, b.do(t, "PATCH", path, adminToken, `{"name":"BOB"}`), http.StatusConflict, "duplicate")
	wantError(t, b.do(t, "PATCH", fmt.Sprintf("/v1/editors/%d", ann.ID+100), adminToken, `{"name":"zed"}`), http.StatusNotFound, "not_found")
	for _, p := range []string{"/v1/editors/x", "/v1/editors/0", "/v1/editors/-3"} {
		wantError(t, b.do(t, "PATCH", p, adminToken, `{"name":"zed"}`), http.StatusBadRequest, "bad_request")
	}
	wantError(t, b.do(t, "PATCH", path, "", `{"name":"zed"}`), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "PATCH", path, ann.Token, `{"name":"zed"}`), http.StatusForbidden, "forbidden")
	b.unchanged(t, before)
}

// replica is a second API process on the bundle's stores: its own editor cache.
func (b *bundle) replica(t *testing.T, ttl time.Duration) *bundle {
	t.Helper()
	h, err := api.New(api.Config{Dispatcher: b.d, Store: b.store, AdminToken: adminToken, EditorCacheTTL: ttl, Logger: slog.New(slog.NewTextHandler(b.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r := &bundle{url: srv.URL, db: b.db, store: b.store, rdb: b.rdb, d: b.d, api: h, logs: b.logs}
	return r
}

type disableOut struct {
	editorDetailOut
	Released *struct {
		TaskID int64 `json:"task_id"`
		Fence  int64 `json:"fence"`
	} `json:"released"`
	ReleasedAll []struct {
		TaskID int64 `json:"task_id"`
		Fence  int64 `json:"fence"`
	} `json:"released_all"`
}

func TestDisableAndEnableEditor(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{api: api.Config{EditorCacheTTL: time.Hour}})
	other := b.replica(t, time.Hour)
	ann := b.editor(t, "ann", "news")
	bob := b.editor(t, "bob", "news")
	ids := b.addN(t, "news", 3)
	held := b.next(t, ann.Token)
	// Both processes remember ann's token.
	if a := other.next(t, ann.Token); a.Task.ID != held.Task.ID {
		t.Fatalf("the other process's next: task %d, want the held %d", a.Task.ID, held.Task.ID)
	}

	path := fmt.Sprintf("/v1/editors/%d", ann.ID)
	var d disableOut
	wantJSON(t, b.do(t, "POST", path+"/disable", adminToken, ""), http.StatusOK, &d)
	if !d.Disabled || d.DisabledAt == nil || d.Claim != nil || d.Released == nil ||
		d.Released.TaskID != held.Task.ID || d.Released.Fence != held.Fence {
		t.Fatalf("disable = %+v, released %+v; want disabled, no claim, released task %d fence %d",
			d, d.Released, held.Task.ID, held.Fence)
	}
	if task := b.task(t, held.Task.ID); task.Status != tasks.StatusPending || task.Fence != held.Fence+1 {
		t.Errorf("revoked task: status %s fence %d, want pending at fence %d", task.Status, task.Fence, held.Fence+1)
	}

	// This process refuses the token at once, on every editor route.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/assignments/next", ""},
		{"POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", held.Task.ID), fmt.Sprintf(`{"fence":%d}`, held.Fence)},
		{"POST", fmt.Sprintf("/v1/assignments/%d/submit", held.Task.ID), fmt.Sprintf(`{"fence":%d,"result":1}`, held.Fence)},
		{"POST", fmt.Sprintf("/v1/assignments/%d/release", held.Task.ID), fmt.Sprintf(`{"fence":%d}`, held.Fence)},
	} {
		wantError(t, b.do(t, r.method, r.path, ann.Token, r.body), http.StatusForbidden, "editor_disabled")
	}
	// The other process still remembers ann as enabled, for up to its TTL; the
	// store refuses her anyway: her old claim is stale and she gets no new one.
	wantError(t, other.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", held.Task.ID), ann.Token,
		fmt.Sprintf(`{"fence":%d,"result":1}`, held.Fence)), http.StatusConflict, "stale_fence")
	before := b.snapshot(t)
	for range 3 {
		wantError(t, other.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusForbidden, "editor_disabled")
	}
	b.unchanged(t, before)
	// The tasks are bob's to take.
	if a := b.next(t, bob.Token); !slices.Contains(ids, a.Task.ID) {
		t.Errorf("bob got task %d", a.Task.ID)
	}

	// Disabling again: still disabled, nothing released.
	wantJSON(t, b.do(t, "POST", path+"/disable", adminToken, "{}"), http.StatusOK, &d)
	if !d.Disabled || d.Released != nil {
		t.Errorf("second disable = %+v, released %+v; want disabled and nothing released", d, d.Released)
	}

	var e editorDetailOut
	wantJSON(t, b.do(t, "POST", path+"/enable", adminToken, ""), http.StatusOK, &e)
	if e.Disabled || e.DisabledAt != nil {
		t.Errorf("enable = %+v, want enabled", e)
	}
	if a := b.next(t, ann.Token); !slices.Contains(ids, a.Task.ID) {
		t.Errorf("ann's next after enable got task %d", a.Task.ID)
	}
	wantJSON(t, b.do(t, "POST", path+"/enable", adminToken, ""), http.StatusOK, &e)

	before = b.snapshot(t)
	for _, action := range []string{"disable", "enable"} {
		wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/editors/%d/%s", bob.ID+100, action), adminToken, ""), http.StatusNotFound, "not_found")
		for _, p := range []string{"/v1/editors/x/", "/v1/editors/0/", "/v1/editors/-1/"} {
			wantError(t, b.do(t, "POST", p+action, adminToken, ""), http.StatusBadRequest, "bad_request")
		}
		for _, body := range []string{"{", `{"now":true}`, `[]`, `{} {}`} {
			wantError(t, b.do(t, "POST", path+"/"+action, adminToken, body), http.StatusBadRequest, "bad_request")
		}
		wantError(t, b.do(t, "POST", path+"/"+action, "", ""), http.StatusUnauthorized, "unauthorized")
		wantError(t, b.do(t, "POST", path+"/"+action, bob.Token, ""), http.StatusForbidden, "forbidden")
		wantError(t, b.do(t, "GET", path+"/"+action, adminToken, ""), http.StatusMethodNotAllowed, "method_not_allowed")
	}
	b.unchanged(t, before)
}

func TestNewEditorToken(t *testing.T) {
	t.Parallel()
	// A long cache here: the old token is refused at once because this process
	// forgets it. The other process's short cache lets it go within its TTL.
	b := setup(t, setupOpts{api: api.Config{EditorCacheTTL: time.Hour}})
	other := b.replica(t, 200*time.Millisecond)
	ann := b.editor(t, "ann", "news")
	bob := b.editor(t, "bob", "news")
	b.addN(t, "news", 2)
	held := b.next(t, ann.Token)
	other.next(t, ann.Token) // remembered there too

	path := fmt.Sprintf("/v1/editors/%d/token", ann.ID)
	var out struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	wantJSON(t, b.do(t, "POST", path, adminToken, ""), http.StatusOK, &out)
	b.secret(out.Token)
	if out.ID != ann.ID || len(out.Token) != 43 || out.Token == ann.Token {
		t.Fatalf("new token answer = %+v", out)
	}
	wantError(t, b.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusUnauthorized, "unauthorized")
	// The claim is the editor's, not the token's: the new token holds it.
	if a := b.next(t, out.Token); a.Task.ID != held.Task.ID || a.Fence != held.Fence {
		t.Errorf("next with the new token: task %d fence %d, want the held task %d fence %d", a.Task.ID, a.Fence, held.Task.ID, held.Fence)
	}
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", held.Task.ID), out.Token,
		fmt.Sprintf(`{"fence":%d}`, held.Fence)), http.StatusOK, nil)
	// The other process refuses the old token once its entry's time is up.
	testenv.Eventually(t, 10*time.Second, "the other process refuses the old token", func() bool {
		return other.do(t, "POST", "/v1/assignments/next", ann.Token, "").status == http.StatusUnauthorized
	})
	if a := other.next(t, out.Token); a.Task.ID != held.Task.ID {
		t.Errorf("next on the other process with the new token: task %d, want %d", a.Task.ID, held.Task.ID)
	}

	before := b.snapshot(t)
	wantError(t, b.do(t, "POST", fmt.Sprintf("/v1/editors/%d/token", bob.ID+100), adminToken, ""), http.StatusNotFound, "not_found")
	for _, p := range []string{"/v1/editors/x/token", "/v1/editors/0/token", "/v1/editors/-1/token"} {
		wantError(t, b.do(t, "POST", p, adminToken, ""), http.StatusBadRequest, "bad_request")
	}
	for _, body := range []string{"{", `{"token":"mine"}`, `[]`} {
		wantError(t, b.do(t, "POST", path, adminToken, body), http.StatusBadRequest, "bad_request")
	}
	wantError(t, b.do(t, "POST", path, "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "POST", path, bob.Token, ""), http.StatusForbidden, "forbidden")
	wantError(t, b.do(t, "POST", path, out.Token, ""), http.StatusForbidden, "forbidden")
	b.unchanged(t, before)
	// bob's token is untouched.
	if a := b.next(t, bob.Token); a.Task.ID == held.Task.ID {
		t.Errorf("bob got ann's task %d", a.Task.ID)
	}
}

type meOut struct {
	ID                    int64               `json:"id"`
	Name                  string              `json:"name"`
	Categories            []string            `json:"categories"`
	CreatedAt             string              `json:"created_at"`
	Capacity              int                 `json:"capacity"`
	Stages                map[string][]string `json:"stages"`
	Assignment            *assignment         `json:"assignment"`
	Today                 countsOut           `json:"today"`
	AllTime               countsOut           `json:"all_time"`
	MedianClaimToSubmitMS *int64              `json:"median_claim_to_submit_ms"`
	MedianOf              int                 `json:"median_of"`
	LastActiveAt          *string             `json:"last_active_at"`
	RecentClaims          []struct {
		TaskID    int64   `json:"task_id"`
		Fence     int64   `json:"fence"`
		ClaimedAt string  `json:"claimed_at"`
		TraceID   *string `json:"trace_id"`
	} `json:"recent_claims"`
}

func TestMe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editor(t, "ann", "news", "arts")
	bob := b.editor(t, "bob", "news")
	b.addN(t, "news", 2)

	var me meOut
	wantJSON(t, b.do(t, "GET", "/v1/me", ann.Token, ""), http.StatusOK, &me)
	if me.ID != ann.ID || me.Name != "ann" || !slices.Equal(me.Categories, []string{"arts", "news"}) || me.Assignment != nil ||
		me.Today != (countsOut{}) || me.AllTime != (countsOut{}) || me.MedianOf != 0 || me.MedianClaimToSubmitMS != nil || me.LastActiveAt != nil {
		t.Errorf("idle ann = %+v", me)
	}
	parseTime(t, me.CreatedAt)
	wantKeys(t, b.do(t, "GET", "/v1/me", ann.Token, "").body, "id", "name", "categories", "created_at", "capacity", "assignment",
		"today", "all_time", "median_claim_to_submit_ms", "median_of", "last_active_at", "recent_claims")

	a := b.next(t, ann.Token)
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token,
		fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence)), http.StatusOK, nil)
	held := b.next(t, ann.Token)
	res := b.do(t, "GET", "/v1/me", ann.Token, "")
	wantJSON(t, res, http.StatusOK, &me)
	// The assignment is exactly what POST /v1/assignments/next answers.
	var raw struct {
		Assignment json.RawMessage `json:"assignment"`
	}
	if err := json.Unmarshal(res.body, &raw); err != nil {
		t.Fatal(err)
	}
	nextBody := b.do(t, "POST", "/v1/assignments/next", ann.Token, "").body
	if string(raw.Assignment)+"\n" != string(nextBody) {
		t.Errorf("assignment %s, want next's answer %s", raw.Assignment, nextBody)
	}
	if me.Assignment == nil || me.Assignment.Task.ID != held.Task.ID || me.Assignment.Fence != held.Fence {
		t.Errorf("assignment = %+v, want task %d fence %d", me.Assignment, held.Task.ID, held.Fence)
	}
	if want := (countsOut{Claimed: 2, Submitted: 1}); me.Today != want || me.AllTime != want {
		t.Errorf("today %+v, all time %+v; want %+v", me.Today, me.AllTime, want)
	}
	if me.MedianOf != 1 || me.MedianClaimToSubmitMS == nil || me.LastActiveAt == nil {
		t.Errorf("median %v over %d, last active %v; want one submission and a time", me.MedianClaimToSubmitMS, me.MedianOf, me.LastActiveAt)
	}
	// bob sees himself only.
	wantJSON(t, b.do(t, "GET", "/v1/me", bob.Token, ""), http.StatusOK, &me)
	if me.ID != bob.ID || me.Assignment != nil || me.AllTime != (countsOut{}) {
		t.Errorf("bob = %+v", me)
	}

	before := b.snapshot(t)
	wantError(t, b.do(t, "GET", "/v1/me?x=1", ann.Token, ""), http.StatusBadRequest, "bad_request")
	wantError(t, b.do(t, "GET", "/v1/me", "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/me", "wrong-token", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/me", adminToken, ""), http.StatusForbidden, "forbidden")
	wantError(t, b.do(t, "POST", "/v1/me", ann.Token, ""), http.StatusMethodNotAllowed, "method_not_allowed")
	b.unchanged(t, before)
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/editors/%d/disable", bob.ID), adminToken, ""), http.StatusOK, nil)
	wantError(t, b.do(t, "GET", "/v1/me", bob.Token, ""), http.StatusForbidden, "editor_disabled")
}

// TestEditorRoutesWithExtremeIDs: the largest id is a well-formed id of no editor
// (404), and the largest cursor ends the listing.
func TestEditorRoutesWithExtremeIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.editor(t, "ada", "news")
	const maxID = "9223372036854775807"
	before := b.snapshot(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/editors/" + maxID, ""},
		{"PATCH", "/v1/editors/" + maxID, `{"name":"x"}`},
		{"POST", "/v1/editors/" + maxID + "/disable", ""},
		{"POST", "/v1/editors/" + maxID + "/enable", ""},
		{"POST", "/v1/editors/" + maxID + "/token", ""},
	} {
		wantError(t, b.do(t, c.method, c.path, adminToken, c.body), http.StatusNotFound, "not_found")
	}
	if p := b.listEditors(t, "?cursor="+maxID); len(p.Editors) != 0 || p.NextCursor != nil {
		t.Errorf("after the largest cursor: %+v, want an empty last page", p)
	}
	b.unchanged(t, before)
}

// New categories end the editor's long poll, which waits for the old ones:
// it answers 204 at once, and the next poll claims from the new categories.
func TestUpdateCategoriesEndsLongPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "sport", 1)[0]
	got := make(chan response, 1)
	go func() {
		res, err := b.doCtx(t.Context(), "POST", "/v1/assignments/next", e.Token, `{"wait_ms":60000}`)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	testenv.Eventually(t, 20*time.Second, "ada waits", func() bool { return b.d.Stats().Waiting > 0 })
	wantStatus(t, b.do(t, "PATCH", fmt.Sprintf("/v1/editors/%d", e.ID), adminToken, `{"name":"ada b"}`), http.StatusOK)
	if b.d.Stats().Waiting == 0 {
		t.Fatal("a new name ended the long poll")
	}
	wantStatus(t, b.do(t, "PATCH", fmt.Sprintf("/v1/editors/%d", e.ID), adminToken, `{"categories":["sport"]}`), http.StatusOK)
	// Within the poll's minute: only the change can end it so soon.
	testenv.Eventually(t, 20*time.Second, "the long poll ends", func() bool { return b.d.Stats().Waiting == 0 })
	wantStatus(t, <-got, http.StatusNoContent)
	var a assignment
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", e.Token, `{}`), http.StatusOK, &a)
	if a.Task.ID != id {
		t.Errorf("ada got task %d, want %d of her new category", a.Task.ID, id)
	}
}
