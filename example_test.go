package taskd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// Embed the engine in a program of your own: it claims the tasks of the
// categories you register handlers for, runs them, renews their leases and
// records their outcome; with Config.AdminToken and Config.HTTP.Addr it also
// serves the editor API. A real program would run it with
// e.Run(signalContext) instead of Start and Stop.
func Example() {
	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: exampleDSN},
		Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix},
	}
	greeted := make(chan string)
	greet := dispatcher.HandlerFunc(func(ctx context.Context, t *tasks.Task) (any, error) {
		var p struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return nil, fmt.Errorf("%w: %w", dispatcher.SkipRetry, err) // a bad payload fails for good
		}
		greeted <- "hello, " + p.Name
		return map[string]string{"greeting": "hello, " + p.Name}, nil // the task's result
	})
	e, err := taskd.New(cfg, taskd.WithHandler("greet", greet), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)

	_, err = e.Dispatcher().AddTasks(ctx, []tasks.NewTask{
		{Category: "greet", Title: "greet Ada", Payload: json.RawMessage(`{"name": "Ada"}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-greeted)
	// Output: hello, Ada
}
