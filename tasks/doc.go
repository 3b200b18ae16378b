// Package tasks holds taskd's domain types: the vocabulary the engine, the HTTP API,
// the pages and the store share. It does no I/O and imports no database package; the
// MySQL store that reads and writes these types lives in internal/store.
//
// # Tasks and their states
//
// A Task is a unit of work in a category, with a JSON payload, a priority, an
// optional deadline (DueAt) and an optional unique Key. Its Status is one of
// StatusPending (in the pool), StatusAssigned (claimed), StatusDone, StatusDead
// (out of attempts) and StatusCancelled; the constants match the ENUM in schema.sql.
// NewTask is a task to insert, checked by NewTask.Validate.
//
// # Claims and fencing
//
// A holder (an editor, "editor:<id>", see EditorHolder, or a worker) claims a task
// for a lease; the Claim carries the task's fence, a number that grows with every
// claim. Every write about a claim names (task, fence, holder), and the store refuses
// it with ErrStale unless that is still the live claim. The params structs name
// these writes: ClaimParams, HeartbeatParams, SubmitParams, ReleaseParams and
// FailParams; Ended, Handover, ClaimResult, Renewed and Completed are their answers.
//
// # Editors, results, events
//
// An Editor is a person who claims tasks of its categories through the API; its
// token is made by NewToken and stored only as HashToken's hash. A Result is a
// submitted result as the results feed reads it (ResultsParams, ResultsPage). Every
// change of a claim is an Event of an EventKind in the task's audit trail; some of
// them are also WebhookEvents, delivered to webhooks through an outbox.
//
// # Queries
//
// The params structs of the store's queries (CandidatesParams, ListParams,
// ListEditorsParams, TaskEventsParams, BulkParams, ChangeParams, RecycleParams,
// LiveLeasesParams, FanOutParams, DueDeliveriesParams, AttemptParams) and their
// pages and answers are declared here, so that the engine and the API speak of them
// without the store. Their limits are constants: Max* for lengths and counts,
// *LimitDefault and *LimitMax for the page sizes.
//
// # Checks
//
// The checks the store makes before a value reaches the database are pure and
// exported, so that the API can refuse a value with the same words: NewTask.Validate,
// CheckCategory, CheckKey, CheckTime, CheckEditorName (and NormalizeEditorName,
// the form of a name the store keeps), CheckResult, CheckSubmission and
// CheckJSONStrings. Their errors wrap ErrInvalid and name the field. The rules of
// text people read (names, one-line fields, notes, decisions) are those of
// internal/textrule, stated there once.
//
// # Errors
//
// The sentinel errors are the store's answers too; test them with errors.Is:
// ErrNotFound, ErrStale, ErrSkipped, ErrHoldLimit, ErrEditorBusy, ErrEditorDisabled,
// ErrInvalid, ErrBusy, ErrDuplicate, ErrPaused and ErrWrongStatus (a *StatusError
// says which status the task had).
package tasks
