package taskd

import (
	"context"
	"fmt"
	"time"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/tasks"
)

// An operator's view of the pool and its editors, as the HTTP API, the pages
// and the taskd command use it. Each method takes the store's params and
// returns its domain types (package tasks). A write that others wait on goes
// through the dispatcher, which takes the locks and sends the wake-ups: a
// disabled editor's claim is revoked and its category woken, a resumed category
// wakes the editors and workers waiting for it on every process, inserted tasks
// wake the waiters of their categories. None of these needs Start: they work
// from New to Stop. Their errors are the store's, unwrapped, so that their
// messages can be shown as they are (the API answers them).

// CreateEditor adds an editor with p's name, categories and token hash (make
// a token with tasks.NewToken; the store keeps only its hash). It returns an
// error wrapping tasks.ErrInvalid for a bad name or category and one wrapping
// tasks.ErrDuplicate when the name or the token hash is taken.
func (e *Engine) CreateEditor(ctx context.Context, p tasks.CreateEditorParams) (*tasks.Editor, error) {
	ed, err := e.store.CreateEditor(ctx, p)
	if err != nil {
		return nil, err
	}
	e.tokenMade(ctx, p.TokenHash)
	return ed, nil
}

// UpdateEditor changes an editor's name, categories, capacity and/or stage
// limits (nil leaves each as it is). A claim the editor holds is kept; its
// next claim takes tasks of the new categories only. The engine's API sees
// the change at once, and new categories or stage limits end the long polls
// the editor holds on it
// (answered 204, so that the next poll waits on the new ones); other
// processes see it within Config.HTTP.EditorCacheTTL. It returns the editor as changed,
// tasks.ErrNotFound for an unknown editor, and errors wrapping
// tasks.ErrInvalid and tasks.ErrDuplicate as CreateEditor does.
func (e *Engine) UpdateEditor(ctx context.Context, p tasks.UpdateEditorParams) (*tasks.Editor, error) {
	ed, err := e.store.UpdateEditor(ctx, p)
	if err != nil {
		return nil, err
	}
	change := api.EditorRenamed
	if p.Categories != nil || p.Stages != nil {
		change = api.EditorCategories
	}
	_ = e.editorChanged(ctx, p.ID, change) // ends no sessions
	return ed, nil
}

// DisableEditor disables an editor: from then on every claim of it is
// refused with tasks.ErrEditorDisabled. The claims it held go back to the
// pool with their fences bumped (so whatever the editor still sends about
// them is stale), and callers waiting for their categories are woken. It
// returns the revoked claims, and tasks.ErrNotFound for an unknown editor.
// Disabling a disabled editor revokes any claim it still holds. The
// editor's page sessions end, and the engine's API refuses its token at once
// (other processes within Config.HTTP.EditorCacheTTL); when the sessions
// could not be ended, the editor is disabled all the same and the error says
// to disable it again.
func (e *Engine) DisableEditor(ctx context.Context, id int64) ([]tasks.Revoked, error) {
	revoked, err := e.d.DisableEditor(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := e.editorChanged(ctx, id, api.EditorDisabled); err != nil {
		return revoked, fmt.Errorf("editor %d is disabled, but its signed-in page sessions could not be ended; disable it again: %w", id, err)
	}
	return revoked, nil
}

// EnableEditor enables a disabled editor: its token is good again and it
// may claim. Enabling an enabled editor changes nothing. It returns
// tasks.ErrNotFound for an unknown editor.
func (e *Engine) EnableEditor(ctx context.Context, id int64) error {
	if err := e.store.EnableEditor(ctx, id); err != nil {
		return err
	}
	_ = e.editorChanged(ctx, id, api.EditorEnabled) // ends no sessions
	return nil
}

// SetEditorToken replaces an editor's token by the one whose SHA-256 hash is
// hash (see tasks.NewToken): the old token is refused from then on (by
// other processes that remember it, within Config.HTTP.EditorCacheTTL), and
// the editor's page sessions end. The editor's
// claim is kept. It returns tasks.ErrNotFound for an unknown editor and an
// error wrapping tasks.ErrDuplicate when another editor has the hash.
func (e *Engine) SetEditorToken(ctx context.Context, id int64, hash [32]byte) error {
	if err := e.store.SetEditorToken(ctx, id, hash); err != nil {
		return err
	}
	e.tokenMade(ctx, hash)
	if err := e.editorChanged(ctx, id, api.EditorToken); err != nil {
		// A session of the old token is refused anyway (it holds the old
		// token's hash), and the pages end it on its next call.
		e.log.WarnContext(ctx, "end the sessions of an editor's old token", "editor_id", id, "err", err)
	}
	return nil
}

// tokenMade tells the engine's API, when it serves one, of a token just
// made, so that it is served from an address blocked for wrong tokens.
func (e *Engine) tokenMade(ctx context.Context, hash [32]byte) {
	if e.api != nil {
		e.api.TokenMade(ctx, hash)
	}
}

// editorChanged brings the engine's API, when it serves one, in step with a
// change made through the methods above: this process then answers the
// editor's next request as changed, not after Config.HTTP.EditorCacheTTL.
func (e *Engine) editorChanged(ctx context.Context, id int64, c api.EditorChange) error {
	if e.api == nil {
		return nil
	}
	return e.api.EditorChanged(ctx, id, c)
}

// InsertTasks adds tasks given with raw JSON payloads, in one statement: all
// of them or, on any error, none; Insert and InsertMany do the same from
// typed values. It wakes the workers and editors waiting for their
// categories. It returns, in the order of ts, each task's id and whether this
// call created it (false: a task with its Key existed, and its id is
// returned). A task the store refuses (see tasks.NewTask.Validate) is an
// error wrapping tasks.ErrInvalid, and so is a gold answer (tasks.NewTask.Gold)
// its category's gold rule (CategoryConfig.Gold) cannot compare, or whose
// category has none.
func (e *Engine) InsertTasks(ctx context.Context, ts []tasks.NewTask) ([]tasks.Inserted, error) {
	if err := e.checkGold(ts); err != nil {
		return nil, fmt.Errorf("taskd: insert: %w", err)
	}
	return e.d.AddTasks(ctx, ts)
}

// CancelTask ends a task for good in one call, whether it waits in the pool
// or runs: it becomes cancelled and no claim takes it again. A running task's
// claim ends with it, under the fence: a worker's handler has its context
// cancelled with cause ErrCancelled (within moments on every process that
// shares the engine's Redis and key prefix, at the latest at the claim's next
// lease renewal, every third to half of Config.Dispatch.LeaseTTL), and whatever the holder
// still sends (a completion, an editor's heartbeat or submit) is refused; an
// editor is told its task was cancelled. The task's 'cancelled' event names the
// fence and holder of the claim it ended, and "by engine" and reason (may be
// empty) as its detail. It writes no webhook event.
//
// It returns an error wrapping tasks.ErrNotFound for an unknown task and one
// wrapping tasks.ErrWrongStatus (a *tasks.StatusError naming the status) for
// a task that has ended already (done, dead or cancelled), changing nothing.
func (e *Engine) CancelTask(ctx context.Context, id int64, reason string) error {
	return e.d.Cancel(ctx, tasks.ChangeParams{TaskID: id, Reason: reason, By: "engine"})
}

// CancelMatching cancels the tasks p selects, pending and running, as
// CancelTask cancels one: up to p.Limit per call (0: tasks.BulkLimitDefault,
// at most tasks.BulkLimitMax), the pending ones first, then the running
// ones, each running one's claim ended under its fence and its handler
// cancelled with cause ErrCancelled. p.Category or p.IDs is required;
// p.Status (tasks.StatusPending or tasks.StatusAssigned) limits it to one of
// the two. The result counts the tasks changed and, of them, Running; call
// again while More is set. With p.DryRun it changes nothing and counts and
// lists the tasks it would change now.
//
// It returns an error wrapping tasks.ErrInvalid for an empty filter or bad
// values. On another error, the result counts the batches (of 500, each its
// own transaction) that committed before it.
func (e *Engine) CancelMatching(ctx context.Context, p tasks.BulkParams) (*tasks.BulkResult, error) {
	return e.d.CancelMatching(ctx, p)
}

// Task returns the task with the given id, or tasks.ErrNotFound.
func (e *Engine) Task(ctx context.Context, id int64) (*tasks.Task, error) {
	return e.store.GetTask(ctx, id)
}

// AcceptedResult returns the result committed for a done task, or
// tasks.ErrNotFound when the task is not done (or does not exist).
func (e *Engine) AcceptedResult(ctx context.Context, taskID int64) (*tasks.AcceptedResult, error) {
	return e.store.AcceptedResult(ctx, taskID)
}

// PoolStats counts the pool's tasks by status and category, and its live
// claims, counting those whose lease passes within expiringWithin as
// expiring (zero counts none). It reads the MySQL replica when
// Config.MySQL.ReplicaDSN sets one, the primary otherwise.
func (e *Engine) PoolStats(ctx context.Context, expiringWithin time.Duration) (*tasks.PoolStats, error) {
	return e.store.PoolStats(ctx, expiringWithin)
}

// LiveLeases lists the live claims in task id order, a page of at most
// p.Limit (1..tasks.LiveLeasesLimitMax) at a time, each with its holder and
// the time its lease has left. It returns an error wrapping tasks.ErrInvalid
// for a bad limit.
func (e *Engine) LiveLeases(ctx context.Context, p tasks.LiveLeasesParams) ([]tasks.LiveLease, error) {
	return e.store.LiveLeases(ctx, p)
}

// PauseCategory pauses a category: from the moment it returns, no claim on
// any process takes its tasks, to editors or to workers; live claims end as
// usual. It returns the pause (since when, by the database's clock) and
// whether this call made it (false: it was paused already). A category tasks
// cannot have is an error wrapping tasks.ErrInvalid.
func (e *Engine) PauseCategory(ctx context.Context, category string) (tasks.PausedCategory, bool, error) {
	return e.d.PauseCategory(ctx, category)
}

// ResumeCategory ends the pause of a category and wakes the editors and
// workers waiting for it, on every process that shares the engine's Redis
// and key prefix. It returns whether this call ended a pause (false: it was
// not paused), and an error wrapping tasks.ErrInvalid for a category tasks
// cannot have.
func (e *Engine) ResumeCategory(ctx context.Context, category string) (bool, error) {
	return e.d.ResumeCategory(ctx, category)
}

// PausedCategories lists the paused categories, by name.
func (e *Engine) PausedCategories(ctx context.Context) ([]tasks.PausedCategory, error) {
	return e.store.PausedCategories(ctx)
}

// Results calls fn with each accepted result after the cursor p.After, in
// cursor order, at most p.Limit of them (1..tasks.ResultsLimitMax; 0 means
// tasks.ResultsLimitDefault), as GET /v1/results and `taskd export` read
// them. An error of fn stops the page and is returned. The page says
// whether more results follow. A bad limit or cursor is an error wrapping
// tasks.ErrInvalid; a cursor older than what retention kept (Config.Retention:
// results of purged tasks are gone), one wrapping tasks.ErrCursorExpired, a
// *tasks.CursorExpiredError that names the oldest cursor still kept.
func (e *Engine) Results(ctx context.Context, p tasks.ResultsParams, fn func(*tasks.Result) error) (tasks.ResultsPage, error) {
	return e.store.Results(ctx, p, fn)
}

// CountResults counts the accepted results after the cursor after.
func (e *Engine) CountResults(ctx context.Context, after int64) (int64, error) {
	return e.store.CountResults(ctx, after)
}

// apiStore is the engine as its HTTP API reads and writes the pool: reads
// from the store, writes through the engine's methods.
type apiStore struct {
	*Engine
}

var _ api.Store = apiStore{}

// The API's own editor writes go to the store: its routes bring the API in
// step themselves, in the answer they give.

func (s apiStore) UpdateEditor(ctx context.Context, p tasks.UpdateEditorParams) (*tasks.Editor, error) {
	return s.store.UpdateEditor(ctx, p)
}

func (s apiStore) EnableEditor(ctx context.Context, id int64) error {
	return s.store.EnableEditor(ctx, id)
}

func (s apiStore) SetEditorToken(ctx context.Context, id int64, hash [32]byte) error {
	return s.store.SetEditorToken(ctx, id, hash)
}

func (s apiStore) EditorByTokenHash(ctx context.Context, hash [32]byte) (*tasks.Editor, error) {
	return s.store.EditorByTokenHash(ctx, hash)
}

func (s apiStore) GetTask(ctx context.Context, id int64) (*tasks.Task, error) {
	return s.store.GetTask(ctx, id)
}

func (s apiStore) ListTasks(ctx context.Context, p tasks.ListParams) (*tasks.TaskPage, error) {
	return s.store.ListTasks(ctx, p)
}

func (s apiStore) TaskEvents(ctx context.Context, p tasks.TaskEventsParams) (*tasks.EventPage, error) {
	return s.store.TaskEvents(ctx, p)
}

func (s apiStore) ClaimHolder(ctx context.Context, taskID, fence int64) (string, error) {
	return s.store.ClaimHolder(ctx, taskID, fence)
}

func (s apiStore) PoolStats(ctx context.Context, expiringWithin time.Duration) (*tasks.PoolStats, error) {
	return s.store.PoolStats(ctx, expiringWithin)
}

func (s apiStore) ListEditors(ctx context.Context, p tasks.ListEditorsParams) (*tasks.EditorPage, error) {
	return s.store.ListEditors(ctx, p)
}

func (s apiStore) GetEditorSummary(ctx context.Context, id int64) (*tasks.EditorSummary, error) {
	return s.store.GetEditorSummary(ctx, id)
}

func (s apiStore) GetEditorStats(ctx context.Context, id int64) (*tasks.EditorStats, error) {
	return s.store.GetEditorStats(ctx, id)
}

func (s apiStore) RecordClaimTime(ctx context.Context, p tasks.ClaimTimeParams) (*tasks.ClaimTimeRecorded, error) {
	return s.store.RecordClaimTime(ctx, p)
}

func (s apiStore) WorkingTime(ctx context.Context, editorID int64, days int) (*tasks.WorkingTime, error) {
	return s.store.WorkingTime(ctx, editorID, days)
}

func (s apiStore) HeldByEditor(ctx context.Context, editorID int64) (*tasks.Claim, error) {
	return s.store.HeldByEditor(ctx, editorID)
}

func (s apiStore) EditorClaims(ctx context.Context, editorID int64) (*tasks.EditorClaims, error) {
	return s.store.EditorClaims(ctx, editorID)
}

func (s apiStore) EditorLoads(ctx context.Context, ids []int64) (map[int64]*tasks.EditorLoad, error) {
	return s.store.EditorLoads(ctx, ids)
}

func (s apiStore) TaskResults(ctx context.Context, p tasks.TaskResultsParams) (*tasks.TaskResultPage, error) {
	return s.store.TaskResults(ctx, p)
}

func (s apiStore) GroupDecisions(ctx context.Context, groupID int64) (map[int64]string, error) {
	return s.store.GroupDecisions(ctx, groupID)
}

func (s apiStore) Agreement(ctx context.Context, p tasks.AgreementParams) (*tasks.AgreementValues, error) {
	return s.store.Agreement(ctx, p)
}

func (s apiStore) GroupTasks(ctx context.Context, groupID int64) ([]tasks.Task, error) {
	return s.store.GroupTasks(ctx, groupID)
}

// Gold tasks: the API's reads and writes of them go to the store.

func (s apiStore) ClaimGold(ctx context.Context, p tasks.GoldClaimParams) (*tasks.Claim, error) {
	return s.store.ClaimGold(ctx, p)
}

func (s apiStore) SubmitGold(ctx context.Context, p tasks.SubmitParams, rules func(string) (tasks.GoldRule, bool)) (*tasks.GoldScored, error) {
	return s.store.SubmitGold(ctx, p, rules)
}

func (s apiStore) MarkGold(ctx context.Context, id int64, a tasks.GoldAnswer, rules func(string) (tasks.GoldRule, bool)) (*tasks.GoldTask, error) {
	return s.store.MarkGold(ctx, id, a, rules)
}

func (s apiStore) GoldAccuracy(ctx context.Context, p tasks.GoldAccuracyParams) ([]tasks.GoldAccuracy, error) {
	return s.store.GoldAccuracy(ctx, p)
}

func (s apiStore) GoldPauses(ctx context.Context, category string) ([]tasks.GoldPause, error) {
	return s.store.GoldPauses(ctx, category)
}

func (s apiStore) EditorGoldPauses(ctx context.Context, editorID int64) ([]string, error) {
	return s.store.EditorGoldPauses(ctx, editorID)
}

func (s apiStore) LiftGoldPause(ctx context.Context, editorID int64, category string) (bool, error) {
	return s.store.LiftGoldPause(ctx, editorID, category)
}
