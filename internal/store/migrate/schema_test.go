package migrate_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestMigrationsAddUpToSchema proves that schema.sql, which people read, is what the
// migrations make: one database is made from schema.sql, one by Up, and their
// tables, columns, keys, foreign keys and checks must be the same.
func TestMigrationsAddUpToSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fromSchema := openEmpty(t)
	execAll(t, fromSchema, migrate.SplitStatements(taskd.Schema)...)
	fromMigrations := openEmpty(t)
	if _, err := migrate.Up(ctx, fromMigrations); err != nil {
		t.Fatal(err)
	}
	if diff := schemaDiff(readSchema(t, fromSchema), readSchema(t, fromMigrations)); diff != "" {
		t.Errorf("applying every migration does not give schema.sql's schema (- schema.sql, + migrations):\n%s\n"+
			"Every schema change is a new migration in internal/store/migrate/migrations, and schema.sql changes to match.", diff)
	}
}

// TestSchemaDiffSeesAKey proves the comparison above can fail: migration 0001 alone is
// not 0001 and 0002, and the difference is the tasks_editor key 0002 changes.
func TestSchemaDiffSeesAKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	upTo0002 := openEmpty(t)
	if _, err := migrate.UpWith(ctx, upTo0002, migrations(t)[:2]); err != nil {
		t.Fatal(err)
	}
	only0001 := openEmpty(t)
	if _, err := migrate.UpWith(ctx, only0001, migrations(t)[:1]); err != nil {
		t.Fatal(err)
	}
	diff := schemaDiff(readSchema(t, upTo0002), readSchema(t, only0001))
	want := "- index tasks.tasks_editor: BTREE (editor_id A)\n+ index tasks.tasks_editor: UNIQUE BTREE (editor_id A)\n"
	if diff != want {
		t.Errorf("0001 and 0002 against 0001 alone: diff\n%s\nwant\n%s", diff, want)
	}
}

// openEmpty opens a new database without tables.
func openEmpty(t *testing.T) *sqlx.DB {
	t.Helper()
	db, err := store.Open(t.Context(), storetest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// readSchema describes the current database's schema from information_schema, one
// entry per table, column, key, foreign key and check constraint, without the version
// table: "column tasks.fence" -> "bigint(20) unsigned NOT NULL default 0 ...".
func readSchema(t *testing.T, db *sqlx.DB) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	add := func(what, query string, args ...any) {
		t.Helper()
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatalf("read %s: %v", what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var key, value string
			if err := rows.Scan(&key, &value); err != nil {
				t.Fatalf("read %s: %v", what, err)
			}
			if _, dup := out[key]; dup {
				t.Fatalf("read %s: %s twice", what, key)
			}
			out[key] = value
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read %s: %v", what, err)
		}
	}
	vt := migrate.VersionTable
	add("tables", `SELECT CONCAT('table ', table_name),
		CONCAT_WS(' ', engine, table_collation, NULLIF(create_options, ''), NULLIF(table_comment, ''))
		FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name <> ?`, vt)
	add("columns", `SELECT CONCAT('column ', table_name, '.', column_name),
		CONCAT_WS(' ', CONCAT('#', ordinal_position), column_type, IF(is_nullable = 'YES', 'NULL', 'NOT NULL'),
			CONCAT('default ', COALESCE(column_default, '(none)')),
			character_set_name, collation_name, NULLIF(extra, ''), NULLIF(generation_expression, ''),
			NULLIF(column_comment, ''))
		FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name <> ?`, vt)
	add("keys", `SELECT CONCAT('index ', table_name, '.', index_name),
		CONCAT(IF(non_unique = 0, 'UNIQUE ', ''), index_type, ' (',
			GROUP_CONCAT(CONCAT_WS(' ', COALESCE(column_name, '(expression)'), collation,
				IF(sub_part IS NULL, NULL, CONCAT('(', sub_part, ')'))) ORDER BY seq_in_index SEPARATOR ', '), ')')
		FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name <> ?
		GROUP BY table_name, index_name, non_unique, index_type`, vt)
	add("foreign keys", `SELECT CONCAT('foreign key ', rc.table_name, '.', rc.constraint_name),
		CONCAT('(', GROUP_CONCAT(k.column_name ORDER BY k.ordinal_position SEPARATOR ', '), ') REFERENCES ',
			rc.referenced_table_name, ' (', GROUP_CONCAT(k.referenced_column_name ORDER BY k.ordinal_position SEPARATOR ', '),
			') ON UPDATE ', rc.update_rule, ' ON DELETE ', rc.delete_rule)
		FROM information_schema.referential_constraints rc
		JOIN information_schema.key_column_usage k ON k.constraint_schema = rc.constraint_schema
			AND k.table_name = rc.table_name AND k.constraint_name = rc.constraint_name
		WHERE rc.constraint_schema = DATABASE()
		GROUP BY rc.table_name, rc.constraint_name, rc.referenced_table_name, rc.update_rule, rc.delete_rule`)
	// MariaDB's check_constraints has the table's name, MySQL's does not (there,
	// constraint names are unique in a schema).
	sameTable := ""
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = 'information_schema' AND table_name = 'CHECK_CONSTRAINTS' AND column_name = 'TABLE_NAME'`); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		sameTable = "AND cc.table_name = tc.table_name"
	}
	add("checks", `SELECT CONCAT('check ', tc.table_name, '.', tc.constraint_name), cc.check_clause
		FROM information_schema.table_constraints tc
		JOIN information_schema.check_constraints cc ON cc.constraint_schema = tc.constraint_schema
			AND cc.constraint_name = tc.constraint_name `+sameTable+`
		WHERE tc.table_schema = DATABASE() AND tc.constraint_type = 'CHECK' AND tc.table_name <> ?`, vt)
	if len(out) == 0 {
		t.Fatal("the database has no schema")
	}
	return out
}

// schemaDiff lists the entries that differ, "- " from a and "+ " from b, sorted by
// entry; "" when a and b are the same.
func schemaDiff(a, b map[string]string) string {
	var sb strings.Builder
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, inA := a[k]
		vb, inB := b[k]
		if inA && inB && va == vb {
			continue
		}
		if inA {
			fmt.Fprintf(&sb, "- %s: %s\n", k, va)
		}
		if inB {
			fmt.Fprintf(&sb, "+ %s: %s\n", k, vb)
		}
	}
	return sb.String()
}

// migrations returns the binary's migrations.
func migrations(t *testing.T) []migrate.Migration {
	t.Helper()
	migs, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	return migs
}

// execAll runs statements on db, failing the test on an error.
func execAll(t *testing.T, db *sqlx.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
}
