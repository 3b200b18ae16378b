package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/config"
)

// storeCheckTimeout bounds connecting to MySQL.
const storeCheckTimeout = 10 * time.Second

// runMigrate applies the migrations built into the binary, or with -status shows
// where the database stands.
func runMigrate(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("migrate", "migrate [flags]", `
Brings the database of mysql.dsn up to date: applies the numbered migrations
built into the binary that it has not applied yet, in order, and records each
in the table taskd_schema_migrations. Prints one line per migration applied.
Running it again applies nothing; several processes at once take turns.

A database made before versioned migrations (taskd's tables, no version table)
is adopted: its tables are checked and recorded as migration 0001.

It refuses, changing nothing, a database migrated by a newer taskd and one
whose applied migrations differ from the binary's. If a migration fails
halfway, the statements before the failed one stay applied and the migration
is not recorded: see "Migrations" in docs/deployment.md.

With -status it changes nothing: it prints each migration, applied (when) or
pending, and whether its file matches the one applied; the exit status is 1
when the database is ahead of the binary or a migration was edited.

Needs MySQL only: Redis need not be up yet.`)
	status := f.Bool("status", false, "show the migrations, applied and pending, and change nothing")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	db, err := openMySQL(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateDB(ctx, a.stdout, db, cfg.MySQL.Server(), *status)
}

// openMySQL connects to the database of cfg for a command that needs MySQL
// alone, bounded by storeCheckTimeout; the error names the server.
func openMySQL(ctx context.Context, cfg *config.Config) (*sqlx.DB, error) {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	db, err := taskd.OpenMySQL(ctx, cfg.MySQL.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql at %s is unreachable: %w", cfg.MySQL.Server(), err)
	}
	return db, nil
}

// migrateDB applies the migrations db lacks and prints them, or with status
// only prints where it stands.
func migrateDB(ctx context.Context, out io.Writer, db *sqlx.DB, where string, status bool) error {
	if status {
		st, err := taskd.MigrationStatus(ctx, db)
		if err != nil {
			return err
		}
		printMigrateStatus(out, st, where)
		return st.Err()
	}
	applied, err := taskd.Migrate(ctx, db)
	printApplied(out, applied)
	if err != nil {
		return err
	}
	st, err := taskd.MigrationStatus(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(out, "%s is up to date at version %04d: nothing to apply\n", where, st.Version())
	} else {
		fmt.Fprintf(out, "%s is at version %04d\n", where, st.Version())
	}
	return nil
}

// printApplied prints one line per migration Up applied or adopted.
func printApplied(out io.Writer, applied []taskd.AppliedMigration) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, m := range applied {
		if m.Adopted {
			fmt.Fprintf(w, "adopted\t%04d\t%s\ttables made before versioned migrations\n", m.Version, m.Name)
		} else {
			fmt.Fprintf(w, "applied\t%04d\t%s\t%s\n", m.Version, m.Name, took(m.Took))
		}
	}
	_ = w.Flush()
}

// took rounds a migration's duration for people.
func took(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}

// printMigrateStatus prints the table of migrations and a line that sums it up.
func printMigrateStatus(out io.Writer, st *taskd.SchemaStatus, where string) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "VERSION\tNAME\tSTATE\tAPPLIED (UTC)\tCHECKSUM\n")
	for _, m := range st.Migrations {
		state, at, sum := "pending", "-", "-"
		switch {
		case m.Applied:
			state, at, sum = "applied", m.AppliedAt.Format(time.DateTime), "ok"
			if m.Edited() {
				sum = "EDITED"
			} else if !m.Known {
				sum = "unknown to this binary"
			}
		case st.Adopt && m.Version == 1:
			state = "adopt"
		}
		fmt.Fprintf(w, "%04d\t%s\t%s\t%s\t%s\n", m.Version, m.Name, state, at, sum)
	}
	_ = w.Flush()

	fmt.Fprintln(out)
	pending := len(st.Pending())
	switch {
	case st.Err() != nil:
		fmt.Fprintf(out, "%s is at version %04d: 'taskd migrate' refuses it (see below)\n", where, st.Version())
	case st.Adopt:
		fmt.Fprintf(out, "%s has tables made before versioned migrations: 'taskd migrate' adopts them as 0001", where)
		if pending > 1 {
			fmt.Fprintf(out, " and applies %d more", pending-1)
		}
		fmt.Fprintln(out)
	case pending > 0 && st.Version() == 0:
		fmt.Fprintf(out, "%s has no migration applied, %d pending: run 'taskd migrate'\n", where, pending)
	case pending > 0:
		fmt.Fprintf(out, "%s is at version %04d, %d pending: run 'taskd migrate'\n", where, st.Version(), pending)
	default:
		fmt.Fprintf(out, "%s is up to date at version %04d\n", where, st.Version())
	}
}
