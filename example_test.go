package taskd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
	"github.com/taskd/taskd/tasks/migrate"
)

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
	greet := dispatcher.HandlerFunc(func(ctx context.Context, t *tasks.Task) (any, error) {
		var p struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return nil, fmt.Errorf("%w: %w", dispatcher.SkipRetry, err) // a bad payload fails for good
		}
		select {
		case greeted <- "hello, " + p.Name:
		case <-ctx.Done(): // shutting down, or the lease was lost
			return nil, ctx.Err()
		}
		return map[string]string{"greeting": "hello, " + p.Name}, nil // the task's result
	})
	e, err := taskd.New(cfg, taskd.WithHandler("greet", greet))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	defer e.Stop(ctx)
	// Start refuses a database without taskd's current schema: migrate it
	// here, or run `taskd migrate` before starting.
	if _, err := migrate.Up(ctx, e.Store().DB()); err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}

	_, err = e.Dispatcher().AddTasks(ctx, []tasks.NewTask{
		{Category: "greet", Title: "greet Ada", Payload: json.RawMessage(`{"name": "Ada"}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-greeted)
	// Output: hello, Ada
}
