package activity

import "time"

// CountClaim counts a claim that took latency, as the recorder does for each
// claim its dispatcher commits while it runs: for tests that need latencies
// of their choosing.
func (h *Recorder) CountClaim(latency time.Duration) { h.act.claimed(latency) }
