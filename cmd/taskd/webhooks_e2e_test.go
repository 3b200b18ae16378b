package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
)

const e2eHookSecret = "e2e-webhook-secret-0123456789"

// flakyReceiver is a webhook receiver on a fixed port that can fail (answer
// 500), be down (nothing listens: connection refused) and be up (answer 204
// after a short delay, so that a stream of events takes a while).
type flakyReceiver struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	srv      *http.Server
	failing  bool
	requests int                     // every request that reached the handler
	answered int                     // requests answered 204
	failed   int                     // requests answered 500
	seen     map[int64]webhook.Event // answered 204, by id: deduplicated
	bad      []string
}

func newFlakyReceiver(t *testing.T) *flakyReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &flakyReceiver{t: t, addr: ln.Addr().String(), seen: map[int64]webhook.Event{}, failing: true}
	r.serve(ln)
	t.Cleanup(r.down)
	return r
}

func (r *flakyReceiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (r *flakyReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var ev webhook.Event
	if err == nil {
		err = webhook.Verify(e2eHookSecret, req.Header.Get(webhook.SignatureHeader), body, 0, time.Now())
	}
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err == nil && req.Header.Get(webhook.EventIDHeader) != strconv.FormatInt(ev.ID, 10) {
		err = errors.New("Taskd-Event-Id differs from the body's id")
	}
	r.mu.Lock()
	r.requests++
	failing := r.failing
	if err != nil {
		r.bad = append(r.bad, err.Error())
	}
	if failing {
		r.failed++
	}
	r.mu.Unlock()
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case failing:
		http.Error(w, "failing", http.StatusInternalServerError)
		return
	}
	time.Sleep(20 * time.Millisecond) // a receiver with work to do
	r.mu.Lock()
	r.answered++
	r.seen[ev.ID] = ev
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// down closes the listener and every connection: requests are refused.
func (r *flakyReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up listens again on the same address and answers 204.
func (r *flakyReceiver) up() {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	r.mu.Lock()
	r.failing = false
	r.mu.Unlock()
	r.serve(ln)
}

func (r *flakyReceiver) counts() (requests, answered, failed, unique int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.answered, r.failed, len(r.seen)
}

// startServe runs `taskd serve` with env and a config file, and waits until it
// serves.
func startServe(t *testing.T, env []string, configFile string) *server {
	t.Helper()
	p := start(t, append(append([]string(nil), env...),
		"TASKD_HTTP_ADDR=127.0.0.1:0", "TASKD_LOG_FORMAT=json", "TASKD_LOG_LEVEL=info", "TASKD_SWEEP_INTERVAL=1s",
	), "serve", "-config", configFile)
	line := p.waitLog("serving", 60*time.Second)
	addr, _ := line["addr"].(string)
	base := "http://" + addr
	return &server{proc: p, base: base, spec: loadSpec(t, base)}
}

// hasLog reports whether the process logged msg.
func (p *proc) hasLog(msg string) bool {
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == msg {
			return true
		}
	}
	return false
}

// work makes events through s's API: n tasks, each claimed by an editor and
// submitted, but every fifth released instead (a released event; the release
// cooldown keeps it from the editor from then on). It returns how many events
// it made.
func work(s *server, ed editorJSON, category string, n int) int {
	s.t.Helper()
	ts := make([]map[string]any, n)
	for i := range ts {
		ts[i] = map[string]any{"category": category, "title": fmt.Sprintf("%s %d", category, i)}
	}
	s.addTasks(ts...)
	events := 0
	released := map[int64]bool{}
	for {
		status, body := s.call("POST", "/v1/assignments/next", ed.Token, map[string]any{})
		if status == http.StatusNoContent {
			return events
		}
		var a assignmentJSON
		if status != http.StatusOK || json.Unmarshal(body, &a) != nil {
			s.t.Fatalf("next: %d %s", status, body)
		}
		if a.Task.ID%5 == 0 && !released[a.Task.ID] {
			released[a.Task.ID] = true
			s.expect(http.StatusNoContent, "POST", fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID), ed.Token,
				map[string]any{"fence": a.Fence, "reason": "later"}, nil)
			events++
			continue
		}
		s.expect(http.StatusOK, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ed.Token,
			map[string]any{"fence": a.Fence, "result": map[string]any{"task": a.Task.ID}}, nil)
		events++
	}
}

// TestE2EWebhooksSurviveKill: two taskd processes share a database and a
// webhook. The receiver first fails (500), then is down (connection refused),
// then recovers; mid-stream, the process delivering is killed with SIGKILL,
// and more events follow. The other takes over, and the receiver ends up with
// every event exactly once after deduplication by id, each signed.
func TestE2EWebhooksSurviveKill(t *testing.T) {
	t.Parallel()
	rc := newFlakyReceiver(t)
	config := filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf(`webhooks:
  - name: e2e
    url: http://%s/hooks
    events: [submitted, released]
    secret: %s
    timeout: 2s
    concurrency: 2
    max_attempts: 1000
webhook_delivery:
  poll_interval: 50ms
  lease_ttl: 2s
  backoff_base: 20ms
  backoff_max: 300ms
`, rc.addr, e2eHookSecret)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := servicesEnv(t)
	a, b := startServe(t, env, config), startServe(t, env, config)
	var dsn string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "TASKD_MYSQL_DSN="); ok {
			dsn = v
		}
	}
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.GetContext(t.Context(), &n, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	// Which one delivers?
	const obtained = "webhook delivery lock obtained; delivering"
	testenv.Eventually(t, 30*time.Second, "a process delivering", func() bool { return a.hasLog(obtained) || b.hasLog(obtained) })
	leader, other := a, b
	if !a.hasLog(obtained) {
		leader, other = b, a
	}
	if other.hasLog(obtained) {
		t.Fatal("both processes deliver")
	}
	ed := other.createEditor("hookie", "hooks1", "hooks2", "hooks3")

	// Phase 1: the receiver fails every request.
	events := work(other, ed, "hooks1", 60)
	testenv.Eventually(t, 30*time.Second, "requests answered 500", func() bool {
		_, _, failed, _ := rc.counts()
		return failed >= 30
	})
	// Phase 2: down, while more events come.
	rc.down()
	events += work(other, ed, "hooks2", 140)
	testenv.Eventually(t, 30*time.Second, "refused connections logged", func() bool {
		return count(`SELECT COUNT(*) FROM webhook_attempts WHERE error LIKE '%connection refused%'`) >= 20
	})
	// Phase 3: up again; with a backlog of all the events (the receiver
	// takes at least 2.4s for them), kill the deliverer mid-stream, and make
	// more events once it is gone.
	upAt := time.Now()
	rc.up()
	testenv.Eventually(t, 30*time.Second, "deliveries flowing", func() bool {
		_, _, _, unique := rc.counts()
		return unique >= 40
	})
	_, _, _, atKill := rc.counts()
	if atKill >= events {
		t.Fatalf("all %d events were delivered before the kill; the stream was to be cut mid-way", events)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	<-leader.done
	events += work(other, ed, "hooks3", 20)
	testenv.Eventually(t, 30*time.Second, "the survivor delivering", func() bool { return other.hasLog(obtained) })
	tookOver := time.Since(killedAt)
	testenv.Eventually(t, 60*time.Second, "every event delivered", func() bool {
		_, _, _, unique := rc.counts()
		return unique >= events
	})
	drained := time.Since(upAt)

	// Every event of the outbox reached the receiver, once after deduplication,
	// and nothing else did.
	var ids []int64
	if err := db.SelectContext(t.Context(), &ids, `SELECT id FROM webhook_outbox ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	seen := rc.seen
	bad := rc.bad
	rc.mu.Unlock()
	if len(ids) != events || len(seen) != events {
		t.Errorf("outbox has %d events, receiver %d distinct, the test made %d", len(ids), len(seen), events)
	}
	kinds := map[string]int{}
	for _, id := range ids {
		ev, ok := seen[id]
		if !ok {
			t.Errorf("event %d never delivered", id)
			continue
		}
		kinds[ev.Type]++
	}
	if len(bad) > 0 {
		t.Errorf("%d requests failed verification: %v", len(bad), bad[:min(3, len(bad))])
	}
	// The last answers are being recorded.
	testenv.Eventually(t, 10*time.Second, "every delivery marked delivered", func() bool {
		return count(`SELECT COUNT(*) FROM webhook_deliveries WHERE status <> 'delivered'`) == 0
	})
	if n := count(`SELECT COUNT(*) FROM webhook_deliveries`); n != events {
		t.Errorf("%d deliveries for %d events", n, events)
	}
	requests, answered, failed, unique := rc.counts()
	attempts := count(`SELECT COUNT(*) FROM webhook_attempts`)
	refused := count(`SELECT COUNT(*) FROM webhook_attempts WHERE error LIKE '%connection refused%'`)
	t.Logf("webhook figures: %d events (%v); %d attempts logged (%d answered 500, %d refused while down); "+
		"%d requests reached the receiver, %d answered 2xx, %d distinct: %d duplicates before dedup; "+
		"%d delivered before the kill; survivor took over %v after SIGKILL; drained %v after the receiver came back",
		events, kinds, attempts, failed, refused, requests, answered, unique, answered-unique,
		atKill, tookOver.Round(time.Millisecond), drained.Round(time.Millisecond))
}
