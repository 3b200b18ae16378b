package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/taskd/taskd/tasks"
)

// runCancel cancels a task, pending or running.
func runCancel(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("cancel", "cancel [flags] TASK", `
Cancels task TASK (its id) for good, in one call, whether it waits in the pool
or runs: it ends cancelled and nothing claims it again. A running task's claim
ends with it: a worker running it has its handler's context cancelled (on
every taskd process that shares the Redis of the configuration and its key
prefix, within moments; at its next lease renewal at the latest), an editor
holding it is told so at its next heartbeat or submit, and whatever the holder
still sends is refused. The task's 'cancelled' event records the claim's fence
and holder, "by engine" and the -reason. A task that has ended (done, dead or
cancelled) is left as it is, and the command fails. Needs MySQL and Redis.`)
	reason := f.String("reason", "", "why, recorded in the task's 'cancelled' event")
	if err := a.parse(f, args); err != nil {
		return err
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
