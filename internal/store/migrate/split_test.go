package migrate_test

import (
	"strings"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/migrate"
)

func TestSplitStatements(t *testing.T) {
	text := "-- header;\n-- more\n\nCREATE TABLE a (\n  x INT -- trailing\n);\n\n-- between\nCREATE TABLE b (y INT);\n-- tail;\n"
	got := migrate.SplitStatements(text)
	want := []string{"CREATE TABLE a (\n  x INT -- trailing\n)", "CREATE TABLE b (y INT)"}
	if len(got) != len(want) {
		t.Fatalf("got %d statements %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("statement %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestSplitSchema(t *testing.T) {
	stmts := migrate.SplitStatements(taskd.Schema)
	if len(stmts) != 21 {
		t.Fatalf("schema has %d statements, want 21 (one per table)", len(stmts))
	}
	for i, s := range stmts {
		if !strings.HasPrefix(s, "CREATE TABLE IF NOT EXISTS ") {
			t.Errorf("statement %d is not an idempotent CREATE TABLE: %.60q", i, s)
		}
		if strings.Contains(s, ";") {
			t.Errorf("statement %d contains a ';': %.60q", i, s)
		}
	}
}
