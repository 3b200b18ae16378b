package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

func TestScenarioGalera(t *testing.T) {
	t.Parallel()
	runs, ok := scenario("g2", Preset{Rounds: 2})
	if !ok {
		t.Fatal("no preset g2")
	}
	var names []string
	for _, r := range runs {
		names = append(names, fmt.Sprintf("%s#%d", r.name, r.round))
		if err := r.workload.WithDefaults().validate(); err != nil {
			t.Errorf("%s: %v", r.name, err)
		}
		if r.workload.Dispatchers != 3 || r.workload.Editors != 200 || r.workload.Categories != 50 {
			t.Errorf("%s: workload %+v, want 3 dispatchers, 200 editors, 50 categories", r.name, r.workload)
		}
	}
	want := "g2-mariadb#1 g2-one-node#1 g2-spread#1 g2-spread-causal-off#1 g2-mariadb#2 g2-one-node#2 g2-spread#2 g2-spread-causal-off#2"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("g2 runs\n%s\nwant\n%s", got, want)
	}
	has := func(rs []run) bool {
		return slices.ContainsFunc(rs, func(r run) bool { return r.workload.Galera != "" })
	}
	if all, _ := scenario("all", Preset{Rounds: 1}); has(all) {
		t.Error("all runs g2 without a Galera cluster")
	}
	if all, _ := scenario("all", Preset{Rounds: 1, Galera: true}); !has(all) {
		t.Error("all leaves g2 out with a Galera cluster")
	}
}

func TestTargetsGalera(t *testing.T) {
	t.Parallel()
	res := func(scenario string, run int, cps, p99 float64, errs int64) Result {
		r := result(scenario, run, StrategyTaskd, cps, 1, 1, 1)
		r.Next.P99Ms, r.Errors = p99, errs
		return r
	}
	rs := []Result{
		// Round 1: spread / one node 0.8, causal on / off 0.9; round 2: 0.4, 0.3.
		// Round 3: 0.6, 0.5. Medians 0.6 and 0.5.
		res(g2Plain, 1, 2000, 10, 0), res(g2OneNode, 1, 1000, 20, 0), res(g2Spread, 1, 800, 30, 0), res(g2CausalOff, 1, 889, 15, 0),
		res(g2Plain, 2, 2000, 10, 0), res(g2OneNode, 2, 1000, 20, 0), res(g2Spread, 2, 400, 100, 2), res(g2CausalOff, 2, 1333, 20, 5),
		res(g2Plain, 3, 2000, 10, 0), res(g2OneNode, 3, 1000, 20, 0), res(g2Spread, 3, 600, 40, 0), res(g2CausalOff, 3, 1200, 40, 0),
	}
	got := map[string]Target{}
	for _, tg := range g2Targets(rs) {
		got[tg.Name] = tg
	}
	const pre = "(g2) 3 dispatchers, 200 editors, 50 categories: "
	for _, want := range []struct {
		name  string
		value float64
		met   bool
	}{
		{pre + "spread over 3 nodes / one node cycles/s", 0.6, true},
		{pre + "spread over 3 nodes / one node next p99", 2, true},
		{pre + "spread, causal reads on / off cycles/s", 0.5, true}, // 0.9, 0.3, 0.5
		{pre + "spread, causal reads on / off next p99", 2, true},   // 2, 5, 1
		{pre + "Galera one node / single MariaDB cycles/s", 0.5, true},
		{"(g2) spread over 3 nodes, causal reads: errors and double commits, worst run", 2, false},
	} {
		tg, ok := got[want.name]
		if !ok {
			t.Errorf("no target %q", want.name)
			continue
		}
		if d := tg.Value - want.value; d > 0.01 || d < -0.01 || tg.Met != want.met {
			t.Errorf("%s: %.3f met %v, want %.3f met %v", want.name, tg.Value, tg.Met, want.value, want.met)
		}
	}
	if line := got[pre+"Galera one node / single MariaDB cycles/s"].String(); !strings.Contains(line, "0.50x, informational, no bound (median of 3") {
		t.Errorf("informational line: %s", line)
	}
	if len(got) != 6 {
		t.Errorf("%d targets, want 6", len(got))
	}
	lines := g2Ratios(rs)
	if len(lines) != 9 || !strings.Contains(lines[0].String(), "g2 #1: taskd spread over 3 nodes / one node cycles/s = 0.80x") {
		t.Errorf("ratio lines: %v", lines)
	}
}

func TestNodeDSN(t *testing.T) {
	t.Parallel()
	dsn, err := nodeDSN("u:p@tcp(127.0.0.1:1)/db?parseTime=true", "127.0.0.1:2", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:2" || cfg.DBName != "db" || cfg.Params["wsrep_sync_wait"] != "0" {
		t.Errorf("nodeDSN = %s: addr %s, database %s, params %v", dsn, cfg.Addr, cfg.DBName, cfg.Params)
	}
	if dsn, _ = nodeDSN("u:p@tcp(127.0.0.1:1)/db", "", false); strings.Contains(dsn, "wsrep") || !strings.Contains(dsn, "127.0.0.1:1") {
		t.Errorf("nodeDSN without a node or causalOff = %s", dsn)
	}
}

// galera returns the services' config with the Galera cluster, which the
// test then has to itself (no other test isolates a node meanwhile).
func galera(t *testing.T) Config {
	t.Helper()
	cfg := services(t)
	g := storetest.NewGalera(t)
	cfg.GaleraDSN, cfg.GaleraAddrs = testenv.Lookup(t, testenv.GaleraDSNVar), g.Addrs
	return cfg
}

// TestGaleraPlacement opens the dispatchers' stores of each placement and asks
// each connection which node it is on and whether its reads are causal.
func TestGaleraPlacement(t *testing.T) {
	t.Parallel()
	cfg := galera(t)
	if len(cfg.GaleraAddrs) < 3 {
		t.Fatalf("a 3-node cluster is needed, got %v", cfg.GaleraAddrs)
	}
	ctx := context.Background()
	a := cfg.GaleraAddrs
	for _, tc := range []struct {
		w         Workload
		addrs     []string
		syncWaits string
	}{
		{Workload{Dispatchers: 3, Galera: GaleraOneNode}, []string{a[0], a[0], a[0]}, "1 1 1"},
		{Workload{Dispatchers: 3, Galera: GaleraSpread}, []string{a[0], a[1], a[2]}, "1 1 1"},
		{Workload{Dispatchers: 3, Galera: GaleraSpread, CausalOff: true}, []string{a[0], a[1], a[2]}, "0 0 0"},
	} {
		bd, err := createDB(ctx, cfg.GaleraDSN, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := bd.openStore(ctx, tc.w, a); err != nil {
			t.Fatal(err)
		}
		var ports, waits []string
		for _, db := range append([]*sqlx.DB{bd.sdb}, bd.extra...) {
			var row struct {
				Port int `db:"port"`
				Wait int `db:"wait"`
			}
			if err := db.GetContext(ctx, &row, "SELECT @@port AS port, @@wsrep_sync_wait AS wait"); err != nil {
				t.Fatal(err)
			}
			ports, waits = append(ports, fmt.Sprint(row.Port)), append(waits, fmt.Sprint(row.Wait))
		}
		var want []string
		for _, addr := range tc.addrs {
			want = append(want, addr[strings.LastIndexByte(addr, ':')+1:])
		}
		if got := strings.Join(ports, " "); got != strings.Join(want, " ") || len(bd.stores) != 3 {
			t.Errorf("%s causal off %v: %d stores on ports %s, want %s", tc.w.Galera, tc.w.CausalOff, len(bd.stores), got, strings.Join(want, " "))
		}
		if got := strings.Join(waits, " "); got != tc.syncWaits {
			t.Errorf("%s causal off %v: wsrep_sync_wait %s, want %s", tc.w.Galera, tc.w.CausalOff, got, tc.syncWaits)
		}
		if err := bd.drop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunGaleraSpread runs editors on 3 dispatchers spread over the nodes and
// checks that work got done, once each, without an error, and that the
// counters add up the nodes.
func TestRunGaleraSpread(t *testing.T) {
	t.Parallel()
	cfg := galera(t)
	w := Workload{Editors: 6, Categories: 2, Pool: 300, Duration: time.Second, Dispatchers: 3, Galera: GaleraSpread}
	rs, err := Run(context.Background(), cfg, "test-galera", w, []string{StrategyTaskd})
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Cycles <= 0 || r.Errors != 0 || r.DoubleCommits != 0 {
		t.Errorf("%d cycles, %d errors (%s), %d double commits", r.Cycles, r.Errors, r.FirstError, r.DoubleCommits)
	}
	if r.MySQLRoundTripsPerCycle == nil || *r.MySQLRoundTripsPerCycle <= 0 || r.MySQLPerAssignment <= 0 {
		t.Errorf("MySQL round trips per cycle %v, statements per assignment %.2f: not counted", r.MySQLRoundTripsPerCycle, r.MySQLPerAssignment)
	}
}
