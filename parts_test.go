package taskd

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/activity"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/locker"
)

// engineKeys are the keys of Config that no part's options value carries:
// the engine reads them itself (its listeners, its logs, its connections),
// or only the taskd command does.
var engineKeys = []string{
	"http.addr", "http.read_header_timeout", "http.read_timeout", "http.write_timeout",
	"http.idle_timeout", "http.shutdown_timeout", "http.metrics_addr",
	"mysql.dsn", "mysql.replica_dsn",
	"redis.cluster", // the mode, redis.go's choice
	"log.level", "log.format",
	"memory_limit_mib",
	"worker.in_serve", "worker.metrics_addr",
	"dispatch.insert_tx_waiters", // the engine's commit waiters (inserttx.go)
}

// notKeys are the fields of the parts' options values that no key of Config
// configures: the parts' defaults stand (or, for telemetry, the build's).
var notKeys = []string{
	"worker.ID", "worker.Wait",
	"store.InsertBatchSize", "store.ReplicaTimeout", "store.ReplicaRest",
	"activity.FlushInterval", "activity.Retention",
	"sweeper.Retention.Pause", // the sweeper's pause between purge batches
	"telemetry.ServiceVersion",
	"schedule.Schedules.Task.Key",         // the scheduler's, per tick
	"schedule.Schedules.Task.KeyHold",     // forever: a tick's key runs it once
	"schedule.Schedules.Task.MaxAttempts", // the store's default, as for POST /v1/tasks
	"schedule.Schedules.Task.Stages",      // the category's workflow, as for POST /v1/tasks
	"schedule.Schedules.Task.Overlap",     // the category's workflow
	"redis.Addr",                          // clientOptions' argument, one of redis.addrs
}

// TestPartsCarryEveryKey checks parts.go both ways. Every key of Config
// reaches some part's options value unless engineKeys lists it (zeroing the
// key changes what the parts get), and every field of a part's options value
// that holds a value (not a handle) comes from a key unless notKeys lists it.
// A key or a field added without its mapping fails here.
func TestPartsCarryEveryKey(t *testing.T) {
	t.Parallel()
	var cfg Config
	leaves := fill(reflect.ValueOf(&cfg).Elem(), "")
	if len(leaves) < 60 {
		t.Fatalf("only %d keys filled", len(leaves))
	}

	full := partValues(t, cfg)
	for path, v := range full {
		if v == "" && !slices.Contains(notKeys, path) {
			t.Errorf("%s is zero although every key is set: map it in parts.go, or list it in notKeys", path)
		}
	}
	for _, key := range leaves {
		zeroed := cfg
		zeroed.Webhooks = slices.Clone(cfg.Webhooks)
		zeroed.Schedules = slices.Clone(cfg.Schedules)
		zeroKey(reflect.ValueOf(&zeroed).Elem(), key)
		changed := !reflect.DeepEqual(partValues(t, zeroed), full)
		switch engine := slices.Contains(engineKeys, key); {
		case !changed && !engine:
			t.Errorf("key %s reaches no part: map it in parts.go, or list it in engineKeys", key)
		case changed && engine:
			t.Errorf("key %s reaches a part but engineKeys lists it", key)
		}
	}
}

// partValues builds every part's options value from cfg and returns the
// fields that hold values, by "part.Field" path, each formatted ("" when
// zero); handles (funcs, interfaces, pointers) are left out.
func partValues(t *testing.T, cfg Config) map[string]string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	e := &Engine{
		cfg: cfg, log: slog.New(slog.DiscardHandler),
		tel:   &telemetry.Providers{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()},
		db:    &sqlx.DB{},
		store: &store.Store{},
		redis: &redisConn{mode: redisSingle, clients: []redis.UniversalClient{rdb}, locks: locker.New(rdb)},
		d:     &dispatcher.Dispatcher{}, hooks: &delivery.Deliverer{}, history: &activity.Recorder{}, api: &api.Handler{},
	}
	sc, err := e.scheduleConfig()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, v := range map[string]any{
		"telemetry":  cfg.Telemetry.telemetryConfig(),
		"redis":      *cfg.Redis.clientOptions(""),
		"cluster":    *cfg.Redis.clusterOptions(),
		"redlock":    *cfg.Redis.redlockOptions(),
		"store":      e.storeConfig(),
		"dispatcher": e.dispatcherConfig(),
		"sweeper":    e.sweeperConfig(),
		"schedule":   sc,
		"worker":     e.workerConfig(worker.NewMux()),
		"delivery":   e.deliveryConfig(),
		"activity":   e.activityConfig(),
		"api":        e.apiConfig(nil),
		"web":        e.webConfig(),
	} {
		values(reflect.ValueOf(v), name, out)
	}
	// The Redis clients' options hold many settings taskd leaves to
	// go-redis: only the ones parts.go sets count.
	for path := range out {
		part, field, _ := strings.Cut(path, ".")
		if (part == "redis" || part == "cluster") && !slices.Contains([]string{
			"Addr", "Addrs", "Username", "Password", "DB", "DialTimeout", "ReadTimeout", "WriteTimeout",
			"ContextTimeoutEnabled", "DialerRetries",
		}, field) {
			delete(out, path)
		}
	}
	return out
}

// values records the value fields of v under prefix: basic kinds, and slices
// and structs of them.
func values(v reflect.Value, prefix string, out map[string]string) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				values(v.Field(i), prefix+"."+f.Name, out)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			if v.Len() == 0 {
				out[prefix] = ""
			}
			for i := range v.Len() {
				values(v.Index(i), prefix, out)
			}
			return
		}
		fallthrough
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64, reflect.Map:
		if v.IsZero() || (v.Kind() == reflect.Slice && v.Len() == 0) {
			out[prefix] = ""
		} else {
			out[prefix] = fmt.Sprint(v.Interface())
		}
	}
}

// fill sets every leaf of the Config v to a value that is not its zero and
// returns the leaves' dotted paths as in config.yaml (list items under
// their list's name).
func fill(v reflect.Value, prefix string) []string {
	var paths []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		path := strings.TrimPrefix(prefix+"."+name, ".")
		fv := v.Field(i)
		switch {
		case f.Type.Kind() == reflect.Struct:
			paths = append(paths, fill(fv, path)...)
			continue
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			fv.Set(reflect.MakeSlice(f.Type, 1, 1))
			paths = append(paths, fill(fv.Index(0), path)...)
			continue
		case f.Type == reflect.TypeFor[time.Duration]():
			fv.SetInt(int64(time.Duration(i+2) * time.Second))
		case f.Type.Kind() == reflect.String:
			fv.SetString(fmt.Sprintf("v%d", i))
		case f.Type.Kind() == reflect.Int:
			fv.SetInt(int64(i + 2))
		case f.Type.Kind() == reflect.Bool:
			fv.SetBool(true)
		case f.Type.Kind() == reflect.Float64:
			fv.SetFloat(0.5)
		case f.Type.Kind() == reflect.Slice:
			fv.Set(reflect.ValueOf([]string{fmt.Sprintf("v%d", i)}))
		case f.Type == reflect.TypeFor[*bool]():
			fv.Set(reflect.ValueOf(new(true)))
		case f.Type == reflect.TypeFor[*float64]():
			fv.Set(reflect.ValueOf(new(0.5)))
		case f.Type == reflect.TypeFor[*time.Duration]():
			fv.Set(reflect.ValueOf(new(time.Duration(i+2) * time.Hour)))
		case f.Type.Kind() == reflect.Map:
			fv.Set(reflect.ValueOf(map[string]any{"k": i}))
		default:
			panic("fill: " + path + " is of kind " + f.Type.Kind().String())
		}
		paths = append(paths, path)
	}
	return paths
}

// zeroKey sets the leaf at the dotted path of fill to its zero value; a
// pointer, nil while unset, to point at its zero.
func zeroKey(v reflect.Value, path string) {
	name, rest, _ := strings.Cut(path, ".")
	for i := range v.NumField() {
		if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); n != name {
			continue
		}
		fv := v.Field(i)
		switch {
		case rest == "" && fv.Kind() == reflect.Pointer:
			fv.Set(reflect.New(fv.Type().Elem()))
		case rest == "":
			fv.SetZero()
		case fv.Kind() == reflect.Slice:
			zeroKey(fv.Index(0), rest)
		default:
			zeroKey(fv, rest)
		}
		return
	}
	panic("zeroKey: no key " + path)
}

// TestRetentionDefaultsAndForever: a Config that leaves retention out gets the
// sweeper's defaults; a duration pointing at 0 keeps that kind forever (the
// sweeper gets 0); a negative one is refused. TestPartsCarryEveryKey checks
// that each key reaches the sweeper.
func TestRetentionDefaultsAndForever(t *testing.T) {
	t.Parallel()
	r := Config{}.WithDefaults().Retention
	if deref(r.Done) != 24*time.Hour || deref(r.Cancelled) != 24*time.Hour || deref(r.Dead) != 7*24*time.Hour ||
		deref(r.Webhooks) != 7*24*time.Hour || r.Batch != 500 {
		t.Errorf("defaults: %v %v %v %v %d", deref(r.Done), deref(r.Cancelled), deref(r.Dead), deref(r.Webhooks), r.Batch)
	}
	var cfg Config
	cfg.Retention.Done = new(time.Duration(0))
	cfg.Retention.Dead = new(time.Hour)
	r = cfg.WithDefaults().Retention
	if deref(r.Done) != 0 || deref(r.Dead) != time.Hour || deref(r.Cancelled) != 24*time.Hour {
		t.Errorf("done 0, dead 1h: %v %v %v", deref(r.Done), deref(r.Dead), deref(r.Cancelled))
	}
	if r.Dead == cfg.Retention.Dead {
		t.Error("WithDefaults shares the caller's pointer")
	}
	*cfg.Retention.Dead = -time.Second
	err := cfg.WithDefaults().validate(false)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "retention.dead" {
		t.Errorf("negative dead retention: %v", err)
	}
}
