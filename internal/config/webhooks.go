package config

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd"
)

// webhooksKey is the top-level key of the list of webhooks. Unlike other keys,
// it is a list of sections, read from the file only: no environment variable
// sets it.
const webhooksKey = "webhooks"

// webhookKeys are the keys of one webhook, taskd.WebhookConfig's leaves, with
// paths relative to the webhook ("name", "url", ...).
var webhookKeys = func() map[string]Key {
	keys := map[string]Key{}
	for _, k := range collectKeys(reflect.TypeFor[taskd.WebhookConfig](), "", nil) {
		keys[k.Path] = k
	}
	return keys
}()

// webhooks applies the list of webhooks: a sequence of mappings with the keys
// of taskd.WebhookConfig. Each value's source is recorded under
// "webhooks[i].key", the path validation errors name.
func (l *loader) webhooks(n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.fail(webhooksKey, l.at(n), "must be a list of webhooks, each a mapping with name, url, events and secret")
		return
	}
	hooks := make([]taskd.WebhookConfig, 0, len(n.Content))
	for i, item := range n.Content {
		item = resolve(item)
		prefix := fmt.Sprintf("%s[%d]", webhooksKey, i)
		var w taskd.WebhookConfig
		if item.Kind != yaml.MappingNode {
			l.fail(prefix, l.at(item), "must be a mapping with name, url, events and secret")
			continue
		}
		l.cfg.sources[prefix] = l.at(item)
		seen := map[string]int{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			kn, vn := resolve(item.Content[j]), resolve(item.Content[j+1])
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
			k, ok := webhookKeys[kn.Value]
			if !ok {
				l.fail(path, l.at(kn), "unknown key (a webhook has name, url, events, secret, timeout, concurrency, max_attempts, max_age)")
				continue
			}
			if isNull(vn) {
				continue
			}
			k.Path = path
			v, ok := l.value(k, vn)
			if !ok {
				continue
			}
			reflect.ValueOf(&w).Elem().FieldByIndex(k.index).Set(v)
			l.cfg.sources[path] = l.at(vn)
		}
		hooks = append(hooks, w)
	}
	l.cfg.Webhooks = hooks
	l.cfg.sources[webhooksKey] = l.at(n)
}
