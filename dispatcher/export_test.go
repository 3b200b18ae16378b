package dispatcher

import "time"

// CountClaim counts a claim that took latency, as the dispatcher does for
// each claim it commits while h runs: for tests that need latencies of
// their choosing.
func (h *History) CountClaim(latency time.Duration) { h.act.claimed(latency) }
