package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

const adminToken = "web-test-admin-token-0123456789"

// server is a real engine listening on a loopback port, over its own
// database and Redis key prefix.
type server struct {
	t      *testing.T
	base   string
	prefix string
	e      *taskd.Engine
}

// testCategories are the workflows of the tests' categories: "desk" is
// edited, then reviewed; "panel" asks for two independent results. Every
// other category (news, sport...) has the default workflow.
func testCategories() []taskd.CategoryConfig {
	return []taskd.CategoryConfig{
		{Name: "desk", Stages: []string{"edit", "review"}},
		{Name: "panel", Overlap: 2},
	}
}

// startServer starts an engine with the API and the pages; cfg may set
// the lease, the session idle time and another admin token than adminToken,
// opts replace the test database and Redis.
func startServer(t *testing.T, cfg taskd.Config, opts ...taskd.Option) *server {
	t.Helper()
	prefix := cfg.Redis.KeyPrefix
	if prefix == "" {
		prefix = testenv.Prefix(t)
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = adminToken
	}
	if cfg.Categories == nil {
		cfg.Categories = testCategories()
	}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Redis.KeyPrefix = prefix
	opts = append([]taskd.Option{
		taskd.WithDB(storetest.NewDB(t)),
		taskd.WithRedis(testenv.Redis(t)),
		taskd.WithLogger(slog.New(slog.DiscardHandler)),
	}, opts...)
	e, err := taskd.New(cfg, opts...)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatalf("start engine: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
	return &server{t: t, base: "http://" + e.Addr(), prefix: prefix, e: e}
}

// admin calls the API with the admin token and decodes a JSON answer into
// out (when not nil); it fails the test unless the status is want.
func (s *server) admin(method, path string, body any, want int, out any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// editor creates an editor of the categories and returns its id and token.
func (s *server) editor(name string, categories ...string) (int64, string) {
	s.t.Helper()
	var ed struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	s.admin("POST", "/v1/editors", map[string]any{"name": name, "categories": categories}, http.StatusCreated, &ed)
	return ed.ID, ed.Token
}

// addTask adds one task and returns its id.
func (s *server) addTask(category string, priority int, title string, payload any) int64 {
	s.t.Helper()
	var out struct {
		IDs []int64 `json:"ids"`
	}
	s.admin("POST", "/v1/tasks", []map[string]any{{"category": category, "priority": priority, "title": title, "payload": payload}}, http.StatusCreated, &out)
	return out.IDs[0]
}

// browserClient is an HTTP client with a cookie jar that does not follow
// redirects, standing in for a browser in the HTTP-level tests.
func browserClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{
		Jar:           jar,
		Timeout:       40 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// signIn posts the sign-in form with token and returns the answer.
func (s *server) signIn(c *http.Client, token string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "POST", s.base+"/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
