//go:build !race

package api_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/testenv"
)

// TestParkedLongPollStacks: a parked long poll's goroutines hold no more
// stack than a request parked about as deep (5 KiB) by a handler that calls
// nothing deeper, though on its
// way each poll's editor was read from MySQL, its body decoded and its claim
// tried against MySQL and Redis. Those calls grow a goroutine's stack to
// 16 KiB, which the runtime does not shrink while the poll waits at its
// depth; made aside (package aside), they leave it at 8 KiB.
//
// The polls and the parked requests are raw connections, so that the
// client side adds no goroutine to this process; each server has its
// connection's background reader beside the request's goroutine. The race
// detector makes frames larger, so this test is built without it; make test
// runs it so.
func TestParkedLongPollStacks(t *testing.T) {
	const (
		polls = 200
		wait  = 10 * time.Minute
	)
	b := setup(t, setupOpts{
		api:        api.Config{MaxWait: wait},
		dispatcher: dispatcher.Config{MaxWait: wait, PollInterval: wait},
	})
	tokens := make([]string, polls)
	for i := range tokens {
		tokens[i] = b.editor(t, fmt.Sprintf("parked-%d", i), "parked").Token
	}

	// The control: requests parked by a handler of their own, as deep.
	parked := make(chan struct{}, polls)
	release := make(chan struct{})
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parkDeep(controlDepth, func() {
			parked <- struct{}{}
			<-release
		})
	}))
	t.Cleanup(control.Close)
	t.Cleanup(func() { close(release) })

	base := stackInUse()
	for range polls {
		dialAndSend(t, control.URL, "GET /parked HTTP/1.1\r\nHost: control\r\n\r\n")
	}
	for range polls {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the control's requests did not all reach its handler")
		}
	}
	controlStacks := stackInUse() - base

	base = stackInUse()
	body := fmt.Sprintf(`{"wait_ms":%d}`, wait.Milliseconds())
	for _, token := range tokens {
		dialAndSend(t, b.url, "POST /v1/assignments/next HTTP/1.1\r\nHost: taskd\r\n"+
			"Authorization: Bearer "+token+"\r\nContent-Type: application/json\r\n"+
			fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body))
	}
	testenv.Eventually(t, 30*time.Second, "every poll parked", func() bool {
		return b.d.Stats().Waiting == polls
	})
	pollStacks := stackInUse() - base

	perControl, perPoll := controlStacks/polls, pollStacks/polls
	t.Logf("stack per parked request: %d B for the control, %d B for a long poll", perControl, perPoll)
	if perControl <= 0 {
		t.Fatalf("the control's requests hold %d B of stack each, want more than none", perControl)
	}
	// A stack grown to 16 KiB adds 8 KiB a poll (10 KiB measured, against
	// 2–3 KiB made aside); the slack covers the background readers', which
	// start at the runtime's running average of stack use.
	if perPoll > perControl+6<<10 {
		t.Errorf("a parked long poll holds %d B of stack, the control's parked request %d B: want at most 6 KiB more", perPoll, perControl)
	}
}

// controlDepth is how many frames of parkDeep the control parks under:
// about 3.8 KiB, under net/http's 1.3 KiB, as deep as a long poll parks.
const controlDepth = 14

// parkDeep calls park under depth frames of about 270 bytes each.
//
//go:noinline
func parkDeep(depth int, park func()) byte {
	var frame [256]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		park()
		return frame[0]
	}
	return parkDeep(depth-1, park) + frame[depth%len(frame)]
}

// stackInUse returns the bytes of goroutine stacks in use, after a
// collection (which shrinks the stacks that may be).
func stackInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.StackInuse)
}

// dialAndSend opens a connection to the server at url and writes request
// on it, leaving it open until the test ends.
func dialAndSend(t *testing.T, url, request string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
}
