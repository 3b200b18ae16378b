package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// Machine-readable error codes; see the package documentation.
const (
	codeBadRequest       = "bad_request"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeEditorDisabled   = "editor_disabled"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeStaleFence       = "stale_fence"
	codeTaskCancelled    = "task_cancelled"
	codeDoneByOther      = "done_by_other"
	codeHoldLimit        = "hold_limit"
	codeDuplicate        = "duplicate"
	codeNotAssigned      = "not_assigned"
	codeInvalid          = "invalid"
	codeBarred           = "barred"
	codeSendBackLimit    = "send_back_limit"
	codeUnavailable      = "unavailable"
	codeThrottled        = "throttled"
	codeCursorExpired    = "cursor_expired"
	codeInternal         = "internal"
)

// apiError is an error answer decided by a handler.
type apiError struct {
	status  int
	code    string
	message string
	// retryAfter, when above zero, is sent as Retry-After (seconds).
	retryAfter int
	// oldestCursor, when not empty, is sent as the error's oldest_cursor:
	// the oldest results feed cursor still kept (410 cursor_expired).
	oldestCursor string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// errorf returns an apiError with a formatted message.
func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// OldestCursor is the oldest cursor still kept, for 410
		// cursor_expired only.
		OldestCursor string `json:"oldest_cursor,omitempty"`
	} `json:"error"`
}

// writeError answers r with err: an apiError as it is, a sentinel of the
// dispatcher or the store with its status, anything else with 500 and a
// generic message (the error itself goes to the log only). When the client
// has gone away nothing is written.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = timedOut(r.Context(), err)
	if r.Context().Err() != nil && !errors.Is(err, errRequestTimeout) {
		a.log.DebugContext(r.Context(), "client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	e := classify(err)
	switch {
	case e.status == http.StatusServiceUnavailable:
		a.log.WarnContext(r.Context(), "store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
	case e.status >= 500:
		a.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	case e.status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="taskd"`)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.OldestCursor = e.code, e.message, e.oldestCursor
	a.writeJSON(w, r, e.status, body)
}

// timedOut returns err marked with errRequestTimeout when ctx ended because
// the request's time was up: whatever the store made of its canceled call, the
// answer is then 503.
func timedOut(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errRequestTimeout) && !errors.Is(err, errRequestTimeout) {
		return fmt.Errorf("%w: %w", errRequestTimeout, err)
	}
	return err
}

// classify maps err to its answer.
func classify(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errRequestTimeout):
		return errorf(http.StatusServiceUnavailable, codeUnavailable, "a store did not answer in time; retry later")
	case errors.Is(dispatcher.Unavailable(err), dispatcher.ErrUnavailable):
		return errorf(http.StatusServiceUnavailable, codeUnavailable, "a store is unavailable; retry later")
	case errors.Is(err, tasks.ErrEditorDisabled):
		return errEditorDisabled
	case errors.Is(err, tasks.ErrSendBackLimit):
		return errorf(http.StatusUnprocessableEntity, codeSendBackLimit, "%s", err)
	case errors.Is(err, tasks.ErrInvalid):
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "%s", err)
	case errors.Is(err, tasks.ErrCursorExpired):
		var ce *tasks.CursorExpiredError
		if !errors.As(err, &ce) {
			break
		}
		e := errorf(http.StatusGone, codeCursorExpired, "retention purged results after cursor %d: those up to cursor %d may be gone "+
			"(read the feed within retention.done); the oldest cursor still kept is %d: ask after it to read on, skipping them",
			ce.Cursor, ce.Oldest, ce.Oldest)
		e.oldestCursor = strconv.FormatInt(ce.Oldest, 10)
		return e
	case errors.Is(err, tasks.ErrBarred):
		return errorf(http.StatusConflict, codeBarred, "the task is not for you at its current stage (four-eyes rule, stage limits, its group or a reservation); ask for your next assignment")
	case errors.Is(err, tasks.ErrHoldLimit):
		return errorf(http.StatusConflict, codeHoldLimit, "the claim has reached the maximum hold time; it ends when its lease passes")
	case errors.Is(err, tasks.ErrCancelled):
		return errorf(http.StatusConflict, codeTaskCancelled, "the task was cancelled while the claim was held; ask for your next assignment")
	case errors.Is(err, tasks.ErrDoneByOther):
		return errorf(http.StatusConflict, codeDoneByOther, "another editor submitted the task first; ask for your next assignment")
	case errors.Is(err, tasks.ErrStale):
		return errorf(http.StatusConflict, codeStaleFence, "the claim is not your live claim (wrong fence, expired, released or submitted)")
	case errors.Is(err, tasks.ErrDuplicate):
		return errorf(http.StatusConflict, codeDuplicate, "%s", err)
	case errors.Is(err, tasks.ErrNotFound):
		return errorf(http.StatusNotFound, codeNotFound, "not found")
	}
	return errorf(http.StatusInternalServerError, codeInternal, "internal error")
}
