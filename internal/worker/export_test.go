package worker

import "time"

// SetClaimGather sets how long w's claim loop waits for slots to free
// together (workerClaimGather); call it before Start.
func (w *Worker) SetClaimGather(d time.Duration) { w.gatherFor = d }

// Writers is how many batches of outcomes a worker of c writes at once.
func Writers(c Config) int { return writers(c.WithDefaults()) }

// ClaimLoops is how many claim loops a worker of c runs.
func ClaimLoops(c Config) int { return claimLoops(c.WithDefaults()) }

// OnBackPressure makes w call fn each time its claim loop stops claiming
// because the completer is behind; call it before Start.
func (w *Worker) OnBackPressure(fn func()) { w.backPressured = fn }

// WriteApart keeps w's claims from carrying outcomes (the writers alone
// write them); call it before Start.
func (w *Worker) WriteApart() { w.apart = true }

// SnoozeFor is how long a snooze of d puts its task off.
func SnoozeFor(d time.Duration) time.Duration { return snoozeFor(d) }
