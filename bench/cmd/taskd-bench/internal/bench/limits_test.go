package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestScenarioLimits(t *testing.T) {
	t.Parallel()
	runs, ok := scenario("all", Preset{Rounds: 2})
	if !ok {
		t.Fatal("no preset all")
	}
	var names []string
	for _, r := range runs {
		if strings.HasPrefix(r.name, "n-limits-") {
			names = append(names, r.name+"#"+string(rune('0'+r.round)))
			if err := r.workload.WithDefaults().validate(); err != nil {
				t.Errorf("%s: %v", r.name, err)
			}
			if r.workload.Pool < LimitsKeyCount*100 {
				t.Errorf("%s: %d tasks, want 100 or more a key", r.name, r.workload.Pool)
			}
		}
	}
	// The ways interleaved, each round comparing its own.
	want := "n-limits-none#1 n-limits-category#1 n-limits-keys#1 n-limits-none#2 n-limits-category#2 n-limits-keys#2"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("all runs %s, want %s", got, want)
	}
	alias, _ := scenario("n", Preset{Rounds: 1})
	if len(alias) != 3 || alias[0].name != "n-limits-none" {
		t.Errorf("-scenario n runs %v, want the three ways", alias)
	}
	if err := (Workload{Workers: 4, Limits: LimitsCategory}).WithDefaults().validate(); err == nil {
		t.Error("limits with workers of the editors' loop: no error")
	}
	if err := (Workload{Limits: "tenants"}).WithDefaults().validate(); err == nil {
		t.Error("an unknown way of limits: no error")
	}
}

func TestTargetsLimits(t *testing.T) {
	t.Parallel()
	way := func(name string, run int, cps float64) Result {
		return Result{Scenario: name, Run: run, Strategy: StrategyTaskd, CyclesPerSec: cps, Limits: &LimitsStats{}}
	}
	rs := []Result{
		way("n-limits-none", 1, 10_000), way("n-limits-category", 1, 9_500), way("n-limits-keys", 1, 6_000),
		way("n-limits-none", 2, 12_000), way("n-limits-category", 2, 10_200), way("n-limits-keys", 2, 9_000),
		way("n-limits-none", 3, 11_000), way("n-limits-category", 3, 9_790), way("n-limits-keys", 3, 5_500),
	}
	ts := limitsTargets(rs)
	if len(ts) != 2 {
		t.Fatalf("%d targets %v, want 2", len(ts), ts)
	}
	// Per round 0.95, 0.85, 0.89: median 0.89, below 0.9.
	if c := ts[0]; c.Value < 0.889 || c.Value > 0.891 || c.Met || c.Want != LimitsCategoryMin || !strings.Contains(c.Name, "max_in_flight 100") {
		t.Errorf("category target %+v, want 0.89 not met against 0.9", c)
	}
	// Per round 0.60, 0.75, 0.50: median 0.60, with no bound.
	if k := ts[1]; k.Value < 0.599 || k.Value > 0.601 || !k.Informational || !strings.Contains(k.Detail, "33k to 17k") {
		t.Errorf("keys target %+v, want 0.60, informational, against River Pro's", k)
	}
	if rat := limitsRatios(rs); len(rat) != 6 || rat[0].Value != 0.95 {
		t.Errorf("ratios %v, want 6, the first 0.95", rat)
	}

	// A taskd without limits: the ways are not run, and say why.
	skipped := []Result{way("n-limits-none", 1, 10_000), way("n-limits-category", 1, 0), way("n-limits-keys", 1, 0)}
	skipped[1].Limits.Skipped, skipped[2].Limits.Skipped = "no max_in_flight", "no key_limit"
	ts = limitsTargets(skipped)
	if len(ts) != 2 || ts[0].Met || !strings.Contains(ts[0].Detail, "not run: no max_in_flight") || !strings.Contains(ts[1].Detail, "not run: no key_limit") {
		t.Errorf("targets of ways not run: %v", ts)
	}
	if rat := limitsRatios(skipped); len(rat) != 0 {
		t.Errorf("ratios of ways not run: %v", rat)
	}
}

// TestLimitsCategories checks that each way's categories are the config
// file's: none unlimited; the limited category, or errNoLimits from a taskd
// that does not know the keys.
func TestLimitsCategories(t *testing.T) {
	t.Parallel()
	if cats, err := limitsCategories(LimitsNone, "u:p@tcp(127.0.0.1:3306)/d"); err != nil || cats != nil {
		t.Errorf("unlimited: %v, %v; want none", cats, err)
	}
	for _, way := range []string{LimitsCategory, LimitsKeys} {
		cats, err := limitsCategories(way, "u:p@tcp(127.0.0.1:3306)/d")
		switch {
		case errors.Is(err, errNoLimits):
			t.Logf("%s: %v", way, err)
		case err != nil:
			t.Errorf("%s: %v", way, err)
		case len(cats) != 1 || cats[0].Name != limitsCategory:
			t.Errorf("%s: categories %+v, want %s alone", way, cats, limitsCategory)
		}
	}
}

// TestRunLimits runs scenario (n)'s unlimited way on a small backlog, and
// the limited ways where this taskd has the limits.
func TestRunLimits(t *testing.T) {
	t.Parallel()
	cfg := services(t)
	for _, way := range []string{LimitsNone, LimitsCategory, LimitsKeys} {
		rs, err := Run(context.Background(), cfg, "test-limits-"+way, Workload{Editors: 1, Categories: 1, Pool: 2_000, Limits: way}, []string{StrategyTaskd})
		if err != nil {
			t.Fatalf("%s: %v", way, err)
		}
		r := rs[0]
		switch l := r.Limits; {
		case l == nil:
			t.Errorf("%s: no limits figures", way)
		case l.Skipped != "":
			if way == LimitsNone || !strings.Contains(l.Skipped, errNoLimits.Error()) {
				t.Errorf("%s: skipped: %s", way, l.Skipped)
			}
		case r.Cycles != 2_000 || r.Assignments < 2_000 || r.CyclesPerSec <= 0 || l.BurnSec <= 0 || l.Left != 0 || r.Errors != 0:
			t.Errorf("%s: %d jobs (%d ran, %d left: %s) at %.0f/s in %.2fs, want the 2,000", way, r.Cycles, r.Assignments, l.Left, r.FirstError, r.CyclesPerSec, l.BurnSec)
		}
	}
}
