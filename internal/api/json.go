package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskd/taskd/internal/wire"
	"github.com/taskd/taskd/tasks"
)

// decode reads r's JSON body into dst: at most MaxBodyBytes, one JSON value,
// no unknown fields, nothing after it but white space. Any failure is a 400
// apiError, except a well-formed integer too big for its field: a 422. An empty
// body is refused unless optional, in which case dst is left as it is.
//
// A string in the body that is not valid UTF-8 or escapes a lone surrogate
// ("\ud800") is an error wrapping tasks.ErrInvalid that names where it is
// ("[0].title must be valid UTF-8"), answered 422: encoding/json would replace
// it with U+FFFD, and the store would keep something the client did not send.
func decode(w http.ResponseWriter, r *http.Request, dst any, optional bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return badBody(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) && optional {
			return nil
		}
		return badBody(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, codeBadRequest, "request body has data after the JSON value")
	}
	return tasks.CheckJSONStrings(body)
}

// badBody describes a decoding error for the client.
func badBody(err error) *apiError {
	var (
		tooLarge  *http.MaxBytesError
		syntax    *json.SyntaxError
		wrongType *json.UnmarshalTypeError
	)
	msg := "malformed JSON"
	switch {
	case errors.As(err, &tooLarge):
		msg = "request body is larger than " + strconv.FormatInt(tooLarge.Limit, 10) + " bytes"
	case errors.Is(err, io.EOF):
		msg = "request body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "malformed JSON: unexpected end of the body"
	case errors.As(err, &syntax):
		msg = "malformed JSON at byte " + strconv.FormatInt(syntax.Offset, 10) + ": " + syntax.Error()
	case errors.As(err, &wrongType):
		what := "the body"
		if wrongType.Field != "" {
			// The request bodies are flat objects: the last element is the key,
			// past the names of embedded Go structs ("fenceField.fence").
			field := wrongType.Field[strings.LastIndexByte(wrongType.Field, '.')+1:]
			what = "field " + strconv.Quote(field)
		}
		kind := jsonKind(wrongType.Type.String())
		if n, ok := strings.CutPrefix(wrongType.Value, "number "); ok && kind == "an integer" && isInteger(n) {
			// A well-formed integer that does not fit: a bad value, not a bad request.
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "%s is out of range: %s", what, n)
		}
		msg = what + " must be " + kind + ", not " + wrongType.Value
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		msg = strings.TrimPrefix(err.Error(), "json: ")
	}
	return errorf(http.StatusBadRequest, codeBadRequest, "%s", msg)
}

// isInteger reports whether the JSON number n is written as an integer: no
// fraction, no exponent.
func isInteger(n string) bool {
	return n != "" && !strings.ContainsAny(n, ".eE")
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case goType == "string", goType == "*string":
		return "a string"
	case goType == "bool", goType == "*bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// writeJSON answers with status and v as JSON.
func (a *api) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		a.log.ErrorContext(r.Context(), "encode response", "method", r.Method, "path", r.URL.Path, "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// formatTime formats t as every time is written (wire.TimeFormat).
func formatTime(t time.Time) string { return wire.FormatTime(t) }

// formatTimePtr formats t, or returns nil (JSON null) for a nil time.
func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// orNull returns nil (JSON null) for a zero value, else a pointer to v.
func orNull[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// taskJSON is the public part of a task.
type taskJSON struct {
	ID       int64           `json:"id"`
	Category string          `json:"category"`
	Priority int             `json:"priority"`
	Title    string          `json:"title"`
	Payload  json.RawMessage `json:"payload"`
}

func taskOf(t *tasks.Task) taskJSON {
	payload := t.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	return taskJSON{ID: t.ID, Category: t.Category, Priority: t.Priority, Title: t.Title, Payload: payload}
}

// taskStateJSON is a task's claim state and bookkeeping, for the admin: in
// GET /v1/tasks/{id} beside the task, in GET /v1/tasks beside its public
// part. Absent values are null.
type taskStateJSON struct {
	Status         tasks.Status `json:"status"`
	Fence          int64        `json:"fence"`
	Holder         *string      `json:"holder"`
	EditorID       *int64       `json:"editor_id"`
	AssignedAt     *string      `json:"assigned_at"`
	LeaseExpiresAt *string      `json:"lease_expires_at"`
	Attempts       int          `json:"attempts"`
	MaxAttempts    int          `json:"max_attempts"`
	RunAfter       string       `json:"run_after"`
	DueAt          *string      `json:"due_at"`
	LastError      *string      `json:"last_error"`
	CreatedAt      string       `json:"created_at"`
	UpdatedAt      string       `json:"updated_at"`
	DoneAt         *string      `json:"done_at"`
	workflowJSON
}

func taskStateOf(t *tasks.Task) taskStateJSON {
	return taskStateJSON{
		Status: t.Status, Fence: t.Fence, Holder: orNull(t.Holder), EditorID: orNull(t.EditorID),
		AssignedAt: formatTimePtr(t.AssignedAt), LeaseExpiresAt: formatTimePtr(t.LeaseExpiresAt),
		Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, RunAfter: formatTime(t.RunAfter),
		DueAt: formatTimePtr(t.DueAt), LastError: orNull(t.LastError), CreatedAt: formatTime(t.CreatedAt),
		UpdatedAt: formatTime(t.UpdatedAt), DoneAt: formatTimePtr(t.DoneAt),
		workflowJSON: workflowOf(t),
	}
}

// assignmentJSON is a claim as an editor sees it.
type assignmentJSON struct {
	Task           taskJSON `json:"task"`
	Fence          int64    `json:"fence"`
	AssignedAt     string   `json:"assigned_at"`
	LeaseExpiresAt string   `json:"lease_expires_at"`
	// Stage and Stages, for a task with stages: the stage to do and every
	// stage in order; Earlier, for such a task, are the latest
	// tasks.TaskResultsLimitDefault results of its earlier submissions, oldest
	// first (what a reviewer reviews; for a task sent back, the reviewer's
	// notes); EarlierMore says older ones exist, read with GET
	// /v1/assignments/{task}/earlier?fence=&before=EarlierBefore.
	Stage         string         `json:"stage,omitempty"`
	Stages        []string       `json:"stages,omitempty"`
	Earlier       *[]wire.Result `json:"earlier,omitempty"`
	EarlierMore   *bool          `json:"earlier_more,omitempty"`
	EarlierBefore string         `json:"earlier_before,omitempty"`
	// GroupID and Overlap, for a task of a group.
	GroupID int64 `json:"group_id,omitempty"`
	Overlap int   `json:"overlap,omitempty"`
	// Hedge says the task is held by another editor too, near its due_at:
	// the first to submit wins, and the other gets 409 done_by_other.
	Hedge bool `json:"hedge,omitempty"`
}

// assignmentOf returns the JSON of c, or nil for no claim.
func assignmentOf(c *tasks.Claim) *assignmentJSON {
	if c == nil {
		return nil
	}
	return &assignmentJSON{
		Task:           taskOf(&c.Task),
		Fence:          c.Fence,
		AssignedAt:     formatTime(c.AssignedAt),
		LeaseExpiresAt: formatTime(c.LeaseExpiresAt),
		Hedge:          c.Hedge,
	}
}
