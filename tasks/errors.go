package tasks

import (
	"errors"
	"time"
)

var (
	// ErrNotFound means the task or editor does not exist, or the editor holds no live
	// claim.
	ErrNotFound = errors.New("not found")

	// ErrStale means a fenced write matched no row: the fence is not the current one, the
	// task is not assigned to the given holder, or its lease has already passed (and it
	// may have been taken over or recycled). Nothing was changed.
	ErrStale = errors.New("stale claim")

	// ErrCancelled means the claim a fenced write names was ended by a cancel
	// (Cancel of an assigned task): the task is cancelled for good. An error
	// that wraps it wraps ErrStale too, so that a caller that knows only stale
	// claims refuses it as one. Nothing was changed.
	ErrCancelled = errors.New("task cancelled")

	// ErrSkipped means the editor skipped the task (Release with Skip) and may not
	// claim it again before the skip passes; others may. Nothing was changed.
	ErrSkipped = errors.New("skipped by the editor")

	// ErrHoldLimit means a heartbeat cannot extend the lease because the claim has
	// reached the maximum hold time (the store's MaxHold). The claim stays valid until its
	// current lease passes.
	ErrHoldLimit = errors.New("hold limit reached")

	// ErrEditorBusy means the editor already holds as many live claims as it may
	// (Editor.Capacity, one by default); the store refuses another.
	ErrEditorBusy = errors.New("editor already holds a task")

	// ErrBarred means the editor may not take the task at its current stage: its
	// categories do not give the editor that stage, the editor did another stage of
	// it (the four-eyes rule), the editor holds or did another task of its group
	// (each result of an overlapped task comes from a different editor), or it was
	// sent back and is reserved for another editor for a while. Others may take it.
	// Nothing was changed. A claim refused so returns a *BarredError.
	ErrBarred = errors.New("not for this editor")

	// ErrSendBackLimit means a submit would send a task back once more than its
	// category allows (Workflow.MaxSendBacks): the reviewer must decide otherwise.
	// Nothing was changed; the claim stays live.
	ErrSendBackLimit = errors.New("send-back limit reached")

	// ErrEditorDisabled means the editor is disabled (DisableEditor): the store refuses
	// it any claim. Nothing was changed.
	ErrEditorDisabled = errors.New("editor is disabled")

	// ErrInvalid wraps validation failures; the message names the offending field.
	// Values are checked before they reach the database; should the database still
	// refuse one (too long, out of range, an incorrect string, a failed CHECK), its
	// error is wrapped with ErrInvalid too, and kept as the cause.
	ErrInvalid = errors.New("invalid input")

	// ErrBusy means a transaction lost lock conflicts on every attempt: InnoDB picked it
	// as a deadlock victim each time, or a lock wait timed out. Nothing was changed; the
	// same call may succeed a moment later.
	ErrBusy = errors.New("busy: the transaction kept losing lock conflicts")

	// ErrDuplicate means a unique value (an editor's name or token hash) is taken.
	ErrDuplicate = errors.New("already exists")
)

// BarredError is ErrBarred (errors.Is holds) with what the store knows of the
// bar's end: For is what is left, on the database's clock at the refused claim,
// of a send-back hold that reserves the task for another editor, and 0 when no
// time ends the bar (the other rules of ErrBarred last while the task stays at
// its stage, or the editor's limits or group stay as they are). A bar may hold
// for several rules: past For, another may still refuse the claim.
type BarredError struct {
	For time.Duration
}

func (e *BarredError) Error() string { return ErrBarred.Error() }

func (e *BarredError) Unwrap() error { return ErrBarred }
