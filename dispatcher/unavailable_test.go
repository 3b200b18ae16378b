package dispatcher_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"connection lost":                    {fmt.Errorf("claim: %w", io.ErrUnexpectedEOF), true},
		"lock conflicts kept going":          {fmt.Errorf("release task 3: %w", tasks.ErrBusy), true},
		"node outside the primary component": {fmt.Errorf("claim: %w", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}), true},
		// A causal read cut short when its Galera node left the primary component.
		"causal read cut short": {fmt.Errorf("editor by token hash: %w", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}), true},
		"duplicate key":         {fmt.Errorf("add: %w", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}), false},
		"stale claim":           {fmt.Errorf("submit task 3: %w", tasks.ErrStale), false},
		"invalid input":         {fmt.Errorf("add tasks: %w", tasks.ErrInvalid), false},
	} {
		err := dispatcher.Unavailable(c.err)
		if got := errors.Is(err, dispatcher.ErrUnavailable); got != c.want {
			t.Errorf("%s: Unavailable(%v) is ErrUnavailable = %v, want %v", name, c.err, got, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: Unavailable(%v) = %v lost the cause", name, c.err, err)
		}
	}
	if dispatcher.Unavailable(nil) != nil {
		t.Error("Unavailable(nil) is not nil")
	}
}
