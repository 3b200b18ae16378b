package worker

import "time"

// SetClaimGather sets how long w's claim loop waits for slots to free
// together (workerClaimGather); call it before Start.
func (w *Worker) SetClaimGather(d time.Duration) { w.gatherFor = d }

// Writers is how many batches of outcomes a worker writes at once.
const Writers = workerWriters
