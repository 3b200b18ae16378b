package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/taskd/taskd/internal/lifecycle"
)

// History defaults and limits.
const (
	// HistoryFlushDefault is how often a History writes its counts to Redis
	// when HistoryConfig.FlushInterval is zero.
	HistoryFlushDefault = 5 * time.Second
	// HistoryRetentionDefault is how long a minute's counts stay in Redis
	// when HistoryConfig.Retention is zero.
	HistoryRetentionDefault = 2 * time.Hour
	// HistoryMaxMinutes is the most minutes one Read returns.
	HistoryMaxMinutes = 120
	// historyFlushTimeout bounds one flush's round trip.
	historyFlushTimeout = 5 * time.Second
)

// HistoryConfig configures a History.
type HistoryConfig struct {
	// Redis keeps the history, under the dispatcher's key prefix. Every
	// replica that writes to the same Redis and prefix adds to the same
	// minutes, and each reads the sum. Required.
	Redis redis.UniversalClient
	// FlushInterval is how often the counts kept in memory are written to
	// Redis. Default HistoryFlushDefault.
	FlushInterval time.Duration
	// Retention is how long Redis keeps a minute's counts, counted from the
	// last flush that added to it. Default HistoryRetentionDefault; at least
	// HistoryMaxMinutes.
	Retention time.Duration
	// NowFunc is the clock that puts counts in their minute. Default time.Now.
	NowFunc func() time.Time
	// Logger receives the history's logs. Default: the dispatcher's.
	Logger *slog.Logger
}

// History keeps the pool's recent activity per minute: the claims and
// submits its dispatcher commits, and the claims' latency in the fixed
// buckets of LatencyBounds. The dispatcher counts in memory (no Redis round
// trip on the claim path); every FlushInterval the History adds the counts
// to per-minute Redis hashes in one pipelined transaction (HINCRBY, with a
// time to live of Retention), so that the counts of every replica add up.
// Read returns the minutes of all replicas together.
//
// A flush that fails keeps its counts for the next one. Counts not yet
// flushed are lost with the process (Stop flushes them).
type History struct {
	d      *Dispatcher
	rdb    redis.UniversalClient
	cfg    HistoryConfig
	log    *slog.Logger
	act    *activity
	prefix string

	life lifecycle.State
	stop context.CancelFunc
	done chan struct{}
}

// NewHistory returns a History of d's activity. It counts from Start on.
func NewHistory(d *Dispatcher, cfg HistoryConfig) (*History, error) {
	if cfg.Redis == nil {
		return nil, errors.New("new history: Redis is required")
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = HistoryFlushDefault
	}
	if cfg.Retention == 0 {
		cfg.Retention = HistoryRetentionDefault
	}
	switch {
	case cfg.FlushInterval < 10*time.Millisecond:
		return nil, fmt.Errorf("new history: flush interval must be at least 10ms, got %v", cfg.FlushInterval)
	case cfg.Retention < HistoryMaxMinutes*time.Minute:
		return nil, fmt.Errorf("new history: retention must be at least %v, got %v", HistoryMaxMinutes*time.Minute, cfg.Retention)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = d.log
	}
	return &History{
		d: d, rdb: cfg.Redis, cfg: cfg, log: cfg.Logger,
		act:    newActivity(cfg.NowFunc),
		prefix: d.cfg.KeyPrefix + "history:{activity}:",
	}, nil
}

// FlushInterval is how often the History writes its counts to Redis: how
// long they may take to show in Read.
func (h *History) FlushInterval() time.Duration { return h.cfg.FlushInterval }

// key is the Redis hash of a Unix minute. The hash tag puts every minute in
// one Cluster slot, so that a flush and a read are each one round trip.
func (h *History) key(minute int64) string {
	return h.prefix + strconv.FormatInt(minute, 10)
}

// Start attaches the History to its dispatcher, which counts its claims and
// submits from then on, and flushes the counts every FlushInterval in the
// background until Stop. It returns an error wrapping ErrStarted when the
// History is running, ErrStopped after Stop, and an error when another
// History of the same dispatcher is running.
func (h *History) Start(ctx context.Context) error {
	attached := h.d.tel.activity.CompareAndSwap(nil, h.act)
	if !attached && h.d.tel.activity.Load() != h.act {
		return errors.New("start history: the dispatcher already has a running history")
	}
	err := h.life.Start("history", func() {
		ctx, cancel := context.WithCancel(ctx)
		h.stop, h.done = cancel, make(chan struct{})
		go h.run(ctx)
	})
	if err != nil && attached {
		h.d.tel.activity.CompareAndSwap(h.act, nil)
	}
	return err
}

func (h *History) run(ctx context.Context) {
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

// Stop detaches the History from its dispatcher, ends the background
// flushes and writes what is left, bounded by ctx; it returns the last
// flush's error. Stop before Start returns nil.
func (h *History) Stop(ctx context.Context) error {
	if !h.life.Stop() {
		return nil
	}
	h.d.tel.activity.CompareAndSwap(h.act, nil)
	h.stop()
	select {
	case <-h.done:
	case <-ctx.Done():
		return fmt.Errorf("stop history: %w", context.Cause(ctx))
	}
	if err := h.Flush(ctx); err != nil {
		return fmt.Errorf("stop history: %w", err)
	}
	return nil
}

// Flush adds the counts kept in memory to Redis now, in one round trip
// (a MULTI/EXEC pipeline of HINCRBY and EXPIRE per minute), and does nothing
// when there are none. On failure the counts are kept for the next flush.
func (h *History) Flush(ctx context.Context) error {
	pending := h.act.take()
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, historyFlushTimeout)
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
		return Unavailable(fmt.Errorf("flush activity history: %w", err))
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

// Read returns the last n minutes (1..HistoryMaxMinutes), the current one
// last, as flushed by every replica so far: a minute without activity has
// zero counts. It reads them in one round trip.
func (h *History) Read(ctx context.Context, n int) ([]Minute, error) {
	if n < 1 || n > HistoryMaxMinutes {
		return nil, fmt.Errorf("read activity history: minutes must be 1..%d, got %d", HistoryMaxMinutes, n)
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
		return nil, Unavailable(fmt.Errorf("read activity history: %w", err))
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
