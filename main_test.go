package taskd_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
)

// The examples' stores, set by TestMain when the services are configured: a
// database of their own with the schema, and a Redis key prefix.
var (
	exampleDSN       string
	exampleRedisAddr string
	examplePrefix    = "example:" + rand.Text()[:8] + ":"
)

// TestMain gives the examples a database of their own. Examples cannot skip
// themselves: without TASKD_TEST_MYSQL_DSN and TASKD_TEST_REDIS_URL only the
// tests run (the integration tests skip with a message), unless
// TASKD_TEST_REQUIRE_SERVICES=1, which makes their absence a failure.
func TestMain(m *testing.M) {
	flag.Parse()
	dsn, redisURL := os.Getenv("TASKD_TEST_MYSQL_DSN"), os.Getenv("TASKD_TEST_REDIS_URL")
	if dsn == "" || redisURL == "" {
		if os.Getenv("TASKD_TEST_REQUIRE_SERVICES") == "1" {
			fmt.Fprintln(os.Stderr, "TASKD_TEST_MYSQL_DSN and TASKD_TEST_REDIS_URL must be set (TASKD_TEST_REQUIRE_SERVICES=1)")
			os.Exit(1)
		}
		fmt.Println("examples skipped: set TASKD_TEST_MYSQL_DSN and TASKD_TEST_REDIS_URL to run them")
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = flag.Set("test.run", "^Test")
		}
		os.Exit(m.Run())
	}
	drop, err := exampleDatabase(dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "example database:", err)
		os.Exit(1)
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "TASKD_TEST_REDIS_URL:", err)
		os.Exit(1)
	}
	exampleRedisAddr = opt.Addr
	code := m.Run()
	drop()
	os.Exit(code)
}

// exampleDatabase creates a database with the schema for the examples, sets
// exampleDSN to it, and returns the function that drops it.
func exampleDatabase(serverDSN string) (drop func(), err error) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return nil, err
	}
	name := "taskd_ex_" + strings.ToLower(rand.Text()[:10])
	cfg.DBName = ""
	root, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	if _, err := root.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = root.Close()
		return nil, err
	}
	drop = func() {
		_, _ = root.ExecContext(ctx, "DROP DATABASE "+name)
		_ = root.Close()
	}
	cfg.DBName = name
	exampleDSN = cfg.FormatDSN()
	db, err := store.Open(ctx, exampleDSN)
	if err == nil {
		_, err = migrate.Up(ctx, db)
		_ = db.Close()
	}
	if err != nil {
		drop()
		return nil, err
	}
	return drop, nil
}
