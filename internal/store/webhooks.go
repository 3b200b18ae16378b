package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// webhookEventOf maps an audit event to the webhook event that reports it, if
// any. A skip is a release (the claim ended and the task is back in the pool;
// only this editor is not offered it for a while), told apart by its cause.
// A failure with attempts left is no webhook event: the task is retried.
func webhookEventOf(k tasks.EventKind) (tasks.WebhookEvent, bool) {
	switch k {
	case tasks.EventSubmitted:
		return tasks.WebhookSubmitted, true
	case tasks.EventDead:
		return tasks.WebhookDead, true
	case tasks.EventExpired, tasks.EventRecycled:
		return tasks.WebhookExpired, true
	case tasks.EventReleased, tasks.EventSkipped:
		return tasks.WebhookReleased, true
	}
	return "", false
}

const (
	// fanOutLockSQL locks new events, oldest first, from their index. SKIP
	// LOCKED passes over events whose transaction has not committed (their rows
	// are locked until it does) and those another fan-out is working on.
	fanOutLockSQL = `SELECT id, kind FROM webhook_outbox FORCE INDEX (webhook_outbox_new)
WHERE fanned_out = 0 ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`
	fanOutDeliveriesSQL = `INSERT INTO webhook_deliveries (event_id, webhook) VALUES %s
ON DUPLICATE KEY UPDATE event_id = event_id`
	fanOutDoneSQL = `UPDATE webhook_outbox SET fanned_out = 1 WHERE id IN (?) AND fanned_out = 0`
)

// FanOut creates a pending delivery for each new event of the outbox and each
// webhook that subscribes to its kind, due at once, and marks the events fanned
// out, in one transaction; it returns how many events it took. Call it until
// it returns fewer than p.Limit to drain a backlog. Concurrent calls take
// distinct events; a delivery that exists already is left alone.
//
// It returns ErrInvalid for bad params. Round trips: BEGIN, locked SELECT,
// INSERT, UPDATE, COMMIT.
func (s *Store) FanOut(ctx context.Context, p tasks.FanOutParams) (int, error) {
	if p.Limit < 1 || p.Limit > tasks.FanOutLimitMax {
		return 0, fmt.Errorf("fan out: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.FanOutLimitMax)
	}
	for _, names := range p.Subscribers {
		for _, n := range names {
			if n == "" || len(n) > tasks.MaxWebhookNameLen {
				return 0, fmt.Errorf("fan out: %w: webhook name must be 1..%d bytes", tasks.ErrInvalid, tasks.MaxWebhookNameLen)
			}
		}
	}
	var taken int
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		taken = 0
		var rows []struct {
			ID   int64              `db:"id"`
			Kind tasks.WebhookEvent `db:"kind"`
		}
		if err := tx.SelectContext(ctx, &rows, fanOutLockSQL, p.Limit); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		var values []string
		var dargs []any
		ids := make([]int64, 0, len(rows))
		for _, r := range rows {
			ids = append(ids, r.ID)
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
		q, args, err := sqlx.In(fanOutDoneSQL, ids)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, q, args...)
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

// dueDeliveriesSQL reads a submitted event's stage and decision from its own
// row, not the task's: the task may have moved to another stage since.
const dueDeliveriesSQL = `SELECT d.attempts, o.id, o.kind, o.task_id, o.category, o.fence,
	COALESCE(o.holder, '') AS holder, COALESCE(o.editor_id, 0) AS editor_id, o.cause,
	COALESCE(o.detail, '') AS detail, o.created_at, r.result, COALESCE(t.task_key, '') AS task_key,
	COALESCE(o.stage_name, '') AS stage_name, COALESCE(o.decision, '') AS decision, COALESCE(r.notes, '') AS notes,
	t.stages, COALESCE(t.group_id, 0) AS group_id, IF(t.group_id IS NULL, 0, t.overlap) AS overlap
FROM webhook_deliveries d FORCE INDEX (webhook_deliveries_due)
JOIN webhook_outbox o ON o.id = d.event_id
LEFT JOIN tasks t ON t.id = o.task_id
LEFT JOIN task_results r ON o.kind = 'submitted' AND r.task_id = o.task_id AND r.fence = o.fence
WHERE d.webhook = ? AND d.status = 'pending' AND d.next_attempt_at <= NOW(3)
ORDER BY d.next_attempt_at, d.event_id LIMIT ?`

// DueDeliveries returns the webhook's pending deliveries whose next attempt is
// due by the database clock, the longest due first, with their events (and a
// submitted event's result, stage, decision and notes, and the stage it moved
// the task to). It reads without locking: one process delivers at a time, and
// RecordAttempt is conditional. It returns ErrInvalid for bad params.
func (s *Store) DueDeliveries(ctx context.Context, p tasks.DueDeliveriesParams) ([]tasks.Delivery, error) {
	if p.Limit < 1 || p.Limit > tasks.FanOutLimitMax {
		return nil, fmt.Errorf("due deliveries: %w: limit must be 1..%d", tasks.ErrInvalid, tasks.FanOutLimitMax)
	}
	var rows []struct {
		Attempts int `db:"attempts"`
		tasks.OutboxEvent
		Result sql.NullString `db:"result"`
		Stages tasks.Stages   `db:"stages"`
	}
	if err := s.db.SelectContext(ctx, &rows, dueDeliveriesSQL, p.Webhook, p.Limit); err != nil {
		return nil, fmt.Errorf("due deliveries of %s: %w", p.Webhook, err)
	}
	out := make([]tasks.Delivery, len(rows))
	for i, r := range rows {
		out[i] = tasks.Delivery{Webhook: p.Webhook, Attempts: r.Attempts, Event: r.OutboxEvent}
		if r.Result.Valid {
			out[i].Event.Result = json.RawMessage(r.Result.String)
		}
		if r.Kind == tasks.WebhookSubmitted {
			out[i].Event.NextStage = nextStage(r.Stages, r.StageName, r.Decision)
		}
	}
	return out, nil
}

// nextStage is the stage a submit at stage of a task with stages moved it to,
// as the submit's UPDATE does (see submitSetSQL): the one before after a send
// back, else the next; "" when the submit made the task done, or the task
// has no such stage.
func nextStage(stages tasks.Stages, stage, decision string) string {
	i := slices.Index(stages, stage)
	switch {
	case i < 0:
		return ""
	case decision == tasks.DecisionSendBack && i > 0:
		return stages[i-1]
	case decision != tasks.DecisionSendBack && i+1 < len(stages):
		return stages[i+1]
	}
	return ""
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

// recordAttemptGaleraSQL is recordAttemptSQL with its writes guarded as
// endWrite guards a claim's (see galera.go): a brute-force abort between them
// leaves the rest of the batch changing nothing, and the batch is retried.
var recordAttemptGaleraSQL = strings.NewReplacer(
	"duration_ms) VALUES (?, ?, ?, ?, ?, ?);", "duration_ms)\n\tSELECT ?, ?, ?, ?, ?, ? FROM DUAL WHERE @@in_transaction = 1;",
	"AND attempts = ?;", "AND attempts = ? AND @@in_transaction = 1;",
).Replace(recordAttemptSQL)

// RecordAttempt logs one POST of a delivery and updates the delivery: delivered,
// pending with its next attempt p.RetryIn from now (database clock), or failed
// once attempts or age ran out. It returns the delivery's status, and ErrStale
// (having logged the attempt) when the delivery had moved on: another process
// recorded this attempt, or it is no longer pending. Round trips: one.
func (s *Store) RecordAttempt(ctx context.Context, p tasks.AttemptParams) (tasks.DeliveryStatus, error) {
	if p.Attempt < 1 || p.MaxAttempts < 1 || p.RetryIn < 0 || p.MaxAge <= 0 {
		return "", fmt.Errorf("record attempt: %w: attempt, max attempts and max age must be positive", tasks.ErrInvalid)
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
		Recorded int64                `db:"recorded"`
		Status   tasks.DeliveryStatus `db:"status"`
	}
	var found bool
	query := recordAttemptSQL
	if s.galera.Load() != galeraOff {
		query = recordAttemptGaleraSQL
	}
	if err := s.batch(ctx, query, args, scanOne(&row, &found)); err != nil {
		return "", fmt.Errorf("record attempt %d of event %d to %s: %w", p.Attempt, p.EventID, p.Webhook, err)
	}
	if !found {
		return "", fmt.Errorf("record attempt %d of event %d to %s: %w", p.Attempt, p.EventID, p.Webhook, tasks.ErrNotFound)
	}
	if row.Recorded == 0 {
		return row.Status, fmt.Errorf("record attempt %d of event %d to %s: %w", p.Attempt, p.EventID, p.Webhook, tasks.ErrStale)
	}
	return row.Status, nil
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
func (s *Store) WebhookBacklog(ctx context.Context) (*tasks.WebhookBacklog, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	defer rollback(ctx, tx)
	b := &tasks.WebhookBacklog{Pending: map[string]int64{}, Failed: map[string]int64{}}
	if err := tx.GetContext(ctx, &b.New, backlogNewSQL); err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	var rows []struct {
		Webhook string               `db:"webhook"`
		Status  tasks.DeliveryStatus `db:"status"`
		N       int64                `db:"n"`
	}
	if err := tx.SelectContext(ctx, &rows, backlogSQL); err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	for _, r := range rows {
		if r.Status == tasks.DeliveryPending {
			b.Pending[r.Webhook] = r.N
		} else {
			b.Failed[r.Webhook] = r.N
		}
	}
	return b, nil
}

const deliveryLogSQL = `SELECT id, event_id, webhook, attempt, COALESCE(status_code, 0) AS status_code,
	COALESCE(error, '') AS error, duration_ms, ` + "`at`" + `
FROM webhook_attempts WHERE event_id = ? AND webhook = ? ORDER BY id`

// deliveryLog returns the attempts to deliver event eventID to webhook, oldest
// first; empty when there were none.
func (s *Store) deliveryLog(ctx context.Context, eventID int64, webhook string) ([]tasks.WebhookAttempt, error) {
	out := []tasks.WebhookAttempt{}
	if err := s.db.SelectContext(ctx, &out, deliveryLogSQL, eventID, webhook); err != nil {
		return nil, fmt.Errorf("delivery log of event %d to %s: %w", eventID, webhook, err)
	}
	return out, nil
}
