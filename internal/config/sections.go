package config

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd"
)

// Top-level keys that are lists of sections: unlike other keys, they are read
// from the file only, and no environment variable sets them.
const (
	webhooksKey   = "webhooks"
	categoriesKey = "categories"
)

// webhookKeys and categoryKeys are the keys of one webhook and one category,
// the leaves of taskd.WebhookConfig and taskd.CategoryConfig, with paths
// relative to the item ("name", "url", ...).
var (
	webhookKeys  = itemKeys[taskd.WebhookConfig]()
	categoryKeys = itemKeys[taskd.CategoryConfig]()
)

func itemKeys[T any]() map[string]Key {
	keys := map[string]Key{}
	for _, k := range collectKeys(reflect.TypeFor[T](), "", nil) {
		keys[k.Path] = k
	}
	return keys
}

// webhooks applies the list of webhooks.
func (l *loader) webhooks(n *yaml.Node) {
	if hooks, ok := sectionList[taskd.WebhookConfig](l, n, webhooksKey, "webhook", webhookKeys,
		"name, url, events and secret", "name, url, events, secret, timeout, concurrency, max_attempts, max_age"); ok {
		l.cfg.Webhooks = hooks
	}
}

// categories applies the list of category workflows.
func (l *loader) categories(n *yaml.Node) {
	if cats, ok := sectionList[taskd.CategoryConfig](l, n, categoriesKey, "category", categoryKeys,
		"a name", "name, stages, overlap, send_back_hold, max_send_backs, weight, rate_limit, max_in_flight, key_limit, gold, hedge"); ok {
		l.cfg.Categories = cats
	}
}

// sectionList reads the list of sections under key: a sequence of mappings
// with the keys of T. Each value's source is recorded under "key[i].field",
// the path validation errors name. It reports false when n is null.
func sectionList[T any](l *loader, n *yaml.Node, key, item string, keys map[string]Key, needs, all string) ([]T, bool) {
	if isNull(n) {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		l.fail(key, l.at(n), "must be a list of %s, each a mapping with %s", key, needs)
		return nil, false
	}
	out := make([]T, 0, len(n.Content))
	for i, node := range n.Content {
		node = resolve(node)
		prefix := fmt.Sprintf("%s[%d]", key, i)
		var v T
		if node.Kind != yaml.MappingNode {
			l.fail(prefix, l.at(node), "must be a mapping with %s", needs)
			continue
		}
		l.cfg.sources[prefix] = l.at(node)
		seen := map[string]int{}
		for j := 0; j+1 < len(node.Content); j += 2 {
			kn, vn := resolve(node.Content[j]), resolve(node.Content[j+1])
			path := prefix + "." + kn.Value
			if kn.Kind != yaml.ScalarNode {
				l.fail(prefix, l.at(kn), "keys must be plain names")
				continue
			}
			if line, dup := seen[kn.Value]; dup {
				l.fail(path, l.at(kn), "set twice (first on line %d)", line)
				continue
			}
			seen[kn.Value] = kn.Line
			if vn.Kind == yaml.MappingNode && hasNested(keys, kn.Value) {
				// A nested section of the item (a category's gold, its
				// hedge): its keys are "name.key".
				l.cfg.sources[path] = l.at(vn)
				for m := 0; m+1 < len(vn.Content); m += 2 {
					ckn, cvn := resolve(vn.Content[m]), resolve(vn.Content[m+1])
					l.itemValue(&v, keys, kn.Value+"."+ckn.Value, path+"."+ckn.Value, ckn, cvn, item, all)
				}
				continue
			}
			l.itemValue(&v, keys, kn.Value, path, kn, vn, item, all)
		}
		out = append(out, v)
	}
	l.cfg.sources[key] = l.at(n)
	return out, true
}

// hasNested reports whether keys has a key under name ("name.field").
func hasNested(keys map[string]Key, name string) bool {
	for k := range keys {
		if len(k) > len(name) && k[:len(name)+1] == name+"." {
			return true
		}
	}
	return false
}

// itemValue sets the field of *v that rel ("stages", "hedge.before_due")
// names to the value vn, recorded under path.
func (l *loader) itemValue(v any, keys map[string]Key, rel, path string, kn, vn *yaml.Node, item, all string) {
	k, ok := keys[rel]
	if !ok {
		l.fail(path, l.at(kn), "unknown key (a %s has %s)", item, all)
		return
	}
	if isNull(vn) {
		return
	}
	k.Path = path
	val, ok := l.value(k, vn)
	if !ok {
		return
	}
	reflect.ValueOf(v).Elem().FieldByIndex(k.index).Set(val)
	l.cfg.sources[path] = l.at(vn)
}
