package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
)

// run is one named run of a scenario: a workload and the strategies it runs.
type run struct {
	name       string
	workload   Workload
	strategies []string
}

// ScenarioNames lists the presets of -scenario.
var ScenarioNames = []string{"all", "one-category", "categories", "pool-size", "sweep", "http"}

// scenario returns the runs of a preset and the ratios to compute from them.
func scenario(name string) ([]run, bool) {
	all := []string{StrategyTaskd, StrategySeedNaive, StrategySkipLocked}
	const d = 8 * time.Second
	presets := map[string][]run{
		// (a) 200 editors on one category, every strategy.
		"one-category": {{"a-one-category", Workload{Editors: 200, Categories: 1, Pool: 100_000, Duration: d}, all}},
		// (b) 200 editors over 50 categories.
		"categories": {{"b-50-categories", Workload{Editors: 200, Categories: 50, Pool: 100_000, Duration: d},
			[]string{StrategyTaskd, StrategySkipLocked}}},
		// (c) next latency against the size of the pool.
		"pool-size": {
			{"c-pool-10k", Workload{Editors: 100, Categories: 1, Pool: 10_000, Duration: 5 * time.Second}, []string{StrategyTaskd}},
			{"c-pool-1m", Workload{Editors: 100, Categories: 1, Pool: 1_000_000, Duration: 5 * time.Second}, []string{StrategyTaskd}},
		},
		// (d) a sweep of 100,000 expired claims under load, and the same load without.
		"sweep": {
			{"d-no-sweep", Workload{Editors: 200, Categories: 1, Pool: 100_000, Duration: 6 * time.Second}, []string{StrategyTaskd}},
			{"d-sweep-100k", Workload{Editors: 200, Categories: 1, Pool: 100_000, Duration: 6 * time.Second, Expired: 100_000}, []string{StrategyTaskd}},
		},
		// (e) the real server over HTTP, for its memory.
		"http": {{"e-http", Workload{Editors: 200, Categories: 1, Pool: 100_000, Duration: d, Mode: ModeHTTP}, []string{StrategyTaskd}}},
	}
	if name == "all" {
		var out []run
		for _, n := range ScenarioNames[1:] {
			out = append(out, presets[n]...)
		}
		return out, true
	}
	rs, ok := presets[name]
	return rs, ok
}

// Report is everything one taskd-bench run measured.
type Report struct {
	Started time.Time `json:"started"`
	Results []Result  `json:"results"`
	Ratios  []Ratio   `json:"ratios"`
	Notes   []string  `json:"notes"`
}

// Notes printed under every table.
var notes = []string{
	"every strategy's submit writes the same durable result (task done by a fenced UPDATE + a task_results row); taskd also writes its audit events (task_events) on claim and submit",
	"taskd's submit returns the next assignment in the same call (as the API's submit does): a cycle is one Submit; next latency is the part of it after the commit (lock release + next claim)",
	"mysql/op and redis/op are deltas of server-wide counters (Questions, total_commands_processed) per assignment: anything else using the servers is counted too; taskd sends a claim and a submit each as one statement batch (one round trip each), and tries its candidates' locks in one script (ObtainAny), so its round trips are fewer than its statements and commands",
	"seed-naive and mysql-skip-locked only claim pending rows: abandoned claims come back to them only with a sweeper, which they do not have",
	"memory is VmHWM/VmRSS of this process (inproc: peak over everything run before) or of the taskd serve child (http)",
}

// RunScenario runs the preset name (or, for "", the single workload w with
// strategies) and returns the report.
func RunScenario(ctx context.Context, cfg Config, name string, w Workload, strategies []string) (*Report, error) {
	rep := &Report{Started: time.Now().UTC(), Notes: notes}
	runs := []run{{"custom", w, strategies}}
	if name != "" {
		var ok bool
		if runs, ok = scenario(name); !ok {
			return nil, fmt.Errorf("unknown scenario %q", name)
		}
	}
	for _, r := range runs {
		res, err := Run(ctx, cfg, r.name, r.workload, r.strategies)
		rep.Results = append(rep.Results, res...)
		if err != nil {
			rep.Ratios = ratios(rep.Results)
			return rep, err
		}
	}
	rep.Ratios = ratios(rep.Results)
	return rep, nil
}

// find returns the result of strategy in scenario, or nil.
func find(rs []Result, scenario, strategy string) *Result {
	for i := range rs {
		if rs[i].Scenario == scenario && rs[i].Strategy == strategy {
			return &rs[i]
		}
	}
	return nil
}

// ratios computes the comparisons the targets ask for, for those results
// present.
func ratios(rs []Result) []Ratio {
	var out []Ratio
	cps := func(r *Result) float64 { return r.CyclesPerSec }
	seen := map[string]bool{}
	for _, r := range rs {
		sc := r.Scenario
		if seen[sc] {
			continue
		}
		seen[sc] = true
		t := find(rs, sc, StrategyTaskd)
		if t == nil {
			continue
		}
		for _, base := range []string{StrategySeedNaive, StrategySkipLocked} {
			if b := find(rs, sc, base); b != nil {
				out = append(out, newRatio(sc+": taskd / "+base, "cycles/s", cps(t), cps(b), 0, true))
			}
		}
	}
	if a, b := find(rs, "c-pool-1m", StrategyTaskd), find(rs, "c-pool-10k", StrategyTaskd); a != nil && b != nil {
		out = append(out, newRatio("c: taskd next p99 pool 1M / pool 10k", "next p99", a.Next.P99Ms, b.Next.P99Ms, 0, false))
	}
	if s, b := find(rs, "d-sweep-100k", StrategyTaskd), find(rs, "d-no-sweep", StrategyTaskd); s != nil && b != nil && s.Sweep != nil {
		out = append(out, newRatio("d: taskd next p99 during sweep / without", "next p99", s.Sweep.NextDuring.P99Ms, b.Next.P99Ms, 0, false))
	}
	return out
}

// WriteTable prints the report as a table, the ratio lines and the notes.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tstrategy\tmode\teditors\tcats\tpool\tcycles/s\tempty\tnext p50 ms\tnext p99 ms\tcycle p99 ms\tconflicts/op\trefused\tmysql/op\tredis/op\terrors\tdouble\tRSS MiB\tHWM MiB\t")
	for _, r := range rep.Results {
		conf := fmt.Sprintf("%.2f", r.ConflictsPerAssignment)
		refused := fmt.Sprint(r.RefusedClaims)
		if r.ConflictsPerAssignment < 0 {
			conf, refused = "n/a", "n/a"
		}
		drained := ""
		if r.Drained {
			drained = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%.0f%s\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t%.1f\t%.1f\t%d\t%d\t%.0f\t%.0f\t\n",
			r.Scenario, r.Strategy, r.Workload.Mode, r.Workload.Editors, r.Workload.Categories, r.Workload.Pool,
			r.CyclesPerSec, drained, r.EmptyHanded, r.Next.P50Ms, r.Next.P99Ms, r.Cycle.P99Ms, conf, refused,
			r.MySQLPerAssignment, r.RedisPerAssignment, r.Errors, r.DoubleCommits,
			float64(r.Memory.RSSKiB)/1024, float64(r.Memory.HWMKiB)/1024)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Sweep != nil {
			fmt.Fprintf(w, "%s: swept %d expired claims in %.2fs; taskd next during the sweep p50 %.2fms p99 %.2fms (%d claims)\n",
				r.Scenario, r.Sweep.Recycled, r.Sweep.DurationSec, r.Sweep.NextDuring.P50Ms, r.Sweep.NextDuring.P99Ms, r.Sweep.NextDuring.Count)
		}
		if r.Drained {
			fmt.Fprintf(w, "%s %s: * the pool ran dry after %.1fs\n", r.Scenario, r.Strategy, r.ElapsedSec)
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s %s: %d errors, the first: %s\n", r.Scenario, r.Strategy, r.Errors, r.FirstError)
		}
	}
	for _, ra := range rep.Ratios {
		fmt.Fprintln(w, ra.String())
	}
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	return nil
}

// WriteJSON writes the report as indented JSON to path.
func (rep *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
