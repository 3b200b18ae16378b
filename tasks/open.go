package tasks

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
)

// Pool settings applied by Open. Callers may change them on the returned handle.
const (
	MaxOpenConnsDefault    = 32
	MaxIdleConnsDefault    = 16
	ConnMaxLifetimeDefault = 3 * time.Minute
	ConnMaxIdleTimeDefault = time.Minute
)

// Open connects to MySQL or MariaDB and pings the server.
//
// Whatever the DSN says, Open forces the settings the store's correctness rests on:
//
//   - clientFoundRows=true: an UPDATE reports the rows it matched, not the rows it
//     changed. A fenced write is accepted only when it matched exactly one row, and a
//     write that changes nothing (for example a heartbeat within the same millisecond)
//     must still count as matched.
//   - parseTime=true, loc=UTC and the session time_zone '+00:00': DATETIME(3) values
//     such as lease deadlines are read and written as UTC instants, and NOW(3) is UTC,
//     so deadlines never shift with a server's local zone or its DST changes.
//   - interpolateParams=true: arguments are escaped into the statement text by the
//     driver, so each statement costs one round trip instead of prepare, execute and
//     close.
func Open(ctx context.Context, dsn string) (*sqlx.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: parse dsn: %w", err)
	}
	cfg.ClientFoundRows = true
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"

	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	db.SetMaxOpenConns(MaxOpenConnsDefault)
	db.SetMaxIdleConns(MaxIdleConnsDefault)
	db.SetConnMaxLifetime(ConnMaxLifetimeDefault)
	db.SetConnMaxIdleTime(ConnMaxIdleTimeDefault)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open database: ping: %w", err)
	}
	return db, nil
}

// Migrate applies taskd.Schema statement by statement. The schema is idempotent, so
// running Migrate again, or from several processes at once, is harmless.
func Migrate(ctx context.Context, db *sqlx.DB) error {
	for _, stmt := range splitStatements(taskd.Schema) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// splitStatements splits SQL text into statements at lines ending with ';'. Whole-line
// "--" comments are dropped, and so are chunks left with no statement. It relies on
// the rules schema.sql keeps: no procedures, triggers or DELIMITER changes, and no ';'
// at the end of a line inside a string literal.
func splitStatements(text string) []string {
	var stmts []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			stmts = append(stmts, strings.TrimSuffix(s, ";"))
		}
		cur.Reset()
	}
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			flush()
		}
	}
	flush()
	return stmts
}
