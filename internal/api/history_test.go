package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/tasks"
)

type activityOut struct {
	Claims    int64    `json:"claims"`
	Submits   int64    `json:"submits"`
	NextP50MS *float64 `json:"next_p50_ms"`
	NextP99MS *float64 `json:"next_p99_ms"`
}

type historyOut struct {
	Minutes []struct {
		Start string `json:"start"`
		activityOut
	} `json:"minutes"`
	Total           activityOut `json:"total"`
	FlushIntervalMS int64       `json:"flush_interval_ms"`
}

// TestStatsHistory: the claims and submits of a few cycles through the API
// show in GET /v1/stats/history once flushed, with their percentiles;
// minutes without claims have none.
func TestStatsHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{history: true})
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 3)
	a := b.next(t, e.Token)
	for i := range 3 {
		res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token, mustJSON(t, map[string]any{"fence": a.Fence, "result": map[string]int{"n": i}}))
		var out struct {
			Next *assignment `json:"next"`
		}
		wantJSON(t, res, http.StatusOK, &out)
		if i < 2 && out.Next == nil {
			t.Fatalf("submit %d: no next", i)
		}
		if out.Next != nil {
			a = *out.Next
		}
	}
	if err := b.hist.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var h historyOut
	wantJSON(t, b.do(t, "GET", "/v1/stats/history?minutes=5", adminToken, ""), http.StatusOK, &h)
	if len(h.Minutes) != 5 || h.FlushIntervalMS != time.Hour.Milliseconds() {
		t.Fatalf("%d minutes, flush interval %dms: %+v", len(h.Minutes), h.FlushIntervalMS, h)
	}
	var claims, submits int64
	for i, m := range h.Minutes {
		start := parseTime(t, m.Start)
		if i > 0 && !start.Equal(parseTime(t, h.Minutes[i-1].Start).Add(time.Minute)) {
			t.Fatalf("minute %d starts at %s, after %s", i, m.Start, h.Minutes[i-1].Start)
		}
		if m.Claims == 0 && (m.NextP50MS != nil || m.NextP99MS != nil) {
			t.Errorf("minute %s without claims has percentiles %v %v", m.Start, m.NextP50MS, m.NextP99MS)
		}
		claims += m.Claims
		submits += m.Submits
	}
	if last := parseTime(t, h.Minutes[4].Start); time.Since(last) < 0 || time.Since(last) > 2*time.Minute {
		t.Errorf("the last minute starts at %v: not the current one", last)
	}
	if claims != 3 || submits != 3 || h.Total.Claims != 3 || h.Total.Submits != 3 {
		t.Fatalf("minutes sum to %d claims, %d submits; total %+v; want 3 and 3", claims, submits, h.Total)
	}
	if p50, p99 := h.Total.NextP50MS, h.Total.NextP99MS; p50 == nil || p99 == nil || *p50 <= 0 || *p99 < *p50 || *p99 > 5000 {
		t.Fatalf("total percentiles %v %v", p50, p99)
	}

	wantJSON(t, b.do(t, "GET", "/v1/stats/history", adminToken, ""), http.StatusOK, &h)
	if len(h.Minutes) != api.HistoryMinutesDefault || h.Total.Claims != 3 {
		t.Fatalf("default: %d minutes, %d claims", len(h.Minutes), h.Total.Claims)
	}
	for _, c := range []struct {
		query, token string
		status       int
		code         string
	}{
		{"?minutes=0", adminToken, 422, "invalid"},
		{"?minutes=121", adminToken, 422, "invalid"},
		{"?minutes=%2B5", adminToken, 422, "invalid"},
		{"?minutes=x", adminToken, 422, "invalid"},
		{"?hours=1", adminToken, 400, "bad_request"},
		{"?minutes=1&minutes=2", adminToken, 400, "bad_request"},
		{"", e.Token, 403, "forbidden"},
		{"", "", 401, "unauthorized"},
	} {
		wantError(t, b.do(t, "GET", "/v1/stats/history"+c.query, c.token, ""), c.status, c.code)
	}
}

// Without a History the route is there, and says there is none.
func TestStatsHistoryNotKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wantError(t, b.do(t, "GET", "/v1/stats/history", adminToken, ""), http.StatusNotFound, "not_found")
}

// TestAdminTokenHash: a context made by WithAdminSession with a MAC of the
// admin token passes the admin routes in-process, without a header; another
// hash (an admin token since changed) is refused, and neither passes the
// editor routes, as an editor's session does not pass the admin routes.
func TestAdminTokenHash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	serveWith := func(ctx context.Context, method, path string) response {
		rec := httptest.NewRecorder()
		b.api.ServeHTTP(rec, httptest.NewRequest(method, path, nil).WithContext(ctx))
		return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	admin := api.WithAdminSession(context.Background(), "session-id", api.AdminSessionMAC(adminToken, "session-id"))
	old := api.WithAdminSession(context.Background(), "session-id", api.AdminSessionMAC("an-admin-token-since-rotated", "session-id"))
	editor := api.WithEditorSession(context.Background(), api.EditorSession{TokenHash: tasks.HashToken(e.Token)})

	wantJSON(t, serveWith(admin, "GET", "/v1/stats"), http.StatusOK, nil)
	wantJSON(t, serveWith(admin, "GET", "/v1/editors"), http.StatusOK, nil)
	if msg := wantError(t, serveWith(old, "GET", "/v1/stats"), http.StatusUnauthorized, "unauthorized"); msg != "the admin token has changed since this session began; sign in again" {
		t.Errorf("message %q", msg)
	}
	wantError(t, serveWith(admin, "GET", "/v1/me"), http.StatusUnauthorized, "unauthorized")
	wantError(t, serveWith(editor, "GET", "/v1/stats"), http.StatusUnauthorized, "unauthorized")
	wantJSON(t, serveWith(editor, "GET", "/v1/me"), http.StatusOK, nil)
}
