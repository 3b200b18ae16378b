package aside_test

import (
	"errors"
	"runtime"
	"testing"

	"github.com/taskd/taskd/internal/aside"
)

func TestDoReturnsWhatFReturns(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	v, err := aside.Do(func() (int, error) { return 7, boom })
	if v != 7 || !errors.Is(err, boom) {
		t.Fatalf("Do = %d, %v; want 7, boom", v, err)
	}
}

func TestDoRunsFOnAnotherGoroutine(t *testing.T) {
	t.Parallel()
	here := goroutineHeader()
	there, _ := aside.Do(func() (string, error) { return goroutineHeader(), nil })
	if here == there {
		t.Fatalf("f ran on the caller's goroutine (%q)", here)
	}
}

func TestDoRaisesFsPanicInTheCaller(t *testing.T) {
	t.Parallel()
	defer func() {
		if p := recover(); p != "f panicked" {
			t.Fatalf("recovered %v, want f's panic", p)
		}
	}()
	_, _ = aside.Do(func() (int, error) { panic("f panicked") })
	t.Fatal("Do returned after f panicked")
}

// goroutineHeader returns the first line of the running goroutine's trace,
// which names it ("goroutine 42 [running]:").
func goroutineHeader() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	for i, c := range buf {
		if c == '\n' {
			return string(buf[:i])
		}
	}
	return string(buf)
}
