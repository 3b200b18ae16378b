package config

import (
	"errors"
	"strings"

	"github.com/taskd/taskd"
)

// Validate applies the defaults of keys set to their zero value (as
// taskd.New does), checks every key and returns the problems found as
// *KeyError values, joined; nil means the configuration is usable. Load
// calls it.
func (c *Config) Validate() error {
	c.Config = c.Config.WithDefaults()
	err := c.Config.Validate()
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		var ce *taskd.ConfigError
		if errors.As(e, &ce) {
			e = &KeyError{Key: ce.Key, Source: c.source(ce.Key), Msg: ce.Msg}
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// unjoin returns the errors errors.Join joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// source is where the key at path came from; a list item's key that is not
// set (webhooks[0].url, schedules[1].spec) names where the item is.
func (c *Config) source(path string) string {
	if src := c.sources[path]; src != "" {
		return src
	}
	if i := strings.Index(path, "]."); i > 0 {
		return c.sources[path[:i+1]]
	}
	return ""
}
