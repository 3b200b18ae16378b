// Package delivery posts the events of the webhook outbox to the
// configured webhooks (Deliverer): one process at a time, at least once,
// with retries. Package dispatcher/webhook is the receiver's side.
package delivery

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/backoff"
	"github.com/taskd/taskd/internal/lifecycle"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Store is what the Deliverer needs of the store; *store.Store implements
// it.
type Store interface {
	FanOut(ctx context.Context, p tasks.FanOutParams) (int, error)
	DueDeliveries(ctx context.Context, p tasks.DueDeliveriesParams) ([]tasks.Delivery, error)
	RecordAttempt(ctx context.Context, p tasks.AttemptParams) (tasks.DeliveryStatus, error)
}

// Dispatcher is what the Deliverer needs of the claims engine: its key
// prefix, logger, tracer and meter providers; *dispatcher.Dispatcher
// implements it.
type Dispatcher interface {
	Config() dispatcher.Config
}

// Locker takes the delivery lock; *locker.Client implements it.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opt *locker.Options) (*locker.Lock, error)
}

var (
	_ Store      = (*store.Store)(nil)
	_ Dispatcher = (*dispatcher.Dispatcher)(nil)
	_ Locker     = (*locker.Client)(nil)
)

// lockCleanupTimeout bounds giving back the delivery lock.
const lockCleanupTimeout = time.Second

// instrumentationName names the deliverer's meter and tracer: the
// dispatcher's, whose metrics these were.
const instrumentationName = "github.com/taskd/taskd/dispatcher"

// Span and metric attribute keys.
const (
	// attrOutcome is an attempt's outcome: delivered, error (to be retried)
	// or failed (for good).
	attrOutcome     = attribute.Key("taskd.outcome")
	attrWebhookName = attribute.Key("taskd.webhook.name")
	attrEventID     = attribute.Key("taskd.event.id")
	attrEventKind   = attribute.Key("taskd.event.kind")
	attrTaskID      = attribute.Key("taskd.task.id")
	attrAttempt     = attribute.Key("taskd.webhook.attempt")
)

// Webhook and Config defaults.
const (
	TimeoutDefault     = 10 * time.Second
	ConcurrencyDefault = 4
	MaxAttemptsDefault = 25
	MaxAgeDefault      = 72 * time.Hour

	PollIntervalDefault = time.Second
	LeaseTTLDefault     = 10 * time.Second
	BatchDefault        = 100
	BackoffBaseDefault  = time.Second
	BackoffMaxDefault   = 10 * time.Minute
)

// Webhook is one receiver of events.
type Webhook struct {
	// Name identifies the webhook's deliveries: 1..64 ASCII characters.
	Name string
	// URL is the absolute http(s) URL events are posted to.
	URL string
	// Events are the kinds posted; at least one.
	Events []tasks.WebhookEvent
	// Secret signs each request (see package webhook). Required.
	Secret string
	// Timeout bounds one POST. Default TimeoutDefault.
	Timeout time.Duration
	// Concurrency bounds the POSTs in flight to this webhook. Default
	// ConcurrencyDefault.
	Concurrency int
	// MaxAttempts and MaxAge bound a delivery: it is marked failed after
	// MaxAttempts POSTs, or at a failure once it is older than MaxAge.
	// Defaults MaxAttemptsDefault and MaxAgeDefault.
	MaxAttempts int
	MaxAge      time.Duration
}

// Config configures a Deliverer.
type Config struct {
	// Store holds the outbox and the deliveries. Required.
	Store Store
	// Locks takes the delivery lock: the dispatcher's locker. Required.
	Locks Locker
	// Webhooks are the receivers; at least one.
	Webhooks []Webhook
	// PollInterval is how often new events are fanned out and due
	// deliveries looked for. Default PollIntervalDefault.
	PollInterval time.Duration
	// LeaseTTL is the time to live of the delivery lock, at least 1s. A
	// process that cannot renew it stops delivering (its requests are
	// cancelled) within it, and another takes over within it after a crash.
	// Default LeaseTTLDefault.
	LeaseTTL time.Duration
	// Batch is how many events one fan-out or one look for due deliveries
	// takes, 1..tasks.FanOutLimitMax. Default BatchDefault.
	Batch int
	// BackoffBase and BackoffMax bound the wait before a retry: BackoffBase
	// doubled with each failed attempt, at most BackoffMax, with equal
	// jitter. Defaults BackoffBaseDefault and
	// BackoffMaxDefault.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Client makes the requests. Default: a client with the default
	// transport that does not follow redirects (a redirect is a failure).
	// With the dispatcher's tracer provider, its transport is wrapped in
	// otelhttp's, which makes a client span of each request and sends the
	// W3C traceparent header.
	Client *http.Client
	// Logger receives the deliverer's logs. Default the dispatcher's.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults,
// except Logger and Client, which New sets.
func (c Config) WithDefaults() Config {
	c.Webhooks = slices.Clone(c.Webhooks)
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		w.Events = slices.Clone(w.Events)
		w.Timeout = cmp.Or(w.Timeout, TimeoutDefault)
		w.Concurrency = cmp.Or(w.Concurrency, ConcurrencyDefault)
		w.MaxAttempts = cmp.Or(w.MaxAttempts, MaxAttemptsDefault)
		w.MaxAge = cmp.Or(w.MaxAge, MaxAgeDefault)
	}
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, LeaseTTLDefault)
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	return c
}

// validate checks what the engine's Config does not configure: the handles
// and that there is something to deliver to. The webhooks and the delivery
// settings are the keys webhooks and webhook_delivery of taskd.Config, the
// engine's to check, once, before New.
func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("a store is required")
	case c.Locks == nil:
		return errors.New("a locker is required")
	case len(c.Webhooks) == 0:
		return errors.New("at least one webhook is required")
	}
	return nil
}

// Deliverer posts the events of the webhook outbox to the webhooks. Only one
// process delivers at a time: the one holding the delivery lock on Redis
// (key prefix + "webhooks"), kept alive while it delivers. Requests run under
// the lock's context, so a process that loses the lock has its requests
// cancelled at the latest when the lock's validity ends, and delivers nothing
// after that.
//
// Delivery is at least once. A delivery is marked delivered only after a 2xx
// answer, and failed only when its attempts or age ran out, so nothing is lost;
// an event is posted again when an answer was lost, when the process was
// killed after the POST and before recording it, or when a process that lost
// the lock was still posting it. Receivers deduplicate by the event id.
//
// The Deliverer only reads the outbox; the writes that fill it never wait for
// a delivery.
//
// With the dispatcher's tracer provider, each attempt that posts is a trace
// of its own, rooted at a webhook.deliver span (attributes
// taskd.webhook.name, taskd.event.id, taskd.event.kind, taskd.task.id,
// taskd.webhook.attempt, http.response.status_code, taskd.outcome:
// delivered, error or failed; status Error when not delivered) over the
// POST's client span, whose trace context the receiver gets in a
// traceparent header, and the attempt's record. Polls of the outbox and the
// delivery lock make no spans.
type Deliverer struct {
	locks  Locker
	prefix string
	cfg    Config
	store  Store
	log    *slog.Logger
	subs   map[tasks.WebhookEvent][]string

	attempts metric.Int64Counter
	duration metric.Float64Histogram
	tracer   trace.Tracer
	client   *http.Client // cfg.Client, traced

	life   lifecycle.State
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leading bool
}

// New returns a Deliverer that uses d's key prefix, logger, tracer and
// meter providers.
func New(d Dispatcher, cfg Config) (*Deliverer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new deliverer: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = d.Config().Logger
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	subs := map[tasks.WebhookEvent][]string{}
	for _, w := range cfg.Webhooks {
		for _, e := range w.Events {
			subs[e] = append(subs[e], w.Name)
		}
	}
	mp := d.Config().MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	attempts, err1 := m.Int64Counter("taskd.webhook.attempts",
		metric.WithDescription("Webhook POSTs, by webhook and outcome (delivered, failed, error)."), metric.WithUnit("{request}"))
	duration, err2 := m.Float64Histogram("taskd.webhook.duration",
		metric.WithDescription("Time of one webhook POST, by webhook."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("new deliverer: metric instruments: %w", err)
	}
	tp := d.Config().TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Deliverer{locks: cfg.Locks, prefix: d.Config().KeyPrefix, cfg: cfg, store: cfg.Store, log: cfg.Logger, subs: subs,
		attempts: attempts, duration: duration, tracer: tp.Tracer(instrumentationName), client: tracedClient(cfg.Client, tp)}, nil
}

// tracedClient returns c with its transport wrapped in otelhttp's, which
// starts a client span under the webhook.deliver span and sends its trace
// context in a traceparent header; c itself with a no-op tp. The
// transport's metrics are left out: the deliverer has its own.
func tracedClient(c *http.Client, tp trace.TracerProvider) *http.Client {
	if _, noop := tp.(tracenoop.TracerProvider); noop {
		return c
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	traced := *c
	traced.Transport = otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(propagation.TraceContext{}))
	return &traced
}

// Config returns the deliverer's configuration with defaults applied.
func (w *Deliverer) Config() Config { return w.cfg }

// delivering reports whether this process holds the delivery lock now.
func (w *Deliverer) delivering() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leading
}

// Start runs the deliverer in the background until Stop: it tries to obtain
// the delivery lock every PollInterval (jittered) and, while it holds it,
// delivers. ctx gives it its values; cancelling it stops the deliveries as
// Stop does, without waiting.
//
// Start returns an error wrapping dispatcher.ErrStarted when the deliverer
// is running and dispatcher.ErrStopped after Stop.
func (w *Deliverer) Start(ctx context.Context) error {
	return w.life.Start("deliverer", func() {
		ctx, cancel := context.WithCancel(ctx)
		w.cancel, w.done = cancel, make(chan struct{})
		go func() {
			defer close(w.done)
			w.run(ctx)
		}()
	})
}

// Stop stops delivering, cancels the requests in flight (their deliveries
// stay pending and are posted again later), gives the lock back, and waits
// for all of it until ctx ends. Stop before Start returns nil.
func (w *Deliverer) Stop(ctx context.Context) error {
	if !w.life.Stop() {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop deliverer: %w", context.Cause(ctx))
	}
}

// run takes the delivery lock whenever it is free and delivers while it holds
// it, until ctx ends.
func (w *Deliverer) run(ctx context.Context) {
	key := w.prefix + "webhooks"
	for {
		lock, err := w.locks.Obtain(ctx, key, w.cfg.LeaseTTL, nil)
		switch {
		case err == nil:
			w.lead(ctx, lock)
		case errors.Is(err, locker.ErrNotObtained) || ctx.Err() != nil:
		default:
			w.log.WarnContext(ctx, "webhook delivery: obtain lock", "err", err)
		}
		// Try again soon, so that a crashed deliverer's lock is taken over
		// about when it expires.
		wait := time.NewTimer(backoff.Spread(min(w.cfg.PollInterval, w.cfg.LeaseTTL/4)))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
	}
}

// lead delivers while lock is held, then gives it back.
func (w *Deliverer) lead(ctx context.Context, lock *locker.Lock) {
	lctx, stop := lock.KeepAlive(ctx, w.cfg.LeaseTTL)
	w.setLeading(true)
	w.log.InfoContext(ctx, "webhook delivery lock obtained; delivering", "webhooks", len(w.cfg.Webhooks))
	var wg sync.WaitGroup
	wake := make([]chan struct{}, len(w.cfg.Webhooks))
	for i, h := range w.cfg.Webhooks {
		wake[i] = make(chan struct{}, 1)
		wg.Go(func() { w.deliverTo(lctx, h, wake[i]) })
	}
	wg.Go(func() { w.fanOut(lctx, wake) })
	wg.Wait()
	w.setLeading(false)
	cause := context.Cause(lctx)
	stop()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockCleanupTimeout)
	defer cancel()
	if err := lock.Release(rctx); err != nil && !errors.Is(err, locker.ErrNotHeld) {
		w.log.WarnContext(ctx, "webhook delivery: release lock", "err", err)
	}
	if ctx.Err() == nil {
		w.log.WarnContext(ctx, "webhook delivery lock lost; stopped delivering", "cause", cause)
	} else {
		w.log.InfoContext(ctx, "webhook delivery stopped")
	}
}

func (w *Deliverer) setLeading(v bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.leading = v
}

// fanOut turns new events into deliveries every PollInterval, draining a
// backlog batch by batch, and wakes the webhooks' loops when it made some.
func (w *Deliverer) fanOut(ctx context.Context, wake []chan struct{}) {
	tick := time.NewTicker(w.cfg.PollInterval)
	defer tick.Stop()
	for {
		total := 0
		for ctx.Err() == nil {
			n, err := w.store.FanOut(ctx, tasks.FanOutParams{Subscribers: w.subs, Limit: w.cfg.Batch})
			if err != nil {
				if ctx.Err() == nil {
					w.log.WarnContext(ctx, "webhook delivery: fan out", "err", err)
				}
				break
			}
			total += n
			if n < w.cfg.Batch {
				break
			}
		}
		if total > 0 {
			for _, c := range wake {
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// deliverTo posts the due deliveries of webhook h, at most h.Concurrency at
// a time, until ctx ends; then it waits for the POSTs in flight, which ctx
// cancels.
func (w *Deliverer) deliverTo(ctx context.Context, h Webhook, wake <-chan struct{}) {
	inFlight := map[int64]bool{}
	finished := make(chan int64, h.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(w.cfg.PollInterval)
	defer tick.Stop()
	for {
		if free := h.Concurrency - len(inFlight); free > 0 {
			due, err := w.store.DueDeliveries(ctx, tasks.DueDeliveriesParams{
				Webhook: h.Name, Limit: min(len(inFlight)+free, tasks.FanOutLimitMax),
			})
			if err != nil && ctx.Err() == nil {
				w.log.WarnContext(ctx, "webhook delivery: read due deliveries", "webhook", h.Name, "err", err)
			}
			for _, d := range due {
				if inFlight[d.Event.ID] || len(inFlight) == h.Concurrency {
					continue
				}
				inFlight[d.Event.ID] = true
				wg.Go(func() {
					w.attempt(ctx, h, d)
					finished <- d.Event.ID
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case id := <-finished:
			delete(inFlight, id)
		case <-wake:
		case <-tick.C:
		}
	}
}

// maxAnswerBytes is how much of an answer's body is read (and dropped), so
// that the connection can be reused.
const maxAnswerBytes = 64 << 10

// attempt posts one delivery and records the attempt. A POST cut off because
// ctx ended (the lock was lost, or Stop) is not recorded: the delivery stays
// pending for whoever delivers next.
//
// Each attempt is a trace of its own, rooted at a webhook.deliver span over
// the POST (otelhttp's client span) and the attempt's record, with the
// webhook's name, the event's id and kind, the task's id, the attempt's
// number, the answer's status and the outcome; an attempt that did not
// deliver has status Error. Polls of the outbox that find nothing due make
// no span.
func (w *Deliverer) attempt(ctx context.Context, h Webhook, d tasks.Delivery) {
	body, err := json.Marshal(eventJSON(d.Event))
	if err != nil {
		w.log.ErrorContext(ctx, "webhook delivery: encode event", "event_id", d.Event.ID, "err", err)
		return
	}
	n := d.Attempts + 1
	ctx, span := w.tracer.Start(ctx, "webhook.deliver", trace.WithNewRoot(), trace.WithAttributes(
		attrWebhookName.String(h.Name), attrEventID.Int64(d.Event.ID), attrEventKind.String(string(d.Event.Kind)),
		attrTaskID.Int64(d.Event.TaskID), attrAttempt.Int(n)))
	defer span.End()
	start := time.Now()
	code, postErr := w.post(ctx, h, d.Event.ID, body)
	took := time.Since(start)
	if code != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
	}
	if ctx.Err() != nil {
		span.SetAttributes(attrOutcome.String("cancelled"))
		return
	}
	delivered := postErr == nil && code >= 200 && code < 300
	errText := ""
	switch {
	case postErr != nil:
		errText = postErr.Error()
	case !delivered:
		errText = "answered " + strconv.Itoa(code) + " " + http.StatusText(code)
	}
	retry := backoff.EqualJitter(backoff.Exponential(w.cfg.BackoffBase, w.cfg.BackoffMax, n))
	attrs := metric.WithAttributes(attrWebhookName.String(h.Name))
	w.duration.Record(ctx, took.Seconds(), attrs)
	// The record outlives a cancellation that comes now: the POST happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	status, err := w.store.RecordAttempt(rctx, tasks.AttemptParams{
		EventID: d.Event.ID, Webhook: h.Name, Attempt: n, StatusCode: code, Err: errText, Duration: took,
		Delivered: delivered, RetryIn: retry, MaxAttempts: h.MaxAttempts, MaxAge: h.MaxAge,
	})
	outcome := "delivered"
	switch {
	case !delivered && status == tasks.DeliveryFailed:
		outcome = "failed"
	case !delivered:
		outcome = "error"
	}
	w.attempts.Add(ctx, 1, metric.WithAttributes(attrWebhookName.String(h.Name), attrOutcome.String(outcome)))
	span.SetAttributes(attrOutcome.String(outcome))
	switch {
	case postErr != nil:
		span.RecordError(postErr)
		span.SetStatus(codes.Error, errText)
	case !delivered:
		span.SetStatus(codes.Error, errText)
	case err != nil && !errors.Is(err, tasks.ErrStale):
		span.RecordError(err)
		span.SetStatus(codes.Error, "record attempt: "+err.Error())
	}
	switch {
	case err != nil && !errors.Is(err, tasks.ErrStale):
		w.log.WarnContext(ctx, "webhook delivery: record attempt", "webhook", h.Name, "event_id", d.Event.ID, "err", err)
	case status == tasks.DeliveryFailed:
		w.log.ErrorContext(ctx, "webhook delivery failed for good", "webhook", h.Name, "event_id", d.Event.ID,
			"attempts", n, "err", errText)
	case !delivered:
		w.log.DebugContext(ctx, "webhook delivery attempt failed", "webhook", h.Name, "event_id", d.Event.ID,
			"attempt", n, "retry_in", retry, "err", errText)
	}
}

// recordTimeout bounds recording one attempt.
const recordTimeout = 5 * time.Second

// post sends one signed request and returns the answer's status.
func (w *Deliverer) post(ctx context.Context, h Webhook, id int64, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "taskd-webhooks")
	req.Header.Set(webhook.EventIDHeader, strconv.FormatInt(id, 10))
	req.Header.Set(webhook.SignatureHeader, webhook.Sign(h.Secret, time.Now(), body))
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	return resp.StatusCode, nil
}

// eventJSON is the body of the request that delivers ev. The workflow's
// fields are set only when they say something: the stage's for a submit at a
// stage, the group's for a task of a group, decision and notes when the
// submit carried them; so a plain task's events read as they did before
// there were workflows.
func eventJSON(ev tasks.OutboxEvent) webhook.Event {
	e := webhook.Event{
		ID: ev.ID, Type: string(ev.Kind), CreatedAt: ev.CreatedAt.UTC(),
		Data: webhook.Data{
			TaskID: ev.TaskID, Category: ev.Category, Key: ev.Key, Fence: ev.Fence, Holder: ev.Holder, EditorID: ev.EditorID,
			Cause: string(ev.Cause), Detail: ev.Detail, Result: ev.Result,
			Decision: ev.Decision, Notes: ev.Notes,
		},
	}
	if ev.GroupID != 0 {
		e.Data.GroupID, e.Data.Overlap = ev.GroupID, ev.Overlap
	}
	if ev.Kind == tasks.WebhookSubmitted && ev.StageName != "" {
		e.Data.Stage, e.Data.TaskStatus, e.Data.NextStage = ev.StageName, webhook.StatusDone, ev.NextStage
		if ev.NextStage != "" {
			e.Data.TaskStatus = webhook.StatusPending
		}
	}
	return e
}
