package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd"
)

// defaultConfigFile is read when it exists and no other file is named.
const defaultConfigFile = "config.yaml"

// configEnv names the config file, like -config.
const configEnv = "TASKD_CONFIG"

// storesConfig is the part of taskd's config.yaml the bench reads; the other
// sections are left to taskd.
type storesConfig struct {
	MySQL taskd.MySQLConfig `yaml:"mysql"`
	Redis taskd.RedisConfig `yaml:"redis"`
}

// loadConfig reads the mysql and redis sections of the file at path (else of
// $TASKD_CONFIG, else of ./config.yaml when it exists), applies their
// TASKD_MYSQL_* and TASKD_REDIS_* variables and taskd's defaults. mysql.dsn
// must be set.
func loadConfig(path string, env func(string) (string, bool)) (taskd.Config, error) {
	if path == "" {
		path, _ = env(configEnv)
	}
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			path = defaultConfigFile
		}
	}
	var sc storesConfig
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return taskd.Config{}, fmt.Errorf("config: read %w", err)
		}
		// Other sections are taskd's business: unknown keys are not errors here.
		if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&sc); err != nil && !errors.Is(err, io.EOF) {
			return taskd.Config{}, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if err := applyEnv(&sc, env); err != nil {
		return taskd.Config{}, err
	}
	cfg := taskd.Config{MySQL: sc.MySQL, Redis: sc.Redis}.WithDefaults()
	if cfg.MySQL.DSN == "" {
		return taskd.Config{}, errors.New("config: mysql.dsn: must be set (or TASKD_MYSQL_DSN)")
	}
	return cfg, nil
}

// applyEnv overrides the keys of sc whose TASKD_ variables are set, as taskd
// does: lists are comma-separated.
func applyEnv(sc *storesConfig, env func(string) (string, bool)) error {
	if v, ok := env("TASKD_MYSQL_DSN"); ok {
		sc.MySQL.DSN = v
	}
	if v, ok := env("TASKD_REDIS_ADDRS"); ok {
		sc.Redis.Addrs = nil
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				sc.Redis.Addrs = append(sc.Redis.Addrs, a)
			}
		}
	}
	if v, ok := env("TASKD_REDIS_USERNAME"); ok {
		sc.Redis.Username = v
	}
	if v, ok := env("TASKD_REDIS_PASSWORD"); ok {
		sc.Redis.Password = v
	}
	if v, ok := env("TASKD_REDIS_DB"); ok {
		db, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("config: redis.db: not a number: %q (from TASKD_REDIS_DB)", v)
		}
		sc.Redis.DB = db
	}
	if v, ok := env("TASKD_REDIS_CLUSTER"); ok {
		c, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("config: redis.cluster: not a boolean: %q (from TASKD_REDIS_CLUSTER)", v)
		}
		sc.Redis.Cluster = c
	}
	return nil
}
