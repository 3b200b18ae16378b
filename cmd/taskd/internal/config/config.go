// Package config loads taskd's configuration: defaults, then a YAML file, then
// environment variables, then validation of the result.
//
// Every key has an environment variable derived from its path:
// TASKD_<SECTION>_<KEY> in upper case ("dispatch.lease_ttl" is
// TASKD_DISPATCH_LEASE_TTL; the top-level "admin_token" is TASKD_ADMIN_TOKEN). A
// few keys have a shorter alias as well (TASKD_LEASE_TTL, TASKD_MAX_HOLD). Lists
// are comma-separated in the environment, durations use Go syntax ("30s",
// "1m30s"). A variable that is set, even to the empty string, overrides the file.
//
// Unknown YAML keys, duplicate keys and values of the wrong type are errors, and
// every error names the key (and the variable, when the value came from one). Only
// this package and package main read YAML or the environment; the rest of taskd
// takes typed configuration.
package config

import (
	"time"

	"github.com/taskd/taskd/dispatcher"
)

// Defaults of every key that has one. A key without a default (mysql.dsn) must be
// set.
const (
	HTTPAddrDefault              = "127.0.0.1:8080"
	HTTPReadHeaderTimeoutDefault = 5 * time.Second
	HTTPReadTimeoutDefault       = 15 * time.Second
	HTTPWriteTimeoutDefault      = 90 * time.Second
	HTTPIdleTimeoutDefault       = 2 * time.Minute
	HTTPMaxWaitDefault           = time.Minute
	HTTPEditorCacheTTLDefault    = 10 * time.Second
	HTTPRequestTimeoutDefault    = 10 * time.Second
	HTTPShutdownTimeoutDefault   = 30 * time.Second

	RedisAddrDefault         = "127.0.0.1:6379"
	RedisKeyPrefixDefault    = "taskd:"
	RedisNodeTimeoutDefault  = 50 * time.Millisecond
	RedisDialTimeoutDefault  = time.Second
	RedisReadTimeoutDefault  = 500 * time.Millisecond
	RedisWriteTimeoutDefault = 500 * time.Millisecond

	DispatchLeaseTTLDefault     = 30 * time.Second
	DispatchMaxHoldDefault      = 2 * time.Hour
	DispatchSkipForDefault      = 10 * time.Minute
	DispatchBatchDefault        = dispatcher.BatchDefault
	DispatchPollIntervalDefault = 5 * time.Second

	SweepIntervalDefault = 10 * time.Second
	SweepBatchDefault    = dispatcher.SweepBatchDefault
	SweepWorkersDefault  = dispatcher.SweepWorkersDefault

	WorkerConcurrencyDefault     = 4
	WorkerShutdownTimeoutDefault = 30 * time.Second

	LogLevelDefault  = "info"
	LogFormatDefault = "text"

	TracesDefault      = TracesNone
	ServiceNameDefault = "taskd"
	SampleRatioDefault = 1.0
	PrometheusDefault  = true
)

// Trace exporters, the values of telemetry.traces.
const (
	TracesNone     = "none"
	TracesStdout   = "stdout"
	TracesOTLPGRPC = "otlp-grpc"
	TracesOTLPHTTP = "otlp-http"
)

// Config is taskd's configuration. Field tags give each key's YAML name; the
// environment variable of a key is derived from its path (see the package
// documentation), and `env` tags add aliases.
type Config struct {
	HTTP     HTTP     `yaml:"http"`
	MySQL    MySQL    `yaml:"mysql"`
	Redis    Redis    `yaml:"redis"`
	Dispatch Dispatch `yaml:"dispatch"`
	Sweep    Sweep    `yaml:"sweep"`
	Worker   Worker   `yaml:"worker"`
	// AdminToken authorizes the admin API (creating editors and tasks, stats,
	// forced releases). At least AdminTokenMinLen characters when set; `taskd
	// serve` and `taskd dev` need it, the other commands do not.
	AdminToken string    `yaml:"admin_token" secret:"true"`
	Log        Log       `yaml:"log"`
	Telemetry  Telemetry `yaml:"telemetry"`

	// sources records where each key that is not a default came from, by path:
	// "config.yaml line 12" or "TASKD_LEASE_TTL". Validation errors name it.
	sources map[string]string
}

// HTTP configures the API server of `taskd serve`.
type HTTP struct {
	// Addr is the listen address, host:port. Default HTTPAddrDefault.
	Addr string `yaml:"addr"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are those of
	// http.Server. WriteTimeout must exceed MaxWait + RequestTimeout, or long
	// polls could be cut off.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// MaxWait caps the long poll of POST /v1/assignments/next. Default
	// HTTPMaxWaitDefault.
	MaxWait time.Duration `yaml:"max_wait"`
	// EditorCacheTTL is how long an editor found by its API token is
	// remembered; 0 looks every request's token up in MySQL. Default
	// HTTPEditorCacheTTLDefault.
	EditorCacheTTL time.Duration `yaml:"editor_cache_ttl"`
	// RequestTimeout bounds a request's work (a long poll's: its wait plus
	// this): a store that hangs makes it 503 then. Default
	// HTTPRequestTimeoutDefault.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// ShutdownTimeout bounds the drain of in-flight requests on SIGTERM; requests
	// still running then are cut off. Default HTTPShutdownTimeoutDefault.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// MySQL configures the database.
type MySQL struct {
	// DSN is a go-sql-driver/mysql DSN. Required. taskd forces
	// clientFoundRows, parseTime and UTC whatever it says.
	DSN string `yaml:"dsn" secret:"true"`
}

// Redis configures the Redis servers the per-task locks live on.
type Redis struct {
	// Addrs are host:port addresses. One address is a single server; several
	// are independent Redlock masters (an odd number, three or more), unless
	// Cluster is set. Default [RedisAddrDefault].
	Addrs []string `yaml:"addrs"`
	// Cluster treats Addrs as seed nodes of one Redis Cluster.
	Cluster bool `yaml:"cluster"`
	// Username and Password authenticate (Redis ACL); both optional.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
	// DB is the database number; must be 0 with Cluster.
	DB int `yaml:"db"`
	// KeyPrefix starts every key taskd uses, so that several deployments can
	// share servers. Default RedisKeyPrefixDefault.
	KeyPrefix string `yaml:"key_prefix"`
	// NodeTimeout bounds each call to one Redlock master. Default
	// RedisNodeTimeoutDefault.
	NodeTimeout time.Duration `yaml:"node_timeout"`
	// DialTimeout, ReadTimeout and WriteTimeout are the client's socket
	// timeouts; keep them small, a lock is only worth its lease.
	DialTimeout  time.Duration `yaml:"dial_timeout"`
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// Dispatch configures claims.
type Dispatch struct {
	// LeaseTTL is how long a claim lives without a heartbeat; the Redis lock
	// of a claim has the same time to live. Default DispatchLeaseTTLDefault.
	LeaseTTL time.Duration `yaml:"lease_ttl" env:"TASKD_LEASE_TTL"`
	// MaxHold caps how long heartbeats can keep one claim. Default
	// DispatchMaxHoldDefault.
	MaxHold time.Duration `yaml:"max_hold" env:"TASKD_MAX_HOLD"`
	// SkipFor is how long a task an editor skipped is not offered to that
	// editor again. Default DispatchSkipForDefault.
	SkipFor time.Duration `yaml:"skip_for"`
	// Batch is how many candidates of a category one read fetches; the
	// process's claims share them. Default DispatchBatchDefault.
	Batch int `yaml:"batch"`
	// PollInterval is how often a long poll looks again without a wake-up.
	// Default DispatchPollIntervalDefault.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Sweep configures the sweeper that recycles expired claims.
type Sweep struct {
	// Interval is the time between sweeps; an abandoned claim is back in the
	// pool within lease_ttl + Interval. Default SweepIntervalDefault.
	Interval time.Duration `yaml:"interval"`
	// Batch is how many expired claims one transaction recycles. Default
	// SweepBatchDefault.
	Batch int `yaml:"batch"`
	// Workers is how many such transactions run at once while a backlog
	// drains. Default SweepWorkersDefault.
	Workers int `yaml:"workers"`
}

// Worker configures `taskd work`, and the workers `taskd serve` runs when
// InServe is set.
type Worker struct {
	// Concurrency is how many tasks one process runs at a time. Default
	// WorkerConcurrencyDefault.
	Concurrency int `yaml:"concurrency"`
	// Categories the workers take tasks from. Default: every category with a
	// registered handler.
	Categories []string `yaml:"categories"`
	// ShutdownTimeout is how long running handlers may finish on SIGTERM before
	// they are cancelled and their tasks given back. Default
	// WorkerShutdownTimeoutDefault.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// InServe runs workers inside `taskd serve` too.
	InServe bool `yaml:"in_serve"`
	// MetricsAddr is where `taskd work` serves GET /healthz and, with
	// telemetry.prometheus, GET /metrics (host:port). Empty: no listener.
	MetricsAddr string `yaml:"metrics_addr"`
}

// Log configures the process's logs (on stderr).
type Log struct {
	// Level is debug, info, warn or error. Default LogLevelDefault.
	Level string `yaml:"level"`
	// Format is text or json. Default LogFormatDefault.
	Format string `yaml:"format"`
}

// Telemetry configures OpenTelemetry.
type Telemetry struct {
	// Traces is the span exporter: none, stdout, otlp-grpc or otlp-http.
	// Default TracesDefault.
	Traces string `yaml:"traces"`
	// Endpoint is the OTLP collector: host:port, or a URL for otlp-http. Empty
	// means the exporter's default (OTEL_EXPORTER_OTLP_ENDPOINT, or localhost).
	Endpoint string `yaml:"endpoint"`
	// Insecure sends OTLP in plaintext to a host:port Endpoint; without it,
	// TLS is used. A URL's scheme (http or https) decides on its own.
	Insecure bool `yaml:"insecure"`
	// ServiceName is the service.name resource attribute. Default
	// ServiceNameDefault.
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the fraction of traces sampled, 0..1 (parent-based).
	// Default SampleRatioDefault.
	SampleRatio float64 `yaml:"sample_ratio"`
	// Prometheus serves metrics on GET /metrics. Default PrometheusDefault.
	Prometheus bool `yaml:"prometheus"`
}

// Default returns the configuration with every default applied and nothing
// set. It does not validate: mysql.dsn has no default.
func Default() *Config {
	return &Config{
		HTTP: HTTP{
			Addr:              HTTPAddrDefault,
			ReadHeaderTimeout: HTTPReadHeaderTimeoutDefault,
			ReadTimeout:       HTTPReadTimeoutDefault,
			WriteTimeout:      HTTPWriteTimeoutDefault,
			IdleTimeout:       HTTPIdleTimeoutDefault,
			MaxWait:           HTTPMaxWaitDefault,
			EditorCacheTTL:    HTTPEditorCacheTTLDefault,
			RequestTimeout:    HTTPRequestTimeoutDefault,
			ShutdownTimeout:   HTTPShutdownTimeoutDefault,
		},
		Redis: Redis{
			Addrs:        []string{RedisAddrDefault},
			KeyPrefix:    RedisKeyPrefixDefault,
			NodeTimeout:  RedisNodeTimeoutDefault,
			DialTimeout:  RedisDialTimeoutDefault,
			ReadTimeout:  RedisReadTimeoutDefault,
			WriteTimeout: RedisWriteTimeoutDefault,
		},
		Dispatch: Dispatch{
			LeaseTTL:     DispatchLeaseTTLDefault,
			MaxHold:      DispatchMaxHoldDefault,
			SkipFor:      DispatchSkipForDefault,
			Batch:        DispatchBatchDefault,
			PollInterval: DispatchPollIntervalDefault,
		},
		Sweep: Sweep{
			Interval: SweepIntervalDefault,
			Batch:    SweepBatchDefault,
			Workers:  SweepWorkersDefault,
		},
		Worker: Worker{
			Concurrency:     WorkerConcurrencyDefault,
			ShutdownTimeout: WorkerShutdownTimeoutDefault,
		},
		Log: Log{
			Level:  LogLevelDefault,
			Format: LogFormatDefault,
		},
		Telemetry: Telemetry{
			Traces:      TracesDefault,
			ServiceName: ServiceNameDefault,
			SampleRatio: SampleRatioDefault,
			Prometheus:  PrometheusDefault,
		},
	}
}

// RedisMode says how Redis.Addrs are used.
type RedisMode int

// Redis modes.
const (
	RedisSingle  RedisMode = iota // one server
	RedisRedlock                  // independent masters, quorum locks
	RedisCluster                  // one Redis Cluster
)

// Mode returns how the addresses are used: a Cluster when Cluster is set,
// Redlock over several addresses, otherwise a single server.
func (r Redis) Mode() RedisMode {
	switch {
	case r.Cluster:
		return RedisCluster
	case len(r.Addrs) > 1:
		return RedisRedlock
	default:
		return RedisSingle
	}
}

// String names the mode for logs.
func (m RedisMode) String() string {
	switch m {
	case RedisRedlock:
		return "redlock"
	case RedisCluster:
		return "cluster"
	default:
		return "single"
	}
}

// Source says where the value of the key at path came from: "config.yaml line
// 12", an environment variable's name, or "" when it is the default.
func (c *Config) Source(path string) string { return c.sources[path] }
