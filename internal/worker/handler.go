package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/taskd/taskd/tasks"
)

// ErrNoHandler is returned (wrapped) by Mux.ProcessTask for a task whose
// category has no handler, and by New for a category without one.
var ErrNoHandler = errors.New("no handler for category")

// SkipRetry, wrapped in a handler's error, asks that the task not be tried
// again: it becomes dead at once (tasks.FailParams.Dead) instead of going back
// to the pool.
//
//lint:ignore ST1012 it reads as a directive, fmt.Errorf("...: %w", taskd.SkipRetry), as in asynq
var SkipRetry = errors.New("skip retry")

// Snooze returns the error a handler returns to run its task again after d,
// not now: the task goes back to the pool, claimable d from the end of the
// claim (by the database clock, to the millisecond), and the claim's attempt
// is not counted (Task.Attempts is back where it was before the claim), a
// 'snoozed' event recording it. A d of 0 or less makes the task claimable at
// once; a d over tasks.SnoozeMax (30 days) is taken as tasks.SnoozeMax.
//
// A task snoozes at most Config.MaxSnoozes times (Task.Snoozes counts them):
// a snooze past that makes it dead, with last_error "snoozed <n> times, the
// limit" and a 'dead' event, so that a handler that always snoozes does not
// keep a task forever. The handler's result is ignored, as with any error.
// A snooze wrapped in another error (fmt.Errorf("...: %w", Snooze(d))) is a
// snooze too; errors.As with a *SnoozeError tells one apart.
func Snooze(d time.Duration) error {
	return &SnoozeError{Duration: d}
}

// SnoozeError is the error Snooze returns: the handler asked to run its task
// again after Duration.
type SnoozeError struct {
	Duration time.Duration
}

// Error says how long the task is put off.
func (e *SnoozeError) Error() string {
	return "snooze " + e.Duration.String()
}

// snoozeFor is how long a snooze of d puts its task off: 0..SnoozeMax, to
// the millisecond.
func snoozeFor(d time.Duration) time.Duration {
	return min(max(d, 0), tasks.SnoozeMax).Truncate(time.Millisecond)
}

// Handler processes a claimed task, in the style of net/http's Handler.
//
// ProcessTask returns the task's result and nil when the task is done: the
// Worker commits the result as JSON (json.Marshal; a json.RawMessage as is;
// nil as JSON null). A result the store refuses (not JSON, too deep, too big)
// makes the task dead. An error made by Snooze puts the task off, its attempt
// not counted (see Snooze). Any other error records a failure: the task is
// tried again after a backoff while attempts remain (Task.Attempts counts this
// one) and is dead after that; the result is then ignored. ctx is cancelled
// when the claim is lost or the worker shuts down (see context.Cause); a
// handler should return soon after.
type Handler interface {
	ProcessTask(ctx context.Context, t *tasks.Task) (result any, err error)
}

// HandlerFunc adapts an ordinary function to a Handler.
type HandlerFunc func(ctx context.Context, t *tasks.Task) (any, error)

// ProcessTask calls f(ctx, t).
func (f HandlerFunc) ProcessTask(ctx context.Context, t *tasks.Task) (any, error) { return f(ctx, t) }

// MiddlewareFunc wraps a Handler with behaviour of its own (logging, tracing,
// limits).
type MiddlewareFunc func(Handler) Handler

// Mux routes tasks to handlers by exact category, like http.Mux
// routes requests by pattern. Middleware added with Use wraps every handler,
// the first added outermost. The zero value is not usable; call NewMux.
// A Mux is safe for concurrent use.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	mws      []MiddlewareFunc
}

// NewMux returns an empty Mux.
func NewMux() *Mux {
	return &Mux{handlers: make(map[string]Handler)}
}

// Handle registers h for category. Like http.Mux, it panics on a
// programmer's error: a category the store would refuse (empty, longer than
// tasks.MaxCategoryLen, or with leading or trailing spaces), a nil handler,
// or a category registered already.
func (mux *Mux) Handle(category string, h Handler) {
	if err := checkCategory(category); err != nil {
		panic(fmt.Sprintf("worker: handle category %q: %v", category, err))
	}
	if h == nil {
		panic(fmt.Sprintf("worker: handle category %q: nil handler", category))
	}
	mux.mu.Lock()
	defer mux.mu.Unlock()
	if _, ok := mux.handlers[category]; ok {
		panic(fmt.Sprintf("worker: handle category %q: registered twice", category))
	}
	mux.handlers[category] = h
}

// HandleFunc registers f for category, with the same panics as Handle.
func (mux *Mux) HandleFunc(category string, f func(ctx context.Context, t *tasks.Task) (any, error)) {
	if f == nil {
		panic(fmt.Sprintf("worker: handle category %q: nil handler", category))
	}
	mux.Handle(category, HandlerFunc(f))
}

// Use appends middleware that wraps every handler of the mux, including those
// registered before the call. The first middleware added is the outermost: it
// sees a task first and its handler's result last.
func (mux *Mux) Use(mws ...MiddlewareFunc) {
	mux.mu.Lock()
	defer mux.mu.Unlock()
	mux.mws = append(mux.mws, mws...)
}

// Categories returns the registered categories, sorted.
func (mux *Mux) Categories() []string {
	mux.mu.RLock()
	defer mux.mu.RUnlock()
	cats := make([]string, 0, len(mux.handlers))
	for c := range mux.handlers {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	return cats
}

// ProcessTask dispatches t to the handler of its category, through the
// middleware. A task of a category without a handler still passes through
// the middleware and then fails with an error wrapping ErrNoHandler.
func (mux *Mux) ProcessTask(ctx context.Context, t *tasks.Task) (any, error) {
	mux.mu.RLock()
	h, ok := mux.handlers[t.Category]
	mws := mux.mws
	mux.mu.RUnlock()
	if !ok {
		h = noHandler
	}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h.ProcessTask(ctx, t)
}

// noHandler handles tasks of categories nobody registered.
var noHandler = HandlerFunc(func(_ context.Context, t *tasks.Task) (any, error) {
	return nil, fmt.Errorf("process task %d: %w %q", t.ID, ErrNoHandler, t.Category)
})

// checkCategory reports whether the store would take c as a category: 1 to
// tasks.MaxCategoryLen characters of valid UTF-8, no leading or trailing
// spaces.
func checkCategory(c string) error {
	if n := utf8.RuneCountInString(c); n < 1 || n > tasks.MaxCategoryLen || !utf8.ValidString(c) || strings.TrimSpace(c) != c {
		return fmt.Errorf("invalid category: 1..%d characters, no leading or trailing spaces", tasks.MaxCategoryLen)
	}
	return nil
}
