package tasks

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
