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

// SyncAccount is the payload of a task of category "sync-account".
type SyncAccount struct {
	Account int `json:"account"`
}

// Category names the category SyncAccount's tasks go to.
func (SyncAccount) Category() string { return "sync-account" }

// A key held only while its task is live: a second sync of an account is not
// added while one waits or runs, and is once it ended. With the default,
// tasks.KeyHoldForever, the key would stay taken as long as the task is kept;
// with tasks.KeyHoldFor(time.Hour), for an hour after it ended.
func ExampleInsertOpts_keyHold() {
	ran := make(chan struct{}, 1)
	sync := func(ctx context.Context, job *taskd.Job[SyncAccount]) (any, error) {
		ran <- struct{}{}
		return nil, nil
	}
	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: exampleDSN},
		Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "keyhold:"},
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(sync), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	opts := &taskd.InsertOpts{Key: "sync:7", KeyHold: tasks.KeyHoldLive}
	first, err := e.Insert(ctx, SyncAccount{Account: 7}, opts)
	if err != nil {
		log.Fatal(err)
	}
	again, err := e.Insert(ctx, SyncAccount{Account: 7}, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("while pending, the same task:", again == first)

	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)
	<-ran
	// The worker records the outcome just after the handler returns.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if t, err := e.Task(ctx, first); err == nil && t.Status == tasks.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("the first sync is not done")
		}
	}
	next, err := e.Insert(ctx, SyncAccount{Account: 7}, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("once done, a new task:", next != first)
	<-ran
	// Output:
	// while pending, the same task: true
	// once done, a new task: true
}
