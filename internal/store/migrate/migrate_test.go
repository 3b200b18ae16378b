package migrate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

// frozenChecksums are the SHA-256 checksums of the migrations as released. An applied
// migration never changes: databases recorded these checksums, and Up refuses a
// database whose checksum differs from the binary's. A new migration adds its line.
var frozenChecksums = map[int]string{
	1:  "763eefd88b186d862e1a71d190718a7de0ebefb5b95c63e7265a0ec103451116",
	2:  "0b667f1c175e84c05e11014075a695e17dd6b390a13c8614dfb7ee0fccf8de60",
	3:  "21c4915b43900332c3647010377b9ebe7dd47048ac065a14359edb4b1ffc55bb",
	4:  "4e19bf335a155fda0629adab46a587599c34b413bfd34e87e169dc9c60cf78ba",
	5:  "aa8e350a3e37a9124dd384709b1577cc28847e4d6ab77d91ed2ec2f94a640c71",
	6:  "55e8b6225b6bd8df895d2fc64134e991cc55e7e548a342d163104dcbcb508fa4",
	7:  "b5f6d3740b1df937752a8d54b4186aa0d4671dea9ec1102aada76d76790c419f",
	8:  "371eec0ed49c77f71ac673a626a72aee28d95d2d66fdddcbeb6bad32a0d80ab2",
	9:  "1694de0c299ef0e808fd8a7b4cb8d6612acbacd5ad2525d0aaff31c682b62169",
	10: "f0ad626b56b05f89173bb6204231bdd2dadfa2be4c709d155b2feb41c3b407ec",
	11: "51821b586581245e058b1a61d4fbbd019dbf8ce740b462c9b4ca4f02b0f30457",
	12: "51ec05349477e80567cba375ed8ce2382ceea76b6e1a413a5f341ac6ba6e6486",
	13: "71cf00c17a96c4cdd1e12f0b859435a18d2df73c0b0411b84093adfa34fb312b",
	14: "4c750c7e212eb6293de3b7e5d24cf621178cbc018c58a649df594de5568de36b",
	15: "3da90da62ae05e34c922f00a7f82d738b82bf042ee9b80e38fdb2de5c543a5f8",
	16: "10753f752b273263a43cedf7be85bf8e7326667183faf463f779657d87d51bb7",
	17: "d20b7add6228368aef4442febb5e2e27b94175e3528d327b06c289c2804a5960",
	18: "70bc3a4b1801b2e94ce84c06f0541deced8879ca5e6d13b5ba659f99f5744165",
	19: "16f1b6f7308e27df19db837b12e4dde0fecc5169f3f40f38fb05375ecc334bec",
	20: "4d0d1b469abba841bf848e03433eec261bc8a7bf77a06e6daa71cf5c8510d29d",
	21: "4aa2a1625f98043ee39ff3d061d12b09d7b54b0e3db7b0ce1aefcfe0608e86bb",
	22: "691ff403ec9bce72de1462033b436d0d5869f8e55f736577cf8adf8acb7eec16",
	23: "6d6ac49685067f76ffffe36ee0dcc2028eabb5c7469af61867eae745d18b18b0",
	24: "9e9e2a0d8ca1b96e2d8144378e0f0be353afe2c4af4d737c7e7f51b943e15f02",
	25: "b77845c46746865c87b0e545bb15ed5b47c610eab7372ceb64236dcf2cc22b20",
}

func TestMigrationsNeverChange(t *testing.T) {
	migs := migrations(t)
	for _, m := range migs {
		want, ok := frozenChecksums[m.Version]
		switch {
		case !ok:
			t.Errorf("migration %s is new: add %d: %q to frozenChecksums", m.ID(), m.Version, m.Checksum)
		case m.Checksum != want:
			t.Errorf("migration %s changed (checksum %s, released as %s): databases that applied it will refuse "+
				"this binary. Restore the file and put the change in a new migration.", m.ID(), m.Checksum, want)
		}
	}
	if len(frozenChecksums) != len(migs) {
		t.Errorf("%d frozen checksums for %d migrations: a migration was removed", len(frozenChecksums), len(migs))
	}
}

func TestMigrationsEmbedded(t *testing.T) {
	migs := migrations(t)
	want := []string{"0001 initial", "0002 tasks_editor_not_unique", "0003 task_keys_due_and_lists"}
	if len(migs) < len(want) {
		t.Fatalf("%d migrations, want at least %d", len(migs), len(want))
	}
	for i, m := range migs {
		if m.Version != i+1 {
			t.Errorf("migration %d has version %d", i, m.Version)
		}
		if i < len(want) && m.ID() != want[i] {
			t.Errorf("migration %d is %s, want %s", i+1, m.ID(), want[i])
		}
		sum := sha256.Sum256([]byte(m.SQL))
		if m.Checksum != hex.EncodeToString(sum[:]) {
			t.Errorf("migration %s: checksum %s is not the SHA-256 of its file", m.ID(), m.Checksum)
		}
	}
	// 0001 is the schema from before versioned migrations, with its UNIQUE key; 0002 is
	// the change to a plain key.
	if !strings.Contains(migs[0].SQL, "  UNIQUE KEY tasks_editor (editor_id)\n") {
		t.Error("0001 has no UNIQUE KEY tasks_editor")
	}
	if got := migrate.SplitStatements(migs[1].SQL); len(got) != 1 || !strings.HasPrefix(got[0], "ALTER TABLE tasks DROP INDEX tasks_editor, ADD KEY tasks_editor (editor_id)") {
		t.Errorf("0002's statements = %q", got)
	}
}

func TestParseMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	good := fstest.MapFS{
		"m/0001_first.sql":  file("-- one\nCREATE TABLE a (x INT);\n"),
		"m/0002_second.sql": file("ALTER TABLE a ADD y INT;\nALTER TABLE a ADD z INT;\n"),
	}
	migs, err := migrate.Parse(good, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) != 2 || migs[0].ID() != "0001 first" || migs[1].ID() != "0002 second" {
		t.Fatalf("migrations = %+v", migs)
	}
	sum := sha256.Sum256([]byte("-- one\nCREATE TABLE a (x INT);\n"))
	if migs[0].Checksum != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum %s, want the file's SHA-256", migs[0].Checksum)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"should be number 0002": {"m/0001_a.sql": file("SELECT 1;\n"), "m/0003_c.sql": file("SELECT 1;\n")},
		"should be number 0001": {"m/0002_b.sql": file("SELECT 1;\n")},
		"is not named":          {"m/0001_a.sql": file("SELECT 1;\n"), "m/0002-b.sql": file("SELECT 1;\n")},
		"has no statement":      {"m/0001_a.sql": file("-- nothing\n")},
		"none in m":             {"m": &fstest.MapFile{Mode: fs.ModeDir}},
	} {
		_, err := migrate.Parse(fsys, "m")
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v, want one saying %q", fsys, err, name)
		}
	}
}

func TestMigrateFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	applied, err := migrate.Up(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	migs := migrations(t)
	if len(applied) != len(migs) {
		t.Fatalf("applied %d migrations, want all %d", len(applied), len(migs))
	}
	for i, a := range applied {
		if a.Version != migs[i].Version || a.Adopted {
			t.Errorf("applied #%d = %s adopted=%v, want %s applied", i, a.ID(), a.Adopted, migs[i].ID())
		}
	}
	recorded := versions(t, db)
	if len(recorded) != len(migs) {
		t.Fatalf("version table has %d rows, want %d", len(recorded), len(migs))
	}
	for i, m := range migs {
		if r := recorded[i]; r.Version != m.Version || r.Name != m.Name || r.Checksum != m.Checksum {
			t.Errorf("recorded %+v, want %s with checksum %s", r, m.ID(), m.Checksum)
		}
	}
}

func TestMigrateAgainIsNoop(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := storetest.NewDB(t) // migrated by Up
	execAll(t, db, `INSERT INTO tasks (id, category, title, payload) VALUES (1, 'news', 'kept', '{"a":1}')`)
	before := versions(t, db)
	for range 2 {
		applied, err := migrate.Up(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != 0 {
			t.Errorf("migrate on an up-to-date database applied %v", applied)
		}
	}
	if after := versions(t, db); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("version table changed:\n%v\n%v", before, after)
	}
	var row string
	if err := db.GetContext(ctx, &row, `SELECT CONCAT_WS(' ', id, category, title, payload, status) FROM tasks`); err != nil {
		t.Fatal(err)
	}
	if want := `1 news kept {"a":1} pending`; row != want {
		t.Errorf("task after migrate = %q, want %q", row, want)
	}
}

func TestMigrateAdoptsPreVersioningDatabase(t *testing.T) {
	t.Parallel()
	for name, schema := range map[string]string{
		// What schema.sql made before versioned migrations, with the UNIQUE key.
		"0001": migrations(t)[0].SQL,
		// What it made between 0002's change and versioned migrations.
		"schema.sql": migrations(t)[0].SQL + "\n" + migrations(t)[1].SQL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := openEmpty(t)
			execAll(t, db, migrate.SplitStatements(schema)...)
			execAll(t, db,
				`INSERT INTO editors (id, name, token_hash) VALUES (7, 'ada', REPEAT('h', 32))`,
				`INSERT INTO editor_categories (editor_id, category) VALUES (7, 'news')`,
				`INSERT INTO tasks (id, category, title, payload, status, fence, holder, editor_id)
					VALUES (1, 'news', 'held', '{"a":1}', 'assigned', 3, 'editor:7', 7), (2, 'news', 'free', '{}', 'pending', 0, NULL, NULL)`)

			st, err := migrate.ReadStatus(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Adopt || st.Version() != 0 || len(st.Pending()) != len(migrations(t)) || st.Err() != nil {
				t.Errorf("status before: adopt %v, version %d, %d pending, err %v; want adopt, 0, all, nil",
					st.Adopt, st.Version(), len(st.Pending()), st.Err())
			}

			applied, err := migrate.Up(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range applied {
				got = append(got, fmt.Sprintf("%s adopted=%v", a.ID(), a.Adopted))
			}
			// 0001 is adopted, every later migration applied.
			want := []string{"0001 initial adopted=true"}
			for _, m := range migrations(t)[1:] {
				want = append(want, m.ID()+" adopted=false")
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("applied %v, want %v", got, want)
			}
			if len(versions(t, db)) != len(migrations(t)) {
				t.Errorf("version table: %v", versions(t, db))
			}
			var rows []string
			if err := db.SelectContext(ctx, &rows, `SELECT CONCAT_WS(' ', id, title, payload, status, fence, holder, editor_id)
				FROM tasks ORDER BY id`); err != nil {
				t.Fatal(err)
			}
			if want := `[1 held {"a":1} assigned 3 editor:7 7 2 free {} pending 0]`; fmt.Sprint(rows) != want {
				t.Errorf("tasks after adoption: %q, want %s", rows, want)
			}
			if n := count(t, db, `SELECT COUNT(*) FROM editor_categories WHERE editor_id = 7`); n != 1 {
				t.Errorf("%d categories of editor 7 after adoption, want 1", n)
			}
			reference := openEmpty(t)
			execAll(t, reference, migrate.SplitStatements(taskd.Schema)...)
			if diff := schemaDiff(readSchema(t, reference), readSchema(t, db)); diff != "" {
				t.Errorf("adopted database is not schema.sql's schema (- schema.sql, + adopted):\n%s", diff)
			}
		})
	}
}

func TestMigrateRefusesUnrecognizedTables(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	// Migration 0001's tables, but one of them lacks a column.
	execAll(t, db, migrate.SplitStatements(migrations(t)[0].SQL)...)
	execAll(t, db, `ALTER TABLE tasks DROP COLUMN trace_context`)
	_, err := migrate.Up(ctx, db)
	if !errors.Is(err, migrate.ErrSchemaUnrecognized) || !strings.Contains(err.Error(), "table tasks has no column trace_context") {
		t.Errorf("migrate = %v, want ErrSchemaUnrecognized naming tasks.trace_context", err)
	}
	if _, err := migrate.ReadStatus(ctx, db); !errors.Is(err, migrate.ErrSchemaUnrecognized) {
		t.Errorf("status = %v, want ErrSchemaUnrecognized", err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`,
		migrate.VersionTable); n != 0 {
		t.Error("the refused migrate created the version table")
	}
}

// migratedTo0001 returns a database with only migration 0001 applied, as a binary that
// knew only 0001 would leave it: 0002 is pending for this binary.
func migratedTo0001(t *testing.T) *sqlx.DB {
	t.Helper()
	db := openEmpty(t)
	if _, err := migrate.UpWith(t.Context(), db, migrations(t)[:1]); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestMigrateRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := migratedTo0001(t)
	next := len(migrations(t)) + 1
	execAll(t, db, fmt.Sprintf(`INSERT INTO %s (version, name, checksum, applied_at)
		VALUES (%d, 'from_the_future', REPEAT('f', 64), UTC_TIMESTAMP(3))`, migrate.VersionTable, next))
	before := versions(t, db)

	_, err := migrate.Up(ctx, db)
	if !errors.Is(err, migrate.ErrSchemaAhead) || !strings.Contains(err.Error(), fmt.Sprintf("%04d from_the_future", next)) {
		t.Fatalf("migrate = %v, want ErrSchemaAhead naming %04d", err, next)
	}
	assertUnchanged(t, db, before)

	st, err := migrate.ReadStatus(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(st.Err(), migrate.ErrSchemaAhead) || st.Version() != next {
		t.Errorf("status: version %d, err %v; want %d and ErrSchemaAhead", st.Version(), st.Err(), next)
	}
}

func TestMigrateRefusesEditedMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := migratedTo0001(t)
	execAll(t, db, `UPDATE `+migrate.VersionTable+` SET checksum = REPEAT('e', 64) WHERE version = 1`)
	before := versions(t, db)

	_, err := migrate.Up(ctx, db)
	if !errors.Is(err, migrate.ErrSchemaEdited) || !strings.Contains(err.Error(), "migration 0001 was edited after it was applied") {
		t.Fatalf("migrate = %v, want ErrSchemaEdited saying 0001 was edited", err)
	}
	assertUnchanged(t, db, before)

	st, err := migrate.ReadStatus(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(st.Err(), migrate.ErrSchemaEdited) || !st.Migrations[0].Edited() || st.Migrations[1].Edited() {
		t.Errorf("status: err %v, edited %v %v; want ErrSchemaEdited, 0001 edited only",
			st.Err(), st.Migrations[0].Edited(), st.Migrations[1].Edited())
	}
}

// assertUnchanged checks that a refused Up left a database made by migratedTo0001
// as it was: the same versions recorded, and 0002 not applied.
func assertUnchanged(t *testing.T, db *sqlx.DB, before []version) {
	t.Helper()
	if after := versions(t, db); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("version table changed:\n%v\n%v", before, after)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE()
		AND table_name = 'tasks' AND index_name = 'tasks_editor' AND non_unique = 0`); n != 1 {
		t.Error("tasks_editor is no longer unique: the refused migrate applied 0002")
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := storetest.NewEmptyDatabase(t)
	const procs = 4
	dbs := make([]*sqlx.DB, procs)
	for i := range dbs {
		db, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
	}
	var wg sync.WaitGroup
	results := make([][]migrate.Applied, procs)
	errs := make([]error, procs)
	start := make(chan struct{})
	for i, db := range dbs {
		wg.Go(func() {
			<-start
			results[i], errs[i] = migrate.Up(ctx, db)
		})
	}
	close(start)
	wg.Wait()

	times := map[int]int{}
	for i := range procs {
		if errs[i] != nil {
			t.Errorf("migrate #%d: %v", i, errs[i])
		}
		for _, a := range results[i] {
			times[a.Version]++
		}
	}
	for _, m := range migrations(t) {
		if times[m.Version] != 1 {
			t.Errorf("migration %s applied %d times, want once", m.ID(), times[m.Version])
		}
	}
	if got := len(versions(t, dbs[0])); got != len(migrations(t)) {
		t.Errorf("version table has %d rows, want %d", got, len(migrations(t)))
	}
}

func TestMigrateWaitsForTheLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	var dbName string
	if err := db.GetContext(ctx, &dbName, `SELECT DATABASE()`); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock := migrate.LockName(dbName)
	var got int
	if err := holder.GetContext(ctx, &got, `SELECT GET_LOCK(?, 5)`, lock); err != nil || got != 1 {
		t.Fatalf("take %s: %v %d", lock, err, got)
	}

	done := make(chan error, 1)
	go func() {
		_, err := migrate.Up(ctx, db)
		done <- err
	}()
	// Wait until Up waits for the lock, then check that it did nothing yet.
	testenv.Eventually(t, 10*time.Second, "migrate asks for the lock", func() bool {
		select {
		case err := <-done:
			t.Fatalf("migrate ended without waiting for the lock another session held: %v", err)
		default:
		}
		return count(t, db, `SELECT COUNT(*) FROM information_schema.processlist
			WHERE id <> CONNECTION_ID() AND info LIKE 'SELECT GET_LOCK(%' AND info LIKE CONCAT('%', ?, '%')`, lock) > 0
	})
	select {
	case err := <-done:
		t.Fatalf("migrate ended while another session held the lock: %v", err)
	default:
	}
	if n := count(t, db, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()`); n != 0 {
		t.Errorf("%d tables while another session held the lock, want 0", n)
	}
	if _, err := holder.ExecContext(ctx, `DO RELEASE_LOCK(?)`, lock); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(versions(t, db)); got != len(migrations(t)) {
		t.Errorf("after the lock was released: %d versions, want %d", got, len(migrations(t)))
	}
}

func TestMigrateFailsHalfway(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	broken := migrate.Migration{Version: len(migrations(t)) + 1, Name: "broken", Checksum: strings.Repeat("b", 64),
		SQL: "CREATE TABLE half (x INT);\nALTER TABLE no_such_table ADD y INT;\n"}
	migs := append(migrations(t), broken)

	applied, err := migrate.UpWith(ctx, db, migs)
	var merr *migrate.Error
	if !errors.As(err, &merr) || merr.Migration.Version != broken.Version || merr.Statement != 2 {
		t.Fatalf("migrate = %v, want a migrate.Error at statement 2 of %s", err, broken.ID())
	}
	for _, want := range []string{
		fmt.Sprintf("migration %s, statement 2 of 2 failed", broken.ID()),
		"statement: ALTER TABLE no_such_table ADD y INT",
		"statement 1 was applied",
		"is not recorded as applied",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(applied) != len(migs)-1 {
		t.Errorf("applied %d before the failure, want %d", len(applied), len(migs)-1)
	}
	if got := len(versions(t, db)); got != len(migs)-1 {
		t.Errorf("%d versions recorded, want %d: the failed one is not", got, len(migs)-1)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'half'`); n != 1 {
		t.Error("the statement before the failed one was not applied")
	}

	// Run again as it is: its first statement now fails, and the error says which.
	_, err = migrate.UpWith(ctx, db, migs)
	if !errors.As(err, &merr) || merr.Statement != 1 || !strings.Contains(err.Error(), "no statement of it was applied by this run") {
		t.Errorf("re-run = %v, want a migrate.Error at statement 1", err)
	}
}

// TestMigrateRerunsHalfApplied re-runs the real migrations 0001 and 0002 after they
// stopped halfway: 0002 applied but not recorded, and 0001 with some tables created
// and not recorded. (Later migrations say in their header whether they can run
// again.)
func TestMigrateRerunsHalfApplied(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	migs := migrations(t)[:2]
	db := openEmpty(t)
	if _, err := migrate.UpWith(ctx, db, migs); err != nil {
		t.Fatal(err)
	}
	execAll(t, db, `DELETE FROM `+migrate.VersionTable+` WHERE version = 2`)
	if applied, err := migrate.UpWith(ctx, db, migs); err != nil || len(applied) != 1 || applied[0].Version != 2 {
		t.Fatalf("re-run of 0002: applied %v, err %v", applied, err)
	}

	execAll(t, db, `DROP TABLE task_skips`, `DROP TABLE task_results`, `DELETE FROM `+migrate.VersionTable)
	if applied, err := migrate.UpWith(ctx, db, migs); err != nil || len(applied) != len(migs) || applied[0].Adopted {
		t.Fatalf("re-run of 0001: applied %v, err %v", applied, err)
	}
	reference := openEmpty(t)
	if _, err := migrate.UpWith(ctx, reference, migs); err != nil {
		t.Fatal(err)
	}
	if diff := schemaDiff(readSchema(t, reference), readSchema(t, db)); diff != "" {
		t.Errorf("after the re-runs (- 0001 and 0002 in one go, + database):\n%s", diff)
	}
}

func TestMigrateStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	st, err := migrate.ReadStatus(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	migs := migrations(t)
	if st.Version() != 0 || len(st.Pending()) != len(migs) || st.Adopt || st.Err() != nil {
		t.Errorf("empty database: version %d, %d pending, adopt %v, err %v", st.Version(), len(st.Pending()), st.Adopt, st.Err())
	}
	if n := count(t, db, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()`); n != 0 {
		t.Errorf("status created %d tables", n)
	}

	if _, err := migrate.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := db.GetContext(ctx, &now, `SELECT UTC_TIMESTAMP(3)`); err != nil {
		t.Fatal(err)
	}
	if st, err = migrate.ReadStatus(ctx, db); err != nil {
		t.Fatal(err)
	}
	if st.Version() != len(migs) || len(st.Pending()) != 0 || st.Err() != nil || len(st.Migrations) != len(migs) {
		t.Errorf("migrated database: version %d, %d pending, err %v", st.Version(), len(st.Pending()), st.Err())
	}
	for _, m := range st.Migrations {
		if !m.Applied || !m.Known || m.Edited() || m.AppliedChecksum != m.Checksum {
			t.Errorf("%s: %+v", m.ID(), m)
		}
		if d := now.Sub(m.AppliedAt); d < 0 || d > time.Minute || m.AppliedAt.Location() != time.UTC {
			t.Errorf("%s applied at %v, database clock now %v", m.ID(), m.AppliedAt, now)
		}
	}
}

// version is a row of the version table.
type version struct {
	Version  int    `db:"version"`
	Name     string `db:"name"`
	Checksum string `db:"checksum"`
	At       string `db:"applied_at"`
}

// versions reads the version table.
func versions(t *testing.T, db *sqlx.DB) []version {
	t.Helper()
	var vs []version
	if err := db.SelectContext(t.Context(), &vs, `SELECT version, name, checksum, CAST(applied_at AS CHAR) AS applied_at
		FROM `+migrate.VersionTable+` ORDER BY version`); err != nil {
		t.Fatal(err)
	}
	return vs
}

// count runs a query that returns one number.
func count(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(context.WithoutCancel(t.Context()), &n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}
