// Package taskstest gives integration tests a fresh MySQL database with the taskd
// schema, so that tests can run in parallel without seeing each other's rows.
//
// Tests find the server through TASKD_TEST_MYSQL_DSN (a go-sql-driver DSN whose user
// may create and drop databases). When it is unset they are skipped, unless
// TASKD_TEST_REQUIRE_SERVICES=1, in which case they fail.
package taskstest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
	"github.com/taskd/taskd/tasks/migrate"
)

// DSN returns the server DSN from TASKD_TEST_MYSQL_DSN. When the variable is unset it
// skips the test, or fails it if TASKD_TEST_REQUIRE_SERVICES=1.
func DSN(tb testing.TB) string {
	tb.Helper()
	return testenv.Lookup(tb, testenv.MySQLDSNVar)
}

// NewDatabase creates a database named taskd_t_<random>, applies the migrations with
// migrate.Up, drops the database when the test ends, and returns a DSN for it.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	dsn := NewEmptyDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := tasks.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open the test database: %v", err)
	}
	defer db.Close()
	if _, err := migrate.Up(ctx, db); err != nil {
		tb.Fatalf("migrate the test database: %v", err)
	}
	return dsn
}

// NewEmptyDatabase creates a database named taskd_t_<random> with no tables, drops it
// when the test ends, and returns a DSN for it.
func NewEmptyDatabase(tb testing.TB) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(DSN(tb))
	if err != nil {
		tb.Fatalf("parse %s: %v", testenv.MySQLDSNVar, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "taskd_t_" + hex.EncodeToString(b[:])

	admin := cfg.Clone()
	admin.DBName = ""
	connector, err := mysql.NewConnector(admin)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	func() {
		db := sql.OpenDB(connector)
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
			tb.Fatalf("create database %s: %v", name, err)
		}
	}()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db := sql.OpenDB(connector)
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})

	cfg.DBName = name
	return cfg.FormatDSN()
}

// NewDB is NewDatabase opened with tasks.Open; the handle is closed when the test ends
// (before the database is dropped).
func NewDB(tb testing.TB) *sqlx.DB {
	tb.Helper()
	dsn := NewDatabase(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := tasks.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
