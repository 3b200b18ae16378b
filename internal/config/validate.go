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
			source := c.sources[ce.Key]
			if i := strings.Index(ce.Key, "]."); source == "" && i > 0 {
				source = c.sources[ce.Key[:i+1]] // a list item's key: the item's place
			}
			e = &KeyError{Key: ce.Key, Source: source, Msg: ce.Msg}
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
