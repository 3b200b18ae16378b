package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd"
)

// KeyError is a problem with one key's value. Load and Validate return them,
// joined with errors.Join when there are several.
type KeyError struct {
	// Key is the key's dotted path, e.g. "dispatch.lease_ttl".
	Key string
	// Source is where the value came from: "config.yaml line 12",
	// "TASKD_LEASE_TTL", or "" for a default.
	Source string
	// Msg says what is wrong.
	Msg string
}

func (e *KeyError) Error() string {
	if e.Source == "" {
		return "config: " + e.Key + ": " + e.Msg
	}
	return "config: " + e.Key + ": " + e.Msg + " (from " + e.Source + ")"
}

// FileEnv names the config file when no -config flag does.
const FileEnv = "TASKD_CONFIG"

// DefaultFile is read when it exists in the working directory and no other
// file is named.
const DefaultFile = "config.yaml"

// Path returns the config file to load: flag when set (the -config flag),
// else $TASKD_CONFIG, else ./config.yaml when it exists, else "" (none).
func Path(flag string, env func(string) (string, bool)) string {
	if flag != "" {
		return flag
	}
	if env != nil {
		if p, _ := env(FileEnv); p != "" {
			return p
		}
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile
	}
	return ""
}

// Load reads the YAML file at path (none when path is ""), applies the
// environment variables that env reports as set (pass os.LookupEnv), and
// validates the result. Keys set nowhere keep their defaults. Every error about a
// value is a *KeyError naming the key; several are joined.
func Load(path string, env func(string) (string, bool)) (*Config, error) {
	var data []byte
	name := ""
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("config: read %w", err)
		}
		name = filepath.Base(path)
	}
	return Parse(data, name, env)
}

// Parse is Load with the file's contents given: data is the YAML (empty for
// none) and name names it in errors.
func Parse(data []byte, name string, env func(string) (string, bool)) (*Config, error) {
	if name == "" {
		name = "config"
	}
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	l := &loader{cfg: Default(), name: name}
	l.cfg.sources = map[string]string{}
	l.yaml(data)
	l.env(env)
	if err := errors.Join(l.errs...); err != nil {
		return nil, err
	}
	if err := l.cfg.Validate(); err != nil {
		return nil, err
	}
	return l.cfg, nil
}

// loader applies one file and the environment to a Config, collecting errors.
type loader struct {
	cfg  *Config
	name string
	errs []error
}

func (l *loader) fail(key, source, format string, args ...any) {
	l.errs = append(l.errs, &KeyError{Key: key, Source: source, Msg: fmt.Sprintf(format, args...)})
}

// yaml applies a YAML document. It walks the node tree itself, rather than
// decoding into the struct, so that each error can name its key.
func (l *loader) yaml(data []byte) {
	if len(bytes.TrimSpace(data)) == 0 {
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // only comments
			return
		}
		l.errs = append(l.errs, fmt.Errorf("config: %s: %w", l.name, err))
		return
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		l.errs = append(l.errs, fmt.Errorf("config: %s: want one YAML document, found more", l.name))
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	root = resolve(root)
	if isNull(root) {
		return
	}
	keys := map[string]Key{}
	for _, k := range Keys() {
		keys[k.Path] = k
	}
	l.mapping(root, "", keys)
}

// mapping applies a mapping node at prefix ("" or "section.").
func (l *loader) mapping(n *yaml.Node, prefix string, keys map[string]Key) {
	where := strings.TrimSuffix(prefix, ".")
	if where == "" {
		where = "top level"
	}
	if n.Kind != yaml.MappingNode {
		l.fail(where, l.at(n), "must be a mapping of keys to values")
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), resolve(n.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			l.fail(where, l.at(kn), "keys must be plain names")
			continue
		}
		path := prefix + kn.Value
		if line, dup := seen[kn.Value]; dup {
			l.fail(path, l.at(kn), "set twice (first on line %d)", line)
			continue
		}
		seen[kn.Value] = kn.Line
		if k, ok := keys[path]; ok {
			l.leaf(k, vn)
			continue
		}
		if path == "schedules" {
			l.schedules(vn)
			continue
		}
		if path == webhooksKey {
			l.webhooks(vn)
			continue
		}
		if path == categoriesKey {
			l.categories(vn)
			continue
		}
		if hasSection(keys, path) {
			if !isNull(vn) {
				l.mapping(vn, path+".", keys)
			}
			continue
		}
		l.fail(path, l.at(kn), "unknown key")
	}
}

// leaf applies one key's value node. A null value keeps the default.
func (l *loader) leaf(k Key, n *yaml.Node) {
	if isNull(n) {
		return
	}
	v, ok := l.value(k, n)
	if !ok {
		return
	}
	k.set(l.cfg, v)
	l.cfg.sources[k.Path] = l.at(n)
}

// value parses a key's value node, a scalar or (for a list) a sequence, and
// reports whether it could; when not, it has recorded the error.
func (l *loader) value(k Key, n *yaml.Node) (reflect.Value, bool) {
	source := l.at(n)
	switch {
	case n.Kind == yaml.SequenceNode && k.Type == "list":
		items := []string{}
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode || isNull(item) {
				l.fail(k.Path, l.at(item), "list items must be plain values")
				return reflect.Value{}, false
			}
			if s := strings.TrimSpace(item.Value); s != "" {
				items = append(items, s)
			}
		}
		return reflect.ValueOf(items), true
	case n.Kind == yaml.ScalarNode:
		v, err := k.parseScalar(n.Value)
		if err != nil {
			l.fail(k.Path, source, "%v", err)
			return reflect.Value{}, false
		}
		return v, true
	default:
		want := "a single value"
		if k.Type == "list" {
			want = "a list or a comma-separated string"
		}
		l.fail(k.Path, source, "must be %s", want)
		return reflect.Value{}, false
	}
}

// env applies the environment variables that are set.
func (l *loader) env(lookup func(string) (string, bool)) {
	for _, k := range Keys() {
		val, ok := lookup(k.Env)
		name := k.Env
		if k.Alias != "" {
			if aval, aok := lookup(k.Alias); aok {
				if ok && aval != val {
					l.fail(k.Path, k.Env+" and "+k.Alias, "both are set, to different values; set one")
					continue
				}
				val, ok, name = aval, true, k.Alias
			}
		}
		if !ok {
			continue
		}
		v, err := k.parseScalar(val)
		if err != nil {
			l.fail(k.Path, name, "%v", err)
			continue
		}
		k.set(l.cfg, v)
		l.cfg.sources[k.Path] = name
	}
}

// at describes a node's position for errors.
func (l *loader) at(n *yaml.Node) string {
	return l.name + " line " + strconv.Itoa(n.Line)
}

// resolve follows aliases to the node they point at.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is an empty or null value ("key:", "key: ~").
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// hasSection reports whether path is a section: some key starts with path + ".".
func hasSection(keys map[string]Key, path string) bool {
	for p := range keys {
		if strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// scheduleFields are the keys of one item of schedules.
var scheduleFields = []string{"name", "spec", "category", "title", "payload", "priority", "limit_key"}

// schedules applies the list of periodic tasks. Each item is a mapping of
// scheduleFields; the errors name the item by its index ("schedules[1].spec").
// The list has no environment variables.
func (l *loader) schedules(n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.fail("schedules", l.at(n), "must be a list of schedules (name, spec, category, title, payload, priority)")
		return
	}
	var out []taskd.ScheduleConfig
	for i, item := range n.Content {
		item = resolve(item)
		where := fmt.Sprintf("schedules[%d]", i)
		if item.Kind != yaml.MappingNode {
			l.fail(where, l.at(item), "must be a mapping of name, spec, category, title, payload and priority")
			continue
		}
		var sc taskd.ScheduleConfig
		l.cfg.sources[where] = l.at(item)
		seen := map[string]bool{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			kn, vn := resolve(item.Content[j]), resolve(item.Content[j+1])
			key := where + "." + kn.Value
			switch {
			case kn.Kind != yaml.ScalarNode || !slices.Contains(scheduleFields, kn.Value):
				l.fail(key, l.at(kn), "unknown key (want %s)", strings.Join(scheduleFields, ", "))
				continue
			case seen[kn.Value]:
				l.fail(key, l.at(kn), "set twice")
				continue
			}
			seen[kn.Value] = true
			l.cfg.sources[key] = l.at(vn)
			if isNull(vn) {
				continue
			}
			if kn.Value == "payload" {
				if vn.Kind != yaml.MappingNode {
					l.fail(key, l.at(vn), "must be a mapping (a JSON object)")
					continue
				}
				if err := vn.Decode(&sc.Payload); err != nil {
					l.fail(key, l.at(vn), "%v", err)
				}
				continue
			}
			if vn.Kind != yaml.ScalarNode {
				l.fail(key, l.at(vn), "must be a single value")
				continue
			}
			switch kn.Value {
			case "name":
				sc.Name = vn.Value
			case "spec":
				sc.Spec = vn.Value
			case "category":
				sc.Category = vn.Value
			case "title":
				sc.Title = vn.Value
			case "limit_key":
				sc.LimitKey = vn.Value
			case "priority":
				p, err := strconv.Atoi(strings.TrimSpace(vn.Value))
				if err != nil {
					l.fail(key, l.at(vn), "must be an integer, got %q", vn.Value)
					continue
				}
				sc.Priority = p
			}
		}
		out = append(out, sc)
	}
	l.cfg.Schedules = out
	l.cfg.sources["schedules"] = l.at(n)
}
