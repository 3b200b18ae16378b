package migrate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
)

// LockLease is how long a migration's lock on a Galera cluster holds without
// being released: a migrator that died with it leaves the database to the next
// one after it.
const LockLease = 15 * time.Minute

// lockTable holds the migration locks of a Galera cluster, a row per database.
const lockTable = "taskd_schema_lock"

const (
	createLockTableSQL = `CREATE TABLE IF NOT EXISTS ` + lockTable + ` (
  name       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  holder     VARCHAR(255) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci`
	// takeLockSQL takes the row when it is free or its lease passed; the
	// assignments read expires_at before it is set (left to right).
	takeLockSQL = `INSERT INTO ` + lockTable + ` (name, holder, expires_at) VALUES (?, ?, NOW(3) + INTERVAL ? SECOND)
ON DUPLICATE KEY UPDATE holder = IF(expires_at < NOW(3), VALUES(holder), holder),
	expires_at = IF(expires_at < NOW(3), VALUES(expires_at), expires_at)`
	readLockSQL    = `SELECT holder, expires_at FROM ` + lockTable + ` WHERE name = ?`
	releaseLockSQL = `DELETE FROM ` + lockTable + ` WHERE name = ? AND holder = ?`
)

// erUnknownSystemVariable is MySQL's answer to @@wsrep_on.
const erUnknownSystemVariable = 1193

// onGalera reports whether conn's server is a node of a Galera cluster.
func onGalera(ctx context.Context, conn *sql.Conn) (bool, error) {
	var on sql.NullString
	err := conn.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == erUnknownSystemVariable:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read wsrep_on: %w", err)
	}
	return on.String == "1", nil
}

// lockMigrationsRow takes the migration lock of dbName on a Galera cluster: a
// row of lockTable, which every node sees, written so that certification orders
// two takers on two nodes (GET_LOCK holds on its own node only). It waits up to
// LockTimeout for a holder to release it, or for its lease to pass, then fails
// with ErrLocked naming the holder.
func lockMigrationsRow(ctx context.Context, conn *sql.Conn, dbName string) (unlock func() error, err error) {
	name := migrateLockName(dbName)
	if _, err := conn.ExecContext(ctx, createLockTableSQL); err != nil {
		return nil, fmt.Errorf("create %s: %w", lockTable, err)
	}
	holder := lockHolder()
	deadline := time.Now().Add(LockTimeout)
	var held string
	var until time.Time
	for {
		_, err := conn.ExecContext(ctx, takeLockSQL, name, holder, int(LockLease/time.Second))
		var me *mysql.MySQLError
		if err != nil && !(errors.As(err, &me) && me.Number == 1213) {
			return nil, fmt.Errorf("take lock %s: %w", name, err)
		}
		if err == nil {
			err := conn.QueryRowContext(ctx, readLockSQL, name).Scan(&held, &until)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				// Released by its holder since the INSERT found it: take it
				// again below.
				held = ""
			case err != nil:
				return nil, fmt.Errorf("read lock %s: %w", name, err)
			case held == holder:
				return releaseRow(ctx, conn, name, holder), nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: lock %s held by %s until %s (after %v)", ErrLocked, name, held, until.UTC().Format(time.RFC3339), LockTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take lock %s: %w", name, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// releaseRow returns the release of the lock row name that holder took.
func releaseRow(ctx context.Context, conn *sql.Conn, name, holder string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, releaseLockSQL, name, holder); err != nil {
			return fmt.Errorf("release lock %s: %w", name, err)
		}
		return nil
	}
}

// lockHolder names this migrator in the lock's row: host, process and a random
// part, so that two migrators never take each other's lock for their own.
func lockHolder() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s pid %d %s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
