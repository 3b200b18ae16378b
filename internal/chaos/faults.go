package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// fault is one scripted failure. inject breaks something, marks the moment
// it undid the damage with p.markRecovered, and returns once the broken part
// answers again.
type fault struct {
	name   string
	inject func(ctx context.Context, p *phase) error
}

func (h *harness) faults() []fault {
	if h.galera != nil {
		return h.galeraFaults()
	}
	a, b := h.replicas[0], h.replicas[1]
	return []fault{
		{"taskd kill -9", func(ctx context.Context, p *phase) error {
			// Every replica at once: nothing serves until they are back.
			for _, r := range h.replicas {
				if err := r.Kill(); err != nil {
					return err
				}
			}
			p.markRecovered()
			return h.startReplicas(ctx, h.replicas...)
		}},
		{"replica kill -9", func(ctx context.Context, p *phase) error {
			// One of two replicas dies; the load balancer notices, and the
			// other one serves and sweeps its claims once their leases pass.
			if err := b.Kill(); err != nil {
				return err
			}
			h.router.setOut(b.Base(), true)
			sleepCtx(ctx, h.cfg.Lease+h.cfg.SweepInterval+500*time.Millisecond)
			p.markRecovered()
			err := b.Start(ctx)
			h.router.setOut(b.Base(), false)
			return err
		}},
		{"purging replica kill -9", func(ctx context.Context, p *phase) error {
			// The replica running a purge batch dies in it: the batch's
			// transaction rolls back whole, and the other replica purges on.
			return h.purgeFault(ctx, p)
		}},
		{"redis restart empty", func(ctx context.Context, p *phase) error {
			if err := h.redis.Kill(); err != nil {
				return err
			}
			sleepCtx(ctx, time.Second)
			p.markRecovered()
			return h.redis.Start(ctx)
		}},
		{"mariadb kill -9", func(ctx context.Context, p *phase) error {
			if err := h.db.Kill(); err != nil {
				return err
			}
			sleepCtx(ctx, time.Second)
			p.markRecovered()
			return h.db.Start(ctx)
		}},
		{"replica paused past lease", func(ctx context.Context, p *phase) error {
			return h.pauseReplica(ctx, p, a, b)
		}},
		{"redis hung", func(ctx context.Context, p *phase) error {
			return h.hang(ctx, p, h.redis)
		}},
		{"mariadb hung", func(ctx context.Context, p *phase) error {
			return h.hang(ctx, p, h.db)
		}},
	}
}

// hang freezes a store (SIGSTOP) for cfg.HangFor, then lets it go on.
func (h *harness) hang(ctx context.Context, p *phase, s server) error {
	if err := s.Pause(); err != nil {
		return err
	}
	sleepCtx(ctx, h.cfg.HangFor)
	p.markRecovered()
	return s.Resume()
}

// runFault runs f in a phase of its own, then waits until an editor's
// request succeeded after the recovery and cfg.FaultEvery passed.
func (h *harness) runFault(ctx context.Context, f fault) error {
	p := h.rec.begin(f.name)
	h.logf("fault: %s", f.name)
	if err := f.inject(ctx, p); err != nil {
		return err
	}
	ready := time.Now()
	h.windowsMu.Lock()
	h.windows = append(h.windows, window{name: f.name, start: p.start, end: ready})
	h.windowsMu.Unlock()

	limit := 60 * time.Second
	deadline := ready.Add(limit)
	for p.firstOK.Load() == 0 && ctx.Err() == nil {
		if time.Now().After(deadline) {
			h.rec.violate(p, "recovery", "no request succeeded within %v of the recovery", limit)
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	sleepCtx(ctx, time.Until(p.recovery().Add(h.cfg.FaultEvery)))
	return nil
}

// probeResult is the answer to a write a paused replica held.
type probeResult struct {
	editor *editor
	what   string
	task   int64
	resp   response
}

// pauseReplica freezes replica b (SIGSTOP) with writes about three claims
// waiting in its sockets, until those claims' leases passed and replica a
// recycled them (and another editor took one over); then it lets b go on. b
// must refuse every one of those late writes.
func (h *harness) pauseReplica(ctx context.Context, p *phase, a, b *replica) error {
	const probeCategory = "probe"
	probes := make([]*editor, 3)
	for i := range probes {
		e, err := h.createEditor(ctx, fmt.Sprintf("probe-%d-%d", h.serial.Add(1), i), probeCategory)
		if err != nil {
			return err
		}
		probes[i] = e
	}
	taker, err := h.createEditor(ctx, fmt.Sprintf("taker-%d", h.serial.Add(1)), probeCategory)
	if err != nil {
		return err
	}
	h.extra = append(h.extra, append(probes, taker)...)
	if err := h.addTasksIn(ctx, len(probes), probeCategory); err != nil {
		return err
	}
	// Each probe claims a task through b.
	claims := make([]assignment, len(probes))
	for i, e := range probes {
		if err := h.directNext(ctx, e, b, &claims[i]); err != nil {
			return fmt.Errorf("probe claim through %s: %w", b.name, err)
		}
	}

	// Out of rotation, no editor request in flight, then frozen.
	h.router.setOut(b.Base(), true)
	defer h.router.setOut(b.Base(), false)
	drainBy := time.Now().Add(time.Minute)
	for h.router.busy(b.Base()) > 0 && time.Now().Before(drainBy) {
		sleepCtx(ctx, 10*time.Millisecond)
	}
	if err := b.Pause(); err != nil {
		return err
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = b.Resume()
		}
	}()

	// The writes reach b's sockets now, while the leases are live, and wait there.
	results := make(chan probeResult, len(probes))
	ops := []string{"submit", "heartbeat", "release"}
	for i, e := range probes {
		c := claims[i]
		op := ops[i%len(ops)]
		body := map[string]any{"fence": c.Fence}
		if op == "submit" {
			body["result"] = map[string]any{"late": true}
		}
		path := "/v1/assignments/" + strconv.FormatInt(c.Task.ID, 10) + "/" + op
		go func() {
			resp := call(ctx, e.client, b.Base(), "POST", path, e.token, body, 5*time.Minute)
			results <- probeResult{editor: e, what: fmt.Sprintf("late %s of task %d fence %d", op, c.Task.ID, c.Fence), task: c.Task.ID, resp: resp}
		}()
	}

	// Wait until replica a's sweeper recycled every probe claim.
	limit := h.cfg.Lease + h.cfg.SweepInterval + h.cfg.Slack + 30*time.Second
	deadline := time.Now().Add(limit)
	for {
		n, err := h.liveProbeClaims(ctx, claims)
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.rec.violate(p, "liveness", "probe claims still held %v after b was paused (err %v)", limit, err)
			break
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	// Another editor takes one of them over through a.
	var taken assignment
	if err := h.directNext(ctx, taker, a, &taken); err != nil {
		return fmt.Errorf("taker claim through %s: %w", a.name, err)
	}

	p.markRecovered()
	resumed = true
	if err := b.Resume(); err != nil {
		return err
	}
	for range probes {
		var r probeResult
		select {
		case r = <-results:
		case <-ctx.Done():
			return ctx.Err()
		}
		rp := h.rec.observe(r.what+" through "+b.name, r.resp)
		var out struct {
			Next *assignment `json:"next"`
		}
		if r.resp.ok() && json.Unmarshal(r.resp.body, &out) == nil && out.Next != nil {
			// A probe given a next task walks away from it.
			h.gotClaim(r.editor, rp, out.Next)
			r.editor.log.abandoned = append(r.editor.log.abandoned, claimRef{out.Next.Task.ID, out.Next.Fence})
		}
		switch {
		case r.resp.ok():
			h.rec.violate(p, "stale writes refused", "%s accepted after its lease passed: %d %s", r.what, r.resp.status, trimBody(r.resp.body))
		case r.resp.status == http.StatusConflict && r.resp.code() == "stale_fence":
			// The editor's own claim, lost: 409 stale_fence, never 403.
			p.stale.Add(1)
		case r.resp.status == http.StatusNotFound && r.resp.code() == "not_found":
			// Its task was finished by another and purged since: the
			// documented answer; the checks hold it to a purged task.
			p.stale.Add(1)
			h.noteGone(r.what, r.task)
		case r.resp.status == 0:
			h.rec.violate(p, "stale writes refused", "%s: no answer after the resume: %v", r.what, r.resp.err)
		default:
			h.rec.violate(p, "stale writes refused", "%s: %d %s, want 409 stale_fence", r.what, r.resp.status, trimBody(r.resp.body))
		}
	}
	// The taker finishes every probe task through a.
	cur := &taken
	deadline = time.Now().Add(time.Minute)
	for {
		if cur != nil {
			cur = h.submit(ctx, taker, cur)
			continue
		}
		var left int
		if err := h.sql.QueryRowContext(ctx, "SELECT COUNT(*) FROM tasks WHERE category = ? AND status <> 'done'", probeCategory).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d probe tasks not done a minute after the fault", left)
		}
		var again assignment
		status, err := h.directNextStatus(ctx, taker, a, &again)
		if err != nil {
			return err
		}
		if status == http.StatusOK {
			cur = &again
		} else {
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
}

// liveProbeClaims counts the probe claims that are still live.
func (h *harness) liveProbeClaims(ctx context.Context, claims []assignment) (int, error) {
	n := 0
	for _, c := range claims {
		var live int
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := h.sql.QueryRowContext(qctx, `SELECT COUNT(*) FROM tasks WHERE id = ? AND fence = ? AND status = 'assigned'`,
			c.Task.ID, c.Fence).Scan(&live)
		cancel()
		if err != nil {
			return 0, err
		}
		n += live
	}
	return n, nil
}

// directNext asks replica r for e's assignment (no wait) and wants one.
func (h *harness) directNext(ctx context.Context, e *editor, r *replica, a *assignment) error {
	status, err := h.directNextStatus(ctx, e, r, a)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("no assignment (%d)", status)
	}
	return err
}

// directNextStatus asks replica r for e's assignment, retrying 503s for up
// to a minute; it records a claim it got.
func (h *harness) directNextStatus(ctx context.Context, e *editor, r *replica, a *assignment) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		resp := call(ctx, e.client, r.Base(), "POST", "/v1/assignments/next", e.token, map[string]any{}, h.cfg.RequestBound)
		p := h.rec.observe("next through "+r.name+" (probe)", resp)
		switch resp.status {
		case http.StatusOK:
			if err := json.Unmarshal(resp.body, a); err != nil {
				return 0, err
			}
			h.gotClaim(e, p, a)
			return resp.status, nil
		case http.StatusNoContent:
			return resp.status, nil
		case 0, http.StatusServiceUnavailable:
		default:
			return resp.status, fmt.Errorf("next: %d %s", resp.status, trimBody(resp.body))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return 0, fmt.Errorf("next through %s: no answer within a minute: %v", r.name, resp.err)
		}
		backoff(ctx)
	}
}
