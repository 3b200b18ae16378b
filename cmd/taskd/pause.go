package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// runPause pauses a category.
func runPause(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("pause", "pause [flags] CATEGORY", `
Pauses CATEGORY: from the moment the command returns, no task of it is handed
out, to editors or to workers, by any taskd process (every claim checks the
pause in MySQL itself). Claims already live finish as usual: their heartbeats,
submits and releases work. Pausing a paused category changes nothing.
'taskd resume CATEGORY' ends the pause; 'taskd status' lists paused categories.
Writes MySQL only.`)
	cat, store, done, err := a.categoryCommand(ctx, f, args)
	if err != nil {
		return err
	}
	defer done()
	p, paused, err := store.PauseCategory(ctx, cat)
	if err != nil {
		return categoryError(f, err)
	}
	if !paused {
		fmt.Fprintf(a.stdout, "category %q was already paused (since %s); nothing changed\n", cat, p.PausedAt.UTC().Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(a.stdout, "paused category %q: nothing in it is handed out until 'taskd resume'; live claims finish as usual\n", cat)
	return nil
}

// runResume ends the pause of a category.
func runResume(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("resume", "resume [flags] CATEGORY", `
Ends the pause of CATEGORY: its tasks are handed out again. Resuming a category
that is not paused changes nothing. Writes MySQL only: editors and workers
long-polling for the category see its tasks within dispatch.poll_interval (a
resume through the API, POST /v1/admin/categories/{category}/resume, wakes them
at once).`)
	cat, store, done, err := a.categoryCommand(ctx, f, args)
	if err != nil {
		return err
	}
	defer done()
	resumed, err := store.ResumeCategory(ctx, cat)
	if err != nil {
		return categoryError(f, err)
	}
	if !resumed {
		fmt.Fprintf(a.stdout, "category %q was not paused; nothing changed\n", cat)
		return nil
	}
	fmt.Fprintf(a.stdout, "resumed category %q: its tasks are handed out again\n", cat)
	return nil
}

// categoryCommand parses the flags and the one CATEGORY of pause and resume,
// and opens the store; done closes it.
func (a *app) categoryCommand(ctx context.Context, f *cmdFlags, args []string) (string, *store.Store, func(), error) {
	if err := a.parse(f, args); err != nil {
		return "", nil, nil, err
	}
	if f.NArg() != 1 {
		return "", nil, nil, usagef(f.name, "want one CATEGORY, got %d arguments", f.NArg())
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return "", nil, nil, err
	}
	db, store, err := openMySQL(ctx, cfg)
	if err != nil {
		return "", nil, nil, err
	}
	return f.Arg(0), store, func() { _ = db.Close() }, nil
}

// categoryError makes a category tasks cannot have a usage error.
func categoryError(f *cmdFlags, err error) error {
	if errors.Is(err, tasks.ErrInvalid) {
		return usagef(f.name, "%v", err)
	}
	return err
}
