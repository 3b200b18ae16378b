package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/cmd/taskd/internal/config"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/dispatcher/telemetry"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// storeCheckTimeout bounds connecting to each store at start.
const storeCheckTimeout = 10 * time.Second

// newLogger returns the process's logger, writing to w in the configured level
// and format.
func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// redisLogger passes go-redis's own log lines (failed dials and the like) to
// slog, at warn level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "go-redis")
}

// mysqlAddr is the server address of a DSN, for messages; the DSN itself holds
// a password and is never printed.
func mysqlAddr(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Addr == "" {
		return "(address not parsed)"
	}
	return cfg.Addr + "/" + cfg.DBName
}

// openMySQL connects to MySQL (with the settings fencing needs, which
// tasks.Open forces) and returns the handle and a store on it. With tel, the
// connection is instrumented. The error names the server.
func openMySQL(ctx context.Context, cfg *config.Config, tel *telemetry.Providers) (*sqlx.DB, *tasks.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	var db *sqlx.DB
	var err error
	if tel != nil {
		db, err = telemetry.OpenMySQL(ctx, cfg.MySQL.DSN, tel)
	} else {
		db, err = tasks.Open(ctx, cfg.MySQL.DSN)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mysql at %s is unreachable: %w", mysqlAddr(cfg.MySQL.DSN), err)
	}
	store, err := tasks.NewStore(db, tasks.Config{SkipFor: cfg.Dispatch.SkipFor, MaxHold: cfg.Dispatch.MaxHold})
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("mysql store: %w", err)
	}
	return db, store, nil
}

// redisConn holds the Redis clients of the process and the locker over them.
type redisConn struct {
	mode    config.RedisMode
	addrs   []string
	clients []redis.UniversalClient // one per Redlock master, else one
	locks   *locker.Client
	log     *slog.Logger
}

// openRedis builds the clients the configuration asks for, instrumented with
// tel, checks that they answer (a quorum of them for Redlock) and returns them
// with their locker. The error names the unreachable servers.
func openRedis(ctx context.Context, cfg config.Redis, tel *telemetry.Providers, log *slog.Logger) (*redisConn, error) {
	redis.SetLogger(redisLogger{log}) // process-wide, which only main may set
	rc := &redisConn{mode: cfg.Mode(), addrs: cfg.Addrs, log: log}
	switch rc.mode {
	case config.RedisCluster:
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    cfg.Addrs,
			Username: cfg.Username,
			Password: cfg.Password,
			// Per-call deadlines must reach the socket; one dial retry, not five
			// with backoff, so a dead node costs little of a lease.
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
		if rc.mode == config.RedisSingle {
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
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	down, err := rc.reach(ctx)
	if err != nil {
		_ = rc.Close()
		return nil, err
	}
	for _, err := range down {
		log.WarnContext(ctx, "redlock master unreachable; a quorum is up", "err", err)
	}
	return rc, nil
}

// pubSub is the client that carries wake-ups between processes: the server,
// the Cluster, or for Redlock the first master (wake-ups are hints; when it is
// down, long polls fall back on their poll interval).
func (rc *redisConn) pubSub() redis.UniversalClient { return rc.clients[0] }

// sweepClient is the client the sweeper scans for orphaned locks: nil for
// Redlock, where one master holds only part of the picture.
func (rc *redisConn) sweepClient() redis.UniversalClient {
	if rc.mode == config.RedisRedlock {
		return nil
	}
	return rc.clients[0]
}

// check reports whether Redis can take locks: the server answers, every master
// of the Cluster answers, or a quorum of the Redlock masters answers.
func (rc *redisConn) check(ctx context.Context) error {
	_, err := rc.reach(ctx)
	return err
}

// reach is check that also returns the Redlock masters that did not answer
// when a quorum did.
func (rc *redisConn) reach(ctx context.Context) (down []error, err error) {
	switch rc.mode {
	case config.RedisCluster:
		c := rc.clients[0].(*redis.ClusterClient)
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
	case config.RedisSingle:
		if err := rc.clients[0].Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("redis at %s is unreachable: %w", rc.addrs[0], err)
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

// newDispatcher builds the dispatcher over store and Redis.
func newDispatcher(cfg *config.Config, store *tasks.Store, rc *redisConn, tel *telemetry.Providers, log *slog.Logger) (*dispatcher.Dispatcher, error) {
	return dispatcher.New(store, rc.locks, dispatcher.Config{
		Lease:          cfg.Dispatch.LeaseTTL,
		Batch:          cfg.Dispatch.Batch,
		KeyPrefix:      cfg.Redis.KeyPrefix,
		PollInterval:   cfg.Dispatch.PollInterval,
		MaxWait:        cfg.HTTP.MaxWait,
		PubSub:         rc.pubSub(),
		Logger:         log,
		TracerProvider: tel.TracerProvider,
		MeterProvider:  tel.MeterProvider,
	})
}

// backend is everything serve, work and dev run on: both stores, the
// dispatcher and the telemetry providers.
type backend struct {
	cfg   *config.Config
	log   *slog.Logger
	tel   *telemetry.Providers
	db    *sqlx.DB
	store *tasks.Store
	redis *redisConn
	d     *dispatcher.Dispatcher
}

// openBackend sets up telemetry (stdout takes the spans of the stdout
// exporter), connects to both stores and builds the dispatcher. Close it when
// done.
func openBackend(ctx context.Context, cfg *config.Config, stdout io.Writer, log *slog.Logger) (*backend, error) {
	b := &backend{cfg: cfg, log: log}
	var err error
	if b.tel, err = newTelemetry(ctx, cfg.Telemetry, stdout, log); err != nil {
		return nil, err
	}
	if b.db, b.store, err = openMySQL(ctx, cfg, b.tel); err != nil {
		b.Close(ctx)
		return nil, err
	}
	if b.redis, err = openRedis(ctx, cfg.Redis, b.tel, log); err != nil {
		b.Close(ctx)
		return nil, err
	}
	if b.d, err = newDispatcher(cfg, b.store, b.redis, b.tel, log); err != nil {
		b.Close(ctx)
		return nil, err
	}
	log.InfoContext(ctx, "stores reachable", "mysql", mysqlAddr(cfg.MySQL.DSN),
		"redis", strings.Join(cfg.Redis.Addrs, ","), "redis_mode", b.redis.mode.String())
	return b, nil
}

// Close closes the stores and flushes telemetry, logging failures.
func (b *backend) Close(ctx context.Context) {
	if b.redis != nil {
		if err := b.redis.Close(); err != nil {
			b.log.WarnContext(ctx, "close redis", "err", err)
		}
	}
	if b.db != nil {
		if err := b.db.Close(); err != nil {
			b.log.WarnContext(ctx, "close mysql", "err", err)
		}
	}
	if b.tel != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := b.tel.Shutdown(ctx); err != nil {
			b.log.WarnContext(ctx, "flush telemetry", "err", err)
		}
	}
}
