package activity_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	os.Exit(m.Run())
}

// bundle is what a dispatcher test works with: its own database and its own
// Redis key prefix, so tests run in parallel.
type bundle struct {
	db     *sqlx.DB
	store  *store.Store
	rdb    *redis.Client
	locks  *locker.Client
	d      *dispatcher.Dispatcher
	prefix string
}

type setupOpts struct {
	dispatcher dispatcher.Config
	store      store.Config
	// redis, when set, replaces the shared Redis server (for tests that
	// flush or stop it).
	redis *redis.Client
	// db, when set, replaces a fresh test database (for tests with a
	// replica).
	db *sqlx.DB
}

func setup(t testing.TB, opts ...setupOpts) *bundle {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	db := o.db
	if db == nil {
		db = storetest.NewDB(t)
	}
	store, err := store.New(db, o.store)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	rdb := o.redis
	if rdb == nil {
		rdb = testenv.Redis(t)
	}
	locks := locker.New(rdb)
	cfg := o.dispatcher
	cfg.KeyPrefix = testenv.Prefix(t)
	d, err := dispatcher.New(store, locks, cfg)
	if err != nil {
		t.Fatalf("new dispatcher: %v", err)
	}
	return &bundle{db: db, store: store, rdb: rdb, locks: locks, d: d, prefix: cfg.KeyPrefix}
}

// editor creates an editor with categories and returns its claimant.
func (b *bundle) editor(t testing.TB, name string, cats ...string) dispatcher.Claimant {
	t.Helper()
	_, hash := tasks.NewToken()
	e, err := b.store.CreateEditor(context.Background(), tasks.CreateEditorParams{
		Name: name, Categories: cats, TokenHash: hash,
	})
	if err != nil {
		t.Fatalf("create editor %s: %v", name, err)
	}
	return dispatcher.EditorClaimant(e)
}

// add inserts n tasks of category with the given priority and returns ids.
func (b *bundle) add(t testing.TB, category string, priority, n int) []int64 {
	t.Helper()
	ts := make([]tasks.NewTask, n)
	for i := range ts {
		ts[i] = tasks.NewTask{Category: category, Priority: priority, Title: fmt.Sprintf("%s #%d", category, i)}
	}
	ids, err := idsOf(b.d.AddTasks(context.Background(), ts))
	if err != nil {
		t.Fatalf("add tasks: %v", err)
	}
	return ids
}

// idsOf returns the ids of the tasks AddTasks added, with its error.
func idsOf(ins []tasks.Inserted, err error) ([]int64, error) {
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	return ids, err
}
