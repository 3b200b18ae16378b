package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/cmd/taskd/internal/wordcount"
	"github.com/taskd/taskd/internal/config"
)

// redisLogger passes go-redis's own log lines (failed dials and the like) to
// slog, at warn level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "go-redis")
}

// toolEngine builds an engine for a command that reads or changes the pool
// and serves nothing (import, export, status, pause, resume): no API,
// no listener, no workers, no telemetry, and only warnings and errors logged,
// on stderr. It connects to MySQL and Redis as serve does (each check bounded
// by 10s, the error naming the server) and starts nothing: writes made
// through it take the locks and send the wake-ups the serving processes
// listen to. Stop it when done, which closes its stores. Configuration
// errors are usageErrors naming the key.
func (a *app) toolEngine(cfg *config.Config) (*taskd.Engine, error) {
	c := cfg.Config
	c.AdminToken, c.HTTP.Addr, c.HTTP.MetricsAddr = "", "", ""
	c.Telemetry = taskd.TelemetryConfig{}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Log.Level)); err != nil || level < slog.LevelWarn {
		c.Log.Level = "warn"
	}
	log := c.Log.Logger(a.stderr)
	redis.SetLogger(redisLogger{log}) // process-wide, which only main may set
	e, err := taskd.New(c, taskd.WithLogger(log))
	if err != nil {
		var ce *taskd.ConfigError
		if errors.As(err, &ce) {
			return nil, &usageError{err: fmt.Errorf("config: %w", ce)}
		}
		return nil, err
	}
	return e, nil
}

// stopTool stops an engine of toolEngine, which closes its stores; it has
// nothing to drain, so there is nothing to report.
func stopTool(e *taskd.Engine) { _ = e.Stop(context.Background()) }

// handlers returns the handlers this binary ships, as engine options.
func handlers(log *slog.Logger) []taskd.Option {
	return []taskd.Option{taskd.WithHandler(wordcount.Category, wordcount.Handler(log))}
}

// handlerCategories lists the categories of handlers, for help texts.
var handlerCategories = []string{wordcount.Category}

// engineRole is what a command runs the engine as.
type engineRole int

const (
	roleServe  engineRole = iota // the API, and workers with worker.in_serve
	roleDev                      // as roleServe, with any admin token the engine takes
	roleWorker                   // workers, metrics on worker.metrics_addr
)

// running is an engine built by a command, with its configuration and
// logger. Stop closes its stores and flushes its telemetry.
type running struct {
	*taskd.Engine
	cfg *config.Config
	log *slog.Logger
}

// newEngine loads the configuration, sets up logging and telemetry (the
// engine builds the providers of telemetry.*; its stdout exporter writes to
// the process's stdout) and builds the engine in role: serve needs a strong
// admin_token (see checkAdminToken), dev any admin_token; a worker serves no
// API, and GET /healthz and GET /metrics on worker.metrics_addr. Stop it
// when done: Stop closes the stores and flushes the telemetry.
// Configuration errors are usageErrors naming the key.
func (a *app) newEngine(ctx context.Context, f *cmdFlags, role engineRole) (*running, error) {
	cfg, err := a.loadConfig(f)
	if err != nil {
		return nil, err
	}
	c := cfg.Config
	serving := role == roleServe || role == roleDev
	if serving && c.AdminToken == "" {
		return nil, &usageError{err: fmt.Errorf("config: admin_token: must be set to serve the API (%s)", makeAdminToken)}
	}
	if role == roleServe {
		if err := checkAdminToken(c.AdminToken); err != nil {
			from := ""
			if src := cfg.Source("admin_token"); src != "" {
				from = " (from " + src + ")"
			}
			return nil, &usageError{err: fmt.Errorf("config: admin_token: %w%s", err, from)}
		}
	}
	if serving && c.HTTP.Addr == "" {
		return nil, &usageError{err: errors.New("config: http.addr: must be set to serve the API (host:port; TASKD_HTTP_ADDR)")}
	}
	log := c.Log.Logger(a.stderr)
	redis.SetLogger(redisLogger{log}) // process-wide, which only main may set
	if c.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(int64(c.MemoryLimitMiB) << 20) // process-wide too
	}
	prepareTelemetry(ctx, c.Telemetry, log)
	opts := []taskd.Option{taskd.WithLogger(log)}
	if role == roleWorker || c.Worker.InServe {
		opts = append(opts, handlers(log)...)
	}
	if role == roleWorker {
		c.AdminToken, c.HTTP.Addr, c.HTTP.MetricsAddr = "", c.Worker.MetricsAddr, ""
	}
	e, err := taskd.New(c, opts...)
	if err != nil {
		var ce *taskd.ConfigError
		if errors.As(err, &ce) {
			return nil, &usageError{err: fmt.Errorf("config: %w", ce)}
		}
		return nil, err
	}
	return &running{Engine: e, cfg: cfg, log: log}, nil
}

// adminTokenMinLen is the shortest admin token `taskd serve` accepts; the
// engine itself takes 16 characters and up, and so does `taskd dev`.
const adminTokenMinLen = 32

// knownAdminTokens are admin tokens published with taskd: config.yaml's, and
// the documentation's examples. Anyone can read them.
var knownAdminTokens = []string{"dev-admin-token-change-me"}

// makeAdminToken says how to make an admin token and where to put it.
const makeAdminToken = "make one with `openssl rand -base64 32` and set it in TASKD_ADMIN_TOKEN or admin_token"

// checkAdminToken refuses an admin token that `taskd serve` must not run
// with: one published with taskd, or one shorter than adminTokenMinLen
// characters. The error says how to make a token; it never quotes the token.
// `taskd dev` runs without this check, for local use with config.yaml as it is.
func checkAdminToken(token string) error {
	if slices.Contains(knownAdminTokens, token) {
		return fmt.Errorf("is the example token shipped with taskd, which anyone can read; %s (`taskd dev` accepts it for local use)", makeAdminToken)
	}
	if n := utf8.RuneCountInString(token); n < adminTokenMinLen {
		return fmt.Errorf("must be at least %d characters to serve, got %d; %s", adminTokenMinLen, n, makeAdminToken)
	}
	return nil
}
