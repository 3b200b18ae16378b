package locker

import (
	"testing"
	"time"
)

func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
		"123456789":            12739,
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // empty tag: the whole key is hashed
		"foo{{bar}}zap":        4015, // tag is "{bar"
		"foo{bar}{zap}":        5061, // first tag only
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestRetryStrategies(t *testing.T) {
	if d := NoRetry().NextBackoff(1); d > 0 {
		t.Errorf("NoRetry: backoff %v, want none", d)
	}
	lin := LinearBackoff(7 * time.Millisecond)
	for attempt := 1; attempt < 50; attempt++ {
		if d := lin.NextBackoff(attempt); d != 7*time.Millisecond {
			t.Fatalf("LinearBackoff attempt %d: %v", attempt, d)
		}
	}
	exp := ExponentialBackoff(4*time.Millisecond, 100*time.Millisecond)
	for attempt, base := range map[int]time.Duration{
		1: 4 * time.Millisecond, 2: 8 * time.Millisecond, 3: 16 * time.Millisecond,
		6: 100 * time.Millisecond, 1000: 100 * time.Millisecond,
	} {
		for range 100 {
			if d := exp.NextBackoff(attempt); d < base/2 || d >= base {
				t.Fatalf("ExponentialBackoff attempt %d: %v, want in [%v, %v)", attempt, d, base/2, base)
			}
		}
	}
	lim := LimitRetry(LinearBackoff(time.Millisecond), 3)
	for attempt := 1; attempt <= 3; attempt++ {
		if d := lim.NextBackoff(attempt); d != time.Millisecond {
			t.Fatalf("LimitRetry attempt %d: %v, want 1ms", attempt, d)
		}
	}
	if d := lim.NextBackoff(4); d > 0 {
		t.Fatalf("LimitRetry after 3 retries: %v, want to stop", d)
	}
}

func TestDrift(t *testing.T) {
	if got, want := drift(10*time.Second), 102*time.Millisecond; got != want {
		t.Fatalf("drift(10s) = %v, want %v (1%% + 2ms)", got, want)
	}
}
