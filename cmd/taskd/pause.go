package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskd/taskd"
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
Needs MySQL and Redis.`)
	cat, e, err := a.categoryCommand(f, args)
	if err != nil {
		return err
	}
	defer stopTool(e)
	p, paused, err := e.PauseCategory(ctx, cat)
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
that is not paused changes nothing. Editors and workers long-polling for the
category are woken at once, on every taskd process that shares the Redis of
the configuration and its key prefix, as by a resume through the API (POST
/v1/admin/categories/{category}/resume). Needs MySQL and Redis.`)
	cat, e, err := a.categoryCommand(f, args)
	if err != nil {
		return err
	}
	defer stopTool(e)
	resumed, err := e.ResumeCategory(ctx, cat)
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
// and builds the engine (see toolEngine); stop it with stopTool.
func (a *app) categoryCommand(f *cmdFlags, args []string) (string, *taskd.Engine, error) {
	if err := a.parse(f, args); err != nil {
		return "", nil, err
	}
	if f.NArg() != 1 {
		return "", nil, usagef(f.name, "want one CATEGORY, got %d arguments", f.NArg())
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return "", nil, err
	}
	e, err := a.toolEngine(cfg)
	if err != nil {
		return "", nil, err
	}
	return f.Arg(0), e, nil
}

// categoryError makes a category tasks cannot have a usage error.
func categoryError(f *cmdFlags, err error) error {
	if errors.Is(err, tasks.ErrInvalid) {
		return usagef(f.name, "%v", err)
	}
	return err
}
