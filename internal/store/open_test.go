package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
)

func TestOpenForcesSettings(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	// Ask for the opposite of every setting the store needs.
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := store.Open(t.Context(), dsn+sep+"clientFoundRows=false&parseTime=false&loc=Local&time_zone=%27%2B05%3A00%27&group_concat_max_len=64")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var tz string
	if err := db.GetContext(t.Context(), &tz, `SELECT @@session.time_zone`); err != nil {
		t.Fatal(err)
	}
	if tz != "+00:00" {
		t.Errorf("session time_zone = %q, want +00:00", tz)
	}

	// group_concat_max_len: the cycles' lists of ids are not cut short.
	var concatLen int64
	if err := db.GetContext(t.Context(), &concatLen, `SELECT @@session.group_concat_max_len`); err != nil {
		t.Fatal(err)
	}
	if concatLen != 1<<20 {
		t.Errorf("session group_concat_max_len = %d, want %d", concatLen, 1<<20)
	}

	// parseTime: DATETIME scans into time.Time, in UTC.
	var now time.Time
	if err := db.GetContext(t.Context(), &now, `SELECT NOW(3)`); err != nil {
		t.Fatalf("scan DATETIME into time.Time: %v", err)
	}
	if now.Location() != time.UTC {
		t.Errorf("time location = %v, want UTC", now.Location())
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Errorf("NOW(3) = %v is %v away from the local clock: session is not UTC", now, d)
	}

	// clientFoundRows: an UPDATE that changes nothing still reports its matched row.
	if _, err := db.ExecContext(t.Context(), `INSERT INTO tasks (category, title, payload) VALUES ('c', 't', '{}')`); err != nil {
		t.Fatal(err)
	}
	res, err := db.ExecContext(t.Context(), `UPDATE tasks SET title = 't' WHERE category = 'c'`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("no-op UPDATE reported %d rows, want 1 matched row", n)
	}
}

func TestConnectionsReadCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	// Every pooled connection, not only the first: hold several at once.
	conns := make([]*sqlx.Conn, 3)
	for i := range conns {
		c, err := b.db.Connx(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		var level string
		err := c.GetContext(b.ctx, &level, "SELECT @@SESSION.tx_isolation") // MariaDB
		if err != nil {
			err = c.GetContext(b.ctx, &level, "SELECT @@SESSION.transaction_isolation") // MySQL 8
		}
		if err != nil {
			t.Fatal(err)
		}
		if level != "READ-COMMITTED" {
			t.Errorf("connection %d: isolation %s, want READ-COMMITTED", i, level)
		}
	}
}

func TestSchemaKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	// No unique key on tasks but the primary key and tasks_key_held: a unique
	// secondary index takes next-key locks on its duplicate checks, which deadlock
	// concurrent claims when claims write its column. Only inserts and requeues
	// make key_held non-NULL (a duplicate check); ending a task may make it NULL,
	// which checks nothing.
	var unique []string
	if err := b.db.SelectContext(b.ctx, &unique, `SELECT DISTINCT index_name FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'tasks' AND non_unique = 0 AND index_name <> 'PRIMARY'`); err != nil {
		t.Fatal(err)
	}
	if len(unique) != 1 || unique[0] != "tasks_key_held" {
		t.Errorf("unique keys on tasks besides the primary key: %v, want [tasks_key_held]", unique)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE()
		AND table_name = 'tasks' AND index_name = 'tasks_editor' AND column_name = 'editor_id'`); n != 1 {
		t.Error("tasks.editor_id has no index")
	}
	var cols []struct {
		Column string `db:"column_name"`
		Seq    int    `db:"seq_in_index"`
		Coll   string `db:"collation"`
	}
	if err := b.db.SelectContext(b.ctx, &cols, `SELECT column_name AS column_name, seq_in_index AS seq_in_index,
		COALESCE(collation, '') AS collation
		FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'tasks'
		AND index_name = 'tasks_candidate' ORDER BY seq_in_index`); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cols {
		got = append(got, c.Column+" "+c.Coll)
	}
	want := []string{"pool_status A", "category A", "priority D", "due_order A", "id A"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("tasks_candidate = %v, want %v", got, want)
	}
}
