package taskd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// openDB opens dsn for the test.
func openDB(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// startOn builds an engine with a listener and the API over db, starts it,
// and returns the engine, what it logged and Start's error.
func startOn(t *testing.T, db *sqlx.DB) (*taskd.Engine, *syncBuffer, error) {
	t.Helper()
	logs := &syncBuffer{}
	e, err := taskd.New(taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		Redis:      taskd.RedisConfig{KeyPrefix: testenv.Prefix(t)},
		AdminToken: testAdminToken,
	}, taskd.WithDB(db), taskd.WithRedis(testenv.Redis(t)), taskd.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e, logs, e.Start(t.Context())
}

// latestVersion is the highest migration the binary has.
func latestVersion(t *testing.T) int {
	t.Helper()
	migs, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	return migs[len(migs)-1].Version
}

// TestStartRefusesAnUnmigratedDatabase starts an engine on a new, empty
// database: Start fails saying what to run, starts nothing (no listener, no
// sweeps warning about missing tables), and succeeds once the database is
// migrated.
func TestStartRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	db := openDB(t, storetest.NewEmptyDatabase(t))
	e, logs, err := startOn(t, db)
	if !errors.Is(err, taskd.ErrSchemaBehind) {
		t.Fatalf("start on an empty database: %v, want ErrSchemaBehind", err)
	}
	want := fmt.Sprintf("has no migration applied (no taskd tables), and this binary needs version %04d", latestVersion(t))
	for _, w := range []string{want, "run 'taskd migrate' with this mysql.dsn", "Engine.Migrate before Start"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("start error %q does not say %q", err, w)
		}
	}
	if e.Addr() != "" {
		t.Errorf("the refused engine listens on %s", e.Addr())
	}
	if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the refused engine logged warnings:\n%s", logs)
	}

	// Migrate brings the database to the schema, and the same engine starts.
	if err := e.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatalf("start on the migrated database: %v", err)
	} else if e.Addr() == "" {
		t.Fatal("the started engine does not listen")
	}
	st, err := migrate.ReadStatus(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Current(); err != nil {
		t.Errorf("after Migrate: %v", err)
	}
	// On a current database it applies nothing, and says so by no error.
	if err := e.Migrate(t.Context()); err != nil {
		t.Errorf("migrate a current database: %v", err)
	}
}

// TestStartRefusesAnOlderSchema starts an engine on a database whose last
// migration is not recorded, as a database an older taskd migrated is.
func TestStartRefusesAnOlderSchema(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	latest := latestVersion(t)
	if _, err := db.ExecContext(t.Context(), "DELETE FROM taskd_schema_migrations WHERE version = ?", latest); err != nil {
		t.Fatal(err)
	}
	e, _, err := startOn(t, db)
	if !errors.Is(err, taskd.ErrSchemaBehind) {
		t.Fatalf("start on an older schema: %v, want ErrSchemaBehind", err)
	}
	want := fmt.Sprintf("is at version %04d, and this binary needs %04d", latest-1, latest)
	for _, w := range []string{want, "run 'taskd migrate'"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("start error %q does not say %q", err, w)
		}
	}
	if e.Addr() != "" {
		t.Errorf("the refused engine listens on %s", e.Addr())
	}
}

// TestStartRefusesANewerSchema starts an engine on a database a newer taskd
// migrated: it is refused, since this binary cannot know what the newer
// migration changed.
func TestStartRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	if _, err := db.ExecContext(t.Context(), `INSERT INTO taskd_schema_migrations (version, name, checksum, applied_at)
		VALUES (?, 'from_the_future', REPEAT('0', 64), UTC_TIMESTAMP(3))`, latestVersion(t)+1); err != nil {
		t.Fatal(err)
	}
	e, _, err := startOn(t, db)
	if !errors.Is(err, taskd.ErrSchemaAhead) || !strings.Contains(err.Error(), "run a newer taskd") {
		t.Fatalf("start on a newer schema: %v, want ErrSchemaAhead saying to run a newer taskd", err)
	}
	if e.Addr() != "" {
		t.Errorf("the refused engine listens on %s", e.Addr())
	}
}

// TestRunRefusesAnUnmigratedDatabase checks Run, which `taskd serve` and
// `taskd work` use: it returns Start's refusal at once.
func TestRunRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	e, err := taskd.New(taskd.Config{Redis: taskd.RedisConfig{KeyPrefix: testenv.Prefix(t)}},
		taskd.WithDB(openDB(t, storetest.NewEmptyDatabase(t))), taskd.WithRedis(testenv.Redis(t)),
		taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := e.Run(ctx); !errors.Is(err, taskd.ErrSchemaBehind) {
		t.Fatalf("run on an empty database: %v, want ErrSchemaBehind", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run waited for its context instead of returning the refusal")
	}
}
