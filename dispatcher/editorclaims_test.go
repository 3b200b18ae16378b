package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// flightStore is a Store whose claims wait for gate, and which records the
// size of each call: 1 for a claim alone, len(ps) for a batch.
type flightStore struct {
	Store
	gate  chan struct{}
	mu    sync.Mutex
	calls []int
}

func (s *flightStore) record(n int) {
	s.mu.Lock()
	s.calls = append(s.calls, n)
	s.mu.Unlock()
	<-s.gate
}

func (s *flightStore) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.calls...)
}

func (s *flightStore) Claim(_ context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	s.record(1)
	return &tasks.Claim{Task: tasks.Task{ID: p.TaskID}}, nil
}

func (s *flightStore) ClaimEditorBatch(_ context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error) {
	s.record(len(ps))
	res := make([]tasks.ClaimResult, len(ps))
	for i, p := range ps {
		res[i].Claim = &tasks.Claim{Task: tasks.Task{ID: p.TaskID}}
	}
	return res, nil
}

// waitCalls waits until s has seen n calls and returns them.
func waitCalls(t *testing.T, s *flightStore, n int) []int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if calls := s.seen(); len(calls) >= n {
			return calls
		}
	}
	t.Fatalf("store calls %v, want %d", s.seen(), n)
	return nil
}

// A claim with nothing in the air goes at once, alone. While a flight is in
// the air, fewer than editorBatchMin claims wait for it to land and go
// together; editorBatchMin of them take off on the second flight at once.
func TestEditorClaimsSecondFlightWaitsForABatch(t *testing.T) {
	s := &flightStore{gate: make(chan struct{})}
	b := newEditorClaims(s)
	ctx := context.Background()
	var wg sync.WaitGroup
	claim := func(task int64) {
		wg.Go(func() {
			c, err := b.claim(ctx, tasks.ClaimParams{TaskID: task, EditorID: task, Status: tasks.StatusPending})
			if err != nil || c.Task.ID != task {
				t.Errorf("claim of task %d = %v, %v", task, c, err)
			}
		})
	}
	claim(1)
	if calls := waitCalls(t, s, 1); calls[0] != 1 {
		t.Fatalf("first call carried %d claims, want 1: a claim alone goes at once", calls[0])
	}
	for task := range int64(editorBatchMin - 1) {
		claim(100 + task)
	}
	time.Sleep(50 * time.Millisecond)
	if calls := s.seen(); len(calls) != 1 {
		t.Fatalf("store calls %v while %d claims queued behind a flight, want them to wait for it", calls, editorBatchMin-1)
	}
	claim(200)
	if calls := waitCalls(t, s, 2); calls[1] != editorBatchMin {
		t.Fatalf("second flight carried %d claims, want %d", calls[1], editorBatchMin)
	}
	close(s.gate)
	wg.Wait()
	if calls := s.seen(); len(calls) != 2 {
		t.Errorf("store calls %v, want 2", calls)
	}
}
