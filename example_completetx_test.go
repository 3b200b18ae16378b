package taskd_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/taskd/taskd"
)

// Invoice is the payload of a task of category "invoice".
type Invoice struct {
	Order int64 `json:"order"`
}

// Category names the category Invoice's tasks go to.
func (Invoice) Category() string { return "invoice" }

// Commit a handler's own writes with its task's outcome: one transaction of
// the handler's on the engine's database, fenced on its claim. Both commit,
// or neither: when the claim is no longer the handler's (its lease passed
// while it was paused, and the task went to another claim), CompleteTx
// returns an error wrapping taskd.ErrLeaseLost, and the rollback discards
// the invoice.
func ExampleCompleteTx() {
	ctx := context.Background()
	db, err := taskd.OpenMySQL(ctx, exampleDSN) // the engine's database
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS invoices (
		order_id BIGINT NOT NULL PRIMARY KEY, task_id BIGINT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	invoiced := make(chan struct{})
	invoice := func(ctx context.Context, job *taskd.Job[Invoice]) (any, error) {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback() // a no-op once committed
		if _, err := tx.ExecContext(ctx, "INSERT INTO invoices (order_id, task_id) VALUES (?, ?)",
			job.Args.Order, job.ID); err != nil {
			return nil, err
		}
		// Last in the transaction, then commit at once.
		if err := taskd.CompleteTx(ctx, tx, job.Task, map[string]int64{"order": job.Args.Order}); err != nil {
			return nil, err // taskd.ErrLeaseLost: another claim has the task; nothing commits
		}
		if err := tx.Commit(); err != nil {
			return nil, err // the task is retried
		}
		close(invoiced)
		return nil, nil // the outcome committed with the invoice
	}
	cfg := taskd.Config{Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "invoice:"}}
	e, err := taskd.New(cfg, taskd.WithDB(db), taskd.WithJobHandler(invoice),
		taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := e.Insert(ctx, Invoice{Order: 42}, nil)
	if err != nil {
		log.Fatal(err)
	}
	<-invoiced

	var order int64
	if err := db.GetContext(ctx, &order, "SELECT order_id FROM invoices WHERE task_id = ?", id); err != nil {
		log.Fatal(err)
	}
	task, err := e.Task(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order", order, "invoiced; task", task.Status)
	// Output: order 42 invoiced; task done
}
