package taskd_test

import (
	"context"
	"fmt"
	"log"

	"github.com/taskd/taskd"
)

// Greet is the payload of a task of category "greet": the engine encodes it
// as the task's JSON and decodes it for the handler.
type Greet struct {
	Name string `json:"name"`
}

// Category names the category Greet's tasks go to.
func (Greet) Category() string { return "greet" }

// Embed the engine in a program of your own: it claims the tasks of the
// categories you register handlers for, runs them, renews their leases and
// records their outcome; with Config.AdminToken and Config.HTTP.Addr it also
// serves the editor API. This is the program of docs/library.md, word for
// word (a test holds them together) but for where the stores are: the
// page's are those `make run` starts. A long-running program would call
// e.Run(signalContext) instead of Start and Stop.
func Example() {
	dsn := exampleDSN             // the examples' own database
	redisAddr := exampleRedisAddr // and the tests' Redis

	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: dsn},
		Redis: taskd.RedisConfig{Addrs: []string{redisAddr}, KeyPrefix: "hello:"},
		Log:   taskd.LogConfig{Level: "warn"},
	}
	greeted := make(chan string)
	greet := func(ctx context.Context, job *taskd.Job[Greet]) (any, error) {
		select {
		case greeted <- "hello, " + job.Args.Name:
		case <-ctx.Done(): // shutting down, or the lease was lost
			return nil, ctx.Err()
		}
		return map[string]string{"greeting": "hello, " + job.Args.Name}, nil // the task's result
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(greet))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	defer e.Stop(ctx)
	// Start refuses a database without taskd's current schema: migrate it
	// here, or run `taskd migrate` before starting.
	if err := e.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}

	if _, err := e.Insert(ctx, Greet{Name: "Ada"}, &taskd.InsertOpts{Title: "greet Ada"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-greeted)
	// Output: hello, Ada
}
