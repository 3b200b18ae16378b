package tasks

import (
	"time"
)

// Editor management: listing editors with what they do (here), their stats from the
// audit trail (editorstats.go), and changes to their name and categories
// (editorupdate.go), their state (editorstate.go) and their token (editortoken.go).

// Limits of editor listings.
const (
	// ListEditorsLimitDefault and ListEditorsLimitMax bound ListEditorsParams.Limit.
	ListEditorsLimitDefault = 50
	ListEditorsLimitMax     = 500
)

// EventCounts counts an editor's events of the audit trail by what they record.
type EventCounts struct {
	// Claimed counts claims the editor made ('claimed').
	Claimed int64
	// Submitted counts results of the editor that were accepted ('submitted').
	Submitted int64
	// Released counts claims the editor gave back, and claims of the editor an
	// operator released or that DisableEditor revoked ('released'); not a
	// claim a hedge took over (done by someone else: see Hedge).
	Released int64
	// Skipped counts claims the editor skipped ('skipped').
	Skipped int64
	// Expired counts claims of the editor whose lease passed: taken over by another
	// claim ('expired') or returned to the pool by a sweep or by the editor's next
	// claim ('recycled').
	Expired int64
}

// EditorClaim is an editor's live claim as a listing shows it.
type EditorClaim struct {
	TaskID         int64
	Fence          int64
	LeaseExpiresAt time.Time
	// TraceContext is the W3C traceparent stored with the claim, if any.
	TraceContext string
}

// EditorSummary is an editor with its live claim, if any, and its counts of today.
type EditorSummary struct {
	Editor
	// Claim is the editor's live claim (assigned, lease not passed), or nil.
	Claim *EditorClaim
	// Today counts the editor's events since midnight UTC by the database clock.
	Today EventCounts
}

// ListEditorsParams are the arguments of ListEditors.
type ListEditorsParams struct {
	// AfterID continues a listing after the editor with this id (EditorPage.NextAfterID
	// of the page before); 0 starts at the beginning.
	AfterID int64
	// Limit is the page size: 1..ListEditorsLimitMax, 0 means ListEditorsLimitDefault.
	Limit int
}

// EditorPage is a page of a listing of editors.
type EditorPage struct {
	// Editors are in id order.
	Editors []EditorSummary
	// NextAfterID is the AfterID of the next page, or 0 when this page is the last.
	NextAfterID int64
}
