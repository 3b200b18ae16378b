package tasks

import (
	"fmt"
	"time"
)

// Workflow limits.
const (
	// MaxStages bounds the stages of a category or a task.
	MaxStages = 8
	// MaxStageLen is the longest stage name.
	MaxStageLen = 32
	// MaxOverlap bounds how many independent results one task may ask for.
	MaxOverlap = 9
	// MaxCapacity bounds how many claims one editor may hold at once.
	MaxCapacity = 100
	// MaxWeight bounds a category's weight in an editor's fair share.
	MaxWeight = 1000
	// MaxNotesLen bounds a submit's notes, in characters.
	MaxNotesLen = 4096
	// SendBackHoldDefault is how long a task sent back is offered only to the
	// editor who did the stage it goes back to, when its category says nothing.
	SendBackHoldDefault = 10 * time.Minute
	// MaxSendBacksDefault is how many times a task may be sent back when its
	// category says nothing. With it, a task of s stages has at most
	// s + 2*MaxSendBacksDefault results (each send back and the stage done
	// again), whatever its editors do.
	MaxSendBacksDefault = 10
	// MaxSendBacksMax bounds a category's MaxSendBacks.
	MaxSendBacksMax = 1000
)

// Decisions a submit may carry. A submit at a task's first stage carries none or
// DecisionApprove; at a later stage DecisionSendBack sends the task back to the
// stage before. Any other decision is kept with the result (results of an
// overlapped task agree when their decisions are equal) and moves the task on,
// as approve does.
const (
	DecisionApprove  = "approve"
	DecisionSendBack = "send_back"
	// MaxDecisionLen is the longest decision.
	MaxDecisionLen = 32
)

// Workflow is how a category's tasks are worked: what a task inserted in it gets
// unless it says otherwise, and how the dispatcher shares an editor's claims.
// The zero Workflow is the default: one stage, one result, weight 1, no rate
// limit.
type Workflow struct {
	// Stages are the stages a task goes through, in order: a submit at one stage
	// moves the task to the next, and the task is done after the last. Each is a
	// stage name (CheckStage), at most MaxStages, distinct. None: one stage, named
	// nothing.
	Stages []string
	// Overlap is how many independent results a task asks for, from distinct
	// editors: 1..MaxOverlap, 0 means 1.
	Overlap int
	// SendBackHold is how long a task sent back is offered only to the editor who
	// did the stage it goes back to; then to anyone who may take that stage. 0
	// means SendBackHoldDefault.
	SendBackHold time.Duration
	// MaxSendBacks is how many times one task may be sent back: a send back past
	// it is refused (ErrSendBackLimit) and the reviewer must approve or decide
	// otherwise. It bounds the results a task accumulates. 1..MaxSendBacksMax, 0
	// means MaxSendBacksDefault.
	MaxSendBacks int
	// Weight is the category's share of an editor's claims under fair share,
	// relative to the editor's other categories: 1..MaxWeight, 0 means 1.
	Weight int
	// RateLimit is the claims of the category per minute across every process
	// sharing the Redis servers: spaced 60s/RateLimit apart on average, with a
	// burst of ceil(RateLimit/60) after an idle time. 0 means none.
	RateLimit int
	// AgreementField is what the results of an overlap group are compared on
	// (GET /v1/admin/agreement): "" the decision of each accepted result,
	// otherwise the top-level field of that name in the result object
	// (CheckAgreementField). A result without it is a missing value.
	AgreementField string
	// AgreementInterval says the compared values are numbers, so agreement
	// is measured with the interval metric as well as the nominal one.
	// Default false: labels, nominal only.
	AgreementInterval bool
	// MaxInFlight is the most tasks of the category assigned at once across
	// every process, workers and editors alike: 0..MaxInFlightMax, 0 means no
	// limit. The claims keep it in MySQL, under the fence (see LimitKey).
	MaxInFlight int
	// KeyLimit is the most tasks of one limit key (NewTask.LimitKey) of the
	// category assigned at once across every process: 0..MaxInFlightMax, 0
	// means no limit per key. Tasks without a key are not limited by it.
	KeyLimit int
	// Hedge offers a held task near its due_at whose holder went inactive to
	// one more editor (see Hedge). The zero Hedge is off.
	Hedge Hedge
}

// Limited reports whether the category has a limit in flight: MaxInFlight
// or KeyLimit.
func (w Workflow) Limited() bool { return w.MaxInFlight > 0 || w.KeyLimit > 0 }

// MaxInFlightMax is the largest Workflow.MaxInFlight and Workflow.KeyLimit.
const MaxInFlightMax = 1_000_000

// Check validates w; its errors wrap ErrInvalid and name the field.
func (w Workflow) Check() error {
	if err := CheckStages(w.Stages); err != nil {
		return err
	}
	if w.Overlap < 0 || w.Overlap > MaxOverlap {
		return fmt.Errorf("%w: overlap must be 1..%d, got %d", ErrInvalid, MaxOverlap, w.Overlap)
	}
	if w.SendBackHold < 0 {
		return fmt.Errorf("%w: send_back_hold must not be negative", ErrInvalid)
	}
	if w.MaxSendBacks < 0 || w.MaxSendBacks > MaxSendBacksMax {
		return fmt.Errorf("%w: max_send_backs must be 1..%d, got %d", ErrInvalid, MaxSendBacksMax, w.MaxSendBacks)
	}
	if w.Weight < 0 || w.Weight > MaxWeight {
		return fmt.Errorf("%w: weight must be 1..%d, got %d", ErrInvalid, MaxWeight, w.Weight)
	}
	if err := w.Hedge.Check(); err != nil {
		return err
	}
	if w.RateLimit < 0 {
		return fmt.Errorf("%w: rate_limit must not be negative, got %d", ErrInvalid, w.RateLimit)
	}
	if w.AgreementField != "" {
		if err := CheckAgreementField(w.AgreementField); err != nil {
			return err
		}
	}
	if w.MaxInFlight < 0 || w.MaxInFlight > MaxInFlightMax {
		return fmt.Errorf("%w: max_in_flight must be 0..%d, got %d", ErrInvalid, MaxInFlightMax, w.MaxInFlight)
	}
	if w.KeyLimit < 0 || w.KeyLimit > MaxInFlightMax {
		return fmt.Errorf("%w: key_limit must be 0..%d, got %d", ErrInvalid, MaxInFlightMax, w.KeyLimit)
	}
	return nil
}

// CheckStage validates a stage name: 1..MaxStageLen lowercase ASCII letters,
// digits, '_' or '-', starting with a letter.
func CheckStage(s string) error {
	if s == "" || len(s) > MaxStageLen {
		return fmt.Errorf("%w: stage must be 1..%d characters, got %q", ErrInvalid, MaxStageLen, s)
	}
	for i, c := range []byte(s) {
		letter := c >= 'a' && c <= 'z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '_' || c == '-')) {
			return fmt.Errorf("%w: stage %q must be lowercase letters, digits, '_' or '-', starting with a letter", ErrInvalid, s)
		}
	}
	return nil
}

// CheckStages validates a list of stages: at most MaxStages stage names, distinct.
func CheckStages(stages []string) error {
	if len(stages) > MaxStages {
		return fmt.Errorf("%w: at most %d stages, got %d", ErrInvalid, MaxStages, len(stages))
	}
	for i, s := range stages {
		if err := CheckStage(s); err != nil {
			return err
		}
		for _, t := range stages[:i] {
			if t == s {
				return fmt.Errorf("%w: stage %q is listed twice", ErrInvalid, s)
			}
		}
	}
	return nil
}

// SendBackLimit is how many times a task of w may be sent back: MaxSendBacks, or
// MaxSendBacksDefault when it is 0.
func (w Workflow) SendBackLimit() int {
	if w.MaxSendBacks == 0 {
		return MaxSendBacksDefault
	}
	return w.MaxSendBacks
}
