package roundtrip

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
)

func TestCountStatements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query               string
		statements, commits int
	}{
		{"SELECT 1", 1, 0},
		{"SELECT 1;", 1, 0},
		{" ; ;", 0, 0},
		{"START TRANSACTION;\nUPDATE t SET a = ';' WHERE b = \"x;y\";\nCOMMIT", 3, 1},
		{"INSERT INTO t VALUES ('it\\'s; fine'); commit;", 2, 1},
		{"SELECT `a;b` FROM t; SELECT 2", 2, 0},
		{"-- one; two\nSELECT 1; /* ; COMMIT; */ SELECT 2 # three; four\n", 2, 0},
		{"SELECT committed FROM t; COMMIT", 2, 1},
		{"UPDATE t SET x = 1; COMMIT; START TRANSACTION; UPDATE t SET x = 2; COMMIT", 5, 2},
	} {
		s, c := countStatements(tc.query)
		if s != tc.statements || c != tc.commits {
			t.Errorf("countStatements(%q) = %d statements, %d commits; want %d, %d", tc.query, s, c, tc.statements, tc.commits)
		}
	}
}

// sessionQuestions reads the session's Questions counter (statements the
// server ran for this connection, including this one) on conn.
func sessionQuestions(t *testing.T, ctx context.Context, conn *sqlx.Conn) int64 {
	t.Helper()
	var row struct {
		Name  string `db:"Variable_name"`
		Value string `db:"Value"`
	}
	if err := conn.GetContext(ctx, &row, "SHOW SESSION STATUS LIKE 'Questions'"); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(row.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCountingConnector sends known requests over one connection and checks
// the counts against what was sent, and the statements against the server's
// own count for the session.
func TestCountingConnector(t *testing.T) {
	t.Parallel()
	dsn := testenv.Lookup(t, testenv.MySQLDSNVar)
	ctx := context.Background()
	db, cc, err := OpenMySQL(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE roundtrip_count (id INT PRIMARY KEY, v VARCHAR(20))"); err != nil {
		t.Fatal(err)
	}
	step := func(name string, want Counts, do func() error) {
		t.Helper()
		q0 := sessionQuestions(t, ctx, conn)
		c0 := cc.Counts()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := cc.Counts().Sub(c0) // the SHOWs are before c0 and after this
		if got != want {
			t.Errorf("%s: counted %+v, want %+v", name, got, want)
		}
		// Questions counts the statements run, the second SHOW included.
		if q := sessionQuestions(t, ctx, conn) - q0 - 1; q != want.Statements {
			t.Errorf("%s: the server ran %d statements, counted %d", name, q, want.Statements)
		}
	}
	step("exec with arguments, interpolated", Counts{1, 1, 0}, func() error {
		_, err := conn.ExecContext(ctx, "INSERT INTO roundtrip_count VALUES (?, ?)", 1, "a;b")
		return err
	})
	step("query", Counts{1, 1, 0}, func() error {
		var n int
		return conn.GetContext(ctx, &n, "SELECT COUNT(*) FROM roundtrip_count WHERE id > ?", 0)
	})
	step("batch", Counts{1, 4, 1}, func() error {
		_, err := conn.ExecContext(ctx, "START TRANSACTION; INSERT INTO roundtrip_count VALUES (2, 'x'); UPDATE roundtrip_count SET v = 'y;' WHERE id = 2; COMMIT")
		return err
	})
	step("transaction committed", Counts{3, 3, 1}, func() error {
		tx, err := conn.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE roundtrip_count SET v = ? WHERE id = ?", "z", 1); err != nil {
			return err
		}
		return tx.Commit()
	})
	step("transaction rolled back", Counts{3, 3, 0}, func() error {
		tx, err := conn.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM roundtrip_count"); err != nil {
			return err
		}
		return tx.Rollback()
	})

	// A prepared statement: the prepare and each execution are round trips
	// (Questions does not count prepares, so only the counts are checked).
	c0 := cc.Counts()
	st, err := conn.PrepareContext(ctx, "SELECT v FROM roundtrip_count WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var v string
		if err := st.QueryRowContext(ctx, 1).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.Close()
	if got := cc.Counts().Sub(c0); got != (Counts{RoundTrips: 3, Statements: 2}) {
		t.Errorf("prepare and two executions: counted %+v, want 3 round trips, 2 statements", got)
	}
}

// TestRedisCounter checks that a command alone, a pipeline, a MULTI/EXEC
// transaction and a script each count one round trip.
func TestRedisCounter(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(testenv.Lookup(t, testenv.RedisURLVar))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil { // the connection's setup happens before counting
		t.Fatal(err)
	}
	h := &RedisHook{}
	rdb.AddHook(h)
	key := "roundtrip:test:" + strings.ReplaceAll(t.Name(), "/", ":")
	defer rdb.Del(ctx, key)
	step := func(name string, want int64, do func() error) {
		t.Helper()
		n0 := h.RoundTrips()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := h.RoundTrips() - n0; got != want {
			t.Errorf("%s: %d round trips, want %d", name, got, want)
		}
	}
	step("set", 1, func() error { return rdb.Set(ctx, key, "1", 0).Err() })
	step("pipeline of 3", 1, func() error {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, key)
			p.Incr(ctx, key)
			p.Get(ctx, key)
			return nil
		})
		return err
	})
	step("transaction", 1, func() error {
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, key)
			p.Get(ctx, key)
			return nil
		})
		return err
	})
	step("eval", 1, func() error { return rdb.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{key}).Err() })
	if v, err := rdb.Get(ctx, key).Int(); err != nil || v != 4 {
		t.Errorf("key = %d (%v), want 4: the counted commands did not all run", v, err)
	}
}
