package store_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// withReplica is setup with a store whose replica is the database replica.
func withReplica(t *testing.T, replica *sqlx.DB, cfg store.Config) (*bundle, *store.Store) {
	t.Helper()
	b := setup(t, store.Config{})
	cfg.Replica = replica
	s, err := store.New(b.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

func candidateIDs(t *testing.T, s *store.Store, p tasks.CandidatesParams) []int64 {
	t.Helper()
	cands, err := s.Candidates(t.Context(), p)
	if err != nil {
		t.Fatalf("candidates: %v", err)
	}
	ids := make([]int64, len(cands))
	for i, c := range cands {
		ids[i] = c.ID
	}
	return ids
}

// Candidates and PoolStats read the replica; claims go to the primary, where a
// task only the replica has does not exist.
func TestCandidatesReadTheReplica(t *testing.T) {
	t.Parallel()
	// A second database stands for a replica that holds other rows than the
	// primary, so the test can tell where each read went.
	replica := setup(t, store.Config{})
	replica.insertOne(t, "sport", 0) // so that ids differ between the two
	onReplica := replica.insertOne(t, "news", 1)
	b, s := withReplica(t, replica.db, store.Config{})
	onPrimary := b.insertOne(t, "news", 5)

	if got := candidateIDs(t, s, tasks.CandidatesParams{Categories: []string{"news"}}); !slices.Equal(got, []int64{onReplica}) {
		t.Fatalf("candidates = %v, want the replica's task %d", got, onReplica)
	}
	if got := candidateIDs(t, s, tasks.CandidatesParams{Categories: []string{"news"}, Primary: true}); !slices.Equal(got, []int64{onPrimary}) {
		t.Fatalf("candidates from the primary = %v, want %d", got, onPrimary)
	}
	st, err := s.PoolStats(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ByCategory) != 2 || st.ByStatus[tasks.StatusPending] != 2 {
		t.Fatalf("stats = %+v, want the replica's two pending tasks", st)
	}
	// The claim goes to the primary, which has no task onReplica.
	if onReplica == onPrimary {
		t.Fatalf("the two databases gave the same id %d", onReplica)
	}
	if _, err := s.Claim(t.Context(), tasks.ClaimParams{TaskID: onReplica, Fence: 0, Status: tasks.StatusPending, Holder: "w", Lease: time.Minute}); err == nil {
		t.Fatalf("claim of a task only the replica has succeeded")
	}
	if n := s.ReplicaFallbacks(); n != 0 {
		t.Fatalf("fallbacks = %d, want 0", n)
	}
}

// A replica with no candidates is checked against the primary: tasks it has
// not received yet are still handed out.
func TestCandidatesEmptyReplicaFallsBackToPrimary(t *testing.T) {
	t.Parallel()
	replica := setup(t, store.Config{})
	b, s := withReplica(t, replica.db, store.Config{})
	id := b.insertOne(t, "news", 0)
	if got := candidateIDs(t, s, tasks.CandidatesParams{Categories: []string{"news"}}); !slices.Equal(got, []int64{id}) {
		t.Fatalf("candidates = %v, want the primary's %d", got, id)
	}
}

// A replica that is down, or hangs, costs one failed read: the primary
// answers it and the next reads until the rest is over.
func TestCandidatesReplicaDownOrHung(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		db   func(t *testing.T) *sqlx.DB
	}{
		{"down", func(t *testing.T) *sqlx.DB {
			// A port nothing listens on: connections are refused.
			cfg := mysql.NewConfig()
			cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = "taskd", "taskd", "tcp", "127.0.0.1:1"
			c, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sqlx.NewDb(sql.OpenDB(c), "mysql")
			t.Cleanup(func() { _ = db.Close() })
			return db
		}},
		{"hung", func(t *testing.T) *sqlx.DB {
			dsn := storetest.NewDatabase(t)
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.StartProxy(t, cfg.Addr)
			cfg.Addr = proxy.Addr()
			db, err := store.Open(t.Context(), cfg.FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			proxy.Freeze()
			t.Cleanup(proxy.Thaw)
			return db
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, s := withReplica(t, tc.db(t), store.Config{ReplicaTimeout: 200 * time.Millisecond, ReplicaRest: time.Hour})
			id := b.insertOne(t, "news", 0)
			for i := range 3 {
				got := candidateIDs(t, s, tasks.CandidatesParams{Categories: []string{"news"}})
				if !slices.Equal(got, []int64{id}) {
					t.Fatalf("read %d: candidates = %v, want the primary's %d", i, got, id)
				}
			}
			if _, err := s.PoolStats(t.Context(), 0); err != nil {
				t.Fatalf("stats with the replica %s: %v", tc.name, err)
			}
			// All four reads went to the primary; only the first tried the replica.
			if n := s.ReplicaFallbacks(); n != 4 {
				t.Fatalf("fallbacks = %d, want 4", n)
			}
		})
	}
}

// A caller's own deadline is not the replica's fault: no fallback, no rest.
func TestCandidatesCallerCancelled(t *testing.T) {
	t.Parallel()
	replica := setup(t, store.Config{})
	_, s := withReplica(t, replica.db, store.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Candidates(ctx, tasks.CandidatesParams{Categories: []string{"news"}}); err == nil {
		t.Fatalf("candidates with a cancelled context succeeded")
	}
	if n := s.ReplicaFallbacks(); n != 0 {
		t.Fatalf("fallbacks = %d, want 0", n)
	}
}

// The services' real replica receives the migrated schema and the primary's
// tasks, and the store reads its candidates there.
func TestCandidatesOnRealReplica(t *testing.T) {
	t.Parallel()
	r := storetest.NewReplicated(t)
	primary, err := store.New(r.Primary, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := primary.InsertTasks(t.Context(), []tasks.NewTask{
		{Category: "news", Title: "a", Priority: 1}, {Category: "news", Title: "b", Priority: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CatchUp(t, r.Primary, r.ReplicaAdmin)
	s, err := store.New(r.Primary, store.Config{Replica: r.Replica})
	if err != nil {
		t.Fatal(err)
	}
	if got := candidateIDs(t, s, tasks.CandidatesParams{Categories: []string{"news"}}); !slices.Equal(got, []int64{ids[1], ids[0]}) {
		t.Fatalf("candidates = %v, want %v", got, []int64{ids[1], ids[0]})
	}
	if n := s.ReplicaFallbacks(); n != 0 {
		t.Fatalf("fallbacks = %d, want 0", n)
	}
}
