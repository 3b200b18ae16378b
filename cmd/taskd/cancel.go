package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/taskd/taskd/tasks"
)

// runCancel cancels a task, pending or running, or the tasks of a filter.
func runCancel(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("cancel", "cancel [flags] TASK | cancel -category CATEGORY [flags]", `
Cancels task TASK (its id) for good, in one call, whether it waits in the pool
or runs: it ends cancelled and nothing claims it again. A running task's claim
ends with it: a worker running it has its handler's context cancelled (on
every taskd process that shares the Redis of the configuration and its key
prefix, within moments; at its next lease renewal at the latest), an editor
holding it is told so at its next heartbeat or submit, and whatever the holder
still sends is refused. The task's 'cancelled' event records the claim's fence
and holder, "by engine" and the -reason. A task that has ended (done, dead or
cancelled) is left as it is, and the command fails.

With -category and no TASK, it cancels every task of the category, pending
and running (-status pending or assigned: only those), created before
-created-before when given, each as above, in calls of 1,000 until none is
left, and says how many were pending and how many running; -dry-run counts
them and changes nothing. Needs MySQL and Redis.`)
	reason := f.String("reason", "", "why, recorded in the task's 'cancelled' event")
	category := f.String("category", "", "cancel the tasks of this category instead of one TASK")
	status := f.String("status", "", "with -category: only the pending, or only the assigned (running) tasks")
	before := f.String("created-before", "", "with -category: only the tasks created before this RFC 3339 time")
	dryRun := f.Bool("dry-run", false, "with -category: count the tasks, change nothing")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if *category != "" {
		if f.NArg() != 0 {
			return usagef(f.name, "want no TASK with -category, got %d arguments", f.NArg())
		}
		p := tasks.BulkParams{Category: *category, Status: tasks.Status(*status), Reason: *reason, DryRun: *dryRun}
		if *before != "" {
			t, err := time.Parse(time.RFC3339Nano, *before)
			if err != nil {
				return usagef(f.name, "-created-before must be an RFC 3339 time, got %q", *before)
			}
			p.CreatedBefore = t
		}
		return cancelMatching(ctx, a, f, p)
	}
	if *status != "" || *before != "" || *dryRun {
		return usagef(f.name, "-status, -created-before and -dry-run go with -category")
	}
	if f.NArg() != 1 {
		return usagef(f.name, "want one TASK, got %d arguments", f.NArg())
	}
	id, err := strconv.ParseInt(f.Arg(0), 10, 64)
	if err != nil || id < 1 {
		return usagef(f.name, "TASK must be a task id, a positive integer, got %q", f.Arg(0))
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	e, err := a.toolEngine(cfg)
	if err != nil {
		return err
	}
	defer stopTool(e)
	if err := e.CancelTask(ctx, id, *reason); err != nil {
		var se *tasks.StatusError
		switch {
		case errors.Is(err, tasks.ErrNotFound):
			return fmt.Errorf("task %d does not exist", id)
		case errors.As(err, &se):
			return fmt.Errorf("task %d is %s: it has ended, and only a pending or assigned task can be cancelled; nothing changed", id, se.Status)
		}
		return err
	}
	// A cancelled task keeps the holder of the claim its cancel ended; one
	// cancelled in the pool has none.
	if t, err := e.Task(ctx, id); err == nil && t.Holder != "" {
		fmt.Fprintf(a.stdout, "cancelled task %d; the claim of %s it was under (fence %d) ended\n", id, t.Holder, t.Fence)
		return nil
	}
	fmt.Fprintf(a.stdout, "cancelled task %d\n", id)
	return nil
}

// cancelMatching cancels the tasks p selects, a call at a time while more
// are left, and says how many it cancelled, pending and running.
func cancelMatching(ctx context.Context, a *app, f *cmdFlags, p tasks.BulkParams) error {
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	e, err := a.toolEngine(cfg)
	if err != nil {
		return err
	}
	defer stopTool(e)
	var changed, running int
	for {
		res, err := e.CancelMatching(ctx, p)
		if res != nil {
			changed, running = changed+res.Changed, running+res.Running
		}
		if errors.Is(err, tasks.ErrInvalid) {
			return usagef(f.name, "%v", err)
		}
		if err != nil {
			return fmt.Errorf("cancelled %d tasks of %s before: %w", changed, p.Category, err)
		}
		if p.DryRun {
			more := ""
			if res.More {
				more = ", and more"
			}
			fmt.Fprintf(a.stdout, "would cancel %d tasks of %s: %d pending, %d running%s\n", res.Matched, p.Category,
				res.Matched-res.Running, res.Running, more)
			return nil
		}
		if !res.More {
			break
		}
	}
	fmt.Fprintf(a.stdout, "cancelled %d tasks of %s: %d pending, %d running\n", changed, p.Category, changed-running, running)
	return nil
}
