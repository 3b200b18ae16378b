// Package schedule adds periodic tasks on their schedules (Scheduler), and
// parses the schedules the engine's loops run on (Parse: a duration, @every,
// a descriptor or a cron expression).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/lifecycle"
	"github.com/taskd/taskd/tasks"
)

// Periodic is a task the Scheduler adds on a schedule.
type Periodic struct {
	// Name names the schedule: 1..MaxNameLen letters, digits, '-', '_'
	// or '.', unique among a scheduler's schedules. It is part of the key of
	// every task it inserts, so renaming a schedule starts its keys afresh.
	Name string
	// Spec is when to insert, as Parse reads it: "@every 1h", "@daily",
	// "0 30 6 * * MON-FRI". Cron expressions count in UTC unless the spec
	// starts with "CRON_TZ=Zone "; @every counts from the Unix epoch, so that
	// every replica sees the same ticks.
	Spec string
	// Task is the task to insert at each tick; its Key is set by the
	// scheduler.
	Task tasks.NewTask
}

// MaxNameLen bounds Periodic.Name.
const MaxNameLen = 64

// Key is the key of the task schedule name inserts for the tick at:
// "schedule:" + name + ":" + the tick in UTC, RFC 3339. Replicas firing the
// same tick insert the same key, so the tick makes one task.
func Key(name string, at time.Time) string {
	return "schedule:" + name + ":" + at.UTC().Format(time.RFC3339)
}

// Validate checks p as New does: the name, the spec and the task
// (without its key).
func (p Periodic) Validate() error {
	if p.Name == "" {
		return errors.New("name is required")
	}
	if len(p.Name) > MaxNameLen {
		return fmt.Errorf("name must be 1..%d characters", MaxNameLen)
	}
	for _, r := range p.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("name %q may hold only letters, digits, '-', '_' and '.'", p.Name)
		}
	}
	if _, err := Parse(p.Spec); err != nil {
		return err
	}
	t := p.Task
	t.Key = Key(p.Name, time.Time{})
	return t.Validate()
}

// Adder adds tasks; *dispatcher.Dispatcher implements it.
type Adder interface {
	// AddTasks adds ts, saying for each whether it was made or its key
	// existed; its errors wrap dispatcher.ErrUnavailable when the store is
	// unreachable.
	AddTasks(ctx context.Context, ts []tasks.NewTask) ([]tasks.Inserted, error)
}

var _ Adder = (*dispatcher.Dispatcher)(nil)

// Config configures a Scheduler.
type Config struct {
	// Schedules are the periodic tasks, with distinct names. Required.
	Schedules []Periodic
	// Logger receives the scheduler's logs. Default slog.Default().
	Logger *slog.Logger
	// TracerProvider receives the schedule.fire spans of the ticks that
	// added a task or failed to. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// instrumentationName names the scheduler's tracer.
const instrumentationName = "github.com/taskd/taskd/internal/schedule"

// Span attribute keys.
const (
	attrSchedule = attribute.Key("taskd.schedule.name")
	attrTick     = attribute.Key("taskd.schedule.tick")
	attrInserted = attribute.Key("taskd.schedule.inserted")
	attrAttempts = attribute.Key("taskd.schedule.attempts")
	attrTaskID   = attribute.Key("taskd.task.id")
)

// Scheduler inserts periodic tasks: at each tick of each schedule, one task
// with the key Key(name, tick) through its Adder. Every
// replica runs its own Scheduler on the same schedules; the key makes each
// tick one task across them, whichever replica gets there first (the others'
// inserts find the key and make nothing). A replica that is down at a tick
// does not catch up on it later; as long as one replica is up, the tick makes
// its task.
//
// A tick that adds its task, or fails to, is recorded as a schedule.fire
// span (attributes taskd.schedule.name, taskd.schedule.tick,
// taskd.schedule.inserted, taskd.schedule.attempts, taskd.task.id; status
// Error on failure), a trace of its own made once the insert has returned,
// so the insert's store spans are not in it. A tick whose task another
// replica added first makes no span.
type Scheduler struct {
	d      Adder
	cfg    Config
	sched  []Cron
	log    *slog.Logger
	tracer trace.Tracer

	life   lifecycle.State
	cron   *cron.Cron
	cancel context.CancelFunc
}

// New returns a Scheduler adding tasks through d. It returns an error
// naming the schedule when one is invalid (Periodic.Validate). The names must
// be distinct, which the engine's configuration checks (schedules[i].name).
func New(d Adder, cfg Config) (*Scheduler, error) {
	if len(cfg.Schedules) == 0 {
		return nil, errors.New("new scheduler: no schedules")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	s := &Scheduler{d: d, cfg: cfg, log: cfg.Logger, tracer: cfg.TracerProvider.Tracer(instrumentationName)}
	for i, p := range cfg.Schedules {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("new scheduler: schedule %d (%q): %w", i, p.Name, err)
		}
		sched, _ := Parse(p.Spec) // checked by Validate
		s.sched = append(s.sched, sched)
	}
	return s, nil
}

// epochAligned is @every as the scheduler counts it: ticks at whole multiples
// of Delay since the Unix epoch, the same in every process, rather than
// Delay after the process started.
type epochAligned struct{ delay time.Duration }

func (e epochAligned) Next(t time.Time) time.Time {
	since := t.Sub(time.Unix(0, 0))
	return time.Unix(0, 0).Add(since - since%e.delay + e.delay).In(t.Location())
}

// scheduleRetries bounds the inserts of one tick when the store fails.
const scheduleRetries = 3

// Start inserts the periodic tasks on their schedules in the background,
// from their next ticks on, until Stop, and returns. The inserts' context
// derives from ctx. Start returns an error wrapping dispatcher.ErrStarted when the
// scheduler is running and dispatcher.ErrStopped after Stop.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.life.Start("scheduler", func() {
		ctx, cancel := context.WithCancel(ctx)
		c := cron.New(cron.WithLocation(time.UTC), cron.WithLogger(CronLogger(s.log, "scheduler")))
		for i, p := range s.cfg.Schedules {
			sched := s.sched[i].cron
			if cd, ok := sched.(cron.ConstantDelaySchedule); ok {
				sched = epochAligned{cd.Delay}
			}
			var id cron.EntryID
			id = c.Schedule(sched, cron.FuncJob(func() {
				// Prev is the tick this run is for: cron sets it before it
				// starts the job, and moves it on only at the next tick.
				s.fire(ctx, p, c.Entry(id).Prev)
			}))
		}
		c.Start()
		s.cron, s.cancel = c, cancel
	})
}

// fire inserts p's task for the tick at.
//
// A tick is traced only when it adds the task or fails to: its inserts run
// under ctx without a span of their own, so that they make none (the
// engine's store and Redis instrumentation records only under a recording
// span), and a tick whose task another replica added first leaves no trace.
// A tick that added its task, or failed, is then recorded as a schedule.fire
// span, dated from the tick's start, with the schedule's name, the tick,
// the tasks inserted (0 or 1), the task's id and the attempts made; a
// failure has status Error.
func (s *Scheduler) fire(ctx context.Context, p Periodic, at time.Time) {
	if at.IsZero() || ctx.Err() != nil {
		return
	}
	start := time.Now()
	t := p.Task
	t.Key = Key(p.Name, at)
	var (
		err      error
		ins      []tasks.Inserted
		attempts int
	)
	for attempt := range scheduleRetries {
		attempts = attempt + 1
		if ins, err = s.d.AddTasks(ctx, []tasks.NewTask{t}); err == nil {
			break
		}
		if !errors.Is(err, dispatcher.ErrUnavailable) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	switch {
	case err == nil && !ins[0].Created:
		s.log.DebugContext(ctx, "periodic task added by another replica", "schedule", p.Name, "tick", at.UTC(), "task_id", ins[0].ID)
		return
	case err != nil && ctx.Err() != nil:
		return
	}
	ctx, span := s.tracer.Start(ctx, "schedule.fire", trace.WithNewRoot(), trace.WithTimestamp(start), trace.WithAttributes(
		attrSchedule.String(p.Name), attrTick.String(at.UTC().Format(time.RFC3339)), attrAttempts.Int(attempts)))
	defer span.End()
	if err != nil {
		span.SetAttributes(attrInserted.Int(0))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		s.log.ErrorContext(ctx, "periodic task not added", "schedule", p.Name, "tick", at.UTC(), "err", err)
		return
	}
	span.SetAttributes(attrInserted.Int(1), attrTaskID.Int64(ins[0].ID))
	s.log.InfoContext(ctx, "periodic task added", "schedule", p.Name, "tick", at.UTC(), "task_id", ins[0].ID)
}

// Stop ends the schedules and waits for inserts in flight. When ctx ends
// first, it cancels them and returns an error wrapping ctx's cause. Stop
// before Start returns nil.
func (s *Scheduler) Stop(ctx context.Context) error {
	if !s.life.Stop() {
		return nil
	}
	defer s.cancel()
	select {
	case <-s.cron.Stop().Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop scheduler: %w", context.Cause(ctx))
	}
}
