package taskd_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// Resize is the payload of a task of category "resize".
type Resize struct {
	Image string `json:"image"`
}

// Category names the category Resize's tasks go to.
func (Resize) Category() string { return "resize" }

// A category's max_in_flight bounds its tasks running at once across every
// process, and its key_limit the tasks of one limit key (a customer, say):
// the claims keep both in MySQL, so they hold whatever the number of workers
// and processes, and through a Redis outage.
func Example_limitsInFlight() {
	var mu sync.Mutex
	running, most := 0, 0
	perKey, mostPerKey := map[string]int{}, 0
	var done sync.WaitGroup
	done.Add(6)
	resize := func(ctx context.Context, job *taskd.Job[Resize]) (any, error) {
		key := job.Args.Image[:1] // the customer, also the task's limit key
		mu.Lock()
		running++
		perKey[key]++
		most, mostPerKey = max(most, running), max(mostPerKey, perKey[key])
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		running--
		perKey[key]--
		mu.Unlock()
		done.Done()
		return nil, nil
	}
	cfg := taskd.Config{
		MySQL:      taskd.MySQLConfig{DSN: exampleDSN},
		Redis:      taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "limits:"},
		Categories: []taskd.CategoryConfig{{Name: "resize", MaxInFlight: 2, KeyLimit: 1}},
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(resize), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var ps []taskd.InsertParams
	for _, img := range []string{"a1", "a2", "a3", "b1", "b2", "c1"} {
		ps = append(ps, taskd.InsertParams{Args: Resize{Image: img}, Opts: &taskd.InsertOpts{LimitKey: img[:1]}})
	}
	ids, err := e.InsertMany(ctx, ps)
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	done.Wait()
	// The worker records the outcome just after the handler returns.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		t, err := e.Task(ctx, ids[len(ids)-1])
		if err == nil && t.Status == tasks.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("the last resize is not done")
		}
	}
	fmt.Println("most running at once:", most)
	fmt.Println("most of one customer at once:", mostPerKey)
	// Output:
	// most running at once: 2
	// most of one customer at once: 1
}
