package taskd_test

import (
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// TestMigrateFillsNameSkeletons: Migrate gives the editors made before names
// had skeletons theirs, also on a database with nothing left to apply, and
// never fails on two existing names that look alike.
func TestMigrateFillsNameSkeletons(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	for _, name := range []string{"rev", "ann", "r\u0435v"} {
		_, hash := tasks.NewToken()
		if _, err := db.ExecContext(t.Context(), `INSERT INTO editors (name, token_hash) VALUES (?, ?)`, name, hash[:]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := taskd.Migrate(t.Context(), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	var names []string
	if err := db.SelectContext(t.Context(), &names, `SELECT name FROM editors WHERE name_skeleton IS NOT NULL ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "rev" || names[1] != "ann" {
		t.Errorf("editors with a skeleton: %q, want rev and ann (r\u0435v looks like rev)", names)
	}
}
