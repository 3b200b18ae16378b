package api

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/taskd/taskd/internal/activity"
)

// History reads the pool's recent activity per minute for GET
// /v1/stats/history; *activity.Recorder implements it.
type History interface {
	Read(ctx context.Context, minutes int) ([]activity.Minute, error)
	FlushInterval() time.Duration
}

var _ History = (*activity.Recorder)(nil)

// HistoryMinutesDefault is the minutes GET /v1/stats/history returns without
// ?minutes=.
const HistoryMinutesDefault = 60

// activityJSON is a minute's activity, or the sum of several.
type activityJSON struct {
	Claims  int64 `json:"claims"`
	Submits int64 `json:"submits"`
	// NextP50MS and NextP99MS are the median and 99th percentile of the time
	// the claims took to be handed out, in milliseconds, estimated from the
	// latency buckets; null without claims.
	NextP50MS *float64 `json:"next_p50_ms"`
	NextP99MS *float64 `json:"next_p99_ms"`
}

type minuteJSON struct {
	Start string `json:"start"`
	activityJSON
}

type historyResponse struct {
	// Minutes are the last minutes, oldest first, the current one last (it
	// is still counting).
	Minutes []minuteJSON `json:"minutes"`
	// Total sums the minutes; its percentiles are those of all their claims.
	Total activityJSON `json:"total"`
	// FlushIntervalMS is how long counts may take to show: each replica adds
	// its counts every so often.
	FlushIntervalMS int64 `json:"flush_interval_ms"`
}

func activityOf(c *activity.Counts) activityJSON {
	out := activityJSON{Claims: c.Claims, Submits: c.Submits}
	ms := func(q float64) *float64 {
		d, ok := c.Quantile(q)
		if !ok {
			return nil
		}
		v := math.Round(float64(d)/float64(time.Millisecond)*1000) / 1000
		return &v
	}
	out.NextP50MS, out.NextP99MS = ms(0.5), ms(0.99)
	return out
}

// history answers with the claims and submits per minute, and the claims'
// latency percentiles, over the last minutes, from every replica.
func (a *api) history(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "minutes")
	if err != nil {
		return err
	}
	if a.hist == nil {
		return errorf(http.StatusNotFound, codeNotFound, "this server keeps no activity history")
	}
	n := HistoryMinutesDefault
	if s, ok := q["minutes"]; ok {
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > activity.MaxMinutes || s[0] == '+' {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "minutes must be an integer 1..%d, not %q", activity.MaxMinutes, s)
		}
	}
	ms, err := a.hist.Read(r.Context(), n)
	if err != nil {
		return err
	}
	out := historyResponse{Minutes: make([]minuteJSON, len(ms)), FlushIntervalMS: a.hist.FlushInterval().Milliseconds()}
	var total activity.Counts
	for i := range ms {
		out.Minutes[i] = minuteJSON{Start: formatTime(ms[i].Start), activityJSON: activityOf(&ms[i].Counts)}
		total.Add(ms[i].Counts)
	}
	out.Total = activityOf(&total)
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}
