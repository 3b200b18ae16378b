package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

const hookSecret = "delivery-test-secret"

// receiver is a webhook receiver: it verifies each request, records it, and
// answers what answer says.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	answer func(r *http.Request, ev webhook.Event) int

	mu       sync.Mutex
	requests int
	events   map[int64]webhook.Event // by id: deduplicated
	bodies   map[int64][]byte        // the events' raw bodies, by id
	bad      []string
}

func newReceiver(t testing.TB, answer func(r *http.Request, ev webhook.Event) int) *receiver {
	rc := &receiver{t: t, answer: answer, events: map[int64]webhook.Event{}, bodies: map[int64][]byte{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var ev webhook.Event
	if err == nil {
		err = webhook.Verify(hookSecret, r.Header.Get(webhook.SignatureHeader), body, 0, time.Now())
	}
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err == nil && r.Header.Get(webhook.EventIDHeader) != strconv.FormatInt(ev.ID, 10) {
		err = errors.New("event id header differs from the body's id")
	}
	rc.mu.Lock()
	rc.requests++
	if err != nil {
		rc.bad = append(rc.bad, err.Error())
	}
	rc.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	code := rc.answer(r, ev)
	if code >= 200 && code < 300 {
		rc.mu.Lock()
		rc.events[ev.ID] = ev
		rc.bodies[ev.ID] = body
		rc.mu.Unlock()
	}
	w.WriteHeader(code)
}

func (rc *receiver) got() (requests int, events map[int64]webhook.Event, bad []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	evs := make(map[int64]webhook.Event, len(rc.events))
	for k, v := range rc.events {
		evs[k] = v
	}
	return rc.requests, evs, append([]string(nil), rc.bad...)
}

// deliverer makes a started deliverer on b's dispatcher, stopped at the end.
func (b *bundle) deliverer(t testing.TB, hook delivery.Webhook, lease time.Duration) *delivery.Deliverer {
	t.Helper()
	if hook.Secret == "" {
		hook.Secret = hookSecret
	}
	w, err := delivery.New(b.D, delivery.Config{
		Store: b.Store, Locks: b.Locks, Webhooks: []delivery.Webhook{hook}, PollInterval: 20 * time.Millisecond,
		LeaseTTL: lease, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stop deliverer: %v", err)
		}
	})
	return w
}

// submitAll claims and submits every task of cat as editor ed and returns the
// ids submitted.
func (b *bundle) submitAll(t testing.TB, ctx context.Context, ed dispatcher.Claimant, n int) []int64 {
	t.Helper()
	var ids []int64
	c, err := b.D.Next(ctx, ed, 0)
	for range n {
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		ids = append(ids, c.Task.ID)
		c, err = b.D.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, json.RawMessage(`{"n":`+strconv.FormatInt(c.Task.ID, 10)+`}`))
		if c == nil && err == nil {
			err = dispatcher.ErrNoTask
		}
	}
	return ids
}

func backlog(t testing.TB, b *bundle) *tasks.WebhookBacklog {
	t.Helper()
	bl, err := b.Store.WebhookBacklog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return bl
}

// TestDelivererRetriesUntilDelivered: a receiver that answers 500 to the first
// requests gets every submitted event, signed, with its result, and the
// delivery log shows the failed attempts.
func TestDelivererRetriesUntilDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Store: store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}}})
	var calls atomic.Int64
	rc := newReceiver(t, func(*http.Request, webhook.Event) int {
		if calls.Add(1) <= 6 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ed := b.Editor(t, "ed", "hooks")
	keyed := make([]tasks.NewTask, 5)
	for i := range keyed {
		keyed[i] = tasks.NewTask{Category: "hooks", Title: fmt.Sprintf("hooks #%d", i), Key: fmt.Sprintf("cms-%d", i)}
	}
	added, err := dispatchtest.IDsOf(b.D.AddTasks(t.Context(), keyed))
	if err != nil {
		t.Fatal(err)
	}
	keyOf := map[int64]string{}
	for i, id := range added {
		keyOf[id] = keyed[i].Key
	}
	ids := b.submitAll(t, t.Context(), ed, 5)
	b.deliverer(t, delivery.Webhook{Name: "sink", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookSubmitted}}, 2*time.Second)

	testenv.Eventually(t, 20*time.Second, "every event delivered", func() bool {
		_, evs, _ := rc.got()
		return len(evs) == 5 && backlog(t, b).PendingTotal() == 0
	})
	requests, evs, bad := rc.got()
	if len(bad) > 0 {
		t.Errorf("bad requests: %v", bad)
	}
	if requests < 5+6 {
		t.Errorf("%d requests, want at least 11 (6 answered 500)", requests)
	}
	seen := map[int64]bool{}
	failed := 0
	for _, ev := range evs {
		seen[ev.Data.TaskID] = true
		if ev.Type != webhook.TypeSubmitted || ev.Data.Cause != "submit" || ev.Data.EditorID == 0 || ev.Data.Key != keyOf[ev.Data.TaskID] ||
			string(ev.Data.Result) != `{"n": `+strconv.FormatInt(ev.Data.TaskID, 10)+`}` && string(ev.Data.Result) != `{"n":`+strconv.FormatInt(ev.Data.TaskID, 10)+`}` {
			t.Errorf("event %+v", ev)
		}
		var codes []int
		err := b.DB.SelectContext(context.Background(), &codes,
			"SELECT COALESCE(status_code, 0) FROM webhook_attempts WHERE event_id = ? AND webhook = 'sink' ORDER BY id", ev.ID)
		if err != nil || len(codes) == 0 || codes[len(codes)-1] != 200 {
			t.Errorf("delivery log of %d: %v, %v", ev.ID, codes, err)
		}
		for _, code := range codes {
			if code == 500 {
				failed++
			}
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("task %d: no submitted event", id)
		}
	}
	if failed < 6 {
		t.Errorf("the delivery log has %d attempts answered 500, want at least 6", failed)
	}
}

// TestDelivererHangingReceiver shows that a receiver that never answers does
// not hold submits back: every submit returns while all the receiver's
// requests are still hanging, since submits only write the outbox. Once the
// receiver answers, everything is delivered.
func TestDelivererHangingReceiver(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Store: store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}}})
	release := make(chan struct{})
	var hanging, answered atomic.Int64
	rc := newReceiver(t, func(r *http.Request, _ webhook.Event) int {
		hanging.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		hanging.Add(-1)
		answered.Add(1)
		return http.StatusNoContent
	})
	ed := b.Editor(t, "ed", "slow")
	b.Add(t, "slow", 0, 40)
	// The first submits' events are in flight, hanging, before the rest.
	b.submitAll(t, t.Context(), ed, 2)
	b.deliverer(t, delivery.Webhook{Name: "slow", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookSubmitted},
		Concurrency: 2, Timeout: time.Minute}, 2*time.Second)
	testenv.Eventually(t, 10*time.Second, "two requests hanging", func() bool { return hanging.Load() == 2 })

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	b.submitAll(t, ctx, ed, 38)
	took := time.Since(start)
	if n := answered.Load(); n != 0 {
		t.Fatalf("the receiver answered %d requests during the submits; it was to hang", n)
	}
	if n := hanging.Load(); n != 2 {
		t.Errorf("%d requests hanging, want 2 (the concurrency)", n)
	}
	if bl := backlog(t, b); bl.PendingTotal() != 40 {
		t.Errorf("backlog %d, want 40", bl.PendingTotal())
	}
	t.Logf("38 submits took %v while the receiver hung", took)

	close(release)
	testenv.Eventually(t, 20*time.Second, "every event delivered", func() bool {
		_, evs, _ := rc.got()
		return len(evs) == 40
	})
}

// TestDelivererFailsForGood: a delivery that keeps failing is marked failed
// after MaxAttempts, kept and counted, and not posted again.
func TestDelivererFailsForGood(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Store: store.Config{WebhookEvents: tasks.WebhookEvents()}})
	var calls atomic.Int64
	rc := newReceiver(t, func(*http.Request, webhook.Event) int {
		calls.Add(1)
		return http.StatusServiceUnavailable
	})
	ed := b.Editor(t, "ed", "doomed")
	b.Add(t, "doomed", 0, 1)
	c, err := b.D.Next(t.Context(), ed, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.D.Release(t.Context(), ed, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, "not now"); err != nil {
		t.Fatal(err)
	}
	b.deliverer(t, delivery.Webhook{Name: "down", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookReleased}, MaxAttempts: 3}, 2*time.Second)
	testenv.Eventually(t, 20*time.Second, "delivery failed", func() bool { return backlog(t, b).Failed["down"] == 1 })
	if bl := backlog(t, b); bl.PendingTotal() != 0 {
		t.Errorf("backlog after failure: %+v", bl)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// TestDelivererOneAtATime: of two deliverers only one delivers; when its lock
// is lost (deleted from Redis) its hanging requests are cancelled, by the lost
// lock and not by their timeout, and the other takes over and delivers.
func TestDelivererOneAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Store: store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}}})
	// A second dispatcher over the same store, Redis and key prefix: another
	// process.
	d2, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	other := *b.Bundle
	other.D = d2
	b2 := &bundle{&other}

	var hang atomic.Bool
	hang.Store(true)
	cancelled := make(chan struct{}, 100)
	rc := newReceiver(t, func(r *http.Request, _ webhook.Event) int {
		if hang.Load() {
			<-r.Context().Done()
			cancelled <- struct{}{}
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	// The requests' timeout is far beyond any wait below: a request cancelled
	// within the wait was cancelled by the lost lock.
	const timeout = 10 * time.Minute
	hook := delivery.Webhook{Name: "one", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookSubmitted}, Timeout: timeout}
	const lease = 2 * time.Second
	w1 := b.deliverer(t, hook, lease)
	testenv.Eventually(t, 10*time.Second, "first deliverer delivering", w1.Delivering)
	w2 := b2.deliverer(t, hook, lease)

	ed := b.Editor(t, "ed", "one")
	b.Add(t, "one", 0, 3)
	b.submitAll(t, t.Context(), ed, 3)
	testenv.Eventually(t, 10*time.Second, "requests hanging", func() bool {
		r, _, _ := rc.got()
		return r == 3
	})
	if w2.Delivering() {
		t.Fatal("both deliverers deliver")
	}

	hang.Store(false)
	if err := b.RDB.Del(context.Background(), b.Prefix+"webhooks").Err(); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	for range 3 {
		select {
		case <-cancelled:
		case <-time.After(timeout / 2):
			t.Fatal("the requests of the deliverer that lost its lock were not cancelled")
		}
	}
	t.Logf("requests cancelled %v after the lock was lost (lease %v)", time.Since(lost), lease)
	testenv.Eventually(t, 20*time.Second, "every event delivered after the takeover", func() bool {
		_, evs, _ := rc.got()
		return len(evs) == 3
	})
	// The one that lost its lock notices at its next renewal, within the
	// lock's time to live.
	testenv.Eventually(t, lease+5*time.Second, "exactly one deliverer delivering", func() bool {
		return w1.Delivering() != w2.Delivering()
	})
}
