package taskd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// TestGoldCopiesSendNoWebhooks: a receiver of every event gets the release
// and the forced release of plain tasks, and nothing of the gold copies
// released and force-released beside them.
func TestGoldCopiesSendNoWebhooks(t *testing.T) {
	t.Parallel()
	const secret = "gold-webhook-secret"
	var mu sync.Mutex
	var got []webhook.Event
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, 0, time.Now()); err != nil || json.Unmarshal(body, &ev) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
		Categories: []taskd.CategoryConfig{{Name: "review", Gold: taskd.GoldConfig{Rule: tasks.GoldRuleDecision, Rate: 1}}},
		Webhooks: []taskd.WebhookConfig{{Name: "sink", URL: rc.URL, Secret: secret,
			Events: []string{taskd.WebhookSubmitted, taskd.WebhookReleased, taskd.WebhookExpired, taskd.WebhookDead}}},
		WebhookDelivery: taskd.WebhookDeliveryConfig{PollInterval: 20 * time.Millisecond, LeaseTTL: 2 * time.Second,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
	})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + e.Addr()
	var ins struct {
		IDs []int64 `json:"ids"`
	}
	apiCall(t, base, testAdminToken, "POST", "/v1/tasks", []map[string]any{
		{"category": "review", "title": "gold", "gold": map[string]any{"decision": "reject"}},
		{"category": "review", "title": "plain 1"}, {"category": "review", "title": "plain 2"},
	}, http.StatusCreated, &ins)
	type assignment struct {
		Task struct {
			ID    int64  `json:"id"`
			Title string `json:"title"`
		} `json:"task"`
		Fence int64 `json:"fence"`
	}
	var copies, plain []int64
	for _, name := range []string{"ann", "bob"} {
		var ed struct {
			Token string `json:"token"`
		}
		apiCall(t, base, testAdminToken, "POST", "/v1/editors", map[string]any{"name": name, "categories": []string{"review"}}, http.StatusCreated, &ed)
		// Rate 1: the first claim is the gold task's copy, the second a plain task.
		for i := range 2 {
			var a assignment
			apiCall(t, base, ed.Token, "POST", "/v1/assignments/next", map[string]any{}, http.StatusOK, &a)
			if isGold := a.Task.Title == "gold"; isGold != (i == 0) || a.Task.ID == ins.IDs[0] {
				t.Fatalf("%s's claim %d = %+v; want the gold task's copy first, then a plain task", name, i, a)
			}
			if i == 0 {
				copies = append(copies, a.Task.ID)
			} else {
				plain = append(plain, a.Task.ID)
			}
			if name == "ann" {
				apiCall(t, base, ed.Token, "POST", fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), map[string]any{"fence": a.Fence}, http.StatusNoContent, nil)
			} else {
				apiCall(t, base, testAdminToken, "POST", fmt.Sprintf("/v1/admin/tasks/%d/release", a.Task.ID), map[string]any{}, http.StatusNoContent, nil)
			}
		}
	}
	testenv.Eventually(t, 20*time.Second, "the plain tasks' released events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ev := range got {
			if ev.Type == taskd.WebhookReleased && (ev.Data.TaskID == plain[0] || ev.Data.TaskID == plain[1]) {
				n++
			}
		}
		return n == 2
	})
	// The copies' events were written before the plain tasks' (the outbox is
	// fanned out in event order): any would have been delivered by now.
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range got {
		if ev.Data.TaskID == copies[0] || ev.Data.TaskID == copies[1] || ev.Data.TaskID == ins.IDs[0] {
			t.Errorf("webhook event %s (cause %s) of task %d, a gold task's copy: gold work reaches no webhook", ev.Type, ev.Data.Cause, ev.Data.TaskID)
		}
	}
	if len(got) != 2 {
		t.Errorf("%d events delivered, want the 2 plain releases: %+v", len(got), got)
	}
}
