package taskd_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// Render is the payload of a task of category "render".
type Render struct {
	Page int `json:"page"`
}

// Category names the category Render's tasks go to.
func (Render) Category() string { return "render" }

// Cancel a task while a handler runs it, in one call: the handler's context
// is cancelled with cause ErrCancelled, what it returns is dropped, the task
// ends cancelled and nothing runs it again. A task that has ended is left as
// it is.
func ExampleEngine_CancelTask() {
	started := make(chan int64, 1)
	stopped := make(chan error, 1)
	render := func(ctx context.Context, job *taskd.Job[Render]) (any, error) {
		started <- job.ID
		<-ctx.Done() // a long render, cut short
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: exampleDSN},
		Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "cancel:"},
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(render), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	id, err := e.Insert(ctx, Render{Page: 7}, nil)
	if err != nil {
		log.Fatal(err)
	}
	<-started
	if err := e.CancelTask(ctx, id, "page withdrawn"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("handler stopped by the cancel:", errors.Is(<-stopped, taskd.ErrCancelled))
	t, err := e.Task(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("task:", t.Status)
	err = e.CancelTask(ctx, id, "")
	fmt.Println("cancel again:", errors.Is(err, tasks.ErrWrongStatus))
	// Output:
	// handler stopped by the cancel: true
	// task: cancelled
	// cancel again: true
}

// Cancel by filter: the tasks waiting and those running, in one call, each
// running handler stopped as CancelTask stops one.
func ExampleEngine_CancelMatching() {
	started := make(chan int64, 3)
	stopped := make(chan error, 3)
	render := func(ctx context.Context, job *taskd.Job[Render]) (any, error) {
		started <- job.ID
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	cfg := taskd.Config{
		MySQL:  taskd.MySQLConfig{DSN: exampleDSN},
		Redis:  taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "cancel-matching:"},
		Worker: taskd.WorkerConfig{Concurrency: 1}, // one runs, the others wait
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(render), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	var ids []int64
	for page := range 3 {
		id, err := e.Insert(ctx, Render{Page: page}, nil)
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, id)
	}
	<-started
	res, err := e.CancelMatching(ctx, tasks.BulkParams{IDs: ids, Reason: "edition withdrawn"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("cancelled %d: %d pending, %d running\n", res.Changed, res.Changed-res.Running, res.Running)
	fmt.Println("handler stopped by the cancel:", errors.Is(<-stopped, taskd.ErrCancelled))
	// Output:
	// cancelled 3: 2 pending, 1 running
	// handler stopped by the cancel: true
}
