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

// Review is the payload of a task of category "review": an article an
// editor approves or rejects.
type Review struct {
	Article string `json:"article"`
}

// Category names the category Review's tasks go to.
func (Review) Category() string { return "review" }

// A gold task inserted with its known answer: in the insert's transaction it
// becomes a gold task, held out of the pool, and editors get it as copies
// whose submits are scored against the answer (a twentieth of their claims
// here). The category's gold rule says what is compared; an answer it
// cannot compare is refused, and nothing is added.
func ExampleInsertOpts_gold() {
	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: exampleDSN},
		Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "gold:"},
		Categories: []taskd.CategoryConfig{
			{Name: "review", Gold: taskd.GoldConfig{Rule: tasks.GoldRuleDecision, Rate: 0.05}},
		},
	}
	e, err := taskd.New(cfg, taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	id, err := e.Insert(ctx, Review{Article: "a known hoax"}, &taskd.InsertOpts{Gold: &tasks.GoldAnswer{Decision: "reject"}})
	if err != nil {
		log.Fatal(err)
	}
	t, err := e.Task(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held out of the pool:", t.RunAfter.Equal(tasks.GoldRunAfter))

	// The rule compares decisions: a result alone is no answer to it.
	_, err = e.Insert(ctx, Review{Article: "another"}, &taskd.InsertOpts{Gold: &tasks.GoldAnswer{Result: []byte(`{"label":"spam"}`)}})
	fmt.Println("refused:", errors.Is(err, taskd.ErrInvalid))
	// Output:
	// held out of the pool: true
	// refused: true
}
