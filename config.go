package taskd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/schedule"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/web"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Defaults of the keys that belong to the engine itself; a key that
// configures a part (the dispatcher, the store, the API, the pages, the
// workers, the webhooks, the telemetry) takes that part's XxxDefault
// constant in WithDefaults, so that each default is declared once, where it
// is used.
const (
	httpReadHeaderTimeoutDefault = 5 * time.Second
	httpReadTimeoutDefault       = 15 * time.Second
	httpWriteTimeoutDefault      = 90 * time.Second
	httpIdleTimeoutDefault       = 2 * time.Minute
	httpShutdownTimeoutDefault   = 30 * time.Second

	redisAddrDefault         = "127.0.0.1:6379"
	redisDialTimeoutDefault  = time.Second
	redisReadTimeoutDefault  = 500 * time.Millisecond
	redisWriteTimeoutDefault = 500 * time.Millisecond

	logLevelDefault  = "info"
	logFormatDefault = "text"

	insertTxWaitersDefault = 8
)

// Defaults that config.yaml gives the two keys whose zero value in Config
// means something else than their default: an empty HTTP.Addr is no
// listener, and a false Telemetry.Prometheus serves no metrics (an embedding
// program opens its own listeners and endpoints). The taskd command starts
// from them; an embedding program sets the fields itself.
const (
	// HTTPAddrDefault is http.addr when config.yaml does not set it.
	HTTPAddrDefault = "127.0.0.1:8080"
	// PrometheusDefault is telemetry.prometheus when config.yaml does not
	// set it: GET /metrics is served.
	PrometheusDefault = true
)

// Defaults of the telemetry keys whose unset value is nil in Config, so that
// their zero (a ratio of 0, false) can be said: WithDefaults applies them,
// in Go as in the file.
const (
	// SampleRatioDefault is Telemetry.SampleRatio (telemetry.sample_ratio)
	// when unset: every new trace is sampled.
	SampleRatioDefault = 1.0
	// KeepFailedDefault is Telemetry.KeepFailed (telemetry.keep_failed)
	// when unset: failed and refused requests are traced whatever the ratio.
	KeepFailedDefault = true
)

// Limits checked by Validate.
const (
	leaseTTLMin          = time.Second
	adminTokenMinLen     = api.MinAdminTokenLen
	keyPrefixMaxLen      = 64
	workerConcurrencyMax = 1024
	maxWaitMax           = 15 * time.Minute
	webhookSecretMinLen  = 16
	authFailuresMax      = 1_000_000
	maxPollsPerEditorMax = 1000
	insertTxWaitersMax   = 256
)

// workerFlushIntervalMax, workerMaxBacklogMax and workerMaxSnoozesMax bound
// worker.flush_interval, worker.max_backlog and worker.max_snoozes: an outcome
// waiting longer than a second for company, a million waiting for their write,
// or a task snoozing more than a million times, is a mistake.
const (
	workerFlushIntervalMax = time.Second
	workerMaxBacklogMax    = 1_000_000
	workerMaxSnoozesMax    = 1_000_000
)

// Config configures an Engine. Every section and key has the name it has in
// taskd's config.yaml (the yaml tags; one exception, Sweep.Schedule, is the
// key sweep.interval), and a zero value means the key's
// default, as in the file; WithDefaults applies them. Only MySQL.DSN has no
// default (unless WithDB passes a handle).
type Config struct {
	HTTP     HTTPConfig     `yaml:"http"`
	MySQL    MySQLConfig    `yaml:"mysql"`
	Redis    RedisConfig    `yaml:"redis"`
	Dispatch DispatchConfig `yaml:"dispatch"`
	Sweep    SweepConfig    `yaml:"sweep"`
	// Retention is how long finished data is kept; the sweeper purges what
	// is older.
	Retention RetentionConfig `yaml:"retention"`
	Worker    WorkerConfig    `yaml:"worker"`
	// AdminToken authorizes the admin API (creating editors and tasks, stats,
	// forced releases). At least 16 characters, no spaces. Without it the
	// engine serves no editor API: HTTPHandler answers only GET /healthz and GET
	// /metrics.
	AdminToken string          `yaml:"admin_token" secret:"true"`
	Log        LogConfig       `yaml:"log"`
	Telemetry  TelemetryConfig `yaml:"telemetry"`
	// MemoryLimitMiB is the soft memory limit of the taskd binary's process,
	// in MiB (Go's GOMEMLIMIT, which the binary sets with
	// debug.SetMemoryLimit at start): near it, the garbage collector runs
	// more often instead of letting the heap grow to twice what is live. A
	// long poll held open costs about 30 KiB (net/http's goroutines and
	// buffers for its connection, the request, the wait), so that the
	// collector's headroom is most of the memory of a process that holds
	// thousands. Keep it well above what is live: 100 MiB plus 32 KiB per
	// long poll. 0: none (GOMEMLIMIT from the environment stands). The
	// Engine does not set it: an embedding program sets its own.
	MemoryLimitMiB int `yaml:"memory_limit_mib"`
	// Schedules are periodic tasks: at each tick of a schedule, every replica
	// inserts the same task with the key "schedule:<name>:<tick, UTC, RFC
	// 3339>", so that each tick makes one task however many replicas run.
	Schedules []ScheduleConfig `yaml:"schedules"`
	// Webhooks are the HTTP endpoints the engine posts task events to. Each
	// event is written to an outbox in the transaction of the change it
	// reports, and only for the events some webhook subscribes to: without
	// webhooks, nothing is written. Default none.
	Webhooks []WebhookConfig `yaml:"webhooks"`
	// WebhookDelivery configures how webhooks are delivered.
	WebhookDelivery WebhookDeliveryConfig `yaml:"webhook_delivery"`
	// Categories are the editorial workflows of the categories that have
	// one: stages, overlap, weight, rate limit. A category not listed has
	// the default: one stage, one result per task, weight 1, no rate limit.
	Categories []CategoryConfig `yaml:"categories"`
}

// CategoryConfig is the workflow of one category (see Config.Categories).
type CategoryConfig struct {
	// Name is the category, as tasks and editors name it. Required, unique.
	Name string `yaml:"name"`
	// Stages are the stages a task of the category goes through, in order
	// (e.g. [edit, review]): a submit at one stage moves the task to the
	// next, and the task is done after the last. Editors may be limited to
	// some stages of a category, and nobody takes a stage of a task whose
	// earlier stage they did. At most 8 names of lowercase letters, digits,
	// '_' or '-'. A task inserted in the category gets them unless it names
	// its own. Default: one stage.
	Stages []string `yaml:"stages"`
	// Overlap is how many independent results a task of the category asks
	// for, each from a different editor, 1..9. Default 1.
	Overlap int `yaml:"overlap"`
	// SendBackHold is how long a task a reviewer sent back is offered only to
	// the editor who did the stage it goes back to; then to anyone. Default
	// 10m.
	SendBackHold time.Duration `yaml:"send_back_hold"`
	// MaxSendBacks is how many times one task may be sent back; a send back
	// past it is refused (422 send_back_limit) and the reviewer must approve
	// or decide otherwise. It bounds the results a task accumulates: at most
	// stages + 2 * max_send_backs. 1..1000. Default 10.
	MaxSendBacks int `yaml:"max_send_backs"`
	// Weight is the category's share of an editor's claims, relative to the
	// editor's other categories, when dispatch.fair_share is on: 1..1000.
	// Default 1.
	Weight int `yaml:"weight"`
	// RateLimit is the claims of the category per minute across every
	// replica, counted in Redis: spaced 60s/RateLimit apart on average, with
	// a burst of ceil(RateLimit/60) after an idle time. Default 0: none.
	RateLimit int `yaml:"rate_limit"`
	// AgreementField is what the results of an overlap group are compared
	// on when agreement between editors is measured (GET
	// /v1/admin/agreement, the console, taskd_agreement_alpha): the top-level
	// field of that name in the result object, its value as text. Default
	// "": each result's decision.
	AgreementField string `yaml:"agreement_field"`
	// AgreementMetric is "nominal" (values are labels: equal or not) or
	// "interval" (values are numbers: also measured by their distance).
	// Default nominal.
	AgreementMetric string `yaml:"agreement_metric"`
	// MaxInFlight is the most tasks of the category assigned at once across
	// every process, workers and editors alike, kept by the claims in MySQL
	// (see docs/library.md, "Limits across processes"). Every process must
	// have the same. 0..1,000,000; default 0: no limit.
	MaxInFlight int `yaml:"max_in_flight"`
	// KeyLimit is the most tasks of one limit key (a task's LimitKey) of the
	// category assigned at once across every process; tasks without a key
	// are not limited by it. 0..1,000,000; default 0: no limit per key.
	KeyLimit int `yaml:"key_limit"`
	// Instructions are the category's instructions to its editors, in
	// Markdown (at most 64 KiB), shown beside each task in the workspace.
	// Engine.Start makes them a new version when they differ from the
	// current one (one set through the API included): every editor of the
	// category then confirms them before its next claim of it. Default "":
	// the instructions are left as they are.
	Instructions string `yaml:"instructions"`
	// InstructionsFile is a file whose text is the category's Instructions,
	// read by Engine.Start (a relative path is relative to the process's
	// working directory): friendlier for long text. At most one of the two.
	InstructionsFile string `yaml:"instructions_file"`
	// Gold, when its Rule is set, is how the category's gold tasks (tasks
	// with a known answer) are mixed into its editors' claims and scored.
	// Default: none is served.
	Gold GoldConfig `yaml:"gold"`
	// Hedge offers a task an editor holds to one more editor of the category
	// when it nears its due_at and its holder went inactive: whoever submits
	// first wins, the other is refused (409 done_by_other). Default: off.
	Hedge HedgeConfig `yaml:"hedge"`
}

// GoldConfig is a category's gold rule (see CategoryConfig.Gold).
type GoldConfig struct {
	// Rule is "decision" (the submit's decision must match the answer's) or
	// "fields" (the result's Fields must, each as trimmed text). Required.
	Rule string `yaml:"rule"`
	// Fields are the result fields compared under rule fields.
	Fields []string `yaml:"fields"`
	// Rate is the share of an editor's new claims of the category that are
	// gold tasks, 0..1 (0.05: one in twenty, drawn at random per claim).
	// Default 0: gold tasks of the category are never served.
	Rate float64 `yaml:"rate"`
	// MinAccuracy, when above 0, is a floor 0..1: an editor whose last
	// MinAnswers gold answers of the category score under it is paused from
	// the category until an admin lifts the pause. Default 0: no floor.
	MinAccuracy float64 `yaml:"min_accuracy"`
	// MinAnswers is how many answers the floor judges (the last ones): an
	// editor with fewer is not judged. 1..1000; default 20 with a floor.
	MinAnswers int `yaml:"min_answers"`
}

// goldRule returns the store's form of g.
func (g GoldConfig) goldRule() tasks.GoldRule {
	n := g.MinAnswers
	if n == 0 && g.MinAccuracy > 0 {
		n = 20
	}
	return tasks.GoldRule{Rule: g.Rule, Fields: g.Fields, Rate: g.Rate, MinAccuracy: g.MinAccuracy, MinAnswers: n}
}

// goldRules returns the gold rules of the categories that have one.
func (c *Config) goldRules() map[string]tasks.GoldRule {
	var out map[string]tasks.GoldRule
	for _, cc := range c.Categories {
		if cc.Gold.Rule == "" {
			continue
		}
		if out == nil {
			out = make(map[string]tasks.GoldRule)
		}
		out[cc.Name] = cc.Gold.goldRule()
	}
	return out
}

// HedgeConfig is a category's hedged re-offers (see CategoryConfig.Hedge).
// Both durations are needed to turn them on; both zero (the default) is off.
type HedgeConfig struct {
	// BeforeDue is how close to its due_at a held task must be: e.g. 10m.
	BeforeDue time.Duration `yaml:"before_due"`
	// InactiveFor is how long its holder must have sent no heartbeat (the
	// workspace sends them only while visible and in use), at least 1s: e.g.
	// 2m.
	InactiveFor time.Duration `yaml:"inactive_for"`
}

// workflow returns the store's and the dispatcher's form of c.
func (c CategoryConfig) workflow() tasks.Workflow {
	return tasks.Workflow{
		Stages: c.Stages, Overlap: c.Overlap, SendBackHold: c.SendBackHold,
		MaxSendBacks: c.MaxSendBacks, Weight: c.Weight, RateLimit: c.RateLimit,
		AgreementField: c.AgreementField, AgreementInterval: c.AgreementMetric == "interval",
		MaxInFlight: c.MaxInFlight, KeyLimit: c.KeyLimit,
		Hedge: tasks.Hedge{BeforeDue: c.Hedge.BeforeDue, InactiveFor: c.Hedge.InactiveFor},
	}
}

// workflows returns the workflow of each category Config.Categories lists.
// limited says whether a category has a limit in flight.
func (c Config) limited() bool {
	for _, w := range c.workflows() {
		if w.Limited() {
			return true
		}
	}
	return false
}

func (c Config) workflows() map[string]tasks.Workflow {
	if len(c.Categories) == 0 {
		return nil
	}
	out := make(map[string]tasks.Workflow, len(c.Categories))
	for _, cc := range c.Categories {
		out[cc.Name] = cc.workflow()
	}
	return out
}

// ScheduleConfig is a periodic task (see Config.Schedules).
type ScheduleConfig struct {
	// Name names the schedule: 1..64 letters, digits, '-', '_' or '.',
	// unique. Required.
	Name string `yaml:"name"`
	// Spec is when: "@every 1h", "@daily", "0 30 6 * * MON-FRI" (cron, with
	// optional seconds, in UTC unless it starts with "CRON_TZ=Zone "); see
	// schedule.Parse. @every counts from the Unix epoch. Required.
	Spec string `yaml:"spec"`
	// Category, Title, Payload, Priority and LimitKey make the task, as in
	// POST /v1/tasks; Payload is a JSON object (nil: {}). LimitKey is the
	// task's key under its category's key_limit (default "": none).
	Category string         `yaml:"category"`
	Title    string         `yaml:"title"`
	Payload  map[string]any `yaml:"payload"`
	Priority int            `yaml:"priority"`
	LimitKey string         `yaml:"limit_key"`
}

// periodic returns the dispatcher's form of c.
func (c ScheduleConfig) periodic() (schedule.Periodic, error) {
	p := schedule.Periodic{Name: c.Name, Spec: c.Spec, Task: tasks.NewTask{
		Category: c.Category, Title: c.Title, Priority: c.Priority, LimitKey: c.LimitKey,
	}}
	if c.Payload != nil {
		data, err := json.Marshal(c.Payload)
		if err != nil {
			return p, fmt.Errorf("payload cannot be JSON: %w", err)
		}
		p.Task.Payload = data
	}
	return p, nil
}

// Webhook event names, the values of WebhookConfig.Events.
const (
	// WebhookSubmitted: a holder's result was accepted; the task is done.
	WebhookSubmitted = string(tasks.WebhookSubmitted)
	// WebhookDead: a holder reported a failure and no attempts are left.
	WebhookDead = string(tasks.WebhookDead)
	// WebhookExpired: a claim's lease passed and the task went back to the
	// pool (a sweep) or to a new claim (a takeover).
	WebhookExpired = string(tasks.WebhookExpired)
	// WebhookReleased: a claim was given back by its holder (also a skip)
	// or revoked by an operator.
	WebhookReleased = string(tasks.WebhookReleased)
)

// WebhookConfig is one webhook: where events of the listed kinds are
// posted, and the secret that signs them.
type WebhookConfig struct {
	// Name identifies the webhook in the delivery log, metrics and stats:
	// 1..64 letters, digits, '.', '_' or '-', unique. Renaming a webhook
	// leaves the deliveries under its old name undelivered.
	Name string `yaml:"name"`
	// URL is the absolute http or https URL events are posted to.
	URL string `yaml:"url"`
	// Events are the event kinds posted: submitted, dead, expired or
	// released; at least one.
	Events []string `yaml:"events"`
	// Secret is the HMAC-SHA256 key of the Taskd-Signature header: at least
	// 16 characters (see webhook.Verify).
	Secret string `yaml:"secret" secret:"true"`
	// Timeout bounds one POST, from connecting to reading the answer's
	// status. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// Concurrency is how many POSTs to this webhook may be in flight at
	// once, 1..256. Default 4.
	Concurrency int `yaml:"concurrency"`
	// MaxAttempts is how many POSTs a delivery gets before it is marked
	// failed, 1..1000. Default 25.
	MaxAttempts int `yaml:"max_attempts"`
	// MaxAge is how long after the event a delivery is still attempted; a
	// delivery that fails past it is marked failed. Default 72h.
	MaxAge time.Duration `yaml:"max_age"`
}

// WebhookDeliveryConfig configures the delivery of webhooks. One process
// at a time delivers, holding a lock on Redis.
type WebhookDeliveryConfig struct {
	// PollInterval is how often the delivering process looks for new events
	// and for deliveries due for a retry. At least 10ms. Default 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// LeaseTTL is the time to live of the delivery lock: a process that
	// loses it stops delivering within it, and when a delivering process
	// dies, another takes over within it. At least 1s. Default 10s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// Batch is how many events one poll fetches, 1..1000. Default 100.
	Batch int `yaml:"batch"`
	// BackoffBase and BackoffMax bound the wait before a retry: it doubles
	// from BackoffBase with each failed attempt up to BackoffMax, with
	// jitter. Defaults 1s and 10m.
	BackoffBase time.Duration `yaml:"backoff_base"`
	BackoffMax  time.Duration `yaml:"backoff_max"`
}

// HTTPConfig configures the HTTP API.
type HTTPConfig struct {
	// Addr is where Start listens and serves Handler (host:port; port 0
	// picks one, see Engine.Addr). Empty: no listener; mount Handler in a
	// server of your own. config.yaml's default is 127.0.0.1:8080
	// (HTTPAddrDefault).
	Addr string `yaml:"addr"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are those
	// of the engine's http.Server. WriteTimeout must exceed MaxWait +
	// RequestTimeout, or long polls could be cut off. Defaults 5s, 15s, 90s
	// and 2m.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// MaxWait caps the long poll of POST /v1/assignments/next, at most 15m.
	// Default 1m.
	MaxWait time.Duration `yaml:"max_wait"`
	// EditorCacheTTL is how long an editor found by its API token is
	// remembered, and a token found to be nobody's; negative turns the cache
	// off (every request's token is looked up in MySQL). Default 10s.
	EditorCacheTTL time.Duration `yaml:"editor_cache_ttl"`
	// RequestTimeout bounds a request's work (a long poll's: its wait plus
	// this): a store that hangs makes it 503 then. Default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// SessionIdle is how long a web page session (the editor's workspace
	// at /, and the ops console's at /ops) lives without a request: each
	// request made with it sets its end SessionIdle from then, never past
	// SessionLifetime after its sign-in. Sessions are kept in Redis, so
	// every replica shares them. Default 8h.
	SessionIdle time.Duration `yaml:"session_idle"`
	// SessionLifetime is how long a web page session (the workspace's or
	// the ops console's) lives at most, however much it is used; then its
	// browser signs in again. Default 24h.
	SessionLifetime time.Duration `yaml:"session_lifetime"`
	// SecureCookie marks the session cookie Secure even on plain HTTP: set
	// it behind a TLS-terminating proxy. Requests over TLS always get a
	// Secure cookie.
	SecureCookie bool `yaml:"secure_cookie"`
	// ShutdownTimeout bounds Stop's drain of in-flight requests; requests
	// still running then are cut off. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MetricsAddr, when set with Addr, is where Start serves GET /metrics
	// (and GET /healthz) instead of on Addr: a listener of its own, such as
	// one only the Prometheus server reaches (host:port). Empty: /metrics is
	// served on Addr with the API. `taskd work` uses worker.metrics_addr
	// instead.
	MetricsAddr string `yaml:"metrics_addr"`
	// MetricsToken, when set, is the bearer token GET /metrics needs,
	// wherever it is served (at least 16 characters); on Addr, wrong ones
	// count against the client's address with the other wrong tokens (see
	// AuthFailures). Empty: /metrics is open to anyone who reaches its
	// listener.
	MetricsToken string `yaml:"metrics_token" secret:"true"`
	// MaxPollsPerEditor bounds the long polls (POST /v1/assignments/next
	// with a wait) one editor holds open in one process: one more answers
	// its oldest 204 at once ("nothing now, ask again"). Negative: no bound.
	// Default 4.
	MaxPollsPerEditor int `yaml:"max_polls_per_editor"`
	// AuthFailures is how many wrong bearer tokens (at the API, at the
	// pages' sign-ins, or at GET /metrics) one client address may send per
	// AuthFailureWindow; past it the address's wrong tokens are answered 429
	// with Retry-After until the window ends, without a MySQL read, while its
	// right tokens are served. Counted in Redis, so shared by every replica.
	// The address is the connection's, or a trusted proxy's client (see
	// TrustedProxies); IPv6 addresses count by /64. Negative turns
	// throttling off. Default 20.
	AuthFailures int `yaml:"auth_failures"`
	// AuthFailureWindow is the window AuthFailures counts in, at least 1s.
	// Default 1m.
	AuthFailureWindow time.Duration `yaml:"auth_failure_window"`
	// TrustedProxies are the networks of the proxies in front of taskd, as
	// CIDRs ("10.0.0.0/8", "2001:db8::/32"; a bare address is one host).
	// From a connection of one of them, the client address that wrong
	// tokens count against is the right-most hop of X-Forwarded-For or
	// Forwarded that is none of them; from any other connection, the
	// connection's address, whatever the headers say. Default none.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// MySQLConfig configures the database.
type MySQLConfig struct {
	// DSN is a go-sql-driver/mysql DSN. Required unless WithDB passes a
	// handle. taskd forces clientFoundRows, parseTime and UTC whatever it
	// says.
	DSN string `yaml:"dsn" secret:"true"`
	// ReplicaDSN, when set, is a read replica of DSN's database. Candidate
	// reads and the operators' statistics go to it; claims and every write
	// stay on the primary. A stale candidate costs only a refused claim, and
	// a replica that fails, hangs or has no candidates is backed by the
	// primary. It must answer when the engine starts.
	ReplicaDSN string `yaml:"replica_dsn" secret:"true"`
}

// Server is the server and database the DSN names, "host:port/db", for
// messages: the DSN itself may hold a password and is never printed.
func (c MySQLConfig) Server() string { return server(c.DSN) }

func server(dsn string) string {
	// tcp(a,b,c): the nodes of a cluster, which ParseDSN does not take apart.
	if i := strings.Index(dsn, "@tcp("); i >= 0 {
		if j := strings.Index(dsn[i:], ")"); j > 0 && strings.Contains(dsn[i:i+j], ",") {
			list := dsn[i+len("@tcp(") : i+j]
			db := strings.TrimPrefix(dsn[i+j+1:], "/")
			if k := strings.IndexByte(db, '?'); k >= 0 {
				db = db[:k]
			}
			return list + "/" + db
		}
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Addr == "" {
		return "(address not parsed)"
	}
	return cfg.Addr + "/" + cfg.DBName
}

// RedisConfig configures the Redis servers the per-task locks live on.
type RedisConfig struct {
	// Addrs are host:port addresses. One address is a single server; several
	// are independent Redlock masters (an odd number, three or more), unless
	// Cluster is set. Default [127.0.0.1:6379].
	Addrs []string `yaml:"addrs"`
	// Cluster treats Addrs as seed nodes of one Redis Cluster.
	Cluster bool `yaml:"cluster"`
	// Username and Password authenticate (Redis ACL); both optional.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
	// DB is the database number; must be 0 with Cluster.
	DB int `yaml:"db"`
	// KeyPrefix starts every key taskd uses, so that several deployments can
	// share servers. Default "taskd:".
	KeyPrefix string `yaml:"key_prefix"`
	// NodeTimeout bounds each call to one Redlock master, at most a third of
	// Dispatch.LeaseTTL. Default 50ms.
	NodeTimeout time.Duration `yaml:"node_timeout"`
	// DialTimeout, ReadTimeout and WriteTimeout are the client's socket
	// timeouts; keep them small, a lock is only worth its lease. Defaults
	// 1s, 500ms and 500ms.
	DialTimeout  time.Duration `yaml:"dial_timeout"`
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// DispatchConfig configures claims.
type DispatchConfig struct {
	// LeaseTTL is how long a claim lives without a heartbeat; the Redis lock
	// of a claim has the same time to live. At least 1s. Default 30s.
	LeaseTTL time.Duration `yaml:"lease_ttl" env:"TASKD_LEASE_TTL"`
	// MaxHold caps how long heartbeats can keep one claim, at least
	// LeaseTTL. Default 2h.
	MaxHold time.Duration `yaml:"max_hold" env:"TASKD_MAX_HOLD"`
	// SkipFor is how long a task an editor skipped is not offered to that
	// editor again. Default 10m.
	SkipFor time.Duration `yaml:"skip_for"`
	// ReleaseCooldown is how long a task an editor released is not offered
	// to that editor again (others get it at once): one editor claims one
	// task at most once per cooldown, however fast it releases and asks
	// again. Default 1m.
	ReleaseCooldown time.Duration `yaml:"release_cooldown"`
	// Batch is how many candidates of a category one read fetches; the
	// process's claims share them, 1..1000. Default 64.
	Batch int `yaml:"batch"`
	// PollInterval is how often long polls look again without a wake-up:
	// one look per category per interval for the whole process (the oldest
	// waiting caller's), and more when it finds something. Default 5s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// GroupCommit is the most claimants' writes (claims, submits,
	// heartbeats) one MySQL transaction carries: those that arrive while one
	// is in flight go together in the next; one that finds none in flight
	// goes at once. 1 sends each alone. 1..1000, default 64.
	GroupCommit int `yaml:"group_commit"`
	// InsertTxWaiters is how many of the engine's MySQL connections may wait
	// at once for transactions that InsertTx and InsertManyTx wrote tasks in
	// to end, so that a commit wakes the waiting workers and long polls
	// (of every process) at once: each holds a connection while it waits,
	// and waits on the queued transactions in turn, a second at a time. A
	// transaction still open a minute after its insert, or one that finds
	// the queue of 1024 full, is found by the next poll (PollInterval); so
	// is every one on Galera, where another node's row locks do not block.
	// 1..256, default 8.
	InsertTxWaiters int `yaml:"insert_tx_waiters"`
	// FairShare shares each editor's claims among its categories by their
	// weights (Config.Categories), priority ordering the tasks within a
	// category, so that a large category cannot starve a small one. Off
	// (the default), an editor gets the best task of all its categories:
	// highest priority, then earliest due, then oldest.
	FairShare bool `yaml:"fair_share"`
}

// SweepConfig configures the sweeper that recycles expired claims.
type SweepConfig struct {
	// Schedule is when sweeps run, the key sweep.interval (the key keeps
	// its name, TASKD_SWEEP_INTERVAL too, for the deployments that set it):
	// a duration ("10s", every ten seconds) or a robfig/cron spec, a
	// descriptor ("@every 10s", "@hourly") or a cron expression with
	// optional seconds ("0 */5 * * * *"). Durations are whole seconds, at
	// least 1s. An abandoned claim is back in the pool within
	// Dispatch.LeaseTTL plus the longest time between two sweeps. Default
	// "10s".
	Schedule string `yaml:"interval"`
	// Batch is how many expired claims one transaction recycles, 1..10000.
	// Default 5000.
	Batch int `yaml:"batch"`
	// Workers is how many such transactions run at once while a backlog
	// drains, 1..16. Default 2.
	Workers int `yaml:"workers"`
}

// RetentionConfig says how long finished data is kept before the sweeper
// purges it, in small batches, one process at a time (under the sweep lock),
// never touching a pending or assigned task. Each duration counts from when
// the row finished (a task's done_at, a delivery's last attempt). A nil
// duration, unset, is its default; a duration of 0 keeps that kind forever:
// Done: new(time.Duration(0)). Negative durations are refused.
//
// The results feed (GET /v1/results, taskd export) loses the results of
// purged tasks: a reader must follow it within Done, or its cursor is
// answered 410 cursor_expired.
type RetentionConfig struct {
	// Done is how long done tasks are kept, with their results, events and
	// skips. Default 24h (sweeper.RetentionDoneDefault).
	Done *time.Duration `yaml:"done"`
	// Cancelled is how long cancelled tasks are kept. Default 24h.
	Cancelled *time.Duration `yaml:"cancelled"`
	// Dead is how long dead tasks are kept: longer, since an operator may
	// still requeue them. Default 168h (7 days).
	Dead *time.Duration `yaml:"dead"`
	// Webhooks is how long delivered and failed webhook deliveries are kept,
	// with their attempts and events. Default 168h (7 days).
	Webhooks *time.Duration `yaml:"webhooks"`
	// Batch is how many tasks (or deliveries) one purge transaction deletes
	// at most, 1..10000. Default 500.
	Batch int `yaml:"batch"`
}

// WorkerConfig configures the workers, which run when handlers are
// registered (WithHandler).
type WorkerConfig struct {
	// Concurrency is how many tasks one process runs at a time, at most
	// 1024. Default 4.
	Concurrency int `yaml:"concurrency"`
	// Categories the workers take tasks from. Default: every category with a
	// registered handler.
	Categories []string `yaml:"categories"`
	// ShutdownTimeout is how long running handlers may finish on Stop before
	// they are cancelled and their tasks given back. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// BatchSize is how many tasks a worker process claims in one round trip
	// per store at most (never more than its free slots), and how many
	// outcomes one completion transaction writes at most, 1..1000. Default
	// 500.
	BatchSize int `yaml:"batch_size"`
	// FlushInterval is how long a finished task's outcome may wait for
	// others to share its transaction while other handlers run, at most 1s.
	// Default 5ms; a negative value writes every outcome as soon as no write
	// is in flight.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// MaxBacklog bounds the outcomes waiting to be written: while that many
	// wait, the process claims nothing new, 1..1,000,000. Default 1000.
	MaxBacklog int `yaml:"max_backlog"`
	// MaxSnoozes is how many times a task may snooze (a handler's Snooze),
	// 1..1,000,000: its next snooze makes it dead. Default 100.
	MaxSnoozes int `yaml:"max_snoozes"`
	// InServe makes `taskd serve` and `taskd dev` register the binary's
	// built-in handlers (the example category wordcount), as `taskd work`
	// does, so that workers run in the API's process too. Only the taskd
	// command reads it: an embedded engine runs workers whenever handlers
	// are registered with WithHandler, whatever this says.
	InServe bool `yaml:"in_serve"`
	// MetricsAddr is where `taskd work` serves GET /healthz and GET /metrics
	// (host:port); empty: no listener. The engine itself does not read it.
	MetricsAddr string `yaml:"metrics_addr"`
}

// LogConfig configures the logs the engine writes to stderr when no
// WithLogger option is given.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// Logger returns a logger writing to w at c's level, in c's format. An
// unknown level is info (Validate refuses it). A line logged with a context
// inside a traced request or task carries the attributes trace_id and
// span_id.
func (c LogConfig) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts)))
}

// TelemetryConfig configures the OpenTelemetry providers the engine builds
// for itself: the tracer provider unless WithTracerProvider passes one, the
// meter provider and GET /metrics unless WithMeterProvider or
// WithMetricsHandler do. Stop flushes what the engine built.
type TelemetryConfig struct {
	// Traces is the span exporter: none, stdout, otlp-grpc or otlp-http.
	// Default none.
	Traces string `yaml:"traces"`
	// Endpoint is the OTLP collector: host:port, or a URL for otlp-http.
	// Empty means the exporter's default (OTEL_EXPORTER_OTLP_ENDPOINT, or
	// localhost).
	Endpoint string `yaml:"endpoint"`
	// Insecure sends OTLP in plaintext to a host:port Endpoint; without it,
	// TLS is used. A URL's scheme (http or https) decides on its own.
	Insecure bool `yaml:"insecure"`
	// ServiceName is the service.name resource attribute. Default "taskd".
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the fraction of new traces sampled, 0..1
	// (parent-based: a sampled parent is always followed). nil, unset, is
	// the default, 1 (SampleRatioDefault): every trace. To sample no new
	// trace, point at 0: SampleRatio: new(0.0) (with KeepFailed on, failed
	// and refused traces are still exported).
	SampleRatio *float64 `yaml:"sample_ratio"`
	// KeepFailed exports the traces that failed or were refused whatever
	// SampleRatio says: a trace the ratio did not choose is recorded all the
	// same and held in memory until its request, task run or sweep ends,
	// then exported whole if one of its spans failed (an error; a refused
	// write, such as a lost claim's 409; an HTTP answer 5xx, or 4xx other
	// than 404), and dropped otherwise. The cost is recording every span;
	// see telemetry.Config.KeepFailed. nil, unset, is the default, true
	// (KeepFailedDefault); KeepFailed: new(false) turns it off, leaving
	// SampleRatio alone to decide.
	KeepFailed *bool `yaml:"keep_failed"`
	// Prometheus records metrics with a meter provider of the engine's own,
	// read by the OpenTelemetry Prometheus exporter, and serves them on GET
	// /metrics (see Engine.HTTPHandler). A bool has no "unset": false is off
	// here, config.yaml's default is true (PrometheusDefault).
	Prometheus bool `yaml:"prometheus"`
	// TraceURL is the address of a trace in a tracing backend's view, an
	// http or https URL in which {trace_id} stands for the trace id (32 hex
	// digits), such as Jaeger's http://127.0.0.1:16686/trace/{trace_id}.
	// The ops console's task detail links each claim's trace id there.
	// Default empty: trace ids are shown as plain text.
	TraceURL string `yaml:"trace_url"`
}

// WithDefaults returns a copy of c with zero values set to their defaults
// (see each field), River's way: each default is the XxxDefault constant of
// the part that uses the key, declared there once; the nil
// Telemetry.SampleRatio and Telemetry.KeepFailed point at SampleRatioDefault
// and KeepFailedDefault. HTTP.Addr stays empty (no listener) and
// Telemetry.Prometheus false when unset; see HTTPAddrDefault. New applies it,
// then validates.
func (c Config) WithDefaults() Config {
	h := &c.HTTP
	setDefault(&h.ReadHeaderTimeout, httpReadHeaderTimeoutDefault)
	setDefault(&h.ReadTimeout, httpReadTimeoutDefault)
	setDefault(&h.WriteTimeout, httpWriteTimeoutDefault)
	setDefault(&h.IdleTimeout, httpIdleTimeoutDefault)
	setDefault(&h.ShutdownTimeout, httpShutdownTimeoutDefault)
	setDefault(&h.MaxWait, dispatcher.MaxWaitDefault)
	setDefault(&h.EditorCacheTTL, api.EditorCacheTTLDefault)
	setDefault(&h.RequestTimeout, api.RequestTimeoutDefault)
	setDefault(&h.MaxPollsPerEditor, api.MaxPollsPerEditorDefault)
	setDefault(&h.AuthFailures, api.AuthFailuresDefault)
	setDefault(&h.AuthFailureWindow, api.AuthFailureWindowDefault)
	setDefault(&h.SessionIdle, web.SessionIdleDefault)
	setDefault(&h.SessionLifetime, web.SessionLifetimeDefault)

	r := &c.Redis
	if len(r.Addrs) == 0 {
		r.Addrs = []string{redisAddrDefault}
	}
	r.Addrs = slices.Clone(r.Addrs)
	setDefault(&r.KeyPrefix, dispatcher.KeyPrefixDefault)
	setDefault(&r.NodeTimeout, locker.NodeTimeoutDefault)
	setDefault(&r.DialTimeout, redisDialTimeoutDefault)
	setDefault(&r.ReadTimeout, redisReadTimeoutDefault)
	setDefault(&r.WriteTimeout, redisWriteTimeoutDefault)

	d := &c.Dispatch
	setDefault(&d.LeaseTTL, dispatcher.LeaseDefault)
	setDefault(&d.Batch, dispatcher.BatchDefault)
	setDefault(&d.PollInterval, dispatcher.PollIntervalDefault)
	setDefault(&d.MaxHold, store.MaxHoldDefault)
	setDefault(&d.SkipFor, store.SkipForDefault)
	setDefault(&d.ReleaseCooldown, store.ReleaseCooldownDefault)
	setDefault(&d.GroupCommit, store.GroupCommitDefault)
	setDefault(&d.InsertTxWaiters, insertTxWaitersDefault)

	setDefault(&c.Sweep.Schedule, sweeper.ScheduleDefault)
	setDefault(&c.Sweep.Batch, sweeper.BatchDefault)
	setDefault(&c.Sweep.Workers, sweeper.WorkersDefault)
	rc := &c.Retention
	for _, d := range []struct {
		v   **time.Duration
		def time.Duration
	}{
		{&rc.Done, sweeper.RetentionDoneDefault},
		{&rc.Cancelled, sweeper.RetentionCancelledDefault},
		{&rc.Dead, sweeper.RetentionDeadDefault},
		{&rc.Webhooks, sweeper.RetentionWebhooksDefault},
	} {
		if *d.v == nil {
			*d.v = new(d.def)
		} else {
			*d.v = new(**d.v) // not shared with the caller's Config
		}
	}
	setDefault(&rc.Batch, sweeper.RetentionBatchDefault)

	setDefault(&c.Worker.Concurrency, worker.ConcurrencyDefault)
	setDefault(&c.Worker.ShutdownTimeout, worker.ShutdownTimeoutDefault)
	setDefault(&c.Worker.BatchSize, worker.BatchSizeDefault)
	setDefault(&c.Worker.FlushInterval, worker.FlushIntervalDefault)
	setDefault(&c.Worker.MaxBacklog, worker.MaxBacklogDefault)
	setDefault(&c.Worker.MaxSnoozes, worker.MaxSnoozesDefault)
	c.Worker.Categories = slices.Clone(c.Worker.Categories)
	c.Schedules = slices.Clone(c.Schedules)

	setDefault(&c.Log.Level, logLevelDefault)
	setDefault(&c.Log.Format, logFormatDefault)

	setDefault(&c.Telemetry.Traces, telemetry.TracesDefault)
	setDefault(&c.Telemetry.ServiceName, telemetry.ServiceNameDefault)
	if c.Telemetry.SampleRatio == nil {
		c.Telemetry.SampleRatio = new(SampleRatioDefault)
	}
	if c.Telemetry.KeepFailed == nil {
		c.Telemetry.KeepFailed = new(KeepFailedDefault)
	}

	c.Webhooks = slices.Clone(c.Webhooks)
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		w.Events = slices.Clone(w.Events)
		setDefault(&w.Timeout, delivery.TimeoutDefault)
		setDefault(&w.Concurrency, delivery.ConcurrencyDefault)
		setDefault(&w.MaxAttempts, delivery.MaxAttemptsDefault)
		setDefault(&w.MaxAge, delivery.MaxAgeDefault)
	}
	c.Categories = slices.Clone(c.Categories)
	for i := range c.Categories {
		cc := &c.Categories[i]
		cc.Stages = slices.Clone(cc.Stages)
		setDefault(&cc.Overlap, 1)
		setDefault(&cc.SendBackHold, tasks.SendBackHoldDefault)
		setDefault(&cc.MaxSendBacks, tasks.MaxSendBacksDefault)
		setDefault(&cc.Weight, 1)
	}
	wd := &c.WebhookDelivery
	setDefault(&wd.PollInterval, delivery.PollIntervalDefault)
	setDefault(&wd.LeaseTTL, delivery.LeaseTTLDefault)
	setDefault(&wd.Batch, delivery.BatchDefault)
	setDefault(&wd.BackoffBase, delivery.BackoffBaseDefault)
	setDefault(&wd.BackoffMax, delivery.BackoffMaxDefault)
	return c
}

// webhookEvents returns the event kinds some webhook subscribes to, for the
// store's outbox.
func (c Config) webhookEvents() []tasks.WebhookEvent {
	var evs []tasks.WebhookEvent
	for _, w := range c.Webhooks {
		for _, e := range w.Events {
			if ev := tasks.WebhookEvent(e); !slices.Contains(evs, ev) {
				evs = append(evs, ev)
			}
		}
	}
	return evs
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// ConfigError is a problem with one key of a Config, named by its dotted
// path as in config.yaml.
type ConfigError struct {
	// Key is the key's dotted path, e.g. "http.max_wait".
	Key string
	// Msg says what is wrong, e.g. "must be at least 100ms, got \"0s\"".
	Msg string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Msg }

// Validate checks every key of c as it is (apply WithDefaults first to
// check what an Engine would run with) and returns the problems found as
// *ConfigError values joined with errors.Join; nil means c is usable. New
// calls it.
func (c Config) Validate() error { return c.validate(true) }

// validate is Validate; without needDSN, an empty mysql.dsn is fine (a
// handle was passed).
func (c Config) validate(needDSN bool) error {
	v := &validator{c: &c}
	v.http()
	v.mysql(needDSN)
	v.dispatch()
	v.redis()
	v.sweep()
	v.retention()
	v.worker()
	v.misc()
	v.schedules()
	v.webhooks()
	v.categories()
	return errors.Join(v.errs...)
}

// schedules checks each schedule, naming it by its index ("schedules[2].spec").
func (v *validator) schedules() {
	seen := map[string]int{}
	for i, sc := range v.c.Schedules {
		key := func(field string) string { return fmt.Sprintf("schedules[%d].%s", i, field) }
		p, err := sc.periodic()
		if err != nil {
			v.fail(key("payload"), "%v", err)
			continue
		}
		if j, dup := seen[sc.Name]; dup && sc.Name != "" {
			v.fail(key("name"), "%q is the name of schedules[%d] too; names must be unique", sc.Name, j)
		}
		seen[sc.Name] = i
		if err := p.Validate(); err != nil {
			field := "task"
			msg := strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": ")
			switch {
			case strings.HasPrefix(err.Error(), "name"):
				field = "name"
			case strings.HasPrefix(err.Error(), "schedule"):
				field = "spec"
			default:
				for _, f := range []string{"category", "title", "payload", "priority", "limit_key"} {
					if strings.HasPrefix(msg, f) {
						field = f
					}
				}
			}
			v.fail(key(field), "%s", msg)
		}
	}
}

// categories checks each category's workflow, naming it by its index
// ("categories[1].stages").
func (v *validator) categories() {
	seen := map[string]int{}
	for i, cc := range v.c.Categories {
		key := func(field string) string { return fmt.Sprintf("categories[%d].%s", i, field) }
		if err := tasks.CheckCategory(cc.Name); err != nil {
			v.fail(key("name"), "%s", strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": category "))
		} else if j, dup := seen[cc.Name]; dup {
			v.fail(key("name"), "%q is the name of categories[%d] too; names must be unique", cc.Name, j)
		}
		seen[cc.Name] = i
		if err := tasks.CheckStages(cc.Stages); err != nil {
			v.fail(key("stages"), "%s", strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
		}
		v.between(key("overlap"), cc.Overlap, 1, tasks.MaxOverlap)
		v.atLeast(key("send_back_hold"), cc.SendBackHold, time.Second)
		v.between(key("max_send_backs"), cc.MaxSendBacks, 1, tasks.MaxSendBacksMax)
		v.between(key("weight"), cc.Weight, 1, tasks.MaxWeight)
		v.between(key("rate_limit"), cc.RateLimit, 0, 1_000_000)
		if cc.AgreementField != "" {
			if err := tasks.CheckAgreementField(cc.AgreementField); err != nil {
				v.fail(key("agreement_field"), "%s", strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": agreement_field "))
			}
		}
		if m := cc.AgreementMetric; m != "" && m != "nominal" && m != "interval" {
			v.fail(key("agreement_metric"), "must be nominal or interval, not %q", m)
		}
		v.between(key("max_in_flight"), cc.MaxInFlight, 0, tasks.MaxInFlightMax)
		v.between(key("key_limit"), cc.KeyLimit, 0, tasks.MaxInFlightMax)
		if cc.Instructions != "" && cc.InstructionsFile != "" {
			v.fail(key("instructions_file"), "give instructions or instructions_file, not both")
		}
		if err := cc.workflow().Hedge.Check(); err != nil {
			v.fail(key("hedge"), "%s", strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": hedge "))
		}
		if err := tasks.CheckInstructions(cc.Instructions); err != nil {
			v.fail(key("instructions"), "%s", strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": instructions "))
		}
		if g := cc.Gold; g.Rule != "" || len(g.Fields) > 0 || g.Rate != 0 || g.MinAccuracy != 0 || g.MinAnswers != 0 {
			if err := cc.Gold.goldRule().Check(); err != nil {
				v.fail(key("gold"), "%s", strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
			}
		}
	}
}

type validator struct {
	c    *Config
	errs []error
}

func (v *validator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// atLeast checks a duration's lower bound.
func (v *validator) atLeast(key string, d, lower time.Duration) bool {
	if d < lower {
		v.fail(key, "must be at least %v, got %q", lower, d.String())
		return false
	}
	return true
}

// between checks an integer's bounds.
func (v *validator) between(key string, n, lower, upper int) {
	if n < lower || n > upper {
		v.fail(key, "must be %d..%d, got %d", lower, upper, n)
	}
}

func (v *validator) http() {
	h := v.c.HTTP
	if h.Addr != "" {
		if err := checkHostPort(h.Addr, true); err != nil {
			v.fail("http.addr", "%v", err)
		}
	}
	v.atLeast("http.read_header_timeout", h.ReadHeaderTimeout, 100*time.Millisecond)
	v.atLeast("http.read_timeout", h.ReadTimeout, 100*time.Millisecond)
	v.atLeast("http.idle_timeout", h.IdleTimeout, 100*time.Millisecond)
	v.atLeast("http.shutdown_timeout", h.ShutdownTimeout, 0)
	if v.atLeast("http.max_wait", h.MaxWait, 100*time.Millisecond) && h.MaxWait > maxWaitMax {
		v.fail("http.max_wait", "must be at most %v, got %q", maxWaitMax, h.MaxWait.String())
	}
	v.atLeast("http.request_timeout", h.RequestTimeout, 100*time.Millisecond)
	v.atLeast("http.session_idle", h.SessionIdle, time.Second)
	v.atLeast("http.session_lifetime", h.SessionLifetime, time.Second)
	if h.MetricsAddr != "" {
		if err := checkHostPort(h.MetricsAddr, true); err != nil {
			v.fail("http.metrics_addr", "%v", err)
		} else if h.MetricsAddr == h.Addr && !strings.HasSuffix(h.Addr, ":0") {
			v.fail("http.metrics_addr", "must differ from http.addr (%s), or be empty to serve /metrics there", h.Addr)
		}
	}
	if t := h.MetricsToken; t != "" {
		if n := utf8.RuneCountInString(t); n < adminTokenMinLen || !utf8.ValidString(t) {
			v.fail("http.metrics_token", "must be at least %d characters, got %d", adminTokenMinLen, n)
		} else if strings.IndexFunc(t, unicode.IsSpace) >= 0 {
			v.fail("http.metrics_token", "must not contain spaces")
		}
	}
	if h.MaxPollsPerEditor > maxPollsPerEditorMax {
		v.fail("http.max_polls_per_editor", "must be at most %d (negative: no bound), got %d", maxPollsPerEditorMax, h.MaxPollsPerEditor)
	}
	if h.AuthFailures > authFailuresMax {
		v.fail("http.auth_failures", "must be at most %d (negative turns throttling off), got %d", authFailuresMax, h.AuthFailures)
	}
	v.atLeast("http.auth_failure_window", h.AuthFailureWindow, time.Second)
	for _, p := range h.TrustedProxies {
		if _, err := parseTrustedProxy(p); err != nil {
			v.fail("http.trusted_proxies", "%v", err)
		}
	}
	// A response to a long poll is written when the wait ends, or when the
	// request's time runs out a request timeout later; the write timeout
	// counts from the end of the request's headers.
	if h.WriteTimeout <= h.MaxWait+h.RequestTimeout {
		v.fail("http.write_timeout", "must be greater than http.max_wait + http.request_timeout (%v), got %q",
			h.MaxWait+h.RequestTimeout, h.WriteTimeout.String())
	}
}

func (v *validator) mysql(needDSN bool) {
	dsn := v.c.MySQL.DSN
	if strings.TrimSpace(dsn) == "" {
		if needDSN {
			v.fail("mysql.dsn", "must be set, e.g. user:password@tcp(127.0.0.1:3306)/taskd")
		}
		return
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		v.fail("mysql.dsn", "not a valid DSN: %v", err)
	}
	if r := v.c.MySQL.ReplicaDSN; strings.TrimSpace(r) != "" {
		if _, err := mysql.ParseDSN(r); err != nil {
			v.fail("mysql.replica_dsn", "not a valid DSN: %v", err)
		}
	}
}

func (v *validator) redis() {
	r := v.c.Redis
	switch {
	case len(r.Addrs) == 0:
		v.fail("redis.addrs", "must list at least one host:port")
	case r.mode() == redisRedlock && (len(r.Addrs) < 3 || len(r.Addrs)%2 == 0):
		v.fail("redis.addrs", "Redlock needs an odd number of independent masters, three or more, got %d (set redis.cluster for a Cluster)", len(r.Addrs))
	}
	seen := map[string]bool{}
	for _, a := range r.Addrs {
		if err := checkHostPort(a, false); err != nil {
			v.fail("redis.addrs", "%q: %v", a, err)
		} else if seen[a] {
			v.fail("redis.addrs", "%q is listed twice", a)
		}
		seen[a] = true
	}
	if r.DB < 0 {
		v.fail("redis.db", "must not be negative, got %d", r.DB)
	} else if r.Cluster && r.DB != 0 {
		v.fail("redis.db", "must be 0 with redis.cluster, got %d", r.DB)
	}
	switch p := r.KeyPrefix; {
	case p == "" || utf8.RuneCountInString(p) > keyPrefixMaxLen || !utf8.ValidString(p):
		v.fail("redis.key_prefix", "must be 1..%d characters, got %q", keyPrefixMaxLen, p)
	case strings.ContainsAny(p, "{}*?[]\\") || strings.IndexFunc(p, unicode.IsSpace) >= 0:
		// Braces would change the hash slot on a Cluster; glob characters
		// would break the sweeper's scan for orphaned locks.
		v.fail("redis.key_prefix", "must not contain spaces, braces or glob characters, got %q", p)
	}
	if v.atLeast("redis.node_timeout", r.NodeTimeout, time.Millisecond) && v.c.Dispatch.LeaseTTL >= leaseTTLMin &&
		r.NodeTimeout > v.c.Dispatch.LeaseTTL/3 {
		v.fail("redis.node_timeout", "must be at most a third of dispatch.lease_ttl (%v), got %q", v.c.Dispatch.LeaseTTL/3, r.NodeTimeout.String())
	}
	v.atLeast("redis.dial_timeout", r.DialTimeout, time.Millisecond)
	v.atLeast("redis.read_timeout", r.ReadTimeout, time.Millisecond)
	v.atLeast("redis.write_timeout", r.WriteTimeout, time.Millisecond)
}

func (v *validator) dispatch() {
	d := v.c.Dispatch
	v.atLeast("dispatch.lease_ttl", d.LeaseTTL, leaseTTLMin)
	if d.MaxHold < d.LeaseTTL {
		v.fail("dispatch.max_hold", "must be at least dispatch.lease_ttl (%v), got %q", d.LeaseTTL, d.MaxHold.String())
	}
	v.atLeast("dispatch.skip_for", d.SkipFor, time.Second)
	v.atLeast("dispatch.release_cooldown", d.ReleaseCooldown, time.Second)
	v.between("dispatch.batch", d.Batch, 1, tasks.CandidatesLimitMax)
	v.between("dispatch.group_commit", d.GroupCommit, 1, store.GroupCommitMax)
	v.atLeast("dispatch.poll_interval", d.PollInterval, 100*time.Millisecond)
	v.between("dispatch.insert_tx_waiters", d.InsertTxWaiters, 1, insertTxWaitersMax)
}

func (v *validator) sweep() {
	s := v.c.Sweep
	if _, err := schedule.Parse(s.Schedule); err != nil {
		v.fail("sweep.interval", "%v", err)
	}
	v.between("sweep.batch", s.Batch, 1, sweeper.BatchMax)
	v.between("sweep.workers", s.Workers, 1, sweeper.WorkersMax)
}

func (v *validator) retention() {
	r := v.c.Retention
	for _, d := range []struct {
		key string
		v   *time.Duration
	}{{"retention.done", r.Done}, {"retention.cancelled", r.Cancelled}, {"retention.dead", r.Dead}, {"retention.webhooks", r.Webhooks}} {
		if d.v != nil && *d.v < 0 {
			v.fail(d.key, "must not be negative (0 keeps forever), got %q", d.v.String())
		}
	}
	v.between("retention.batch", r.Batch, 1, store.PurgeLimitMax)
}

func (v *validator) worker() {
	w := v.c.Worker
	v.between("worker.concurrency", w.Concurrency, 1, workerConcurrencyMax)
	v.atLeast("worker.shutdown_timeout", w.ShutdownTimeout, 0)
	v.between("worker.batch_size", w.BatchSize, 1, tasks.BatchMax)
	if w.FlushInterval > workerFlushIntervalMax {
		v.fail("worker.flush_interval", "must be at most %v, got %q", workerFlushIntervalMax, w.FlushInterval.String())
	}
	v.between("worker.max_backlog", w.MaxBacklog, 1, workerMaxBacklogMax)
	v.between("worker.max_snoozes", w.MaxSnoozes, 1, workerMaxSnoozesMax)
	if w.MetricsAddr != "" {
		if err := checkHostPort(w.MetricsAddr, true); err != nil {
			v.fail("worker.metrics_addr", "%v", err)
		}
	}
	if len(w.Categories) > tasks.MaxCategories {
		v.fail("worker.categories", "at most %d categories, got %d", tasks.MaxCategories, len(w.Categories))
	}
	for i, cat := range w.Categories {
		if err := tasks.CheckCategory(cat); err != nil {
			v.fail("worker.categories", "%q: %s", cat, strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
		} else if slices.Contains(w.Categories[:i], cat) {
			v.fail("worker.categories", "%q is listed twice", cat)
		}
	}
}

func (v *validator) misc() {
	if t := v.c.AdminToken; t != "" {
		if n := utf8.RuneCountInString(t); n < adminTokenMinLen || !utf8.ValidString(t) {
			v.fail("admin_token", "must be at least %d characters, got %d", adminTokenMinLen, n)
		} else if strings.IndexFunc(t, unicode.IsSpace) >= 0 {
			v.fail("admin_token", "must not contain spaces")
		}
	}

	if v.c.MemoryLimitMiB < 0 {
		v.fail("memory_limit_mib", "must not be negative, got %d", v.c.MemoryLimitMiB)
	}
	switch l := v.c.Log.Level; strings.ToLower(l) {
	case "debug", "info", "warn", "error":
	default:
		v.fail("log.level", "must be debug, info, warn or error, got %q", l)
	}
	switch f := v.c.Log.Format; f {
	case "text", "json":
	default:
		v.fail("log.format", "must be text or json, got %q", f)
	}

	t := v.c.Telemetry
	switch t.Traces {
	case telemetry.TracesNone, telemetry.TracesStdout:
	case telemetry.TracesOTLPGRPC, telemetry.TracesOTLPHTTP:
		if t.Endpoint != "" {
			if err := checkEndpoint(t.Endpoint); err != nil {
				v.fail("telemetry.endpoint", "%v", err)
			}
		}
	default:
		v.fail("telemetry.traces", "must be none, stdout, otlp-grpc or otlp-http, got %q", t.Traces)
	}
	if strings.TrimSpace(t.ServiceName) == "" || !utf8.ValidString(t.ServiceName) {
		v.fail("telemetry.service_name", "must be set")
	}
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		v.fail("telemetry.sample_ratio", "must be 0..1, got %v", *r)
	}
	if t.TraceURL != "" {
		if err := checkTraceURL(t.TraceURL); err != nil {
			v.fail("telemetry.trace_url", "%v", err)
		}
	}
}

// checkTraceURL checks telemetry.trace_url: an absolute http or https URL
// with a host, in which {trace_id} appears.
func checkTraceURL(s string) error {
	if !strings.Contains(s, "{trace_id}") {
		return fmt.Errorf("must contain {trace_id}, got %q", s)
	}
	u, err := url.Parse(strings.ReplaceAll(s, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an http or https URL, got %q", s)
	}
	return nil
}

// parseTrustedProxy parses an item of http.trusted_proxies: a CIDR, or an
// IP address standing for its own host.
func parseTrustedProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("must be CIDRs such as 10.0.0.0/8 or 2001:db8::/32, got %q", s)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("must be CIDRs such as 10.0.0.0/8 or 2001:db8::/32, got %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// trustedProxies returns http.trusted_proxies as networks. Validate has
// checked them; an item that is none anyway is left invalid, for the API to
// refuse.
func trustedProxies(items []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range items {
		p, _ := parseTrustedProxy(s)
		out = append(out, p)
	}
	return out
}

// checkHostPort checks a host:port address. The host may be empty (all
// interfaces) only when emptyHost is set; the port must be a number.
func checkHostPort(addr string, emptyHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	if host == "" && !emptyHost {
		return fmt.Errorf("must name a host, got %q", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port must be a number 0..65535, got %q", port)
	}
	return nil
}

// checkEndpoint accepts host:port or an http(s) URL with a host.
func checkEndpoint(e string) error {
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("must be host:port or an http(s) URL, got %q", e)
		}
		return nil
	}
	return checkHostPort(e, false)
}

func (v *validator) webhooks() {
	names := map[string]int{}
	for i, w := range v.c.Webhooks {
		key := func(field string) string { return fmt.Sprintf("webhooks[%d].%s", i, field) }
		switch {
		case w.Name == "":
			v.fail(key("name"), "must be set")
		case len(w.Name) > tasks.MaxWebhookNameLen || strings.IndexFunc(w.Name, notNameRune) >= 0:
			v.fail(key("name"), "must be 1..%d letters, digits, '.', '_' or '-', got %q", tasks.MaxWebhookNameLen, w.Name)
		default:
			if j, dup := names[w.Name]; dup {
				v.fail(key("name"), "%q is also the name of webhooks[%d]", w.Name, j)
			}
			names[w.Name] = i
		}
		if err := checkWebhookURL(w.URL); err != nil {
			v.fail(key("url"), "%v", err)
		}
		if len(w.Events) == 0 {
			v.fail(key("events"), "must list at least one of submitted, dead, expired, released")
		}
		for j, e := range w.Events {
			switch {
			case !slices.Contains(tasks.WebhookEvents(), tasks.WebhookEvent(e)):
				v.fail(key("events"), "unknown event %q (want submitted, dead, expired or released)", e)
			case slices.Contains(w.Events[:j], e):
				v.fail(key("events"), "%q is listed twice", e)
			}
		}
		// The secret itself is never quoted.
		if n := utf8.RuneCountInString(w.Secret); n < webhookSecretMinLen || !utf8.ValidString(w.Secret) {
			v.fail(key("secret"), "must be at least %d characters, got %d", webhookSecretMinLen, n)
		}
		v.atLeast(key("timeout"), w.Timeout, 10*time.Millisecond)
		v.between(key("concurrency"), w.Concurrency, 1, 256)
		v.between(key("max_attempts"), w.MaxAttempts, 1, 1000)
		v.atLeast(key("max_age"), w.MaxAge, time.Second)
	}
	d := v.c.WebhookDelivery
	v.atLeast("webhook_delivery.poll_interval", d.PollInterval, 10*time.Millisecond)
	v.atLeast("webhook_delivery.lease_ttl", d.LeaseTTL, time.Second)
	v.between("webhook_delivery.batch", d.Batch, 1, tasks.FanOutLimitMax)
	if v.atLeast("webhook_delivery.backoff_base", d.BackoffBase, time.Millisecond) && d.BackoffMax < d.BackoffBase {
		v.fail("webhook_delivery.backoff_max", "must be at least webhook_delivery.backoff_base (%v), got %q", d.BackoffBase, d.BackoffMax.String())
	}
}

// notNameRune reports whether r may not appear in a webhook's name.
func notNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

// checkWebhookURL accepts an absolute http(s) URL with a host and no user
// information (it would be sent with every event).
func checkWebhookURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("must be set, e.g. https://example.com/hooks/taskd")
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an http or https URL, got %q", s)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("must name a host, got %q", s)
	case u.User != nil:
		return errors.New("must not hold a user or password")
	case u.Fragment != "":
		return fmt.Errorf("must not have a fragment, got %q", s)
	}
	return nil
}
