package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/tasks"
)

func TestRefusedValue(t *testing.T) {
	if refusedValue(nil) != nil {
		t.Fatal("refusedValue(nil) is not nil")
	}
	for _, n := range refusedValueErrors {
		cause := &mysql.MySQLError{Number: n, Message: "refused"}
		err := refusedValue(fmt.Errorf("exec: %w", cause))
		var me *mysql.MySQLError
		if !errors.Is(err, tasks.ErrInvalid) || !errors.As(err, &me) || me.Number != n {
			t.Errorf("error %d became %v, want ErrInvalid keeping the cause", n, err)
		}
	}
	for _, n := range []uint16{erDupEntry, erLockDeadlock, erLockWaitTimeout, 1064, 1146, 1452} {
		err := refusedValue(&mysql.MySQLError{Number: n})
		if errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("error %d became ErrInvalid: it is no refused value", n)
		}
	}
	if err := refusedValue(errors.New("connection reset")); errors.Is(err, tasks.ErrInvalid) {
		t.Error("a network error became ErrInvalid")
	}
	// Already invalid stays as it is, not wrapped twice.
	once := fmt.Errorf("%w: x", tasks.ErrInvalid)
	if refusedValue(once) != once {
		t.Error("an ErrInvalid error was wrapped again")
	}
}

func TestInsertBatchEnd(t *testing.T) {
	s := &Store{cfg: Config{InsertBatchSize: 3}.WithDefaults()}
	row := func(payloadBytes int) newTaskRow {
		return newTaskRow{category: "c", title: "t", payload: strings.Repeat("x", payloadBytes)}
	}
	big := insertBatchBytes / 2
	rows := []newTaskRow{row(1), row(1), row(1), row(1), row(big), row(big), row(insertBatchBytes * 2), row(1)}
	var batches []int
	for start := 0; start < len(rows); {
		end := s.insertBatchEnd(rows, start)
		batches = append(batches, end-start)
		start = end
	}
	// 3 small rows (the row limit); 1 small and 1 big; 1 big (the second would pass
	// the byte limit); the huge row on its own; the last row.
	if got, want := fmt.Sprint(batches), "[3 2 1 1 1]"; got != want {
		t.Fatalf("batch sizes %s, want %s", got, want)
	}
}
