package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// galeraFaults are the faults of a run on a Galera cluster. Replica a lists
// the nodes 1, 2, 3 and replica b 2, 3, 1; node 3, where the harness reads,
// is never touched.
func (h *harness) galeraFaults() []fault {
	a, b := h.replicas[0], h.replicas[1]
	n1, n2 := h.galera.nodes[0], h.galera.nodes[1]
	return []fault{
		{"galera node kill -9", func(ctx context.Context, p *phase) error {
			// Node 2, b's, dies under load: b moves to node 3. Then node 2
			// starts again on its data directory and catches up by IST.
			start := time.Now()
			if err := n2.Kill(); err != nil {
				return err
			}
			// Both replicas: a's node lives, but the cluster may stall
			// until it has evicted the dead node.
			h.measureFailover(ctx, p, start, b, a)
			p.markRecovered()
			if err := n2.Start(ctx); err != nil {
				return err
			}
			p.rejoin, p.rejoinMS = n2.lastRejoin, n2.lastRejoinEnd.Sub(n2.lastRejoinAt).Milliseconds()
			return nil
		}},
		{"galera node hung", func(ctx context.Context, p *phase) error {
			// Node 1, a's, frozen: until the others evict it, flow control
			// and certification wait for it, and the whole cluster may stall.
			// Every request must still be answered within the bound (503).
			if err := n1.Pause(); err != nil {
				return err
			}
			sleepCtx(ctx, h.cfg.HangFor)
			p.markRecovered()
			if err := n1.Resume(); err != nil {
				return err
			}
			start := time.Now()
			if err := waitFor(ctx, 2*time.Minute, n1.Name()+" synced after SIGCONT", n1.proc, n1.synced); err != nil {
				return err
			}
			p.notes = append(p.notes, fmt.Sprintf("%s synced %d ms after SIGCONT", n1.Name(), time.Since(start).Milliseconds()))
			return nil
		}},
		{"galera node partitioned", func(ctx context.Context, p *phase) error {
			// Node 1, a's, cut off from the other two (gmcast.isolate): it
			// leaves the primary component and refuses every query; a must
			// answer 503 there, never 500, and move to node 2.
			start := time.Now()
			if err := n1.isolate(ctx, true); err != nil {
				return err
			}
			isolated := true
			defer func() {
				if isolated {
					_ = n1.isolate(context.Background(), false)
				}
			}()
			if err := waitFor(ctx, time.Minute, n1.Name()+" out of the primary component", n1.proc, func(ctx context.Context) error {
				prim, err := n1.primary(ctx)
				if err == nil && prim {
					err = errors.New("still primary")
				}
				return err
			}); err != nil {
				return err
			}
			p.notes = append(p.notes, fmt.Sprintf("%s left the primary component %d ms after the cut", n1.Name(), time.Since(start).Milliseconds()))
			p.notes = append(p.notes, h.nonPrimaryRefuses(ctx, p, n1))
			h.measureFailover(ctx, p, start, a, b)
			sleepCtx(ctx, time.Second)
			p.markRecovered()
			back := time.Now()
			isolated = false
			if err := n1.isolate(ctx, false); err != nil {
				return err
			}
			if err := waitFor(ctx, 2*time.Minute, n1.Name()+" synced after the partition", n1.proc, n1.synced); err != nil {
				return err
			}
			p.notes = append(p.notes, fmt.Sprintf("%s back in the primary component, synced, %d ms after the cut ended", n1.Name(), time.Since(back).Milliseconds()))
			return nil
		}},
	}
}

// nonPrimaryRefuses reads through a node outside the primary component, which
// must refuse (1047, "WSREP has not yet prepared node for application use").
func (h *harness) nonPrimaryRefuses(ctx context.Context, p *phase, n *galeraNode) string {
	db, err := n.root()
	if err != nil {
		return "could not reach " + n.Name() + ": " + err.Error()
	}
	defer db.Close()
	var count int
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+dbName+"`.tasks").Scan(&count)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		h.rec.violate(p, "a non-primary node refuses", "%s answered a read outside the primary component", n.Name())
		return n.Name() + " answered outside the primary component"
	case errors.As(err, &me):
		return fmt.Sprintf("%s refused a read: %d %s", n.Name(), me.Number, me.Message)
	default:
		return fmt.Sprintf("%s refused a read: %v", n.Name(), err)
	}
}

// measureFailover writes through each replica (one task, to the pool) until a
// write succeeds, and records the time since the fault began. Every answer is
// observed like an editor's: a 500 is a violation, a 503 counts.
func (h *harness) measureFailover(ctx context.Context, p *phase, start time.Time, rs ...*replica) {
	ms := make([]int64, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { ms[i] = h.firstWrite(ctx, p, start, r) })
	}
	wg.Wait()
	if p.failover == nil {
		p.failover = make(map[string]int64)
	}
	for i, r := range rs {
		p.failover[r.name] = ms[i]
	}
}

// firstWrite writes through r until a write succeeds and returns the time from
// start to its answer in milliseconds, or -1 (a violation) after a minute.
func (h *harness) firstWrite(ctx context.Context, p *phase, start time.Time, r *replica) int64 {
	limit := time.Minute
	for ctx.Err() == nil {
		s := h.serial.Add(1)
		task := []map[string]any{{"category": h.pickCategory(), "priority": 0,
			"title": fmt.Sprintf("chaos task %d", s), "payload": map[string]any{"n": s}}}
		resp := call(ctx, h.admin, r.Base(), "POST", "/v1/tasks", adminToken, task, h.cfg.RequestBound)
		h.rec.observe("add a task through "+r.name+" (failover probe)", resp)
		if resp.status == http.StatusCreated {
			return resp.answered.Sub(start).Milliseconds()
		}
		if time.Since(start) > limit {
			h.rec.violate(p, "failover", "%s wrote nothing within %v of the fault: %d %v", r.name, limit, resp.status, resp.err)
			return -1
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return -1
}
