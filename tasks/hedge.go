package tasks

import (
	"errors"
	"fmt"
	"time"
)

// ErrDoneByOther means the slot a fenced write names was submitted by another
// editor first: the holder of a claim whose task was also offered to another
// editor near its deadline (a hedge, see Hedge), or that other editor, lost the
// race to submit. An error that wraps it wraps ErrStale too, so that a caller
// that knows only stale claims refuses it as one. Nothing was changed.
var ErrDoneByOther = errors.New("done by another editor")

// WebhookHedge is the cause of the released event of a claim that ended because
// the editor its task was also offered to (see Hedge) submitted first.
const WebhookHedge WebhookCause = "hedge"

// Hedge is a category's hedged re-offer: when a task an editor holds is
// within BeforeDue of its due_at and its holder has sent no heartbeat for
// InactiveFor, the task is offered to one more eligible editor too. Whoever
// submits first wins; the other's writes are refused with ErrDoneByOther. The
// zero Hedge is off (the default); both durations must be set to turn it on.
type Hedge struct {
	// BeforeDue is how close to its due_at a held task must be.
	BeforeDue time.Duration
	// InactiveFor is how long its holder must have sent no heartbeat (the
	// workspace sends them only while visible and in use), counted from the
	// claim when it sent none.
	InactiveFor time.Duration
}

// On reports whether h offers tasks again.
func (h Hedge) On() bool { return h.BeforeDue > 0 && h.InactiveFor > 0 }

// Check validates h; its errors wrap ErrInvalid and name the field.
func (h Hedge) Check() error {
	switch {
	case h.BeforeDue < 0 || h.InactiveFor < 0:
		return fmt.Errorf("%w: hedge durations must not be negative", ErrInvalid)
	case (h.BeforeDue > 0) != (h.InactiveFor > 0):
		return fmt.Errorf("%w: hedge needs both before_due and inactive_for, or neither", ErrInvalid)
	case h.On() && h.InactiveFor < time.Second:
		return fmt.Errorf("%w: hedge inactive_for must be at least 1s", ErrInvalid)
	}
	return nil
}

// HedgeParams are the arguments of a hedge's take: the editor that takes it,
// the categories it may take from (those whose Workflow.Hedge is on count),
// and the hedge's lease from now.
type HedgeParams struct {
	EditorID   int64
	Categories []string
	Lease      time.Duration
}

// HedgeRef names a hedge an editor holds: its task and fence.
type HedgeRef struct {
	TaskID   int64
	Fence    int64
	EditorID int64
}
