package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestAgreementRoute: GET /v1/admin/agreement compares the field a category
// names, answers its interval alpha null when a value is not a number, and
// answers a category with nothing to compare with null alphas and empty lists;
// bad query parameters are 400 or 422.
func TestAgreementRoute(t *testing.T) {
	t.Parallel()
	wf := map[string]tasks.Workflow{
		"scores": {Overlap: 2, AgreementField: "score", AgreementInterval: true},
		"labels": {Overlap: 2},
	}
	b := setup(t, setupOpts{storeCfg: store.Config{Workflows: wf}, dispatcher: dispatcher.Config{Workflows: wf}})
	ann, bob := b.editor(t, "ann", "scores"), b.editor(t, "bob", "scores")
	b.add(t, newTask{Category: "scores", Title: "one"}, newTask{Category: "scores", Title: "two"})
	// One group scored 3 and "x", the other 4 and 4.
	for _, w := range []struct {
		token  string
		scores []string
	}{{ann.Token, []string{`3`, `4`}}, {bob.Token, []string{`"x"`, `4`}}} {
		for _, score := range w.scores {
			var a flowAssignment
			wantJSON(t, b.do(t, "POST", "/v1/assignments/next", w.token, ""), http.StatusOK, &a)
			res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), w.token,
				fmt.Sprintf(`{"fence":%d,"result":{"score":%s}}`, a.Fence, score))
			if res.status != http.StatusOK {
				t.Fatalf("submit: %d %s", res.status, res.body)
			}
		}
	}
	var got struct {
		Field          *string `json:"field"`
		Units          int     `json:"units"`
		PairableValues int     `json:"pairable_values"`
		Alpha          map[string]*float64
		Pairs          []struct {
			Units  int `json:"units"`
			Agreed int `json:"agreed"`
		} `json:"pairs"`
	}
	res := b.do(t, "GET", "/v1/admin/agreement?category=scores", adminToken, "")
	if err := json.Unmarshal(res.body, &got); err != nil || res.status != http.StatusOK {
		t.Fatalf("agreement: %d %s: %v", res.status, res.body, err)
	}
	// Nominal over 3, x, 4, 4: Do = 2/4, De = (16 - 1 - 1 - 4)/12: 1 - 0.6 = 0.4.
	if got.Field == nil || *got.Field != "score" || got.Units != 2 || got.PairableValues != 4 {
		t.Errorf("answer %s, want field score, 2 units of 4 values", res.body)
	}
	if n, ok := got.Alpha["nominal"]; !ok || n == nil || *n != 0.4 {
		t.Errorf("alpha %s, want nominal 0.4", res.body)
	}
	if i, ok := got.Alpha["interval"]; !ok || i != nil || !strings.Contains(string(res.body), `"interval":null`) {
		t.Errorf("alpha %s, want interval null: x is not a number", res.body)
	}
	if len(got.Pairs) != 1 || got.Pairs[0].Units != 2 || got.Pairs[0].Agreed != 1 {
		t.Errorf("pairs %s, want ann and bob agreeing on 1 of 2", res.body)
	}

	res = b.do(t, "GET", "/v1/admin/agreement?category=labels", adminToken, "")
	if res.status != http.StatusOK || !strings.Contains(string(res.body), `"alpha":{"nominal":null}`) ||
		!strings.Contains(string(res.body), `"editors":[],"pairs":[]`) {
		t.Errorf("labels: %d %s, want alpha null, no interval, empty lists", res.status, res.body)
	}

	now := time.Now().UTC()
	for _, c := range []struct {
		query  string
		status int
	}{
		{"", http.StatusUnprocessableEntity},
		{"category=scores&colour=red", http.StatusBadRequest},
		{"category=scores&category=labels", http.StatusBadRequest},
		{"category=scores&since=yesterday", http.StatusUnprocessableEntity},
		{"category=scores&since=" + url.QueryEscape(now.Format(time.RFC3339)) + "&until=" + url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339)), http.StatusUnprocessableEntity},
		{"category=scores&limit=100001", http.StatusUnprocessableEntity},
	} {
		if res := b.do(t, "GET", "/v1/admin/agreement?"+c.query, adminToken, ""); res.status != c.status {
			t.Errorf("?%s: %d %s, want %d", c.query, res.status, res.body, c.status)
		}
	}
	if res := b.do(t, "GET", "/v1/admin/agreement?category=scores", ann.Token, ""); res.status != http.StatusForbidden {
		t.Errorf("an editor's token: %d, want 403", res.status)
	}
}
