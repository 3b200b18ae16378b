package taskd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/locker"
)

// redisConn holds the engine's Redis clients and the locker over them.
type redisConn struct {
	mode    string
	addrs   []string
	clients []redis.UniversalClient // one per Redlock master, else one
	locks   *locker.Client
}

// openRedis builds the clients cfg asks for (a single server, a Cluster, or
// Redlock masters), instrumented with tel. It does no I/O.
func openRedis(cfg RedisConfig, tel *telemetry.Providers) (*redisConn, error) {
	rc := &redisConn{mode: cfg.mode(), addrs: cfg.Addrs}
	switch rc.mode {
	case redisCluster:
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    cfg.Addrs,
			Username: cfg.Username,
			Password: cfg.Password,
			// Per-call deadlines must reach the socket; one dial retry, not
			// five with backoff, so a dead node costs little of a lease.
			ContextTimeoutEnabled: true,
			DialerRetries:         1,
			DialTimeout:           cfg.DialTimeout,
			ReadTimeout:           cfg.ReadTimeout,
			WriteTimeout:          cfg.WriteTimeout,
		})
		rc.clients = []redis.UniversalClient{c}
		rc.locks = locker.New(c)
	default:
		masters := make([]locker.RedisClient, len(cfg.Addrs))
		for i, addr := range cfg.Addrs {
			c := redis.NewClient(&redis.Options{
				Addr:                  addr,
				Username:              cfg.Username,
				Password:              cfg.Password,
				DB:                    cfg.DB,
				ContextTimeoutEnabled: true,
				DialerRetries:         1,
				DialTimeout:           cfg.DialTimeout,
				ReadTimeout:           cfg.ReadTimeout,
				WriteTimeout:          cfg.WriteTimeout,
			})
			rc.clients = append(rc.clients, c)
			masters[i] = c
		}
		if rc.mode == redisSingle {
			rc.locks = locker.New(masters[0])
			break
		}
		locks, err := locker.NewRedlock(masters, &locker.RedlockOptions{NodeTimeout: cfg.NodeTimeout})
		if err != nil {
			_ = rc.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		rc.locks = locks
	}
	for _, c := range rc.clients { // before their first command
		if err := telemetry.InstrumentRedis(c, tel); err != nil {
			_ = rc.Close()
			return nil, err
		}
	}
	return rc, nil
}

// pubSub is the client that carries wake-ups between processes: the server,
// the Cluster, or for Redlock the first master (wake-ups are hints; when it
// is down, long polls fall back on their poll interval).
func (rc *redisConn) pubSub() redis.UniversalClient { return rc.clients[0] }

// sweepClient is the client the sweeper scans for orphaned locks: nil for
// Redlock, where one master holds only part of the picture.
func (rc *redisConn) sweepClient() redis.UniversalClient {
	if rc.mode == redisRedlock {
		return nil
	}
	return rc.clients[0]
}

// check reports whether Redis can take locks: the server answers, every
// master of the Cluster answers, or a quorum of the Redlock masters answers.
func (rc *redisConn) check(ctx context.Context) error {
	_, err := rc.reach(ctx)
	return err
}

// reach is check that also returns the Redlock masters that did not answer
// when a quorum did.
func (rc *redisConn) reach(ctx context.Context) (down []error, err error) {
	switch rc.mode {
	case redisCluster:
		c, ok := rc.clients[0].(*redis.ClusterClient)
		if !ok {
			break
		}
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			if err := m.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("master %s: %w", m.Options().Addr, err)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redis cluster at %s is unreachable: %w", strings.Join(rc.addrs, ","), err)
		}
		return nil, nil
	case redisSingle:
		if err := rc.clients[0].Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("redis at %s is unreachable: %w", strings.Join(rc.addrs, ","), err)
		}
		return nil, nil
	}
	errs := make([]error, len(rc.clients))
	var wg sync.WaitGroup
	for i, c := range rc.clients {
		wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			down = append(down, fmt.Errorf("%s: %w", rc.addrs[i], err))
		}
	}
	quorum := len(rc.clients)/2 + 1
	if len(rc.clients)-len(down) < quorum {
		return down, fmt.Errorf("redis: fewer than %d of %d Redlock masters are reachable: %w", quorum, len(rc.clients), errors.Join(down...))
	}
	return down, nil
}

// Close closes every client.
func (rc *redisConn) Close() error {
	var errs []error
	for _, c := range rc.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
