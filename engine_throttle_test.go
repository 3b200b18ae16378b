package taskd_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// A token made by the engine's editor methods is served at once from an
// address blocked for wrong tokens, as one made through the API is, while
// the address's wrong tokens are refused 429.
func TestEngineTokensPassTheThrottle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := taskd.Config{AdminToken: testAdminToken}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.AuthFailures = 1
	e := newEngine(t, cfg)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	me := func(token string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+e.Addr()+"/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if got := me("wrong-token-1"); got != http.StatusUnauthorized {
		t.Fatalf("the first wrong token: %d, want 401", got)
	}
	if got := me("wrong-token-2"); got != http.StatusTooManyRequests {
		t.Fatalf("the second wrong token: %d, want 429", got)
	}
	token, hash := tasks.NewToken()
	ed, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if got := me(token); got != http.StatusOK {
		t.Errorf("a token made by Engine.CreateEditor, from the blocked address: %d, want 200", got)
	}
	newToken, newHash := tasks.NewToken()
	if err := e.SetEditorToken(ctx, ed.ID, newHash); err != nil {
		t.Fatal(err)
	}
	if got := me(newToken); got != http.StatusOK {
		t.Errorf("a token made by Engine.SetEditorToken, from the blocked address: %d, want 200", got)
	}
	if got := me("wrong-token-3"); got != http.StatusTooManyRequests {
		t.Errorf("a wrong token from the blocked address: %d, want 429", got)
	}
}
