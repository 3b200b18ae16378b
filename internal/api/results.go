package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/taskd/taskd/internal/wire"
	"github.com/taskd/taskd/tasks"
)

// GET /v1/results flushes its first line at once, then every resultsFlushLines
// lines or, when lines come slowly, with the first line after resultsFlushAfter.
const (
	resultsFlushLines = 64
	resultsFlushAfter = 100 * time.Millisecond
)

// Each line but the last is a wire.Result.

// resultsEndJSON is the last line of GET /v1/results.
type resultsEndJSON struct {
	NextCursor string `json:"next_cursor"`
	Count      int    `json:"count"`
	More       bool   `json:"more"`
}

// results streams the accepted results after the cursor as JSON lines, in
// feed order (see Engine.Results of package taskd), then a last line with the cursor to
// resume from:
//
//	{"cursor":"41","task_id":7,"fence":1,"category":"news",...}
//	{"cursor":"42",...}
//	{"next_cursor":"42","count":2,"more":false}
//
// after is a cursor from a previous answer (a result's cursor or next_cursor),
// or empty or "0" for the start; limit is 1..tasks.ResultsLimitMax, default
// tasks.ResultsLimitDefault. more is true when the page was full: ask again at
// once. Otherwise the client has caught up and polls again later.
//
// Lines are flushed as they are read from the database: the first at once,
// then in groups (see resultsFlushLines). Should the read fail
// once the answer has started, the connection is cut (the client sees a
// truncated body, without the last line); every line received whole stands,
// and the client resumes from the cursor of the last one.
func (a *api) results(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, err := queryInt(q.Get("after"), "after", "a cursor from a previous answer", 0)
	if err != nil {
		return err
	}
	limit, err := queryInt(q.Get("limit"), "limit", "1.."+strconv.Itoa(tasks.ResultsLimitMax), 1)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	rc := http.NewResponseController(w)
	started, lines := false, 0
	var flushed time.Time
	flush := func() error {
		flushed = time.Now()
		if err := out.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	page, err := a.store.Results(r.Context(), tasks.ResultsParams{After: after, Limit: int(limit)}, func(res *tasks.Result) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
		if err := enc.Encode(wire.ResultOf(res)); err != nil {
			return err
		}
		if lines++; lines == 1 || lines%resultsFlushLines == 0 || time.Since(flushed) >= resultsFlushAfter {
			return flush()
		}
		return nil
	})
	if err != nil && !started {
		return err
	}
	if err != nil {
		// The status is sent: cut the answer short rather than end it as if whole.
		// The whole lines written go out first.
		a.log.WarnContext(r.Context(), "results stream cut short", "after", after, "sent", page.Count, "err", timedOut(r.Context(), err))
		_ = flush()
		panic(http.ErrAbortHandler)
	}
	if !started {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
	_ = enc.Encode(resultsEndJSON{NextCursor: strconv.FormatInt(page.Next, 10), Count: page.Count, More: page.More})
	_ = flush()
	return nil
}

// queryInt parses the query parameter name, a decimal integer of at least
// least; empty means 0 (the default). Anything else is 422 invalid, the message
// saying what is expected.
func queryInt(s, name, want string, least int64) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < least || s[0] == '+' {
		return 0, errorf(http.StatusUnprocessableEntity, codeInvalid, "%s must be %s, got %q", name, want, s)
	}
	return n, nil
}
