package taskd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd"
)

// apiCall sends method path with body as JSON and token, fails the test unless
// the status is want, and decodes the answer into out (when not nil).
func apiCall(t *testing.T, base, token, method, path string, body any, want int, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

// TestMetricsAgreementAlpha: taskd_agreement_alpha reports each overlap
// category's Krippendorff's alpha, nominal, and interval where the category
// says its values are numbers; a category with no group done reports none.
func TestMetricsAgreementAlpha(t *testing.T) {
	t.Parallel()
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
		Telemetry:  taskd.TelemetryConfig{Prometheus: true},
		Categories: []taskd.CategoryConfig{
			{Name: "panel", Overlap: 2},
			{Name: "scores", Overlap: 2, AgreementField: "score", AgreementMetric: "interval"},
			{Name: "idle", Overlap: 3},
		},
	})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + e.Addr()
	var tokens []string
	for _, name := range []string{"ann", "bob"} {
		var ed struct {
			Token string `json:"token"`
		}
		apiCall(t, base, testAdminToken, "POST", "/v1/editors", map[string]any{"name": name, "categories": []string{"panel", "scores"}}, http.StatusCreated, &ed)
		tokens = append(tokens, ed.Token)
	}
	// panel: two groups, decided alike on one: yes/yes, yes/no. scores: two
	// groups, scored 1/2 and 4/4.
	work := []struct {
		category string
		values   [2]any
	}{{"panel", [2]any{"yes", "yes"}}, {"panel", [2]any{"yes", "no"}}, {"scores", [2]any{1, 2}}, {"scores", [2]any{4, 4}}}
	for _, w := range work {
		apiCall(t, base, testAdminToken, "POST", "/v1/tasks", []map[string]any{{"category": w.category, "title": "t"}}, http.StatusCreated, nil)
		for i, tok := range tokens {
			var a struct {
				Task struct {
					ID int64 `json:"id"`
				} `json:"task"`
				Fence int64 `json:"fence"`
			}
			apiCall(t, base, tok, "POST", "/v1/assignments/next", map[string]any{}, http.StatusOK, &a)
			sub := map[string]any{"fence": a.Fence, "result": map[string]any{}}
			if w.category == "panel" {
				sub["decision"] = w.values[i]
			} else {
				sub["result"] = map[string]any{"score": w.values[i]}
			}
			apiCall(t, base, tok, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), sub, http.StatusOK, nil)
		}
	}
	status, body := get(t, base+"/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "taskd_agreement_alpha{") {
			lines = append(lines, l)
		}
	}
	// panel: n = 4, o(yes,yes) = 2, o(yes,no) = o(no,yes) = 1: Do = 2/4,
	// De = 2·3·1/(4·3) = 1/2, alpha 0. scores nominal: values 1, 2, 4, 4:
	// Do = 2/4, De = (16 - (1+1+4))/12 = 10/12, alpha 1 - 0.6 = 0.4 (to
	// float precision); interval: Do = 2·1/4 = 0.5, De = Σ n_c n_k (c-k)²/12
	// = 2·(1·1·1 + 1·2·9 + 1·2·4)/12 = 54/12, alpha = 1 - 0.5/4.5 = 0.888...
	want := map[string]string{
		`taskd_task_category="panel"`:                                    "0",
		`taskd_agreement_metric="nominal",taskd_task_category="scores"`:  "0.4",
		`taskd_agreement_metric="interval",taskd_task_category="scores"`: "0.888888",
	}
	if len(lines) != 3 {
		t.Fatalf("taskd_agreement_alpha lines:\n%s\nwant 3 (panel nominal, scores nominal and interval)", strings.Join(lines, "\n"))
	}
	for sel, prefix := range want {
		found := false
		for _, l := range lines {
			if strings.Contains(l, sel) {
				found = true
				v := l[strings.LastIndexByte(l, ' ')+1:]
				if !strings.HasPrefix(v, prefix) && !(prefix == "0.4" && strings.HasPrefix(v, "0.39999")) {
					t.Errorf("%s = %s, want %s", sel, v, prefix)
				}
			}
		}
		if !found {
			t.Errorf("no line with %s in:\n%s", sel, strings.Join(lines, "\n"))
		}
	}
}
