// Package activity keeps the pool's recent activity per minute for GET
// /v1/stats/history: the claims and submits a dispatcher commits (its
// ClaimEvents, the same count its Stats and metrics take) and the claims'
// latency in fixed buckets, added up across replicas in Redis.
package activity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/lifecycle"
)

// Defaults and limits.
const (
	// FlushDefault is how often a Recorder writes its counts to Redis when
	// Config.FlushInterval is zero.
	FlushDefault = 5 * time.Second
	// RetentionDefault is how long a minute's counts stay in Redis when
	// Config.Retention is zero.
	RetentionDefault = 2 * time.Hour
	// MaxMinutes is the most minutes one Read returns.
	MaxMinutes = 120
	// flushTimeout bounds one flush's round trip.
	flushTimeout = 5 * time.Second
)

// Dispatcher is what a Recorder needs of the claims engine;
// *dispatcher.Dispatcher implements it.
type Dispatcher interface {
	// Config gives the key prefix and the logger.
	Config() dispatcher.Config
	// Observe calls f with each claim and submit until stop is called.
	Observe(f func(context.Context, dispatcher.ClaimEvent)) (stop func())
}

var _ Dispatcher = (*dispatcher.Dispatcher)(nil)

// Config configures a Recorder.
type Config struct {
	// Redis keeps the history, under the dispatcher's key prefix. Every
	// replica that writes to the same Redis and prefix adds to the same
	// minutes, and each reads the sum. Required.
	Redis redis.UniversalClient
	// FlushInterval is how often the counts kept in memory are written to
	// Redis. Default FlushDefault.
	FlushInterval time.Duration
	// Retention is how long Redis keeps a minute's counts, counted from the
	// last flush that added to it. Default RetentionDefault; at least
	// MaxMinutes.
	Retention time.Duration
	// NowFunc is the clock that puts counts in their minute. Default time.Now.
	NowFunc func() time.Time
	// Logger receives the recorder's logs. Default: the dispatcher's.
	Logger *slog.Logger
}

// Recorder keeps the pool's recent activity per minute: the claims and
// submits its dispatcher commits, and the claims' latency in the fixed
// buckets of LatencyBounds. It counts the dispatcher's ClaimEvents in memory (no
// Redis round trip on the claim path); every FlushInterval it adds the counts
// to per-minute Redis hashes in one pipelined transaction (HINCRBY, with a
// time to live of Retention), so that the counts of every replica add up.
// Read returns the minutes of all replicas together.
//
// A flush that fails keeps its counts for the next one. Counts not yet
// flushed are lost with the process (Stop flushes them).
type Recorder struct {
	d      Dispatcher
	rdb    redis.UniversalClient
	cfg    Config
	log    *slog.Logger
	act    *activity
	prefix string

	life     lifecycle.State
	stop     context.CancelFunc
	done     chan struct{}
	unsubscr func() // ends the observation of the dispatcher's events
}

// New returns a Recorder of d's activity. It counts from Start on.
func New(d Dispatcher, cfg Config) (*Recorder, error) {
	if cfg.Redis == nil {
		return nil, errors.New("new activity history: Redis is required")
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = FlushDefault
	}
	if cfg.Retention == 0 {
		cfg.Retention = RetentionDefault
	}
	switch {
	case cfg.FlushInterval < 10*time.Millisecond:
		return nil, fmt.Errorf("new activity history: flush interval must be at least 10ms, got %v", cfg.FlushInterval)
	case cfg.Retention < MaxMinutes*time.Minute:
		return nil, fmt.Errorf("new activity history: retention must be at least %v, got %v", MaxMinutes*time.Minute, cfg.Retention)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = d.Config().Logger
	}
	return &Recorder{
		d: d, rdb: cfg.Redis, cfg: cfg, log: cfg.Logger,
		act:    newActivity(cfg.NowFunc),
		prefix: d.Config().KeyPrefix + "history:{activity}:",
	}, nil
}

// FlushInterval is how often the Recorder writes its counts to Redis: how
// long they may take to show in Read.
func (h *Recorder) FlushInterval() time.Duration { return h.cfg.FlushInterval }

// key is the Redis hash of a Unix minute. The hash tag puts every minute in
// one Cluster slot, so that a flush and a read are each one round trip.
func (h *Recorder) key(minute int64) string {
	return h.prefix + strconv.FormatInt(minute, 10)
}

// Start observes the dispatcher's claims and submits from then on, and
// flushes the counts every FlushInterval in the background until Stop. Run
// one Recorder per dispatcher: two would count each claim twice. Start
// returns an error wrapping dispatcher.ErrStarted when the Recorder is
// running and dispatcher.ErrStopped after Stop.
func (h *Recorder) Start(ctx context.Context) error {
	return h.life.Start("activity history", func() {
		ctx, cancel := context.WithCancel(ctx)
		h.stop, h.done = cancel, make(chan struct{})
		h.unsubscr = h.d.Observe(h.observe)
		go h.run(ctx)
	})
}

// observe counts a claim or a submit.
func (h *Recorder) observe(_ context.Context, ev dispatcher.ClaimEvent) {
	switch ev.Op {
	case dispatcher.OpClaim:
		h.act.claimed(ev.Latency)
	case dispatcher.OpSubmit:
		h.act.submitted()
	}
}

func (h *Recorder) run(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.Flush(ctx); err != nil && ctx.Err() == nil {
				h.log.WarnContext(ctx, "flush activity history; the counts are kept for the next flush", "err", err)
			}
		}
	}
}

// Stop stops observing the dispatcher, ends the background
// flushes and writes what is left, bounded by ctx; it returns the last
// flush's error. Stop before Start returns nil.
func (h *Recorder) Stop(ctx context.Context) error {
	if !h.life.Stop() {
		return nil
	}
	h.unsubscr()
	h.stop()
	select {
	case <-h.done:
	case <-ctx.Done():
		return fmt.Errorf("stop activity history: %w", context.Cause(ctx))
	}
	if err := h.Flush(ctx); err != nil {
		return fmt.Errorf("stop activity history: %w", err)
	}
	return nil
}

// Flush adds the counts kept in memory to Redis now, in one round trip
// (a MULTI/EXEC pipeline of HINCRBY and EXPIRE per minute), and does nothing
// when there are none. On failure the counts are kept for the next flush.
func (h *Recorder) Flush(ctx context.Context) error {
	pending := h.act.take()
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	_, err := h.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for m, c := range pending {
			key := h.key(m)
			incr := func(field string, n int64) {
				if n != 0 {
					p.HIncrBy(ctx, key, field, n)
				}
			}
			incr("claims", c.Claims)
			incr("submits", c.Submits)
			for i, n := range c.Latency {
				incr("l"+strconv.Itoa(i), n)
			}
			p.Expire(ctx, key, h.cfg.Retention)
		}
		return nil
	})
	if err != nil {
		oldest := h.cfg.NowFunc().Add(-h.cfg.Retention).Unix() / 60
		h.act.restore(pending, oldest)
		return dispatcher.Unavailable(fmt.Errorf("flush activity history: %w", err))
	}
	return nil
}

// Minute is one minute of the pool's activity, summed over every replica
// that flushed to the same Redis.
type Minute struct {
	// Start is the minute's first instant.
	Start time.Time
	Counts
}

// Read returns the last n minutes (1..MaxMinutes), the current one
// last, as flushed by every replica so far: a minute without activity has
// zero counts. It reads them in one round trip.
func (h *Recorder) Read(ctx context.Context, n int) ([]Minute, error) {
	if n < 1 || n > MaxMinutes {
		return nil, fmt.Errorf("read activity history: minutes must be 1..%d, got %d", MaxMinutes, n)
	}
	last := h.cfg.NowFunc().Unix() / 60
	first := last - int64(n) + 1
	cmds := make([]*redis.MapStringStringCmd, n)
	_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.HGetAll(ctx, h.key(first+int64(i)))
		}
		return nil
	})
	if err != nil {
		return nil, dispatcher.Unavailable(fmt.Errorf("read activity history: %w", err))
	}
	out := make([]Minute, n)
	for i, cmd := range cmds {
		out[i].Start = time.Unix((first+int64(i))*60, 0).UTC()
		for field, v := range cmd.Val() {
			count, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("read activity history: %s %s is %q, not a count", h.key(first+int64(i)), field, v)
			}
			switch {
			case field == "claims":
				out[i].Claims = count
			case field == "submits":
				out[i].Submits = count
			case len(field) > 1 && field[0] == 'l':
				b, err := strconv.Atoi(field[1:])
				if err == nil && b >= 0 && b < LatencyBuckets {
					out[i].Latency[b] = count
				}
			}
		}
	}
	return out, nil
}
