package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// The answers whose nulls an OpenAPI 3.0 document got wrong (a nullable beside
// an allOf, which a strict reader ignores), each made for real and checked
// against the document read strictly, as JSON Schema 2020-12: that the null
// is there, so the case is the one named, and that the schema takes it.
func TestOpenAPIAnswersWithNulls(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{history: true})
	spec, err := openapiSpec()
	if err != nil {
		t.Fatal(err)
	}
	// check sends a request, wants status and a null at each path (dotted,
	// array indexes as numbers; "" is the whole body) of the JSON answer, and
	// checks the answer against the document.
	check := func(method, path, token, body string, status int, nulls ...string) response {
		t.Helper()
		res := b.do(t, method, path, token, body)
		if res.status != status {
			t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.status, status, res.body)
		}
		for _, p := range nulls {
			if v, ok := jsonAt(res.body, p); !ok || v != nil {
				t.Errorf("%s %s: %s is %v (present %v), want null: %s", method, path, p, v, ok, res.body)
			}
		}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if err := spec.CheckResponse(req, res.status, res.header, res.body); err != nil {
			t.Errorf("read strictly: %v", err)
		}
		return res
	}

	kim := b.editor(t, "kim", "news")
	id := b.add(t, newTask{Category: "news", Title: "unclaimed"})[0]
	task := "/v1/tasks/" + strconv.FormatInt(id, 10)

	// An unclaimed task: no holder, no editor, no claim times, no key, no result.
	check("GET", task, adminToken, "", http.StatusOK,
		"editor_id", "holder", "assigned_at", "lease_expires_at", "due_at", "key", "last_error", "done_at", "result", "history_before")
	check("GET", "/v1/tasks?status=pending", adminToken, "", http.StatusOK,
		"tasks.0.editor_id", "tasks.0.holder", "tasks.0.assigned_at", "tasks.0.key", "next_cursor")
	check("GET", task+"/events", adminToken, "", http.StatusOK, "before")

	// An editor with no claim and no history.
	check("GET", "/v1/me", kim.Token, "", http.StatusOK, "assignment", "median_claim_to_submit_ms", "last_active_at")
	check("GET", "/v1/editors", adminToken, "", http.StatusOK, "editors.0.claim", "editors.0.disabled_at", "next_cursor")
	check("GET", fmt.Sprintf("/v1/editors/%d", kim.ID), adminToken, "", http.StatusOK, "claim", "median_claim_to_submit_ms")

	// The claim is submitted, and nothing else is claimable: next is null. The
	// task has no key, so neither has its line in the feed.
	a := b.next(t, kim.Token)
	if a.Task.ID != id {
		t.Fatalf("claimed task %d, want %d", a.Task.ID, id)
	}
	check("POST", fmt.Sprintf("/v1/assignments/%d/submit", id), kim.Token,
		fmt.Sprintf(`{"fence":%d,"result":{"ok":true}}`, a.Fence), http.StatusOK, "next")
	res := check("GET", "/v1/results", adminToken, "", http.StatusOK)
	if lines := bytes.Split(bytes.TrimSpace(res.body), []byte("\n")); len(lines) != 2 {
		t.Errorf("GET /v1/results: %d lines, want the result and the end:\n%s", len(lines), res.body)
	} else if v, ok := jsonAt(lines[0], "key"); !ok || v != nil {
		t.Errorf("GET /v1/results: the line's key is %v, want null: %s", v, lines[0])
	}

	// A disable that revokes nothing; the history without claims flushed.
	check("POST", fmt.Sprintf("/v1/editors/%d/disable", kim.ID), adminToken, "", http.StatusOK, "released")
	check("GET", "/v1/stats/history?minutes=1", adminToken, "", http.StatusOK, "total.next_p50_ms", "total.next_p99_ms")
	check("POST", "/v1/admin/categories/news/resume", adminToken, "", http.StatusOK, "paused_at")
}

// The document refuses a submit whose result is null, as taskd does (422),
// and takes one whose result is any other JSON value, as taskd does.
func TestOpenAPISubmitResultNotNull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec, err := openapiSpec()
	if err != nil {
		t.Fatal(err)
	}
	kim := b.editor(t, "kim", "news")
	id := b.add(t, newTask{Category: "news", Title: "t"})[0]
	a := b.next(t, kim.Token)
	path := fmt.Sprintf("/v1/assignments/%d/submit", id)
	request := func(body string) error {
		req := httptest.NewRequest("POST", path, nil)
		req.Header.Set("Content-Type", "application/json")
		return spec.CheckRequest(req, []byte(body))
	}

	null := fmt.Sprintf(`{"fence":%d,"result":null}`, a.Fence)
	if err := request(null); err == nil {
		t.Errorf("the document takes %s", null)
	}
	wantError(t, b.do(t, "POST", path, kim.Token, null), http.StatusUnprocessableEntity, "invalid")

	for _, result := range []string{`false`, `0`, `""`, `[]`, `{"ok":true}`} {
		if err := request(fmt.Sprintf(`{"fence":%d,"result":%s}`, a.Fence, result)); err != nil {
			t.Errorf("result %s: %v", result, err)
		}
	}
	ok := fmt.Sprintf(`{"fence":%d,"result":false}`, a.Fence)
	wantJSON(t, b.do(t, "POST", path, kim.Token, ok), http.StatusOK, &struct {
		Next *assignment `json:"next"`
	}{})
}

// jsonAt returns the value at a dotted path in a JSON document ("" is the
// whole document, a number indexes an array), and whether it is there.
func jsonAt(data []byte, path string) (any, bool) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, false
	}
	if path == "" {
		return v, true
	}
	for _, key := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[key]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}
