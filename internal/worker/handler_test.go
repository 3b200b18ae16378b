package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

func TestServeMuxRoutesByExactCategory(t *testing.T) {
	t.Parallel()
	mux := worker.NewMux()
	var got []string
	record := func(name string) worker.HandlerFunc {
		return func(_ context.Context, task *tasks.Task) (any, error) {
			got = append(got, fmt.Sprintf("%s:%d", name, task.ID))
			return nil, nil
		}
	}
	mux.Handle("news", record("news"))
	mux.HandleFunc("news/sports", record("sports"))
	mux.Handle("News", record("News"))

	ctx := context.Background()
	for _, task := range []*tasks.Task{
		{ID: 1, Category: "news"},
		{ID: 2, Category: "news/sports"},
		{ID: 3, Category: "News"},
	} {
		if _, err := mux.ProcessTask(ctx, task); err != nil {
			t.Fatalf("process task %d (%q): %v", task.ID, task.Category, err)
		}
	}
	want := []string{"news:1", "sports:2", "News:3"}
	if !slices.Equal(got, want) {
		t.Fatalf("handlers ran %v, want %v", got, want)
	}
	if cats, want := mux.Categories(), []string{"News", "news", "news/sports"}; !slices.Equal(cats, want) {
		t.Fatalf("categories %v, want %v (sorted)", cats, want)
	}
}

func TestServeMuxUnknownCategory(t *testing.T) {
	t.Parallel()
	mux := worker.NewMux()
	ran := false
	mux.HandleFunc("news", func(context.Context, *tasks.Task) (any, error) { ran = true; return nil, nil })

	for _, cat := range []string{"sports", "new", "news/x", "NEWS"} {
		_, err := mux.ProcessTask(context.Background(), &tasks.Task{ID: 7, Category: cat})
		if !errors.Is(err, worker.ErrNoHandler) {
			t.Fatalf("category %q: err = %v, want ErrNoHandler", cat, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", cat)) || !strings.Contains(err.Error(), "task 7") {
			t.Fatalf("category %q: error %q names neither the task nor the category", cat, err)
		}
	}
	if ran {
		t.Fatal("the news handler ran for another category")
	}
}

func TestServeMuxPassesTaskContextAndError(t *testing.T) {
	t.Parallel()
	type key struct{}
	boom := errors.New("boom")
	mux := worker.NewMux()
	mux.HandleFunc("news", func(ctx context.Context, task *tasks.Task) (any, error) {
		if ctx.Value(key{}) != "v" {
			return nil, errors.New("context value lost")
		}
		if task.Title != "t" {
			return nil, fmt.Errorf("task title %q, want %q", task.Title, "t")
		}
		return nil, fmt.Errorf("wrapped: %w", boom)
	})
	ctx := context.WithValue(context.Background(), key{}, "v")
	if _, err := mux.ProcessTask(ctx, &tasks.Task{Category: "news", Title: "t"}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the handler's error", err)
	}
}

func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var trace []string
	mw := func(name string) worker.MiddlewareFunc {
		return func(next worker.Handler) worker.Handler {
			return worker.HandlerFunc(func(ctx context.Context, task *tasks.Task) (any, error) {
				trace = append(trace, name+" in")
				res, err := next.ProcessTask(ctx, task)
				trace = append(trace, name+" out")
				return res, err
			})
		}
	}
	mux := worker.NewMux()
	mux.Use(mw("a"))
	mux.HandleFunc("news", func(context.Context, *tasks.Task) (any, error) {
		trace = append(trace, "handler")
		return nil, nil
	})
	// Middleware added after a handler still wraps it.
	mux.Use(mw("b"), mw("c"))

	if _, err := mux.ProcessTask(context.Background(), &tasks.Task{Category: "news"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a in", "b in", "c in", "handler", "c out", "b out", "a out"}
	if !slices.Equal(trace, want) {
		t.Fatalf("order %v, want %v", trace, want)
	}

	// Unknown categories pass through the middleware too, which sees the error.
	trace = nil
	_, err := mux.ProcessTask(context.Background(), &tasks.Task{Category: "sports"})
	if !errors.Is(err, worker.ErrNoHandler) {
		t.Fatalf("err = %v, want ErrNoHandler", err)
	}
	want = []string{"a in", "b in", "c in", "c out", "b out", "a out"}
	if !slices.Equal(trace, want) {
		t.Fatalf("order for an unknown category %v, want %v", trace, want)
	}
}

func TestMiddlewareCanShortCircuit(t *testing.T) {
	t.Parallel()
	denied := errors.New("denied")
	mux := worker.NewMux()
	ran := false
	mux.HandleFunc("news", func(context.Context, *tasks.Task) (any, error) { ran = true; return nil, nil })
	mux.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, task *tasks.Task) (any, error) {
			if task.Priority < 0 {
				return nil, denied
			}
			return next.ProcessTask(ctx, task)
		})
	})
	if _, err := mux.ProcessTask(context.Background(), &tasks.Task{Category: "news", Priority: -1}); !errors.Is(err, denied) {
		t.Fatalf("err = %v, want the middleware's error", err)
	}
	if ran {
		t.Fatal("the handler ran although the middleware refused the task")
	}
	if _, err := mux.ProcessTask(context.Background(), &tasks.Task{Category: "news"}); err != nil || !ran {
		t.Fatalf("err = %v, ran = %v: want the handler to run", err, ran)
	}
}

func TestHandlerFunc(t *testing.T) {
	t.Parallel()
	var seen *tasks.Task
	want := errors.New("failure")
	var h worker.Handler = worker.HandlerFunc(func(_ context.Context, task *tasks.Task) (any, error) {
		seen = task
		if task.ID == 3 {
			return nil, want
		}
		return map[string]int64{"id": task.ID}, nil
	})
	task := &tasks.Task{ID: 3}
	if _, err := h.ProcessTask(context.Background(), task); err != want {
		t.Fatalf("err = %v, want %v", err, want)
	}
	if seen != task {
		t.Fatal("the function did not get the task")
	}
	// The result comes back through a mux.
	mux := worker.NewMux()
	mux.Handle("news", h)
	res, err := mux.ProcessTask(context.Background(), &tasks.Task{ID: 4, Category: "news"})
	if m, ok := res.(map[string]int64); err != nil || !ok || m["id"] != 4 {
		t.Fatalf("result %v, err %v; want map[id:4]", res, err)
	}
}

func TestServeMuxHandlePanics(t *testing.T) {
	t.Parallel()
	nop := worker.HandlerFunc(func(context.Context, *tasks.Task) (any, error) { return nil, nil })
	cases := []struct {
		name     string
		register func(mux *worker.Mux)
	}{
		{"empty category", func(mux *worker.Mux) { mux.Handle("", nop) }},
		{"leading space", func(mux *worker.Mux) { mux.Handle(" news", nop) }},
		{"trailing space", func(mux *worker.Mux) { mux.Handle("news ", nop) }},
		{"too long", func(mux *worker.Mux) { mux.Handle(strings.Repeat("x", tasks.MaxCategoryLen+1), nop) }},
		{"invalid utf-8", func(mux *worker.Mux) { mux.Handle("news\xff", nop) }},
		{"nil handler", func(mux *worker.Mux) { mux.Handle("news", nil) }},
		{"nil func", func(mux *worker.Mux) { mux.HandleFunc("news", nil) }},
		{"duplicate", func(mux *worker.Mux) { mux.Handle("news", nop); mux.Handle("news", nop) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mux := worker.NewMux()
			defer func() {
				if recover() == nil {
					t.Fatal("Handle did not panic")
				}
			}()
			c.register(mux)
		})
	}

	// The longest valid category is fine.
	mux := worker.NewMux()
	long := strings.Repeat("é", tasks.MaxCategoryLen)
	mux.Handle(long, nop)
	if cats := mux.Categories(); len(cats) != 1 || cats[0] != long {
		t.Fatalf("categories %q, want the long one", cats)
	}
}
