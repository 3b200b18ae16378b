// Package config loads taskd's configuration: taskd.Config's defaults, then a
// YAML file, then environment variables, then taskd.Config's validation of
// the result, with each error naming where the bad value came from.
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

import "github.com/taskd/taskd"

// Config is taskd's configuration as loaded: the typed taskd.Config, and
// where each key that is not a default came from. The defaults and the rules
// are taskd.Config's (WithDefaults, Validate); this package adds none.
type Config struct {
	taskd.Config

	// sources records where each key that is not a default came from, by path:
	// "config.yaml line 12" or "TASKD_LEASE_TTL". Validation errors name it.
	sources map[string]string
}

// Default returns the configuration with nothing set: taskd.Config's
// defaults, and config.yaml's for the two keys whose zero value means
// something else (taskd.HTTPAddrDefault, taskd.PrometheusDefault). It does
// not validate: mysql.dsn has no default.
func Default() *Config {
	return &Config{Config: taskd.Config{
		HTTP:      taskd.HTTPConfig{Addr: taskd.HTTPAddrDefault},
		Telemetry: taskd.TelemetryConfig{Prometheus: taskd.PrometheusDefault},
	}.WithDefaults()}
}

// Source says where the value of the key at path came from: "config.yaml line
// 12", an environment variable's name, or "" when it is the default.
func (c *Config) Source(path string) string { return c.sources[path] }
