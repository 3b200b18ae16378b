package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd/tasks"
)

// The workflow's sentinels reach a client with their own answers: a task
// barred to the editor is 409 barred (the dispatcher passes such tasks by, so
// it is not expected), and an invalid submit 422 with the store's message.
func TestClassifyWorkflowErrors(t *testing.T) {
	t.Parallel()
	barred := classify(fmt.Errorf("claim task 7: %w", tasks.ErrBarred))
	if barred.status != http.StatusConflict || barred.code != codeBarred || !strings.Contains(barred.message, "not for you") {
		t.Errorf("ErrBarred: %d %s %q, want 409 barred saying why", barred.status, barred.code, barred.message)
	}
	invalid := classify(fmt.Errorf("submit task 7: %w: send_back at the first stage", tasks.ErrInvalid))
	if invalid.status != http.StatusUnprocessableEntity || invalid.code != codeInvalid || !strings.Contains(invalid.message, "send_back at the first stage") {
		t.Errorf("ErrInvalid: %d %s %q, want 422 invalid with the store's message", invalid.status, invalid.code, invalid.message)
	}
}
