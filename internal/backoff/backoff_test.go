package backoff

import (
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	for _, c := range []struct {
		base, max time.Duration
		attempt   int
		want      time.Duration
	}{
		{time.Second, time.Minute, 0, time.Second},
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 2, 2 * time.Second},
		{time.Second, time.Minute, 6, 32 * time.Second},
		{time.Second, time.Minute, 7, time.Minute},
		{time.Second, time.Minute, 1 << 30, time.Minute},
		{time.Hour, time.Minute, 1, time.Minute},
		{0, time.Minute, 3, 0},
		{time.Second, 0, 3, 0},
	} {
		if got := Exponential(c.base, c.max, c.attempt); got != c.want {
			t.Errorf("Exponential(%v, %v, %d) = %v, want %v", c.base, c.max, c.attempt, got, c.want)
		}
	}
}

func TestJitterRanges(t *testing.T) {
	const d = 100 * time.Millisecond
	var eqLow, eqHigh, spLow, spHigh bool
	for range 2000 {
		e := EqualJitter(d)
		if e < d/2 || e >= d {
			t.Fatalf("EqualJitter(%v) = %v, want within [%v, %v)", d, e, d/2, d)
		}
		eqLow, eqHigh = eqLow || e < 3*d/4, eqHigh || e >= 3*d/4
		s := Spread(d)
		if s < d/2 || s >= 3*d/2 {
			t.Fatalf("Spread(%v) = %v, want within [%v, %v)", d, s, d/2, 3*d/2)
		}
		spLow, spHigh = spLow || s < d, spHigh || s >= d
	}
	// Both halves of each range are drawn: the delays are spread, not fixed.
	if !eqLow || !eqHigh || !spLow || !spHigh {
		t.Errorf("2000 draws stayed in one half of a range: equal jitter %v/%v, spread %v/%v", eqLow, eqHigh, spLow, spHigh)
	}
	for _, tiny := range []time.Duration{0, 1} {
		if EqualJitter(tiny) != tiny || Spread(tiny) != tiny {
			t.Errorf("jitter of %v changed it", tiny)
		}
	}
}
