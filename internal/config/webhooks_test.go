package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
)

const webhooksYAML = `
mysql:
  dsn: u:p@tcp(h:1)/d
webhooks:
  - name: sink
    url: https://example.com/hooks
    events: [submitted, dead]
    secret: 0123456789abcdef
  - name: audit.v2
    url: http://127.0.0.1:9000/x
    events:
      - expired
      - released
    secret: fedcba9876543210-more
    timeout: 2s
    concurrency: 8
    max_attempts: 3
    max_age: 1h
`

func TestWebhooksLoad(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(webhooksYAML), "config.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []taskd.WebhookConfig{
		{Name: "sink", URL: "https://example.com/hooks", Events: []string{"submitted", "dead"}, Secret: "0123456789abcdef",
			Timeout: 10 * time.Second, Concurrency: 4, MaxAttempts: 25, MaxAge: 72 * time.Hour},
		{Name: "audit.v2", URL: "http://127.0.0.1:9000/x", Events: []string{"expired", "released"}, Secret: "fedcba9876543210-more",
			Timeout: 2 * time.Second, Concurrency: 8, MaxAttempts: 3, MaxAge: time.Hour},
	}
	if !reflect.DeepEqual(cfg.Webhooks, want) {
		t.Errorf("webhooks = %+v\nwant %+v", cfg.Webhooks, want)
	}
	if got := cfg.Source("webhooks[1].max_age"); got != "config.yaml line 18" {
		t.Errorf("source of webhooks[1].max_age = %q", got)
	}
	if d := cfg.WebhookDelivery; d.PollInterval != time.Second || d.LeaseTTL != 10*time.Second || d.Batch != 100 {
		t.Errorf("webhook_delivery defaults = %+v", d)
	}
}

// TestWebhooksInvalid checks that each mistake is refused with an error naming
// the webhook's key and the line, and never quoting a secret.
func TestWebhooksInvalid(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef"
	hook := func(fields string) string {
		return "mysql:\n  dsn: u:p@tcp(h:1)/d\nwebhooks:\n  - " + strings.ReplaceAll(strings.TrimSpace(fields), "\n", "\n    ") + "\n"
	}
	ok := "name: a\nurl: https://h/x\nevents: [submitted]\nsecret: " + secret
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bad url", hook("name: a\nurl: ftp://h/x\nevents: [dead]\nsecret: " + secret), "webhooks[0].url: must be an http or https URL"},
		{"relative url", hook("name: a\nurl: /x\nevents: [dead]\nsecret: " + secret), "webhooks[0].url: must be an http or https URL"},
		{"no host", hook("name: a\nurl: http:///x\nevents: [dead]\nsecret: " + secret), "webhooks[0].url: must name a host"},
		{"user in url", hook("name: a\nurl: https://u:pw@h/x\nevents: [dead]\nsecret: " + secret), "webhooks[0].url: must not hold a user"},
		{"no url", hook("name: a\nevents: [dead]\nsecret: " + secret), "webhooks[0].url: must be set"},
		{"unknown event", hook("name: a\nurl: https://h/x\nevents: [dead, claimed]\nsecret: " + secret), `webhooks[0].events: unknown event "claimed"`},
		{"no events", hook("name: a\nurl: https://h/x\nsecret: " + secret), "webhooks[0].events: must list at least one"},
		{"twice", hook("name: a\nurl: https://h/x\nevents: [dead, dead]\nsecret: " + secret), `webhooks[0].events: "dead" is listed twice`},
		{"empty secret", hook("name: a\nurl: https://h/x\nevents: [dead]\nsecret: \"\""), "webhooks[0].secret: must be at least 16 characters, got 0"},
		{"short secret", hook("name: a\nurl: https://h/x\nevents: [dead]\nsecret: shorty"), "webhooks[0].secret: must be at least 16 characters, got 6"},
		{"duplicate name", hook(ok) + "  - " + strings.ReplaceAll(ok, "\n", "\n    ") + "\n", `webhooks[1].name: "a" is also the name of webhooks[0]`},
		{"bad name", hook("name: a b\nurl: https://h/x\nevents: [dead]\nsecret: " + secret), "webhooks[0].name: must be 1..64 letters"},
		{"no name", hook("url: https://h/x\nevents: [dead]\nsecret: " + secret), "webhooks[0].name: must be set"},
		{"unknown key", hook(ok + "\nretries: 3"), "webhooks[0].retries: unknown key"},
		{"not a list", "webhooks: {name: a}\n", "webhooks: must be a list"},
		{"bad duration", hook(ok + "\ntimeout: soon"), "webhooks[0].timeout: must be a duration"},
		{"low concurrency", hook(ok + "\nconcurrency: -1"), "webhooks[0].concurrency: must be 1..256"},
		{"backoff", "mysql:\n  dsn: u:p@tcp(h:1)/d\nwebhook_delivery:\n  backoff_base: 1m\n  backoff_max: 1s\n", "webhook_delivery.backoff_max: must be at least"},
	} {
		_, err := Parse([]byte(tc.yaml), "config.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one containing %q", tc.name, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "config.yaml line ") {
			t.Errorf("%s: error names no line: %v", tc.name, err)
		}
		if strings.Contains(err.Error(), "shorty") || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: error shows a secret: %v", tc.name, err)
		}
		var ke *KeyError
		if !errors.As(err, &ke) {
			t.Errorf("%s: %v is not a *KeyError", tc.name, err)
		}
	}
}

// TestWebhooksFromGo checks that the same validation runs on a taskd.Config
// built in Go, with the defaults applied.
func TestWebhooksFromGo(t *testing.T) {
	t.Parallel()
	c := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(h:1)/d"}, Webhooks: []taskd.WebhookConfig{
		{Name: "a", URL: "https://h/x", Events: []string{taskd.WebhookSubmitted}, Secret: "0123456789abcdef"},
	}}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := c.Webhooks[0]; w.Timeout != 10*time.Second || w.MaxAttempts != 25 || w.Concurrency != 4 || w.MaxAge != 72*time.Hour {
		t.Errorf("defaults not applied: %+v", w)
	}
	c.Webhooks[0].Events = []string{"done"}
	var ce *taskd.ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Key != "webhooks[0].events" {
		t.Errorf("unknown event: %v", err)
	}
}
