package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// PhaseReport is what the editors saw during one fault (or calm stretch).
type PhaseReport struct {
	Name     string  `json:"name"`
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	OK       int64   `json:"ok"`
	// Unavailable counts 503 answers.
	Unavailable int64 `json:"unavailable_503"`
	// TransportErrors counts requests with no HTTP answer (refused or reset
	// connections of a dead process).
	TransportErrors int64 `json:"transport_errors"`
	// TimedOut counts requests not answered within wait + Config.RequestBound.
	TimedOut int64 `json:"timed_out"`
	// ServerErrors counts 5xx answers other than 503.
	ServerErrors int64 `json:"server_errors"`
	// RecoveryMS is the time from the fault's undoing (restart, resume) to
	// the first successful answer; -1 when the phase had no fault or none came.
	RecoveryMS  int64 `json:"first_ok_after_recovery_ms"`
	Assignments int64 `json:"assignments"`
	Submits     int64 `json:"submits"`
	// Stale counts writes refused as stale (409 stale_fence).
	Stale      int64 `json:"stale_refusals"`
	Releases   int64 `json:"releases"`
	Heartbeats int64 `json:"heartbeats"`
	Abandons   int64 `json:"abandons"`
	Violations int64 `json:"violations"`
	// FailoverMS is, per taskd replica a Galera fault cut off from its node,
	// the time from the fault to the replica's first write that succeeded
	// (on the next node of its list, or the same node once it was back).
	FailoverMS map[string]int64 `json:"failover_ms,omitempty"`
	// Rejoin is how a Galera node started again after a kill caught up with
	// the cluster (IST or SST), and RejoinMS how long from its start until
	// it was synced.
	Rejoin   string   `json:"rejoin,omitempty"`
	RejoinMS int64    `json:"rejoin_ms,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	// Workload describes the editors' work: the default one, or the
	// workflow pass's (Config.Workflow).
	Workload string `json:"workload"`
	// Workflow counts what the workflow pass did.
	Workflow *WorkflowCounts `json:"workflow,omitempty"`
	Seconds  float64         `json:"seconds"`
	Config   ReportConfig    `json:"config"`
	Phases   []PhaseReport   `json:"phases"`
	Totals   PhaseReport     `json:"totals"`
	Checks   []CheckResult   `json:"checks"`
	Hostile  hostileResult   `json:"hostile"`
	// Purge is what retention purged under the faults, and what the feed
	// reader saw.
	Purge PurgeCounts `json:"purge"`
	// InFlight is what the in-flight check found about the limited
	// category; nil when the run limited none.
	InFlight   *InFlightCounts `json:"in_flight,omitempty"`
	Violations []Violation     `json:"violations"`
}

// WorkflowCounts are what the workflow pass did: the decisions of its
// acknowledged submits, and the claims editors took while holding another
// (task_events), which only capacities above 1 allow.
type WorkflowCounts struct {
	Approved   int64 `json:"approved"`
	SentBack   int64 `json:"sent_back"`
	Labelled   int64 `json:"labelled"`
	HeldBeside int64 `json:"claims_beside_another"`
	// Groups are the overlapped tasks with all their results in; Agreeing
	// those whose results' decisions are equal.
	Groups   int64 `json:"groups"`
	Agreeing int64 `json:"groups_agreeing"`
	// Hedges are what the hedged re-offers of desk did.
	Hedges HedgeCounts `json:"hedges"`
}

// ReportConfig is the part of Config a reader of the report needs.
type ReportConfig struct {
	Editors         int     `json:"editors"`
	LeaseSeconds    float64 `json:"lease_ttl_seconds"`
	SweepSeconds    float64 `json:"sweep_interval_seconds"`
	SlackSeconds    float64 `json:"slack_seconds"`
	BoundSeconds    float64 `json:"request_bound_seconds"`
	HangSeconds     float64 `json:"hang_seconds"`
	Soak            bool    `json:"soak"`
	TargetAssigned  int64   `json:"target_assignments,omitempty"`
	DurationSeconds float64 `json:"max_duration_seconds,omitempty"`
}

func (h *harness) report(d time.Duration) *Report {
	r := &Report{Workload: h.workload(), Seconds: d.Seconds(), Checks: h.checks, Hostile: h.hostile, Purge: h.purgeCounts, InFlight: h.inFlight}
	r.Purge.RetentionDoneSeconds, r.Purge.Batch = purgeDone.Seconds(), purgeBatch
	if h.cfg.Workflow {
		r.Workflow = &WorkflowCounts{Approved: h.stats.approvals.Load(), SentBack: h.stats.sendBacks.Load(),
			Labelled: h.stats.labelled.Load(), HeldBeside: h.beside, Groups: h.groups, Agreeing: h.agreeing, Hedges: h.hedged}
	}
	c := h.cfg
	r.Config = ReportConfig{Editors: c.Editors, LeaseSeconds: c.Lease.Seconds(), SweepSeconds: c.SweepInterval.Seconds(),
		SlackSeconds: c.Slack.Seconds(), BoundSeconds: c.RequestBound.Seconds(), HangSeconds: c.HangFor.Seconds(), Soak: c.Soak}
	if c.Soak {
		r.Config.TargetAssigned, r.Config.DurationSeconds = c.Assignments, c.Duration.Seconds()
	}
	r.Totals.Name = "total"
	r.Totals.RecoveryMS = -1
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	for _, p := range h.rec.phases {
		pr := PhaseReport{
			Name: p.name, Seconds: p.end.Sub(p.start).Seconds(),
			Requests: p.requests.Load(), OK: p.ok.Load(), Unavailable: p.unavailable.Load(),
			TransportErrors: p.transportErrors.Load(), TimedOut: p.timedOut.Load(), ServerErrors: p.serverErrors.Load(),
			RecoveryMS:  -1,
			Assignments: p.assignments.Load(), Submits: p.submits.Load(), Stale: p.stale.Load(),
			Releases: p.releases.Load(), Heartbeats: p.heartbeats.Load(), Abandons: p.abandons.Load(),
			Violations: p.violations.Load(),
			FailoverMS: p.failover, Rejoin: p.rejoin, RejoinMS: p.rejoinMS, Notes: p.notes,
		}
		if rec, ok := p.recovered.Load(), p.firstOK.Load(); rec != 0 && ok != 0 {
			pr.RecoveryMS = time.Duration(ok - rec).Milliseconds()
		}
		r.Phases = append(r.Phases, pr)
		t := &r.Totals
		t.Seconds += pr.Seconds
		t.Requests += pr.Requests
		t.OK += pr.OK
		t.Unavailable += pr.Unavailable
		t.TransportErrors += pr.TransportErrors
		t.TimedOut += pr.TimedOut
		t.ServerErrors += pr.ServerErrors
		t.Assignments += pr.Assignments
		t.Submits += pr.Submits
		t.Stale += pr.Stale
		t.Releases += pr.Releases
		t.Heartbeats += pr.Heartbeats
		t.Abandons += pr.Abandons
		t.Violations += pr.Violations
	}
	r.Violations = append([]Violation(nil), h.rec.viols...)
	return r
}

// WriteText writes the report as tables.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "workload %s\n", r.Workload)
	if c := r.Workflow; c != nil {
		fmt.Fprintf(w, "reviews approved %d, sent back %d; labels given %d, %d of %d groups agreeing; claims taken beside another %d\n",
			c.Approved, c.SentBack, c.Labelled, c.Agreeing, c.Groups, c.HeldBeside)
		hc := c.Hedges
		fmt.Fprintf(w, "hedges taken %d, took their task over %d, submitted %d; refused done_by_other: holders %d, hedgers %d\n",
			hc.Taken, hc.Won, hc.Submitted, hc.HolderRefused, hc.HedgerRefused)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tsecs\trequests\t503s\tno answer\ttimed out\t5xx\tfirst ok after recovery\tassignments\tsubmits\tstale refused\treleases\tabandons\tviolations\t")
	row := func(p PhaseReport) {
		rec := "-"
		if p.RecoveryMS >= 0 {
			rec = fmt.Sprintf("%d ms", p.RecoveryMS)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.Name, p.Seconds, p.Requests,
			p.Unavailable, p.TransportErrors, p.TimedOut, p.ServerErrors, rec, p.Assignments, p.Submits, p.Stale,
			p.Releases, p.Abandons, p.Violations)
	}
	for _, p := range r.Phases {
		row(p)
	}
	row(r.Totals)
	tw.Flush()
	for _, p := range r.Phases {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(p.FailoverMS)) {
			if ms := p.FailoverMS[name]; ms >= 0 {
				parts = append(parts, fmt.Sprintf("%s wrote again %d ms after the fault", name, ms))
			} else {
				parts = append(parts, name+" never wrote again")
			}
		}
		if p.Rejoin != "" {
			parts = append(parts, fmt.Sprintf("node rejoined by %s in %d ms", p.Rejoin, p.RejoinMS))
		}
		parts = append(parts, p.Notes...)
		if len(parts) > 0 {
			fmt.Fprintf(w, "%s: %s\n", p.Name, strings.Join(parts, "; "))
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tchecked\tviolations")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", c.Name, c.Checked, c.Violations)
	}
	tw.Flush()
	pc := r.Purge
	fmt.Fprintf(w, "\npurged (retention done %vs, batch %d): %d tasks, %d results, %d events; %d tasks left; feed read %d results, %d 410s skipping %d cursors; orphan reads %d; late writes 404 %d; kills mid-purge %d, of the last purger %d\n",
		pc.RetentionDoneSeconds, pc.Batch, pc.Tasks, pc.Results, pc.Events, pc.Live, pc.FeedResults, pc.FeedExpired, pc.FeedSkipped,
		pc.OrphanReads, pc.GoneWrites, pc.KilledMidPurge, pc.KilledSweeper)
	if c := r.InFlight; c != nil {
		how := "configured"
		if !c.Enforced {
			how = "not configured: this taskd has no max_in_flight"
		}
		fmt.Fprintf(w, "in flight: %s, max_in_flight %d (%s): %d claims, at most %d live at once, %d stretches above the limit\n",
			c.Category, c.Limit, how, c.Claims, c.Max, c.Over)
	}
	fmt.Fprintf(w, "lease_ttl %vs, sweep.interval %vs, liveness slack %vs, answer bound wait + %vs, stores hung for %vs; %d editors; %.0fs\n",
		r.Config.LeaseSeconds, r.Config.SweepSeconds, r.Config.SlackSeconds, r.Config.BoundSeconds, r.Config.HangSeconds,
		r.Config.Editors, r.Seconds)
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "no violations")
		return
	}
	fmt.Fprintf(w, "%d violations:\n", len(r.Violations))
	for i, v := range r.Violations {
		if i == 100 {
			fmt.Fprintf(w, "  … %d more (all in the JSON report)\n", len(r.Violations)-100)
			break
		}
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(v.String(), "\n", " "))
	}
}

// WriteJSON writes the report as JSON to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
