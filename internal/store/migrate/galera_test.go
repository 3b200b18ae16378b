package migrate_test

import (
	"context"
	"sync"
	"testing"

	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestGaleraMigrateOnEveryNodeAtOnce: three migrators, one per node of a
// Galera cluster, on one empty database at once. GET_LOCK would hold on each
// node alone; the lock row serializes them: one applies every migration, the
// others find the database up to date, and each migration is recorded once.
func TestGaleraMigrateOnEveryNodeAtOnce(t *testing.T) {
	g := storetest.NewEmptyGalera(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	applied := make([]int, len(g.Nodes))
	errs := make([]error, len(g.Nodes))
	for i, db := range g.Nodes {
		wg.Go(func() {
			a, err := migrate.Up(ctx, db)
			applied[i], errs[i] = len(a), err
		})
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrate through node %d: %v", i+1, err)
		}
		total += applied[i]
	}
	want := len(migrations(t))
	if total != want {
		t.Errorf("the three migrators applied %v migrations, %d in all, want %d in all", applied, total, want)
	}
	for i, db := range g.Nodes {
		if got := len(versions(t, db)); got != want {
			t.Errorf("node %d: %d versions recorded, want %d", i+1, got, want)
		}
	}
	if n := count(t, g.Nodes[0], "SELECT COUNT(*) FROM taskd_schema_lock"); n != 0 {
		t.Errorf("%d migration locks left taken, want none", n)
	}
}
