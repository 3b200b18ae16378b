package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvPrefix starts the environment variable of every key.
const EnvPrefix = "TASKD_"

// Key describes one configuration key, a leaf of Config.
type Key struct {
	// Path is the key's dotted YAML path, e.g. "dispatch.lease_ttl".
	Path string
	// Env is the environment variable derived from the path, e.g.
	// "TASKD_DISPATCH_LEASE_TTL".
	Env string
	// Alias is a second, shorter variable for the key, or "".
	Alias string
	// Secret keys (tokens, passwords, the DSN) never have their values quoted
	// in errors.
	Secret bool
	// Type names the value's type: string, bool, int, float, duration or list.
	Type string

	index []int // field index path into Config
}

// Keys returns every configuration key in declaration order.
func Keys() []Key { return keyList() }

var (
	durationType = reflect.TypeFor[time.Duration]()
	keyList      = sync.OnceValue(func() []Key { return collectKeys(reflect.TypeFor[Config](), "", nil) })
)

// collectKeys walks the struct type t and returns its leaves.
func collectKeys(t reflect.Type, prefix string, index []int) []Key {
	var keys []Key
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct { // the embedded taskd.Config
			keys = append(keys, collectKeys(f.Type, prefix, append(append([]int(nil), index...), i))...)
			continue
		}
		name := f.Tag.Get("yaml")
		if name == "" || !f.IsExported() {
			continue
		}
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			continue // a list of sections (schedules, webhooks, categories): read by the loader itself, no variables
		}
		path := prefix + name
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct {
			keys = append(keys, collectKeys(f.Type, path+".", idx)...)
			continue
		}
		keys = append(keys, Key{
			Path:   path,
			Env:    EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")),
			Alias:  f.Tag.Get("env"),
			Secret: f.Tag.Get("secret") == "true",
			Type:   typeName(valueType(f.Type)),
			index:  idx,
		})
	}
	return keys
}

// valueType is the type of a key's value: t, or what t points at (a key
// that is nil while unset).
func valueType(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list"
	case t.Kind() == reflect.Float64:
		return "float"
	default:
		return t.Kind().String()
	}
}

// field returns the value of k in c, settable.
func (k Key) field(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(k.index)
}

// set sets k in c to v, a value parseScalar made: through a new pointer for
// a key that is nil while unset.
func (k Key) set(c *Config, v reflect.Value) {
	f := k.field(c)
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		p.Elem().Set(v)
		v = p
	}
	f.Set(v)
}

// parseScalar parses s as a value of the key's type; lists are comma-separated.
// The error is the message to put after the key's name.
func (k Key) parseScalar(s string) (reflect.Value, error) {
	quoted := strconv.Quote(s)
	if k.Secret {
		quoted = "(value hidden)"
	}
	switch k.Type {
	case "string":
		return reflect.ValueOf(s), nil
	case "bool":
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return reflect.Value{}, fmt.Errorf("must be true or false, got %s", quoted)
		}
		return reflect.ValueOf(b), nil
	case "int":
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return reflect.Value{}, fmt.Errorf("must be an integer, got %s", quoted)
		}
		return reflect.ValueOf(n), nil
	case "float":
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return reflect.Value{}, fmt.Errorf("must be a number, got %s", quoted)
		}
		return reflect.ValueOf(f), nil
	case "duration":
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return reflect.Value{}, fmt.Errorf("must be a duration such as 30s or 1m30s, got %s", quoted)
		}
		return reflect.ValueOf(d), nil
	case "list":
		return reflect.ValueOf(splitList(s)), nil
	}
	return reflect.Value{}, fmt.Errorf("unsupported type %s", k.Type)
}

// splitList splits a comma-separated list, trimming spaces and dropping empty
// items.
func splitList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
