package main

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/tasks"
)

// runMigrate applies the migrations embedded in the binary.
func runMigrate(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("migrate", "migrate [flags]", `
Creates or updates the tables taskd needs in the database of mysql.dsn: applies
the numbered migrations built into the binary that it has not applied yet.
Running it again, or from several processes at once, is harmless.`)
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
	db, _, err := openMySQL(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := tasks.Migrate(ctx, db); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "schema applied to %s\n", mysqlAddr(cfg.MySQL.DSN))
	return nil
}
