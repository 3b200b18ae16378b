package chaos

import (
	"context"
	"errors"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	// The faults make both clients log broken connections on purpose.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	redis.SetLogger(discardRedis{})
	os.Exit(m.Run())
}

type discardRedis struct{}

func (discardRedis) Printf(context.Context, string, ...any) {}

// TestChaos runs every fault once against private servers and the real
// taskd binary (built from this module, or TASKD_CHAOS_TASKD), and fails on
// any violation. It takes about a minute and a half.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite takes a minute or two; run without -short")
	}
	for _, names := range [][]string{{"redis-server"}, {"mariadbd", "mysqld"}, {"mariadb-install-db", "mysql_install_db"}} {
		if _, err := findBinary(names...); err != nil {
			if os.Getenv("TASKD_TEST_REQUIRE_SERVICES") == "1" {
				t.Fatalf("%v, and TASKD_TEST_REQUIRE_SERVICES=1: install redis-server and mariadb-server (scripts/services.sh up does, as root)", err)
			}
			t.Skipf("%v: install redis-server and mariadb-server to run the fault suite", err)
		}
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		TaskdBin: os.Getenv("TASKD_CHAOS_TASKD"),
		WorkDir:  t.TempDir(),
		Editors:  20,
		// Two replicas, as the test ran before limits: it runs beside the
		// rest of make test on a loaded machine, where a third process made
		// the answer bound a matter of scheduling. make chaos runs three.
		Replicas: 2,
		Logf:     t.Logf,
	})
	if errors.Is(err, ErrMissingServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteText(&b)
	t.Logf("report:\n%s", b.String())
	wantNoViolations(t, rep)
	// The run must have done something worth checking.
	if rep.Totals.Assignments < 1000 || rep.Totals.Submits < 1000 || rep.Hostile.Requests == 0 {
		t.Errorf("too little work to prove anything: %d assignments, %d submits, %d hostile requests",
			rep.Totals.Assignments, rep.Totals.Submits, rep.Hostile.Requests)
	}
}

// TestChaosGalera runs the Galera faults once (a node killed under load and
// rejoining by IST, a node frozen, a node cut off from the other two) against
// a private 3-node cluster and two taskd replicas that list the nodes in
// different orders, and fails on any violation: a 500, an unbounded answer, a
// broken invariant. It takes about a minute and a half.
func TestChaosGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("the Galera fault suite takes a minute or two; run without -short")
	}
	for _, names := range [][]string{{"redis-server"}, {"mariadbd", "mysqld"}, {"mariadb-install-db", "mysql_install_db"}, {"rsync"}} {
		if _, err := findBinary(names...); err != nil {
			if os.Getenv("TASKD_TEST_REQUIRE_SERVICES") == "1" {
				t.Fatalf("%v, and TASKD_TEST_REQUIRE_SERVICES=1: install redis-server, mariadb-server, galera-4 and rsync (scripts/services.sh install does, as root)", err)
			}
			t.Skipf("%v: install redis-server, mariadb-server, galera-4 and rsync to run the Galera fault suite", err)
		}
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		TaskdBin: os.Getenv("TASKD_CHAOS_TASKD"),
		WorkDir:  t.TempDir(),
		Editors:  20,
		Galera:   true,
		Logf:     t.Logf,
	})
	if errors.Is(err, ErrMissingServer) {
		if os.Getenv("TASKD_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteText(&b)
	t.Logf("report:\n%s", b.String())
	wantNoViolations(t, rep)
	faults := 0
	for _, p := range rep.Phases {
		if strings.HasPrefix(p.Name, "galera ") {
			faults++
			if len(p.FailoverMS) == 0 && p.Name != "galera node hung" {
				t.Errorf("%s: no failover measured", p.Name)
			}
		}
	}
	if faults != 3 {
		t.Errorf("%d Galera faults ran, want 3", faults)
	}
	if rep.Totals.Assignments < 1000 || rep.Totals.Submits < 1000 {
		t.Errorf("too little work to prove anything: %d assignments, %d submits", rep.Totals.Assignments, rep.Totals.Submits)
	}
}

// wantNoViolations fails t on each of rep's violations (the first 30). Where
// the taskd under test has no max_in_flight (the run's limited category went
// unlimited), the in-flight check's violations are expected instead: the
// editors keep more claims of the category live than the limit, and the
// check must say so.
func wantNoViolations(t *testing.T, rep *Report) {
	t.Helper()
	var vs []Violation
	expected := 0
	for _, v := range rep.Violations {
		if c := rep.InFlight; c != nil && !c.Enforced && v.Check == inFlightCheck {
			expected++
			continue
		}
		vs = append(vs, v)
	}
	switch c := rep.InFlight; {
	case c == nil:
		t.Errorf("no in-flight check in the report")
	case !c.Enforced && (expected == 0 || c.Max <= c.Limit):
		t.Errorf("%s unlimited: at most %d claims live at once, %d stretches above %d; want more than the limit", c.Category, c.Max, expected, c.Limit)
	case !c.Enforced:
		t.Logf("this taskd has no max_in_flight: %d stretches with more than %d claims of %s live (at most %d), as expected", expected, c.Limit, c.Category, c.Max)
	}
	for i, v := range vs {
		if i == 30 {
			t.Errorf("… %d more violations", len(vs)-30)
			break
		}
		t.Errorf("%s", v)
	}
}
