package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

type figuresOut struct {
	ActiveMS           int64    `json:"active_ms"`
	Submitted          int      `json:"submitted"`
	Released           int      `json:"released"`
	Reviewed           int      `json:"reviewed"`
	SentBack           int      `json:"sent_back"`
	TasksPerActiveHour *float64 `json:"tasks_per_active_hour"`
	SendBackRate       *float64 `json:"send_back_rate"`
	GoldAccuracy       *float64 `json:"gold_accuracy"`
}

type workingTimeOut struct {
	EditorID   int64      `json:"editor_id"`
	Days       int        `json:"days"`
	Since      string     `json:"since"`
	Total      figuresOut `json:"total"`
	Categories []struct {
		Category string `json:"category"`
		figuresOut
		Stages []struct {
			Stage          int     `json:"stage"`
			StageName      *string `json:"stage_name"`
			Submitted      int     `json:"submitted"`
			MedianActiveMS int64   `json:"median_active_ms"`
		} `json:"stages"`
	} `json:"categories"`
	Daily []struct {
		Day       string `json:"day"`
		ActiveMS  int64  `json:"active_ms"`
		Submitted int    `json:"submitted"`
	} `json:"daily"`
}

// claimActive returns the active_ms kept for task id's claim.
func (b *bundle) claimActive(t *testing.T, id int64) (active, reported int64, beats *int64) {
	t.Helper()
	var row struct {
		Active   int64  `db:"active_ms"`
		Reported int64  `db:"reported_ms"`
		Beats    *int64 `db:"beats"`
	}
	if err := b.db.Get(&row, "SELECT active_ms, reported_ms, beats FROM claim_time WHERE task_id = ?", id); err != nil {
		t.Fatalf("claim time of task %d: %v", id, err)
	}
	return row.Active, row.Reported, row.Beats
}

// TestActiveTimeIsBoundedByHeartbeats: a submit that reports more active time
// than its counted heartbeats allow is cut to (beats + 2) intervals; one that
// reports more than the claim's wall time is cut to that; a release keeps the
// last heartbeat's figure when it reports none; a client that reports nothing
// records nothing. The figures come back from GET /v1/me/time and GET
// /v1/editors/{id}/time, and the time kept is added to
// taskd.editor.active of the category.
func TestActiveTimeIsBoundedByHeartbeats(t *testing.T) {
	t.Parallel()
	const every = 100 * time.Millisecond
	reader := sdkmetric.NewManualReader()
	b := setup(t, setupOpts{api: api.Config{HeartbeatEvery: every, Redis: testenv.Redis(t), KeyPrefix: testenv.Prefix(t),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	ann := b.editor(t, "ann", "news")
	ids := b.addN(t, "news", 4)

	// One heartbeat counted, then 600ms on the claim: 1000ms reported, the
	// heartbeats allow 300ms.
	a := b.next(t, ann.Token)
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"active_ms":50}`, a.Fence))
	wantJSON(t, res, http.StatusOK, nil)
	time.Sleep(6 * every)
	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"result":1,"active_ms":1000}`, a.Fence))
	wantJSON(t, res, http.StatusOK, nil)
	if active, reported, beats := b.claimActive(t, a.Task.ID); active != 300 || reported != 1000 || beats == nil || *beats != 1 {
		t.Errorf("kept %d of %d reported, %v beats; want 300 of 1000, 1 beat", active, reported, beats)
	}

	// Ten hours reported: cut to the claim's wall time (well under a second).
	a = b.next(t, ann.Token)
	for range 3 {
		res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"active_ms":10}`, a.Fence))
		wantJSON(t, res, http.StatusOK, nil)
	}
	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"result":1,"active_ms":%d}`, a.Fence, 10*time.Hour/time.Millisecond))
	wantJSON(t, res, http.StatusOK, nil)
	var wall int64
	if err := b.db.Get(&wall, "SELECT TIMESTAMPDIFF(MICROSECOND, claimed_at, ended_at) DIV 1000 FROM claim_time WHERE task_id = ?", a.Task.ID); err != nil {
		t.Fatal(err)
	}
	if active, _, _ := b.claimActive(t, a.Task.ID); active != wall || wall > 5000 {
		t.Errorf("kept %d for a claim of %d ms, want its wall time", active, wall)
	}

	// A release without a figure keeps its last heartbeat's.
	a = b.next(t, ann.Token)
	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"active_ms":0}`, a.Fence))
	wantJSON(t, res, http.StatusOK, nil)
	time.Sleep(every)
	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d}`, a.Fence))
	if res.status != http.StatusNoContent {
		t.Fatalf("release: %d %s", res.status, res.body)
	}
	if active, reported, _ := b.claimActive(t, a.Task.ID); active != 0 || reported != 0 {
		t.Errorf("released: kept %d of %d, want the heartbeat's 0", active, reported)
	}

	// Nothing measured, nothing recorded.
	a = b.next(t, ann.Token)
	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"result":1}`, a.Fence))
	wantJSON(t, res, http.StatusOK, nil)
	if n := b.count(t, "SELECT COUNT(*) FROM claim_time WHERE task_id = ?", a.Task.ID); n != 0 {
		t.Errorf("an unmeasured submit recorded %d rows", n)
	}
	_ = ids

	// The results feed carries each measured claim's active time.
	res = b.do(t, "GET", "/v1/results", adminToken, "")
	if res.status != http.StatusOK {
		t.Fatalf("results: %d %s", res.status, res.body)
	}
	lines := strings.Split(strings.TrimSpace(string(res.body)), "\n")
	var feed []string
	for _, l := range lines[:len(lines)-1] {
		var r struct {
			TaskID   int64  `json:"task_id"`
			ActiveMS *int64 `json:"active_ms"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		ms := "none"
		if r.ActiveMS != nil {
			ms = strconv.FormatInt(*r.ActiveMS, 10)
		}
		feed = append(feed, ms)
	}
	if want := []string{"300", strconv.FormatInt(wall, 10), "none"}; strings.Join(feed, ",") != strings.Join(want, ",") {
		t.Errorf("the feed's active_ms %q, want %q", feed, want)
	}

	var mine, theirs workingTimeOut
	wantJSON(t, b.do(t, "GET", "/v1/me/time", ann.Token, ""), http.StatusOK, &mine)
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/editors/%d/time?days=3", ann.ID), adminToken, ""), http.StatusOK, &theirs)
	if mine.EditorID != ann.ID || mine.Days != 14 || len(mine.Daily) != 14 || mine.Total.Submitted != 2 || mine.Total.Released != 1 ||
		mine.Total.ActiveMS != 300+wall || mine.Total.GoldAccuracy != nil || mine.Total.TasksPerActiveHour == nil {
		t.Errorf("my time: %+v", mine)
	}
	if theirs.Days != 3 || len(theirs.Daily) != 3 || theirs.Total.ActiveMS != mine.Total.ActiveMS || len(theirs.Categories) != 1 || theirs.Categories[0].Category != "news" {
		t.Errorf("ann's time as the admin reads it: %+v", theirs)
	}

	// The counter holds what claim_time kept, per category.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[float64])
			if m.Name != "taskd.editor.active" || !ok || m.Unit != "s" || !sum.IsMonotonic {
				continue
			}
			for _, p := range sum.DataPoints {
				cat, _ := p.Attributes.Value("taskd.task.category")
				points = append(points, fmt.Sprintf("%s=%.3f/%d", cat.AsString(), p.Value, p.Attributes.Len()))
			}
		}
	}
	if want := fmt.Sprintf("news=%.3f/1", float64(300+wall)/1000); strings.Join(points, ",") != want {
		t.Errorf("taskd.editor.active = %v, want %s (one attribute, the category)", points, want)
	}
}

// TestWorkingTimeRefusesBadInput: an active_ms out of range, days out of
// range or not a number, an unknown parameter, an editor that does not exist
// and the wrong kind of token are clear 4xx answers, and nothing is written.
func TestWorkingTimeRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.editor(t, "ann", "news")
	b.addN(t, "news", 1)
	a := b.next(t, ann.Token)
	for _, c := range []struct {
		what, path, token, body string
		status                  int
		msg                     string
	}{
		{"negative active_ms", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"result":1,"active_ms":-1}`, a.Fence), 422, "active_ms must be"},
		{"a day and more", fmt.Sprintf("/v1/assignments/%d/heartbeat", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"active_ms":86400001}`, a.Fence), 422, "active_ms must be"},
		{"a string", fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), ann.Token, fmt.Sprintf(`{"fence":%d,"active_ms":"5"}`, a.Fence), 400, ""},
		{"days 0", "/v1/me/time?days=0", ann.Token, "", 422, "days must be an integer 1..90"},
		{"days 91", fmt.Sprintf("/v1/editors/%d/time?days=91", ann.ID), adminToken, "", 422, "days must be"},
		{"days empty", "/v1/me/time?days=", ann.Token, "", 422, "days must be"},
		{"days a word", "/v1/me/time?days=week", ann.Token, "", 422, "days must be"},
		{"unknown parameter", "/v1/me/time?weeks=2", ann.Token, "", 400, "weeks"},
		{"no such editor", "/v1/editors/999999/time", adminToken, "", 404, "does not exist"},
		{"an editor's token", fmt.Sprintf("/v1/editors/%d/time", ann.ID), ann.Token, "", 403, ""},
		{"the admin's token", "/v1/me/time", adminToken, "", 403, ""},
	} {
		method := "GET"
		if c.body != "" {
			method = "POST"
		}
		res := b.do(t, method, c.path, c.token, c.body)
		if res.status != c.status || !strings.Contains(string(res.body), c.msg) {
			t.Errorf("%s: %d %s; want %d with %q", c.what, res.status, res.body, c.status, c.msg)
		}
	}
	if task := b.task(t, a.Task.ID); task.Fence != a.Fence || task.Status != "assigned" {
		t.Errorf("refused writes changed the claim: %+v", task)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM claim_time"); n != 0 {
		t.Errorf("refused writes recorded %d rows", n)
	}
}

// TestHedgeBeatsNotInherited: a hedger whose hedge lost leaves its heartbeat
// counter behind, at the fence the task's next claim gets; that claim, another
// editor's, is measured by its own heartbeats and figure only.
func TestHedgeBeatsNotInherited(t *testing.T) {
	t.Parallel()
	const every = 100 * time.Millisecond
	wf := map[string]tasks.Workflow{"news": {Stages: []string{"edit", "review"},
		Hedge: tasks.Hedge{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}}}
	b := setup(t, setupOpts{storeCfg: store.Config{Workflows: wf}, dispatcher: dispatcher.Config{Workflows: wf},
		api: api.Config{HeartbeatEvery: every, Redis: testenv.Redis(t), KeyPrefix: testenv.Prefix(t)}})
	ann, bob, cat := b.editor(t, "ann", "news"), b.editor(t, "bob", "news"), b.editor(t, "cat", "news")
	b.add(t, newTask{Category: "news", Title: "near", DueAt: time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)})
	type stagedHedge struct {
		flowAssignment
		Hedge bool `json:"hedge"`
	}
	var held, hedge stagedHedge
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", ann.Token, ""), http.StatusOK, &held)
	b.exec(t, `UPDATE tasks SET assigned_at = NOW(3) - INTERVAL 3 MINUTE WHERE id = ?`, held.Task.ID)
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", bob.Token, ""), http.StatusOK, &hedge)
	if !hedge.Hedge || hedge.Task.ID != held.Task.ID {
		t.Fatalf("bob's assignment = %+v, want a hedge of task %d", hedge, held.Task.ID)
	}
	wantJSON(t, b.do(t, "POST", submitPath(hedge.Task.ID, "heartbeat"), bob.Token, fmt.Sprintf(`{"fence":%d,"active_ms":600000}`, hedge.Fence)), http.StatusOK, nil)
	wantJSON(t, b.do(t, "POST", submitPath(held.Task.ID, "submit"), ann.Token, fmt.Sprintf(`{"fence":%d,"result":{"text":"edited"}}`, held.Fence)), http.StatusOK, nil)
	// The review stage, claimed by cat at the fence bob's hedge had.
	var review stagedHedge
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", cat.Token, ""), http.StatusOK, &review)
	if review.Task.ID != held.Task.ID || review.Fence != hedge.Fence {
		t.Fatalf("cat's assignment = task %d fence %d, want the review of task %d at fence %d", review.Task.ID, review.Fence, held.Task.ID, hedge.Fence)
	}
	time.Sleep(every / 2)
	wantJSON(t, b.do(t, "POST", submitPath(review.Task.ID, "submit"), cat.Token, fmt.Sprintf(`{"fence":%d,"result":1,"decision":"approve","active_ms":20}`, review.Fence)), http.StatusOK, nil)
	var row struct {
		Reported int64  `db:"reported_ms"`
		Beats    *int64 `db:"beats"`
	}
	if err := b.db.Get(&row, "SELECT reported_ms, beats FROM claim_time WHERE task_id = ? AND fence = ?", review.Task.ID, review.Fence); err != nil {
		t.Fatalf("cat's claim time: %v", err)
	}
	if row.Beats == nil {
		t.Fatalf("cat's claim: reported %d ms, no count; want its own count of heartbeats", row.Reported)
	}
	if row.Reported != 20 || *row.Beats != 0 {
		t.Errorf("cat's claim: reported %d ms, %d beats; want its own 20 ms and no heartbeat (not bob's)", row.Reported, *row.Beats)
	}
}
