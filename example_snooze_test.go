package taskd_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// RenewCert is the payload of a task of category "renew-cert".
type RenewCert struct {
	Domain string `json:"domain"`
}

// Category names the category RenewCert's tasks go to.
func (RenewCert) Category() string { return "renew-cert" }

// A handler that cannot do its work yet snoozes: the task goes back to the
// pool and runs again after the delay, without spending one of its attempts.
// A task snoozes at most Config.Worker.MaxSnoozes times (100 by default);
// past that it is dead.
func ExampleSnooze() {
	runs := make(chan string, 2)
	renew := func(ctx context.Context, job *taskd.Job[RenewCert]) (any, error) {
		runs <- fmt.Sprintf("attempt %d, snoozed %d times", job.Attempts, job.Snoozes)
		if job.Snoozes == 0 {
			return nil, taskd.Snooze(50 * time.Millisecond) // the issuer is busy: later
		}
		return map[string]string{"renewed": job.Args.Domain}, nil
	}
	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: exampleDSN},
		Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "snooze:"},
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(renew), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	id, err := e.Insert(ctx, RenewCert{Domain: "example.org"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	fmt.Println(<-runs)
	fmt.Println(<-runs)
	// The worker records the outcome just after the handler returns.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		t, err := e.Task(ctx, id)
		if err == nil && t.Status == tasks.StatusDone {
			fmt.Println(t.Status, "after", t.Attempts, "attempt and", t.Snoozes, "snooze")
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("the renewal is not done")
		}
	}
	// Output:
	// attempt 1, snoozed 0 times
	// attempt 1, snoozed 1 times
	// done after 1 attempt and 1 snooze
}
