package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd"
)

// TestWorkspaceInstructionsCalls: the workspace reads and confirms its
// instructions through /app/v1 with its session, a category with a "/" in
// its name too (its escaped form is kept), and only with the CSRF header.
func TestWorkspaceInstructionsCalls(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Ada", "desk/politics")
	s.admin("PUT", "/v1/admin/categories/desk%2Fpolitics/instructions", map[string]string{"markdown": "Be *fair*."}, http.StatusOK, nil)
	c := signedIn(t, s, token)
	csrf := csrfOf(t, s, c)

	code, body := do(t, c, "GET", s.base+"/app/v1/me/instructions", "", "")
	if code != http.StatusOK || !strings.Contains(body, `"category":"desk/politics"`) || !strings.Contains(body, `"pending":true`) {
		t.Fatalf("GET /app/v1/me/instructions = %d %s", code, body)
	}
	if code, body := do(t, c, "POST", s.base+"/app/v1/me/instructions/desk%2Fpolitics/ack", "", `{"version":1}`); code != http.StatusForbidden {
		t.Errorf("confirm without the CSRF header = %d %s, want 403", code, body)
	}
	if code, body := do(t, c, "POST", s.base+"/app/v1/me/instructions/desk%2Fpolitics/ack", csrf, `{"version":1}`); code != http.StatusOK {
		t.Fatalf("confirm = %d %s", code, body)
	}
	if code, body := do(t, c, "GET", s.base+"/app/v1/me/instructions", "", ""); code != http.StatusOK || !strings.Contains(body, `"pending":false`) {
		t.Errorf("after the confirmation = %d %s", code, body)
	}
}
