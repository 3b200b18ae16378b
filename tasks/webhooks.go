package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// WebhookEvent names an event the outbox records for webhooks. The values
// match the ENUM of webhook_outbox.kind in schema.sql.
type WebhookEvent string

// Webhook events.
const (
	// WebhookSubmitted: a holder's result was accepted (Submit); the task is
	// done.
	WebhookSubmitted WebhookEvent = "submitted"
	// WebhookDead: a holder reported a failure with no attempts left, or one
	// retrying cannot fix (Fail); the task is dead.
	WebhookDead WebhookEvent = "dead"
	// WebhookExpired: a claim's lease passed and the task went back to the
	// pool (RecycleExpired, or a claim of the same editor) or to a new claim
	// that took it over (Claim).
	WebhookExpired WebhookEvent = "expired"
	// WebhookReleased: the holder gave the claim back (Release, also with
	// Skip) or an operator revoked it (ForceRelease).
	WebhookReleased WebhookEvent = "released"
)

// WebhookEvents returns every webhook event, in a fixed order.
func WebhookEvents() []WebhookEvent {
	return []WebhookEvent{WebhookSubmitted, WebhookDead, WebhookExpired, WebhookReleased}
}

// WebhookCause says what caused a webhook event; events carry it as "cause".
type WebhookCause string

// Webhook causes, by event.
const (
	WebhookSubmit   WebhookCause = "submit"   // submitted: Submit
	WebhookFail     WebhookCause = "fail"     // dead: Fail
	WebhookSweep    WebhookCause = "sweep"    // expired: RecycleExpired returned it to the pool
	WebhookTakeover WebhookCause = "takeover" // expired: a Claim took it over
	WebhookReclaim  WebhookCause = "reclaim"  // expired: the same editor's next Claim returned it to the pool
	WebhookRelease  WebhookCause = "release"  // released: the holder's Release
	WebhookSkip     WebhookCause = "skip"     // released: the editor's Release with Skip
	WebhookForce    WebhookCause = "force"    // released: an operator's ForceRelease
)

// webhookEventOf maps an audit event to the webhook event that reports it, if
// any. A skip is a release (the claim ended and the task is back in the pool;
// only this editor is not offered it for a while), told apart by its cause.
// A failure with attempts left is no webhook event: the task is retried.
func webhookEventOf(k EventKind) (WebhookEvent, bool) {
	switch k {
	case EventSubmitted:
		return WebhookSubmitted, true
	case EventDead:
		return WebhookDead, true
	case EventExpired, EventRecycled:
		return WebhookExpired, true
	case EventReleased, EventSkipped:
		return WebhookReleased, true
	}
	return "", false
}

// DeliveryStatus is the state of a webhook delivery. The values match the ENUM
// of webhook_deliveries.status in schema.sql.
type DeliveryStatus string

// Delivery states.
const (
	DeliveryPending   DeliveryStatus = "pending"   // not delivered yet; retried when due
	DeliveryDelivered DeliveryStatus = "delivered" // a POST was answered 2xx
	DeliveryFailed    DeliveryStatus = "failed"    // attempts or age ran out; kept, not retried
)

// Limits of the webhook store methods.
const (
	// FanOutLimitMax bounds FanOutParams.Limit and DueDeliveriesParams.Limit.
	FanOutLimitMax = 1000
	// MaxWebhookNameLen is the longest webhook name, in bytes (ASCII).
	MaxWebhookNameLen = 64
)

// OutboxEvent is a record of the webhook outbox: one task event.
type OutboxEvent struct {
	// ID is the event's id, unique and never reused: receivers deduplicate by it.
	ID       int64        `db:"id"`
	Kind     WebhookEvent `db:"kind"`
	TaskID   int64        `db:"task_id"`
	Category string       `db:"category"`
	// Key is the task's key, "" when it has none.
	Key string `db:"task_key"`
	// Fence, Holder and EditorID are those of the claim the event is about
	// (EditorID 0 for a worker's).
	Fence    int64        `db:"fence"`
	Holder   string       `db:"holder"`
	EditorID int64        `db:"editor_id"`
	Cause    WebhookCause `db:"cause"`
	// Detail is the holder's release reason, the error of a dead task, or
	// what recorded the expiry.
	Detail string `db:"detail"`
	// CreatedAt is when the change happened, by the database clock.
	CreatedAt time.Time `db:"created_at"`
	// Result is the accepted result of a submitted event; nil for others.
	Result json.RawMessage `db:"-"`
}

// FanOutParams are the arguments of FanOut.
type FanOutParams struct {
	// Subscribers names, for each event kind, the webhooks that receive it.
	// Events of other kinds are fanned out to none.
	Subscribers map[WebhookEvent][]string
	// Limit is how many events one call takes: 1..FanOutLimitMax.
	Limit int
}

const (
	// fanOutLockSQL locks new events, oldest first, from their index. SKIP
	// LOCKED passes over events whose transaction has not committed (their rows
	// are locked until it does) and those another fan-out is working on.
	fanOutLockSQL = `SELECT id, kind FROM webhook_outbox FORCE INDEX (webhook_outbox_new)
WHERE fanned_out = 0 ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`
	fanOutDeliveriesSQL = `INSERT INTO webhook_deliveries (event_id, webhook) VALUES %s
ON DUPLICATE KEY UPDATE event_id = event_id`
	fanOutDoneSQL = `UPDATE webhook_outbox SET fanned_out = 1 WHERE id IN (%s) AND fanned_out = 0`
)

// FanOut creates a pending delivery for each new event of the outbox and each
// webhook that subscribes to its kind, due at once, and marks the events fanned
// out, in one transaction; it returns how many events it took. Call it until
// it returns fewer than p.Limit to drain a backlog. Concurrent calls take
// distinct events; a delivery that exists already is left alone.
//
// It returns ErrInvalid for bad params. Round trips: BEGIN, locked SELECT,
// INSERT, UPDATE, COMMIT.
func (s *Store) FanOut(ctx context.Context, p FanOutParams) (int, error) {
	if p.Limit < 1 || p.Limit > FanOutLimitMax {
		return 0, fmt.Errorf("fan out: %w: limit must be 1..%d", ErrInvalid, FanOutLimitMax)
	}
	for _, names := range p.Subscribers {
		for _, n := range names {
			if n == "" || len(n) > MaxWebhookNameLen {
				return 0, fmt.Errorf("fan out: %w: webhook name must be 1..%d bytes", ErrInvalid, MaxWebhookNameLen)
			}
		}
	}
	var taken int
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		taken = 0
		var rows []struct {
			ID   int64        `db:"id"`
			Kind WebhookEvent `db:"kind"`
		}
		if err := tx.SelectContext(ctx, &rows, fanOutLockSQL, p.Limit); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		var values, ids []string
		var dargs, iargs []any
		for _, r := range rows {
			ids = append(ids, "?")
			iargs = append(iargs, r.ID)
			for _, name := range p.Subscribers[r.Kind] {
				values = append(values, "(?, ?)")
				dargs = append(dargs, r.ID, name)
			}
		}
		if len(values) > 0 {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(fanOutDeliveriesSQL, strings.Join(values, ", ")), dargs...); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, fmt.Sprintf(fanOutDoneSQL, strings.Join(ids, ", ")), iargs...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != int64(len(rows)) {
			return fmt.Errorf("fan out matched %d of %d locked events", n, len(rows))
		}
		taken = len(rows)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fan out: %w", err)
	}
	return taken, nil
}

// Delivery is a pending delivery of an event to a webhook.
type Delivery struct {
	Webhook string
	// Attempts is how many POSTs were made so far.
	Attempts int
	Event    OutboxEvent
}

// DueDeliveriesParams are the arguments of DueDeliveries.
type DueDeliveriesParams struct {
	Webhook string
	// Limit is the most deliveries returned: 1..FanOutLimitMax.
	Limit int
}

const dueDeliveriesSQL = `SELECT d.attempts, o.id, o.kind, o.task_id, o.category, o.fence,
	COALESCE(o.holder, '') AS holder, COALESCE(o.editor_id, 0) AS editor_id, o.cause,
	COALESCE(o.detail, '') AS detail, o.created_at, r.result, COALESCE(t.task_key, '') AS task_key
FROM webhook_deliveries d FORCE INDEX (webhook_deliveries_due)
JOIN webhook_outbox o ON o.id = d.event_id
LEFT JOIN tasks t ON t.id = o.task_id
LEFT JOIN task_results r ON o.kind = 'submitted' AND r.task_id = o.task_id AND r.fence = o.fence
WHERE d.webhook = ? AND d.status = 'pending' AND d.next_attempt_at <= NOW(3)
ORDER BY d.next_attempt_at, d.event_id LIMIT ?`

// DueDeliveries returns the webhook's pending deliveries whose next attempt is
// due by the database clock, the longest due first, with their events (and a
// submitted event's result). It reads without locking: one process delivers at
// a time, and RecordAttempt is conditional. It returns ErrInvalid for bad
// params.
func (s *Store) DueDeliveries(ctx context.Context, p DueDeliveriesParams) ([]Delivery, error) {
	if p.Limit < 1 || p.Limit > FanOutLimitMax {
		return nil, fmt.Errorf("due deliveries: %w: limit must be 1..%d", ErrInvalid, FanOutLimitMax)
	}
	var rows []struct {
		Attempts int `db:"attempts"`
		OutboxEvent
		Result sql.NullString `db:"result"`
	}
	if err := s.db.SelectContext(ctx, &rows, dueDeliveriesSQL, p.Webhook, p.Limit); err != nil {
		return nil, fmt.Errorf("due deliveries of %s: %w", p.Webhook, err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{Webhook: p.Webhook, Attempts: r.Attempts, Event: r.OutboxEvent}
		if r.Result.Valid {
			out[i].Event.Result = json.RawMessage(r.Result.String)
		}
	}
	return out, nil
}

// AttemptParams are the arguments of RecordAttempt: one POST of a delivery and
// what became of it.
type AttemptParams struct {
	EventID int64
	Webhook string
	// Attempt is the POST's number: the delivery's Attempts when it was read,
	// plus one.
	Attempt int
	// StatusCode is the answer's HTTP status, or 0 when there was none.
	StatusCode int
	// Err describes a failure (truncated to 1024 characters); empty on success.
	Err      string
	Duration time.Duration
	// Delivered says the receiver took the event (a 2xx answer).
	Delivered bool
	// RetryIn is the wait before the next attempt when not delivered.
	RetryIn time.Duration
	// MaxAttempts and MaxAge bound the delivery: when it was not delivered and
	// this was attempt MaxAttempts, or the delivery is older than MaxAge by the
	// database clock, it is marked failed.
	MaxAttempts int
	MaxAge      time.Duration
}

// recordAttemptSQL is RecordAttempt's statement batch (see batch): the log row,
// then the delivery's update, conditional on its attempts being the ones the
// caller read (a second deliverer's attempt of the same number is logged but
// not counted), and the delivery's status as the report.
const recordAttemptSQL = `START TRANSACTION;
INSERT INTO webhook_attempts (event_id, webhook, attempt, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?);
UPDATE webhook_deliveries SET attempts = ?, last_error = ?,
	done_at = IF(? OR ? OR created_at < NOW(3) - INTERVAL ? MICROSECOND, NOW(3), NULL),
	next_attempt_at = IF(?, next_attempt_at, NOW(3) + INTERVAL ? MICROSECOND),
	status = CASE WHEN ? THEN 'delivered' WHEN ? OR created_at < NOW(3) - INTERVAL ? MICROSECOND THEN 'failed' ELSE 'pending' END
WHERE event_id = ? AND webhook = ? AND status = 'pending' AND attempts = ?;
SELECT ROW_COUNT() AS recorded, status FROM webhook_deliveries WHERE event_id = ? AND webhook = ?;
COMMIT`

// RecordAttempt logs one POST of a delivery and updates the delivery: delivered,
// pending with its next attempt p.RetryIn from now (database clock), or failed
// once attempts or age ran out. It returns the delivery's status, and ErrStale
// (having logged the attempt) when the delivery had moved on: another process
// recorded this attempt, or it is no longer pending. Round trips: one.
func (s *Store) RecordAttempt(ctx context.Context, p AttemptParams) (DeliveryStatus, error) {
	if p.Attempt < 1 || p.MaxAttempts < 1 || p.RetryIn < 0 || p.MaxAge <= 0 {
		return "", fmt.Errorf("record attempt: %w: attempt, max attempts and max age must be positive", ErrInvalid)
	}
	exhausted := !p.Delivered && p.Attempt >= p.MaxAttempts
	lastErr := nullString(truncate(p.Err, maxDetailLen))
	var code any // NULL without an answer
	if p.StatusCode > 0 {
		code = p.StatusCode
	}
	ms := min(p.Duration.Milliseconds(), math.MaxInt32)
	args := []any{
		p.EventID, p.Webhook, p.Attempt, code, lastErr, ms,
		p.Attempt, lastErr,
		p.Delivered, exhausted, micros(p.MaxAge),
		p.Delivered, micros(p.RetryIn),
		p.Delivered, exhausted, micros(p.MaxAge),
		p.EventID, p.Webhook, p.Attempt - 1,
		p.EventID, p.Webhook,
	}
	var row struct {
		Recorded int64          `db:"recorded"`
		Status   DeliveryStatus `db:"status"`
	}
	var found bool
	if err := s.batch(ctx, recordAttemptSQL, args, scanOne(&row, &found)); err != nil {
		return "", fmt.Errorf("record attempt %d of event %d to %s: %w", p.Attempt, p.EventID, p.Webhook, err)
	}
	if !found {
		return "", fmt.Errorf("record attempt %d of event %d to %s: %w", p.Attempt, p.EventID, p.Webhook, ErrNotFound)
	}
	if row.Recorded == 0 {
		return row.Status, fmt.Errorf("record attempt %d of event %d to %s: %w", p.Attempt, p.EventID, p.Webhook, ErrStale)
	}
	return row.Status, nil
}

// WebhookBacklog counts the outbox's events not fanned out yet and the
// deliveries that are pending or failed, by webhook.
type WebhookBacklog struct {
	// New counts events not fanned out to deliveries yet.
	New int64
	// Pending and Failed count deliveries by webhook; webhooks with none are
	// left out.
	Pending map[string]int64
	Failed  map[string]int64
}

// PendingTotal is New plus every webhook's pending deliveries: what is still
// to be delivered.
func (b *WebhookBacklog) PendingTotal() int64 {
	n := b.New
	for _, p := range b.Pending {
		n += p
	}
	return n
}

const (
	backlogNewSQL = `SELECT COUNT(*) FROM webhook_outbox FORCE INDEX (webhook_outbox_new) WHERE fanned_out = 0`
	// backlogSQL reads the status index, which covers it (the primary key holds
	// the webhook): its cost grows with pending and failed deliveries, not with
	// delivered ones.
	backlogSQL = `SELECT webhook, status, COUNT(*) AS n FROM webhook_deliveries FORCE INDEX (webhook_deliveries_status)
WHERE status IN ('pending', 'failed') GROUP BY webhook, status`
)

// WebhookBacklog returns the backlog of webhook deliveries. Its two reads run
// in one read-only REPEATABLE READ transaction, so they see one snapshot: an
// event fanned out between them is counted once, as new or as pending, never
// as both.
func (s *Store) WebhookBacklog(ctx context.Context) (*WebhookBacklog, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	b := &WebhookBacklog{Pending: map[string]int64{}, Failed: map[string]int64{}}
	if err := tx.GetContext(ctx, &b.New, backlogNewSQL); err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	var rows []struct {
		Webhook string         `db:"webhook"`
		Status  DeliveryStatus `db:"status"`
		N       int64          `db:"n"`
	}
	if err := tx.SelectContext(ctx, &rows, backlogSQL); err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	for _, r := range rows {
		if r.Status == DeliveryPending {
			b.Pending[r.Webhook] = r.N
		} else {
			b.Failed[r.Webhook] = r.N
		}
	}
	return b, nil
}

// WebhookAttempt is a row of the delivery log.
type WebhookAttempt struct {
	ID      int64  `db:"id"`
	EventID int64  `db:"event_id"`
	Webhook string `db:"webhook"`
	Attempt int    `db:"attempt"`
	// StatusCode is the answer's HTTP status, 0 when there was none.
	StatusCode int       `db:"status_code"`
	Error      string    `db:"error"`
	DurationMS int64     `db:"duration_ms"`
	At         time.Time `db:"at"`
}

const deliveryLogSQL = `SELECT id, event_id, webhook, attempt, COALESCE(status_code, 0) AS status_code,
	COALESCE(error, '') AS error, duration_ms, ` + "`at`" + `
FROM webhook_attempts WHERE event_id = ? AND webhook = ? ORDER BY id`

// DeliveryLog returns the attempts to deliver event eventID to webhook, oldest
// first; empty when there were none.
func (s *Store) DeliveryLog(ctx context.Context, eventID int64, webhook string) ([]WebhookAttempt, error) {
	out := []WebhookAttempt{}
	if err := s.db.SelectContext(ctx, &out, deliveryLogSQL, eventID, webhook); err != nil {
		return nil, fmt.Errorf("delivery log of event %d to %s: %w", eventID, webhook, err)
	}
	return out, nil
}
