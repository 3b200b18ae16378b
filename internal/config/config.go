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

	"github.com/taskd/taskd"
)

// Defaults of the keys whose default in config.yaml differs from the zero
// value's meaning in taskd.Config (see its field comments), and of two keys
// the tests check.
const (
	// HTTPAddrDefault is http.addr when unset: taskd serve listens there.
	HTTPAddrDefault = "127.0.0.1:8080"
	// PrometheusDefault is telemetry.prometheus when unset.
	PrometheusDefault = true
	// SampleRatioDefault is telemetry.sample_ratio when unset.
	SampleRatioDefault = 1.0

	RedisKeyPrefixDefault  = "taskd:"
	DispatchMaxHoldDefault = 2 * time.Hour
)

// LeaseTTLMin is the shortest dispatch.lease_ttl taskd.Config accepts.
const LeaseTTLMin = time.Second

// Config is taskd's configuration as loaded: the typed taskd.Config, and
// where each key that is not a default came from.
type Config struct {
	taskd.Config

	// sources records where each key that is not a default came from, by path:
	// "config.yaml line 12" or "TASKD_LEASE_TTL". Validation errors name it.
	sources map[string]string
}

// Default returns the configuration with every default applied and nothing
// set. It does not validate: mysql.dsn has no default.
func Default() *Config {
	return &Config{Config: taskd.Config{
		HTTP:      taskd.HTTPConfig{Addr: HTTPAddrDefault},
		Telemetry: taskd.TelemetryConfig{Prometheus: PrometheusDefault, SampleRatio: SampleRatioDefault},
	}.WithDefaults()}
}

// RedisMode says how redis.addrs are used.
type RedisMode int

// Redis modes.
const (
	RedisSingle  RedisMode = iota // one server
	RedisRedlock                  // independent masters, quorum locks
	RedisCluster                  // one Redis Cluster
)

// Mode returns how the addresses of r are used: a Cluster when Cluster is
// set, Redlock over several addresses, otherwise a single server.
func Mode(r taskd.RedisConfig) RedisMode {
	switch {
	case r.Cluster:
		return RedisCluster
	case len(r.Addrs) > 1:
		return RedisRedlock
	default:
		return RedisSingle
	}
}

// Source says where the value of the key at path came from: "config.yaml line
// 12", an environment variable's name, or "" when it is the default.
func (c *Config) Source(path string) string { return c.sources[path] }

// String names the mode for messages.
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
