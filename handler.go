package taskd

import (
	"github.com/taskd/taskd/internal/worker"
)

// Handler processes a claimed task, in the style of net/http's Handler:
// register one per category with WithHandler.
//
// ProcessTask returns the task's result and nil when the task is done: the
// engine commits the result as JSON (json.Marshal; a json.RawMessage as is;
// nil as JSON null). A result the store refuses (not JSON, too deep, too
// big) makes the task dead. Snooze(d) runs the task again after d without
// spending an attempt (see Snooze). Any other error records a failure: the
// task is tried again after a backoff while attempts remain (Task.Attempts
// counts this one) and is dead after that; an error wrapping SkipRetry makes
// it dead at once. ctx is cancelled when the claim is lost (cause
// ErrLeaseLost), the task is cancelled (cause ErrCancelled: Engine.CancelTask,
// or an operator) or the engine stops (cause ErrWorkerShutdown, once
// Worker.ShutdownTimeout has passed); a handler should return soon after.
// Handlers run at least once per task: only one claim's outcome is ever
// committed, but a crash or a lost lease may run a task again.
type Handler = worker.Handler

// HandlerFunc adapts an ordinary function to a Handler.
type HandlerFunc = worker.HandlerFunc

// MiddlewareFunc wraps a Handler with behaviour of its own (logging,
// tracing, limits); WithMiddleware adds it to every handler.
type MiddlewareFunc = worker.MiddlewareFunc

// ErrWorkerShutdown is the cause (context.Cause) of a handler's context
// when the engine's Stop cancelled it: the task goes back to the pool.
var ErrWorkerShutdown = worker.ErrWorkerShutdown

// WithMiddleware wraps every handler registered with WithHandler or
// WithJobHandler in mws, the first outermost: it sees a task first and its
// handler's result last. A task of a category without a handler passes
// through the middleware too, then fails.
func WithMiddleware(mws ...MiddlewareFunc) Option {
	return func(o *options) { o.middleware = append(o.middleware, mws...) }
}
