package worker

import (
	"context"
	"sync"
	"time"
)

// A failed task goes back to the pool claimable after its backoff: by time
// alone, which no insert or release announces, so a long poll would find it
// only at its next look (the dispatcher's PollInterval, 5 s by default). The
// worker that recorded the failure knows when that is, and wakes the claims
// waiting for the task's category then (Dispatcher.Wake: every process's,
// with pub/sub), so that a retry runs when its backoff has passed.

// retryWakeBucket groups the wake-ups of one category due within the same
// span of time into one: a burst of failures wakes the category once.
const retryWakeBucket = 10 * time.Millisecond

// retryWakeTimeout bounds one wake-up (a publish, with pub/sub).
const retryWakeTimeout = time.Second

// retryWaker wakes the claims of a category when failed tasks of it become
// claimable again.
type retryWaker struct {
	wake func(ctx context.Context, counts map[string]int)

	mu      sync.Mutex
	stopped bool
	pending map[retryWakeKey]*retryWake
}

type retryWakeKey struct {
	category string
	bucket   int64 // the wake-up's time, in retryWakeBucket steps
}

type retryWake struct {
	tasks int
	timer *time.Timer
}

func newRetryWaker(wake func(ctx context.Context, counts map[string]int)) *retryWaker {
	return &retryWaker{wake: wake, pending: map[retryWakeKey]*retryWake{}}
}

// after wakes category's claims once after d, for one more task, at the end
// of d's bucket: never before the task is claimable.
func (r *retryWaker) after(category string, d time.Duration) {
	at := time.Now().Add(d)
	k := retryWakeKey{category: category, bucket: at.UnixNano()/int64(retryWakeBucket) + 1}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if w := r.pending[k]; w != nil {
		w.tasks++
		return
	}
	w := &retryWake{tasks: 1}
	w.timer = time.AfterFunc(time.Until(time.Unix(0, k.bucket*int64(retryWakeBucket))), func() { r.fire(k) })
	r.pending[k] = w
}

func (r *retryWaker) fire(k retryWakeKey) {
	r.mu.Lock()
	w := r.pending[k]
	delete(r.pending, k)
	stopped := r.stopped
	r.mu.Unlock()
	if w == nil || stopped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), retryWakeTimeout)
	defer cancel()
	r.wake(ctx, map[string]int{k.category: w.tasks})
}

// stop drops the wake-ups not yet due.
func (r *retryWaker) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for k, w := range r.pending {
		w.timer.Stop()
		delete(r.pending, k)
	}
}
