package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTaskLimitKey: POST /v1/tasks takes a task's limit_key, GET
// /v1/tasks/{id} shows it (null without one), and a key over 128 bytes is
// refused with 422.
func TestTaskLimitKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var added struct {
		IDs      []int64          `json:"ids"`
		Tasks    []map[string]any `json:"tasks"`
		Created  int              `json:"created"`
		Existing int              `json:"existing"`
	}
	wantJSON(t, b.do(t, "POST", "/v1/tasks", adminToken,
		`[{"category":"news","title":"keyed","limit_key":"tenant-7"},{"category":"news","title":"none","limit_key":""}]`), http.StatusCreated, &added)
	for i, want := range []string{"tenant-7", ""} {
		var d taskDetail
		wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", added.IDs[i]), adminToken, ""), http.StatusOK, &d)
		switch {
		case want == "" && d.LimitKey != nil:
			t.Errorf("task %d: limit_key %q, want null", i, *d.LimitKey)
		case want != "" && (d.LimitKey == nil || *d.LimitKey != want):
			t.Errorf("task %d: limit_key %v, want %q", i, d.LimitKey, want)
		}
	}
	res := b.do(t, "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"long","limit_key":"`+strings.Repeat("k", 129)+`"}]`)
	wantError(t, res, http.StatusUnprocessableEntity, "invalid")
}
