package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A limit across processes: in the default workload (and on Galera) one
// category, limitedCategory, is configured with max_in_flight
// Config.InFlightLimit (a config.yaml the harness gives every replica), below
// the number of editors that take it, so the limit binds; the editors ask
// for work through every replica in turn. After the run, checkInFlight reads
// the audit trail for the instants more claims of it were live than the
// limit.
//
// A taskd without max_in_flight refuses the key (unknown key, at
// `taskd migrate`); the run then goes on without it, says so in the report
// (InFlightCounts.Enforced false) and still checks: every instant above the
// limit is then a violation, which proves the check can fail.

// limitedCategory is the category the run limits.
const limitedCategory = "cat0"

// InFlightCounts is what the in-flight check found about the limited
// category.
type InFlightCounts struct {
	Category string `json:"category"`
	Limit    int    `json:"max_in_flight"`
	// Enforced says whether the replicas ran with the limit configured; false
	// when the taskd binary has no max_in_flight (the check then measures
	// what an unlimited taskd does).
	Enforced bool  `json:"enforced"`
	Claims   int64 `json:"claims"`
	// Max is the most claims of the category live at one instant; Over the
	// stretches of time with more than Limit live (each a violation).
	Max  int `json:"max_live"`
	Over int `json:"stretches_over_limit"`
}

// writeLimitConfig writes the taskd config of the default workload: the
// limited category with max_in_flight limit. It returns its path.
func writeLimitConfig(dir string, limit int) (string, error) {
	var b strings.Builder
	b.WriteString("# The chaos run's limit across processes.\ncategories:\n")
	fmt.Fprintf(&b, "  - name: %s\n    max_in_flight: %d\n", limitedCategory, limit)
	// Not config.yaml: taskd reads that from its working directory unasked.
	path := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write the taskd config: %w", err)
	}
	return path, nil
}

// migrateWithLimit runs `taskd migrate` with the limited category's config
// added to h.env when the run has one. A taskd that refuses max_in_flight as
// an unknown key migrates without it, and the run goes on unlimited: the
// check then reports what it finds.
func (h *harness) migrateWithLimit(ctx context.Context) error {
	if h.cfg.Workflow || h.cfg.InFlightLimit <= 0 {
		return runMigrate(ctx, h.bin, h.workDir, h.env)
	}
	h.inFlight = &InFlightCounts{Category: limitedCategory, Limit: h.cfg.InFlightLimit}
	path, err := writeLimitConfig(h.workDir, h.cfg.InFlightLimit)
	if err != nil {
		return err
	}
	env := append(append([]string(nil), h.env...), "TASKD_CONFIG="+path)
	err = runMigrate(ctx, h.bin, h.workDir, env)
	if err != nil && strings.Contains(err.Error(), "max_in_flight: unknown key") {
		h.logf("this taskd has no max_in_flight: %s runs unlimited, and the in-flight check reports every instant above %d",
			limitedCategory, h.cfg.InFlightLimit)
		return runMigrate(ctx, h.bin, h.workDir, h.env)
	}
	if err != nil {
		return err
	}
	h.env, h.inFlight.Enforced = env, true
	return nil
}

// inFlightCheck names the check; the limit is in each finding.
const inFlightCheck = "no more claims of a category live at once than its max_in_flight"

// inFlightEdge is a claim's start or end in checkInFlight's sweep.
type inFlightEdge struct {
	at  time.Time
	ord int // at one instant: 0 ends, 1 starts, 2 ends of claims that started then
	ref claimRef
}

// checkInFlight checks that at no instant more than limit claims of tasks of
// category were live, from the claims of the audit trail (after applyBeats).
// It returns the claims it looked at, the most live at once and a finding per
// stretch of time above the limit.
//
// A claim is live from its 'claimed' event (which the database writes at or
// after the instant of the claim, so a claim counts from no later than it
// began) until the earlier of its end event and the latest its lease could
// have ended: its last lease (the claim's, or one a heartbeat answered) or
// the end of its last heartbeat that got no answer, plus the lease. Each
// bound is the latest the claim could have been live, so the check can only
// find more overlap than there was, never less. A worker's claim (editor 0)
// renews its lease without a trace in the trail: it is live until its end
// event. A claim with no end is live until its lease's end (a worker's: for
// ever).
//
// Times are the database's, to the millisecond: at one millisecond, the
// ends of claims that began earlier come before the claims that begin then
// (a claim taking over an expired lease ends it in the statement that makes
// it, at the same instant, and a limit kept under the fence admits a claim
// once another ended); a claim that ended in the millisecond it began counts
// as live in that millisecond, beside every claim of it.
func checkInFlight(claims map[claimRef]*claimHistory, tasks map[int64]taskRow, category string, limit int, lease time.Duration) (checked int64, maxLive int, fs []finding) {
	var edges []inFlightEdge
	for k, c := range claims {
		if tasks[k.Task].category != category {
			continue
		}
		checked++
		end := time.Time{} // zero: never ends
		if c.end != nil {
			end = c.end.At
		}
		if c.editor != 0 {
			last := c.lastLease
			if c.lastTry.After(last) {
				last = c.lastTry
			}
			if leaseEnd := last.Add(lease); end.IsZero() || leaseEnd.Before(end) {
				end = leaseEnd
			}
		}
		edges = append(edges, inFlightEdge{at: c.claimedAt, ord: 1, ref: k})
		switch {
		case end.IsZero():
		case end.After(c.claimedAt):
			edges = append(edges, inFlightEdge{at: end, ord: 0, ref: k})
		default:
			edges = append(edges, inFlightEdge{at: c.claimedAt, ord: 2, ref: k})
		}
	}
	slices.SortFunc(edges, func(a, b inFlightEdge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.ord != b.ord {
			return a.ord - b.ord
		}
		if a.ref.Task != b.ref.Task {
			return int(a.ref.Task - b.ref.Task)
		}
		return int(a.ref.Fence - b.ref.Fence)
	})

	live := make(map[claimRef]bool)
	var (
		over       bool
		from       time.Time
		peak       int
		peakClaims []claimRef
	)
	for _, e := range edges {
		if e.ord == 1 {
			live[e.ref] = true
		} else {
			delete(live, e.ref)
		}
		n := len(live)
		maxLive = max(maxLive, n)
		if n > limit && (!over || n > peak) {
			if !over {
				over, from = true, e.at
			}
			peak, peakClaims = n, sortedRefs(live)
		}
		if over && n <= limit {
			fs = append(fs, overLimit(category, limit, from, e.at, peak, peakClaims, claims))
			over, peak = false, 0
		}
	}
	if over {
		fs = append(fs, overLimit(category, limit, from, time.Time{}, peak, peakClaims, claims))
	}
	return checked, maxLive, fs
}

// overLimit is the finding of one stretch of time above the limit, naming
// the claims live at its peak (the first ten).
func overLimit(category string, limit int, from, to time.Time, peak int, refs []claimRef, claims map[claimRef]*claimHistory) finding {
	var parts []string
	for i, r := range refs {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("… %d more", len(refs)-10))
			break
		}
		c := claims[r]
		parts = append(parts, fmt.Sprintf("task %d fence %d (editor %d, claimed %s)", r.Task, r.Fence, c.editor, c.claimedAt.Format("15:04:05.000")))
	}
	until := "the end of the trail"
	if !to.IsZero() {
		until = to.Format("15:04:05.000")
	}
	return found(inFlightCheck, "%s (max_in_flight %d): %d claims live at once from %s until %s: %s",
		category, limit, peak, from.Format(time.RFC3339Nano), until, strings.Join(parts, ", "))
}

// sortedRefs returns the claims of a set in (task, fence) order.
func sortedRefs(set map[claimRef]bool) []claimRef {
	out := make([]claimRef, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b claimRef) int {
		if a.Task != b.Task {
			return int(a.Task - b.Task)
		}
		return int(a.Fence - b.Fence)
	})
	return out
}
