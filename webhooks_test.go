package taskd_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// TestEngineWebhooks runs webhooks through the engine, configured from Go: a
// worker's results reach a receiver that is down at first, and GET /v1/stats
// shows the backlog while it is.
func TestEngineWebhooks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const secret = "engine-webhook-secret"
	var up atomic.Bool
	var mu sync.Mutex
	got := map[int64]webhook.Event{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, 0, time.Now()); err != nil || json.Unmarshal(body, &ev) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if !up.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		mu.Lock()
		got[ev.ID] = ev
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)

	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
		Webhooks: []taskd.WebhookConfig{{
			Name: "sink", URL: rc.URL, Events: []string{taskd.WebhookSubmitted}, Secret: secret,
		}},
		WebhookDelivery: taskd.WebhookDeliveryConfig{PollInterval: 20 * time.Millisecond, LeaseTTL: 2 * time.Second,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
	}, taskd.WithHandler("hooked", taskd.HandlerFunc(func(_ context.Context, t *tasks.Task) (any, error) {
		return map[string]any{"title": t.Title}, nil
	})))
	if !e.HasDelivererForTest() {
		t.Fatal("no deliverer with a webhook configured")
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.InsertTasks(ctx, []tasks.NewTask{{Category: "hooked", Title: "a"}, {Category: "hooked", Title: "b"}}); err != nil {
		t.Fatal(err)
	}
	type statsJSON struct {
		Webhooks *struct {
			Backlog int64            `json:"backlog"`
			Pending map[string]int64 `json:"pending"`
		} `json:"webhooks"`
	}
	stats := func() statsJSON {
		req, _ := http.NewRequest("GET", "http://"+e.Addr()+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var s statsJSON
		if err := json.NewDecoder(res.Body).Decode(&s); err != nil || res.StatusCode != 200 || s.Webhooks == nil {
			t.Fatalf("stats: %d, %+v, %v", res.StatusCode, s, err)
		}
		return s
	}
	testenv.Eventually(t, 20*time.Second, "backlog of 2 while the receiver is down", func() bool {
		return stats().Webhooks.Pending["sink"] == 2
	})
	up.Store(true)
	testenv.Eventually(t, 20*time.Second, "both results delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 2
	})
	testenv.Eventually(t, 10*time.Second, "backlog drained", func() bool { return stats().Webhooks.Backlog == 0 })
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range got {
		var res map[string]string
		if err := json.Unmarshal(ev.Data.Result, &res); err != nil || (res["title"] != "a" && res["title"] != "b") || ev.Data.EditorID != 0 {
			t.Errorf("event %+v", ev)
		}
	}
}
