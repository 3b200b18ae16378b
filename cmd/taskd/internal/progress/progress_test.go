package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// clock is a fake clock that tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestPlainLines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	b := New(&out, "importing", "tasks", 100)
	b.Now = c.now
	if b.tty {
		t.Fatal("a buffer counts as a terminal")
	}

	b.Add(10)
	c.t = c.t.Add(LineInterval - time.Millisecond)
	b.Add(10)
	if out.Len() != 0 {
		t.Fatalf("printed before LineInterval passed: %q", out.String())
	}
	c.t = c.t.Add(time.Millisecond)
	b.Add(30)
	if got, want := out.String(), "importing: 50/100 tasks (50%), 5s elapsed\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	b.Add(50)
	b.Finish()
	if got := strings.Count(out.String(), "\n"); got != 2 || !strings.HasSuffix(out.String(), "importing: 100/100 tasks (100%), 5s elapsed\n") {
		t.Errorf("after Finish: %q, want a final line", out.String())
	}

	// A short operation prints nothing at all.
	out.Reset()
	b = New(&out, "checking", "records", 0)
	b.Now = c.now
	b.Add(3)
	b.Finish()
	if out.Len() != 0 {
		t.Errorf("short operation printed %q", out.String())
	}
}

func TestBar(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &clock{t: time.Unix(0, 0)}
	b := New(&out, "importing", "tasks", 200)
	b.tty = true // as on a terminal
	b.Now = c.now
	b.Add(50)
	c.t = c.t.Add(time.Second)
	b.Add(50)
	b.Finish()
	draws := strings.Split(out.String(), "\r")[1:]
	if len(draws) != 3 {
		t.Fatalf("got %d draws, want 3 (first, after 1s, final): %q", len(draws), out.String())
	}
	if want := "importing [===============>              ]  50% 100/200 tasks  100/s\x1b[K"; draws[1] != want {
		t.Errorf("draw after 1s = %q, want %q", draws[1], want)
	}
	if !strings.HasSuffix(out.String(), "\n") {
		t.Error("Finish did not end the line")
	}
}
