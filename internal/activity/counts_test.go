package activity

import (
	"testing"
	"time"
)

func TestCountsQuantile(t *testing.T) {
	t.Parallel()
	var c Counts
	if _, ok := c.Quantile(0.5); ok {
		t.Fatal("a quantile of no claims")
	}
	count := func(d time.Duration, n int) {
		for range n {
			c.Latency[bucketOf(d)]++
		}
	}
	count(1500*time.Microsecond, 98) // (1ms, 2ms]
	count(300*time.Millisecond, 2)   // (200ms, 500ms]
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, time.Millisecond + time.Millisecond*50/98},
		{0.98, 2 * time.Millisecond},
		{0.99, 350 * time.Millisecond},
		{1, 500 * time.Millisecond},
	} {
		got, ok := c.Quantile(tc.q)
		if !ok || (got-tc.want).Abs() > time.Microsecond {
			t.Errorf("quantile %v = %v, %v; want %v", tc.q, got, ok, tc.want)
		}
	}

	var slow Counts
	slow.Latency[bucketOf(time.Minute)] = 3
	if got, ok := slow.Quantile(0.5); !ok || got != 5*time.Second {
		t.Errorf("quantile past the last bound = %v, %v; want the last bound, 5s", got, ok)
	}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {time.Millisecond, 0}, {time.Millisecond + 1, 1}, {5 * time.Second, len(LatencyBounds) - 1}, {5*time.Second + 1, len(LatencyBounds)}} {
		if got := bucketOf(tc.d); got != tc.want {
			t.Errorf("bucket of %v = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestActivityRestoreDropsOldMinutes(t *testing.T) {
	t.Parallel()
	now := time.Unix(600*60+30, 0)
	a := newActivity(func() time.Time { return now })
	a.claimed(time.Millisecond)
	taken := a.take()
	if len(taken) != 1 || taken[600].Claims != 1 {
		t.Fatalf("taken %v, want one claim in minute 600", taken)
	}
	taken[500] = &Counts{Claims: 9}
	a.submitted()
	a.restore(taken, 550)
	p := a.take()
	if len(p) != 1 || p[600].Claims != 1 || p[600].Submits != 1 {
		t.Fatalf("after restore: %v; want minute 600 with a claim and a submit, minute 500 dropped", p)
	}
}
