package api_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/tasks"
)

// TestAdminSessionMAC: an ops session's MAC opens the admin routes only with
// the session id it was made for and the admin token it was made with; the
// SHA-256 of the admin token, which sessions used to keep, opens nothing.
func TestAdminSessionMAC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status := func(ctx context.Context) int {
		rec := httptest.NewRecorder()
		b.api.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/stats", nil).WithContext(ctx))
		return rec.Code
	}
	mac := api.AdminSessionMAC(adminToken, "id-a")
	if got := status(api.WithAdminSession(context.Background(), "id-a", mac)); got != http.StatusOK {
		t.Errorf("the session's own MAC: status %d, want 200", got)
	}
	for name, ctx := range map[string]context.Context{
		"a MAC copied to another session": api.WithAdminSession(context.Background(), "id-b", mac),
		"a MAC of another admin token":    api.WithAdminSession(context.Background(), "id-a", api.AdminSessionMAC("another-admin-token-0123456789", "id-a")),
		"the admin token's SHA-256":       api.WithAdminSession(context.Background(), "id-a", sha256.Sum256([]byte(adminToken))),
		"no MAC":                          api.WithAdminSession(context.Background(), "id-a", [32]byte{}),
	} {
		if got := status(ctx); got != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, got)
		}
	}
	if api.AdminSessionMAC(adminToken, "id-a") == api.AdminSessionMAC(adminToken, "id-b") {
		t.Error("two sessions got the same MAC")
	}
}

// endedSessions records the editors whose sessions the API ended, and fails
// while fail is set.
type endedSessions struct {
	mu    sync.Mutex
	ended []int64
	fail  bool
}

func (e *endedSessions) EndEditorSessions(_ context.Context, editorID int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail {
		return errors.New("redis is down")
	}
	e.ended = append(e.ended, editorID)
	return nil
}

func (e *endedSessions) got() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ended)
}

// TestEditorSessionsEnd: disabling an editor and giving it a new token end
// its page sessions; enabling it and changing its name do not. A disable
// whose sessions could not be ended answers 503 (the editor is disabled
// all the same, and disabling again ends them); a new token is answered
// anyway, as the old token's sessions are refused.
func TestEditorSessionsEnd(t *testing.T) {
	t.Parallel()
	var sess endedSessions
	b := setup(t, setupOpts{api: api.Config{Sessions: &sess}})
	ann := b.editor(t, "ann", "news")
	path := fmt.Sprintf("/v1/editors/%d", ann.ID)

	wantJSON(t, b.do(t, "PATCH", path, adminToken, `{"name":"ann b"}`), http.StatusOK, nil)
	wantJSON(t, b.do(t, "POST", path+"/token", adminToken, ""), http.StatusOK, nil)
	wantJSON(t, b.do(t, "POST", path+"/disable", adminToken, ""), http.StatusOK, nil)
	wantJSON(t, b.do(t, "POST", path+"/enable", adminToken, ""), http.StatusOK, nil)
	if got := sess.got(); !slices.Equal(got, []int64{ann.ID, ann.ID}) {
		t.Errorf("sessions ended for %v, want editor %d's twice (new token, disable)", got, ann.ID)
	}

	sess.mu.Lock()
	sess.fail = true
	sess.mu.Unlock()
	wantError(t, b.do(t, "POST", path+"/disable", adminToken, ""), http.StatusServiceUnavailable, "unavailable")
	var ed map[string]any
	if wantJSON(t, b.do(t, "GET", path, adminToken, ""), http.StatusOK, &ed); ed["disabled"] != true {
		t.Error("the editor is not disabled after a disable answered 503")
	}
	wantJSON(t, b.do(t, "POST", path+"/token", adminToken, ""), http.StatusOK, nil)
	sess.mu.Lock()
	sess.fail = false
	sess.mu.Unlock()
	wantJSON(t, b.do(t, "POST", path+"/disable", adminToken, ""), http.StatusOK, nil)
	if got := sess.got(); len(got) != 3 {
		t.Errorf("sessions ended %d times, want 3 (the disable again ended them)", len(got))
	}
}

// TestEditorSessionEpoch: a sign-in learns the epoch of the read of the
// editor that let its token in; a session of that epoch works until the
// editor's next disable and never after, enabled again or not, while a
// session begun after the enable works. The epoch comes before the
// disabled check: a disabled editor's old session is answered 401, not 403.
func TestEditorSessionEpoch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ed := b.editor(t, "epo", "news")
	path := fmt.Sprintf("/v1/editors/%d", ed.ID)
	serve := func(ctx context.Context) response {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/me", nil).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+ed.Token) // ignored with a session
		b.api.ServeHTTP(rec, req)
		return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	signIn := func() api.EditorSession {
		t.Helper()
		var s api.EditorSession
		if res := serve(api.WithSignIn(context.Background(), &s)); res.status != http.StatusOK {
			t.Fatalf("sign in: %d %s", res.status, res.body)
		}
		if s.TokenHash != tasks.HashToken(ed.Token) {
			t.Fatalf("the sign-in learnt token hash %x, want the token's", s.TokenHash)
		}
		return s
	}
	before := signIn()
	wantJSON(t, serve(api.WithEditorSession(context.Background(), before)), http.StatusOK, nil)

	wantJSON(t, b.do(t, "POST", path+"/disable", adminToken, ""), http.StatusOK, nil)
	wantError(t, serve(api.WithEditorSession(context.Background(), before)), http.StatusUnauthorized, "unauthorized")
	var refused api.EditorSession
	wantError(t, serve(api.WithSignIn(context.Background(), &refused)), http.StatusForbidden, "editor_disabled")
	if refused != (api.EditorSession{}) {
		t.Errorf("a refused sign-in learnt %+v, want nothing", refused)
	}

	wantJSON(t, b.do(t, "POST", path+"/enable", adminToken, ""), http.StatusOK, nil)
	if msg := wantError(t, serve(api.WithEditorSession(context.Background(), before)), http.StatusUnauthorized, "unauthorized"); msg != "your session has ended; sign in again" {
		t.Errorf("message %q", msg)
	}
	after := signIn()
	if after.Epoch <= before.Epoch {
		t.Errorf("epoch after a disable %d, before %d: want it raised", after.Epoch, before.Epoch)
	}
	wantJSON(t, serve(api.WithEditorSession(context.Background(), after)), http.StatusOK, nil)
}
