// Package webhook is what a receiver of taskd's webhooks needs: the shape of
// an event and the check of its signature. It imports nothing but the
// standard library, so a receiver can use it without the rest of taskd.
//
// taskd POSTs each event as JSON (see Event) with the headers
//
//	Content-Type: application/json
//	Taskd-Event-Id: 123
//	Taskd-Signature: t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//
// where v1 is the hex HMAC-SHA256, keyed with the webhook's secret, of the
// timestamp t (Unix seconds, when the POST was made), a dot and the raw body.
// A receiver reads the raw body, calls Verify before parsing it, and answers
// 2xx once the event is stored; anything else (or no answer within the
// webhook's timeout) makes taskd retry later. Delivery is at least once: the
// same event may arrive more than once (after a retry whose first answer was
// lost, or when another taskd process takes over the delivery), always with
// the same id, so receivers deduplicate by Event.ID (the Taskd-Event-Id
// header).
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a webhook request.
const (
	// EventIDHeader carries the event's id, Event.ID in decimal.
	EventIDHeader = "Taskd-Event-Id"
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>".
	SignatureHeader = "Taskd-Signature"
)

// ToleranceDefault is the largest difference between a signature's timestamp
// and the receiver's clock that Verify accepts with a zero tolerance: it bounds
// how long a captured request can be replayed.
const ToleranceDefault = 5 * time.Minute

// Event types, the values of Event.Type.
const (
	// TypeSubmitted: a holder's result was accepted; the task is done, or,
	// for a task with stages, went on to another stage (Data.TaskStatus,
	// Data.NextStage). Data.Result holds the result.
	TypeSubmitted = "submitted"
	// TypeDead: a holder reported a failure and no attempts are left (or the
	// failure was final). Data.Detail holds the error.
	TypeDead = "dead"
	// TypeExpired: a claim's lease passed without a submit or release; the
	// task went back to the pool (cause "sweep" or "reclaim") or to a new
	// claim ("takeover").
	TypeExpired = "expired"
	// TypeReleased: the claim was given back by its holder (cause "release",
	// Data.Detail the reason), skipped by its editor ("skip": back in the
	// pool, not offered to that editor for a while) or revoked by an operator
	// ("force").
	TypeReleased = "released"
)

// Event is the JSON body of a webhook request.
type Event struct {
	// ID identifies the event: unique, never reused, the same on every
	// delivery of the event. Deduplicate by it.
	ID int64 `json:"id"`
	// Type is one of the Type constants.
	Type string `json:"type"`
	// CreatedAt is when the change happened, by the database's clock.
	CreatedAt time.Time `json:"created_at"`
	Data      Data      `json:"data"`
}

// Data describes the task and the claim an event is about.
type Data struct {
	TaskID   int64  `json:"task_id"`
	Category string `json:"category"`
	// Key is the task's key (its id in the system it came from); absent
	// when the task has none.
	Key string `json:"key,omitempty"`
	// Fence identifies the claim: the task's fence when it was claimed.
	Fence int64 `json:"fence"`
	// Holder held the claim: "editor:<id>" or a worker's id.
	Holder string `json:"holder,omitempty"`
	// EditorID is the editor who held the claim; absent for a worker.
	EditorID int64 `json:"editor_id,omitempty"`
	// Cause says what caused the event: submit, fail, sweep, takeover,
	// reclaim, release, skip or force.
	Cause string `json:"cause"`
	// Detail is the release reason, the error of a dead task, or how an
	// expiry was noticed; absent when empty.
	Detail string `json:"detail,omitempty"`
	// Stage, for a submitted event of a task with stages, is the stage the
	// result was submitted at; absent otherwise.
	Stage string `json:"stage,omitempty"`
	// Decision is a submitted event's decision, e.g. "approve" or
	// "send_back" (DecisionSendBack) from a reviewer; absent when the submit
	// carried none.
	Decision string `json:"decision,omitempty"`
	// Notes are a submitted event's notes, e.g. why a reviewer sent the task
	// back; absent when the submit carried none.
	Notes string `json:"notes,omitempty"`
	// TaskStatus, for a submitted event of a task with stages, is the task's
	// status right after the submit: StatusDone after its last stage, or
	// StatusPending when it went on to NextStage; absent for a task without
	// stages, which a submit always makes done.
	TaskStatus string `json:"task_status,omitempty"`
	// NextStage, with TaskStatus StatusPending, is the stage the task went
	// to, back in the pool: the next one, or the one before after a send
	// back. Absent when the submit made the task done.
	NextStage string `json:"next_stage,omitempty"`
	// GroupID, for a task that asks for several independent results (one
	// task per result, each from a different editor), is its group's id: the
	// id of the group's first task. Overlap is how many results the group
	// asks for; the group is complete when that many of its tasks are done.
	// Both absent for a task that asks for one result.
	GroupID int64 `json:"group_id,omitempty"`
	Overlap int   `json:"overlap,omitempty"`
	// Result is the accepted result of a submitted event, as submitted.
	Result json.RawMessage `json:"result,omitempty"`
}

// Values of Data.TaskStatus.
const (
	// StatusDone: the submit ended the task's last stage; the task is done.
	StatusDone = "done"
	// StatusPending: the submit moved the task to another stage
	// (Data.NextStage), back in the pool.
	StatusPending = "pending"
)

// Decisions of Data.Decision that taskd acts on. Any other decision is the
// submitter's own verdict, kept as given; it moves a task on as
// DecisionApprove does.
const (
	// DecisionApprove moves a task on to its next stage, or makes it done
	// at its last.
	DecisionApprove = "approve"
	// DecisionSendBack is a reviewer's decision that sends a task back to the
	// stage before, offered first to the editor who did that stage.
	DecisionSendBack = "send_back"
)

// Sign returns the value of the Taskd-Signature header for body, signed with
// secret at time t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Errors of Verify.
var (
	// ErrNoSignature: the header is empty or has no t or no v1.
	ErrNoSignature = errors.New("webhook: no valid signature header")
	// ErrBadSignature: no v1 in the header matches the body and secret.
	ErrBadSignature = errors.New("webhook: signature does not match")
	// ErrTooOld: the timestamp is further than the tolerance from now.
	ErrTooOld = errors.New("webhook: signature timestamp outside the tolerance")
	// ErrNoSecret: Verify was called with an empty secret, which anyone can
	// sign with; no signature is accepted with it.
	ErrNoSecret = errors.New("webhook: empty secret: pass the webhook's secret from taskd's configuration")
	// ErrNegativeTolerance: Verify was called with a negative tolerance,
	// which would accept a captured request replayed at any time.
	ErrNegativeTolerance = errors.New("webhook: negative tolerance: pass 0 for ToleranceDefault, or a positive duration")
)

// Verify checks the Taskd-Signature header of a request whose raw body is body
// against secret: one of its v1 values must be the HMAC of its timestamp and
// body, and the timestamp must be within tolerance of now (0 means
// ToleranceDefault). It compares in constant time and returns nil,
// ErrNoSignature, ErrBadSignature or ErrTooOld; an empty secret is
// ErrNoSecret and a negative tolerance ErrNegativeTolerance, whatever the
// header says.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	switch {
	case secret == "":
		return ErrNoSecret
	case tolerance < 0:
		return fmt.Errorf("%w (got %v)", ErrNegativeTolerance, tolerance)
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		ok = hmac.Equal(s, want) || ok
	}
	if !ok {
		return ErrBadSignature
	}
	if tolerance == 0 {
		tolerance = ToleranceDefault
	}
	if d := now.Sub(time.Unix(unix, 0)).Abs(); d > tolerance {
		return fmt.Errorf("%w: %v off", ErrTooOld, d.Truncate(time.Second))
	}
	return nil
}
