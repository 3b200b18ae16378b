package tasks

import (
	"encoding/json"
	"time"
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
	WebhookSnooze   WebhookCause = "snooze"   // dead: a worker's snooze past the task's limit (Snooze.Max)
	WebhookSweep    WebhookCause = "sweep"    // expired: RecycleExpired returned it to the pool
	WebhookTakeover WebhookCause = "takeover" // expired: a Claim took it over
	WebhookReclaim  WebhookCause = "reclaim"  // expired: the same editor's next Claim returned it to the pool
	WebhookRelease  WebhookCause = "release"  // released: the holder's Release
	WebhookSkip     WebhookCause = "skip"     // released: the editor's Release with Skip
	WebhookForce    WebhookCause = "force"    // released: an operator's ForceRelease
)

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

	// StageName is the stage a submitted event's result was submitted at, ""
	// for a task without stages and for other events. Decision and Notes are
	// the submitter's, "" when none.
	StageName string `db:"stage_name"`
	Decision  string `db:"decision"`
	Notes     string `db:"notes"`
	// NextStage, for a submitted event at a stage, is the stage the submit
	// moved the task to, back in the pool (the next, or the one before after
	// DecisionSendBack); "" when the submit made the task done.
	NextStage string `db:"-"`
	// GroupID and Overlap are the task's group and how many results the group
	// asks for (see Task.GroupID); 0 for a task that asks for one result.
	GroupID int64 `db:"group_id"`
	Overlap int   `db:"overlap"`
}

// FanOutParams are the arguments of FanOut.
type FanOutParams struct {
	// Subscribers names, for each event kind, the webhooks that receive it.
	// Events of other kinds are fanned out to none.
	Subscribers map[WebhookEvent][]string
	// Limit is how many events one call takes: 1..FanOutLimitMax.
	Limit int
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
