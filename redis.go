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

// Redis modes, the values of redisConn.mode: how the engine uses Redis. The
// mode is decided here alone, by RedisConfig.mode for the clients the engine
// opens and by adoptRedis for those passed in.
const (
	redisSingle  = "single"
	redisRedlock = "redlock"
	redisCluster = "cluster"
)

// mode returns how Addrs are used: "cluster" when Cluster is set, "redlock"
// over several addresses, otherwise "single".
func (r RedisConfig) mode() string {
	switch {
	case r.Cluster:
		return redisCluster
	case len(r.Addrs) > 1:
		return redisRedlock
	default:
		return redisSingle
	}
}

// openRedis builds the clients cfg asks for (a single server, a Cluster, or
// Redlock masters), instrumented with tel. It does no I/O.
func openRedis(cfg RedisConfig, tel *telemetry.Providers) (*redisConn, error) {
	rc := &redisConn{mode: cfg.mode(), addrs: cfg.Addrs}
	switch rc.mode {
	case redisCluster:
		c := redis.NewClusterClient(cfg.clusterOptions())
		rc.clients = []redis.UniversalClient{c}
		rc.locks = locker.New(c)
	default:
		masters := make([]locker.RedisClient, len(cfg.Addrs))
		for i, addr := range cfg.Addrs {
			c := redis.NewClient(cfg.clientOptions(addr))
			rc.clients = append(rc.clients, c)
			masters[i] = c
		}
		if rc.mode == redisSingle {
			rc.locks = locker.New(masters[0])
			break
		}
		locks, err := locker.NewRedlock(masters, cfg.redlockOptions())
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

// adoptRedis wraps the caller's client (WithRedis) and locker (WithLocker;
// nil: a locker over client). Its mode comes from the handles, not from
// Config.Redis: a *redis.ClusterClient is a Cluster, a locker of the
// caller's is taken for Redlock (no scan of one client can see its locks),
// anything else is a single server. addrs name the servers in messages when
// the client does not say.
func adoptRedis(client redis.UniversalClient, locks *locker.Client, addrs []string) *redisConn {
	rc := &redisConn{mode: redisSingle, addrs: addrs, clients: []redis.UniversalClient{client}, locks: locks}
	switch c := client.(type) {
	case *redis.ClusterClient:
		rc.mode, rc.addrs = redisCluster, c.Options().Addrs
	case *redis.Client:
		rc.addrs = []string{c.Options().Addr}
	}
	if locks == nil {
		rc.locks = locker.New(client)
	} else {
		rc.mode = redisRedlock
	}
	return rc
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
