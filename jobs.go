package taskd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// Args is the payload of a typed task: a Go value the engine encodes as the
// task's JSON payload (encoding/json, with the value's own tags), whose
// Category names the category its tasks go to. Category is called on the zero
// value too, so it must not depend on the fields.
//
//	type Resize struct {
//		Image string `json:"image"`
//		Width int    `json:"width"`
//	}
//
//	func (Resize) Category() string { return "resize" }
type Args interface {
	Category() string
}

// Errors a handler or a caller of Insert meets, the same values as the
// packages underneath return, so that errors.Is needs no other import.
var (
	// SkipRetry, wrapped in a handler's error, makes the task dead at once
	// instead of retrying it: fmt.Errorf("%w: %w", taskd.SkipRetry, err).
	SkipRetry = worker.SkipRetry
	// ErrLeaseLost is the cause (context.Cause) of a handler's context when
	// the claim's lease was lost: another claim may run the task now. It is
	// wrapped too by CompleteTx's error when the claim is no longer the
	// current one.
	ErrLeaseLost = worker.ErrLeaseLost
	// ErrCancelled is the cause (context.Cause) of a handler's context when
	// its task was cancelled (Engine.CancelTask, or an operator through the
	// API, the console or `taskd cancel`): nobody runs the task again, and
	// what the handler returns is dropped. Whatever a holder of a cancelled
	// claim still sends is refused with an error wrapping it.
	ErrCancelled = worker.ErrCancelled
	// ErrInvalid is wrapped by the errors of Insert, InsertMany, InsertTx
	// and InsertManyTx for args or options the store refuses; nothing was
	// added.
	ErrInvalid = tasks.ErrInvalid
)

// Snooze returns the error a handler returns to run its task again after d,
// not now, without spending an attempt: the task goes back to the pool,
// claimable d from the end of the claim (by the database's clock, to the
// millisecond), its Attempts back where they were before the claim, and a
// 'snoozed' event records it (detail: d). A d of 0 or less makes the task
// claimable at once; a d over tasks.SnoozeMax (30 days) is taken as 30 days.
// The handler's result, if any, is ignored.
//
// A task snoozes at most Config.Worker.MaxSnoozes times (default 100;
// Task.Snoozes counts them, and a requeue resets them): a snooze past that
// makes the task dead, with last_error "snoozed <n> times, the limit" and a
// 'dead' event (the webhook's cause "snooze"), so that a handler that always
// snoozes cannot keep a task forever. A snooze wrapped in another error
// (fmt.Errorf("...: %w", taskd.Snooze(d))) counts too.
func Snooze(d time.Duration) error { return worker.Snooze(d) }

// SnoozeError is the error Snooze returns, for a middleware that tells a
// snooze apart from a failure with errors.As.
type SnoozeError = worker.SnoozeError

// Job is a claimed task whose payload was decoded into Args, as a handler
// registered with WithJobHandler receives it. Task holds the rest: its id,
// title, attempts and the raw payload.
type Job[T Args] struct {
	*tasks.Task
	Args T
}

// WithJobHandler registers fn to run the tasks of T's category, each with its
// payload decoded into a T (encoding/json; fields the payload lacks keep their
// zero value, fields T lacks are ignored). A payload that does not decode into
// a T can never succeed, so its task is dead at once with the decode error,
// and fn is not called. Otherwise fn's result and error count as a Handler's
// do (see Handler): the result is committed as JSON, an error
// retries the task after a backoff while attempts remain, an error
// wrapping SkipRetry makes it dead at once, and Snooze(d) runs it again
// after d without spending an attempt.
//
// It is WithHandler for T's category: registering that category again, typed
// or not, replaces the handler.
func WithJobHandler[T Args](fn func(ctx context.Context, job *Job[T]) (any, error)) Option {
	var zero T
	return WithHandler(zero.Category(), jobHandler[T](fn))
}

// jobHandler runs a typed handler as a Handler.
type jobHandler[T Args] func(ctx context.Context, job *Job[T]) (any, error)

func (h jobHandler[T]) ProcessTask(ctx context.Context, t *tasks.Task) (any, error) {
	job := &Job[T]{Task: t}
	if len(t.Payload) > 0 {
		if err := json.Unmarshal(t.Payload, &job.Args); err != nil {
			return nil, fmt.Errorf("%w: decode the payload of task %d into %T: %w", SkipRetry, t.ID, job.Args, err)
		}
	}
	return h(ctx, job)
}

// InsertOpts are a typed task's settings besides its payload; the zero value
// (or nil) takes every default.
type InsertOpts struct {
	// Title is what editors and the console show; 1..512 characters.
	// Default: the category.
	Title string
	// Priority orders the pool: higher first. Default 0.
	Priority int
	// MaxAttempts is 1..100; 0 means tasks.MaxAttemptsDefault.
	MaxAttempts int
	// Key, when set, is a unique external id: inserting a task whose key
	// is held returns the holder's id and adds nothing.
	Key string
	// KeyHold says how long the task holds Key: tasks.KeyHoldForever (the
	// default) while the task is kept, tasks.KeyHoldLive only while it is
	// pending or running, tasks.KeyHoldFor(d) until d after it ended. Once
	// the key is free, an insert with it adds a new task.
	KeyHold tasks.KeyHold
	// RunAfter, when set, is the earliest time the task is handed out.
	RunAfter time.Time
	// DueAt, when set, is the task's deadline: within a priority, tasks with
	// one go first, earliest first.
	DueAt time.Time
	// LimitKey, when set, is the task's limit key, 1..128 bytes: in a
	// category with a key_limit (CategoryConfig.KeyLimit), at most that many
	// tasks of one key run at once across every process. Default: none.
	LimitKey string
	// Gold, when set, is the task's known answer: it is a gold task from its
	// insert on (see docs/api.md, Gold tasks), never handed out as itself
	// but to editors as copies, their results scored against it. Its
	// category needs a gold rule (CategoryConfig.Gold) the answer fits, and
	// the task asks for one result; else the insert is refused with an error
	// wrapping ErrInvalid. Default: nil, an ordinary task.
	Gold *tasks.GoldAnswer
}

// InsertParams is one task of InsertMany.
type InsertParams struct {
	Args Args
	Opts *InsertOpts
}

// Insert adds one task whose payload is args encoded as JSON, in
// args.Category(), and wakes the workers and editors waiting for that
// category. It needs New, not Start: tasks inserted before Start wait in the
// pool. It returns the task's id; with opts.Key set and a task holding that
// key (see InsertOpts.KeyHold), that task's id, and nothing is added. Bad args or opts
// (a payload that does not encode as a JSON object, a title or category the
// store refuses) return an error wrapping ErrInvalid, and nothing is
// added.
func (e *Engine) Insert(ctx context.Context, args Args, opts *InsertOpts) (int64, error) {
	ids, err := e.InsertMany(ctx, []InsertParams{{Args: args, Opts: opts}})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// InsertMany adds several tasks as Insert does, in one statement: all of them
// or, on any error, none. It returns their ids in the order of ps.
func (e *Engine) InsertMany(ctx context.Context, ps []InsertParams) ([]int64, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	ts, err := newTasks(ps)
	if err == nil {
		err = e.checkGold(ts)
	}
	if err != nil {
		return nil, fmt.Errorf("taskd: insert: %w", err)
	}
	ins, err := e.d.AddTasks(ctx, ts)
	if err != nil {
		return nil, err
	}
	return insertedIDs(ins), nil
}

// checkGold checks the gold answers of ts against their categories' gold
// rules (CategoryConfig.Gold): an error wrapping ErrInvalid, naming the task
// when there are several, for a category without one or an answer it cannot
// compare.
func (e *Engine) checkGold(ts []tasks.NewTask) error {
	var rules map[string]tasks.GoldRule
	for i, t := range ts {
		if t.Gold == nil {
			continue
		}
		if rules == nil {
			rules = e.cfg.goldRules()
		}
		rule, ok := rules[t.Category]
		err := fmt.Errorf("%w: category %q has no gold rule in the configuration", tasks.ErrInvalid, t.Category)
		if ok {
			err = rule.CheckAnswer(*t.Gold)
		}
		if err != nil {
			if len(ts) > 1 {
				err = fmt.Errorf("task %d of %d: %w", i+1, len(ts), err)
			}
			return err
		}
	}
	return nil
}

// newTasks encodes ps as the store's NewTasks and validates them, naming the
// one refused when there are several.
func newTasks(ps []InsertParams) ([]tasks.NewTask, error) {
	ts := make([]tasks.NewTask, len(ps))
	for i, p := range ps {
		t, err := newTask(p)
		if err != nil {
			if len(ps) > 1 {
				err = fmt.Errorf("task %d of %d: %w", i+1, len(ps), err)
			}
			return nil, err
		}
		ts[i] = t
	}
	return ts, nil
}

// insertedIDs returns the ids of ins, in order.
func insertedIDs(ins []tasks.Inserted) []int64 {
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	return ids
}

// Migrate applies the schema migrations this binary carries that the
// engine's database lacks (see the package function Migrate), and leaves a
// database at the current schema alone. Start refuses a database behind the
// schema: call Migrate before it, or run `taskd migrate`.
func (e *Engine) Migrate(ctx context.Context) error {
	_, err := Migrate(ctx, e.db)
	return err
}

// newTask encodes p as the store's NewTask and validates it.
func newTask(p InsertParams) (tasks.NewTask, error) {
	if p.Args == nil {
		return tasks.NewTask{}, fmt.Errorf("%w: no args", tasks.ErrInvalid)
	}
	payload, err := json.Marshal(p.Args)
	if err != nil {
		return tasks.NewTask{}, fmt.Errorf("%w: encode %T as JSON: %w", tasks.ErrInvalid, p.Args, err)
	}
	var o InsertOpts
	if p.Opts != nil {
		o = *p.Opts
	}
	t := tasks.NewTask{
		Category: p.Args.Category(), Title: cmp.Or(o.Title, p.Args.Category()), Payload: payload,
		Priority: o.Priority, MaxAttempts: o.MaxAttempts, Key: o.Key, KeyHold: o.KeyHold, RunAfter: o.RunAfter, DueAt: o.DueAt,
		LimitKey: o.LimitKey, Gold: o.Gold,
	}
	if err := t.Validate(); err != nil {
		return tasks.NewTask{}, fmt.Errorf("%T: %w", p.Args, err)
	}
	return t, nil
}
