package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// Store is what the API reads of the pool and its editors, and the editor
// changes it makes that take no lock; everything about claims, and every
// write that wakes or revokes, goes through the dispatcher. The engine
// (package taskd) passes a value of its own, whose writes are the engine's;
// the package's tests pass the MySQL store itself.
type Store interface {
	CreateEditor(ctx context.Context, p tasks.CreateEditorParams) (*tasks.Editor, error)
	EditorByTokenHash(ctx context.Context, hash [32]byte) (*tasks.Editor, error)
	GetTask(ctx context.Context, id int64) (*tasks.Task, error)
	ListTasks(ctx context.Context, p tasks.ListParams) (*tasks.TaskPage, error)
	TaskEvents(ctx context.Context, p tasks.TaskEventsParams) (*tasks.EventPage, error)
	AcceptedResult(ctx context.Context, taskID int64) (*tasks.AcceptedResult, error)
	ClaimHolder(ctx context.Context, taskID, fence int64) (string, error)
	PoolStats(ctx context.Context, expiringWithin time.Duration) (*tasks.PoolStats, error)
	PausedCategories(ctx context.Context) ([]tasks.PausedCategory, error)

	ListEditors(ctx context.Context, p tasks.ListEditorsParams) (*tasks.EditorPage, error)
	GetEditorSummary(ctx context.Context, id int64) (*tasks.EditorSummary, error)
	GetEditorStats(ctx context.Context, id int64) (*tasks.EditorStats, error)
	UpdateEditor(ctx context.Context, p tasks.UpdateEditorParams) (*tasks.Editor, error)
	EnableEditor(ctx context.Context, id int64) error
	SetEditorToken(ctx context.Context, id int64, hash [32]byte) error
	HeldByEditor(ctx context.Context, editorID int64) (*tasks.Claim, error)
	EditorClaims(ctx context.Context, editorID int64) (*tasks.EditorClaims, error)
	EditorLoads(ctx context.Context, ids []int64) (map[int64]*tasks.EditorLoad, error)

	TaskResults(ctx context.Context, p tasks.TaskResultsParams) (*tasks.TaskResultPage, error)
	GroupTasks(ctx context.Context, groupID int64) ([]tasks.Task, error)
	GroupDecisions(ctx context.Context, groupID int64) (map[int64]string, error)
	Agreement(ctx context.Context, p tasks.AgreementParams) (*tasks.AgreementValues, error)
	RecordClaimTime(ctx context.Context, p tasks.ClaimTimeParams) (*tasks.ClaimTimeRecorded, error)
	WorkingTime(ctx context.Context, editorID int64, days int) (*tasks.WorkingTime, error)
	InstructionsStore
	GoldStore

	Results(ctx context.Context, p tasks.ResultsParams, fn func(*tasks.Result) error) (tasks.ResultsPage, error)
}

// Check is a readiness check run by GET /readyz, such as a ping of MySQL or
// Redis. It gets a context that ends after CheckTimeout.
type Check struct {
	// Name keys the check's result in the answer ("mysql", "redis").
	Name string
	// Check returns nil when the dependency is ready.
	Check func(ctx context.Context) error
}

// Defaults and limits.
const (
	// MaxBodyBytes is the largest request body accepted (1 MiB).
	MaxBodyBytes = 1 << 20
	// MaxTasksPerRequest is the most tasks one POST /v1/tasks may add.
	MaxTasksPerRequest = 10_000
	// MaxReasonLen is the longest release reason, in characters (the size of
	// the audit record's detail).
	MaxReasonLen = 1024
	// MinAdminTokenLen is the shortest admin token New accepts.
	MinAdminTokenLen = 16
	// CheckTimeout bounds each readiness check.
	CheckTimeout = 2 * time.Second
	// RetryAfter is the Retry-After of 503 answers, in seconds.
	RetryAfter = 2
	// RequestTimeoutDefault bounds a request's work when
	// Config.RequestTimeout is zero.
	RequestTimeoutDefault = 10 * time.Second
	// EditorCacheTTLDefault is how long an editor found by its token is
	// remembered when Config.EditorCacheTTL is zero.
	EditorCacheTTLDefault = 10 * time.Second
	// editorCacheMax bounds the editors remembered at once.
	editorCacheMax = 100_000
	// unknownTokensMax bounds the unknown token hashes remembered at once.
	unknownTokensMax = 10_000
)

// Config configures the API.
type Config struct {
	// Dispatcher hands out and fences claims. Required.
	Dispatcher *dispatcher.Dispatcher
	// Store reads the pool and the editors and makes the editor changes
	// that take no lock (the engine's own value; see Store). Required.
	Store Store
	// AdminToken authenticates the admin routes; at least MinAdminTokenLen
	// characters. It is compared in constant time. Required.
	AdminToken string
	// Checks are run by GET /readyz, concurrently, each bounded by
	// CheckTimeout.
	Checks []Check
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// MetricsToken, when set, is the bearer token GET /metrics needs (see
	// MetricsHandler); without it, /metrics is open to anyone who reaches
	// the API.
	MetricsToken string
	// WebhookBacklog, when set, reports the webhook backlog in GET /v1/stats
	// (typically the store's WebhookBacklog). Leave it nil without webhooks.
	WebhookBacklog func(ctx context.Context) (*tasks.WebhookBacklog, error)
	// Storage, when set, reports in GET /v1/stats the size of the tables
	// retention purges and the age of the oldest finished task kept
	// (typically the store's Storage, cached: it reads information_schema).
	Storage func(ctx context.Context) (*tasks.Storage, error)
	// History, when set, is read by GET /v1/stats/history (typically the
	// engine's activity.Recorder); without it that route answers 404.
	History History
	// Gold are the categories' gold rules, by category (see GoldStore): an
	// editor's claims of a category with a rate take a gold copy at that
	// rate. Nil: no gold tasks are served.
	Gold map[string]tasks.GoldRule
	// MaxWait caps wait_ms of POST /v1/assignments/next; larger values are
	// lowered to it. The dispatcher's own Config.MaxWait caps it too: give
	// both the same value. Default dispatcher.MaxWaitDefault.
	MaxWait time.Duration
	// RequestTimeout bounds the work of one request: a store that hangs (a
	// stopped server that keeps its connections open) makes the request 503
	// unavailable when it passes, instead of holding it forever. A long poll
	// gets its wait on top. Default RequestTimeoutDefault.
	RequestTimeout time.Duration
	// EditorCacheTTL is how long an editor found by its token is remembered,
	// so that its next requests need not read MySQL to authenticate, and a
	// token found to be nobody's (at most 10,000 of them), so that a wrong
	// token sent again costs no MySQL read either; a token this process makes
	// is never refused on the strength of that. A change
	// to an editor through this API (PATCH, disable, enable, a new token) shows
	// at once in this process; through another process, or made in the
	// database directly, within EditorCacheTTL. Negative turns the cache off.
	// Default EditorCacheTTLDefault.
	EditorCacheTTL time.Duration
	// Sessions, when set, ends an editor's page sessions when it is disabled
	// or given a new token (typically the web package's).
	Sessions Sessions
	// MaxPollsPerEditor bounds the long polls (POST /v1/assignments/next with a
	// wait) one editor holds open in this process: when it opens one more,
	// its oldest is answered 204 at once. Negative: no bound. Default
	// MaxPollsPerEditorDefault.
	MaxPollsPerEditor int
	// Redis, when set, keeps the counters of failed authentications, shared
	// by every replica that uses it with the same KeyPrefix: a client
	// address that sends more than AuthFailures wrong bearer tokens in
	// AuthFailureWindow is answered 429 until the window ends (see the
	// package documentation). Without it, nothing is throttled.
	Redis redis.Scripter
	// KeyPrefix starts the keys the API writes to Redis.
	KeyPrefix string
	// HeartbeatEvery is how often a client heartbeats a claim (the
	// workspace: a third of the lease). With Redis, the heartbeats that
	// carry active_ms are counted per claim, and the active time recorded
	// when the claim ends is at most tasks.ActiveBound of the count. Zero:
	// nothing is counted, and only the claim's wall time bounds it.
	HeartbeatEvery time.Duration
	// AuthFailures is how many wrong bearer tokens one client address may
	// send per AuthFailureWindow; negative turns throttling off. Default
	// AuthFailuresDefault.
	AuthFailures int
	// AuthFailureWindow is the window AuthFailures counts in: the first
	// failure starts it, and a blocked client waits for its end. Default
	// AuthFailureWindowDefault.
	AuthFailureWindow time.Duration
	// TrustedProxies are the networks of the proxies in front of taskd
	// (load balancers, TLS terminators). A request whose connection comes
	// from one of them counts its wrong tokens against the client its
	// X-Forwarded-For or Forwarded header names (the right-most hop that is
	// no trusted proxy); any other request counts them against its
	// connection's address, whatever its headers say. Default none: the
	// headers are never read.
	TrustedProxies []netip.Prefix
	// MeterProvider receives the API's metrics (taskd.auth.failures,
	// taskd.auth.throttled, taskd.editor.active). Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Logger receives the API's logs. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxWait == 0 {
		c.MaxWait = dispatcher.MaxWaitDefault
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = RequestTimeoutDefault
	}
	if c.EditorCacheTTL == 0 {
		c.EditorCacheTTL = EditorCacheTTLDefault
	}
	if c.MaxPollsPerEditor == 0 {
		c.MaxPollsPerEditor = MaxPollsPerEditorDefault
	}
	if c.AuthFailures == 0 {
		c.AuthFailures = AuthFailuresDefault
	}
	if c.AuthFailureWindow == 0 {
		c.AuthFailureWindow = AuthFailureWindowDefault
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks the handles, the admin token (MinAdminTokenLen, the
// engine's bound too) and the checks. The other values are the keys of
// taskd.Config.HTTP, the engine's to check, once, before New.
func (c Config) validate() error {
	switch {
	case c.Dispatcher == nil:
		return errors.New("dispatcher is required")
	case c.Store == nil:
		return errors.New("store is required")
	case len(c.AdminToken) < MinAdminTokenLen:
		return fmt.Errorf("admin token must be at least %d characters", MinAdminTokenLen)
	case c.MaxWait < 0:
		return fmt.Errorf("max wait must not be negative, got %v", c.MaxWait)
	}
	seen := make(map[string]bool, len(c.Checks))
	for i, ch := range c.Checks {
		switch {
		case ch.Name == "":
			return fmt.Errorf("check %d has no name", i)
		case ch.Check == nil:
			return fmt.Errorf("check %q has no function", ch.Name)
		case seen[ch.Name]:
			return fmt.Errorf("check %q is listed twice", ch.Name)
		}
		seen[ch.Name] = true
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("trusted proxy %d is not a valid network", i)
		}
	}
	return nil
}

// api holds what the handlers share.
type api struct {
	d         *dispatcher.Dispatcher
	store     Store
	adminHash [32]byte // SHA-256 of the admin token: compared in constant time
	opsKey    [32]byte // key of the ops sessions' MACs (AdminSessionMAC)
	sessions  Sessions // nil: no page sessions to end
	checks    []Check
	maxWait   time.Duration
	timeout   time.Duration // Config.RequestTimeout
	editors   *editorCache
	throttle  *throttle
	trusted   []netip.Prefix // Config.TrustedProxies
	polls     *polls
	backlog   func(ctx context.Context) (*tasks.WebhookBacklog, error) // nil without webhooks
	storage   func(ctx context.Context) (*tasks.Storage, error)        // nil: no storage in stats
	hist      History                                                  // nil without a history
	instr     instructionsCache
	// gold are the categories' gold rules; goldFloors, whether one has a
	// floor; goldFloat draws the gold mix (see goldDraw).
	gold       map[string]tasks.GoldRule
	goldFloors bool
	goldFloat  func() float64
	beats      redis.Scripter        // nil: heartbeats are not counted
	beatEvery  time.Duration         // Config.HeartbeatEvery
	active     metric.Float64Counter // taskd.editor.active: kept active time, by category
	keyPrefix  string                // Config.KeyPrefix
	log        *slog.Logger
	mux        *http.ServeMux
	drain      context.Context    // ended by Handler.Shutdown: long polls end
	endDrain   context.CancelFunc // ends drain
}

// New validates cfg and returns the API's router. Unknown paths are 404 and
// known paths with another method 405, both as JSON errors.
func New(cfg Config) (*Handler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	a := &api{
		d:         cfg.Dispatcher,
		store:     cfg.Store,
		adminHash: sha256.Sum256([]byte(cfg.AdminToken)),
		opsKey:    adminSessionMACKey(cfg.AdminToken),
		sessions:  cfg.Sessions,
		checks:    cfg.Checks,
		maxWait:   cfg.MaxWait,
		timeout:   cfg.RequestTimeout,
		editors:   newEditorCache(cfg.EditorCacheTTL, editorCacheMax, unknownTokensMax),
		polls:     newPolls(max(cfg.MaxPollsPerEditor, 0)),
		trusted:   maskAll(cfg.TrustedProxies),
		backlog:   cfg.WebhookBacklog,
		storage:   cfg.Storage,
		hist:      cfg.History,
		log:       cfg.Logger,
		mux:       http.NewServeMux(),
		beatEvery: cfg.HeartbeatEvery,
		keyPrefix: cfg.KeyPrefix,
	}
	if cfg.HeartbeatEvery > 0 {
		a.beats = cfg.Redis
	}
	a.gold, a.goldFloat = cfg.Gold, goldFloatDefault
	for _, g := range cfg.Gold {
		a.goldFloors = a.goldFloors || g.MinAccuracy > 0
	}
	var err error
	if a.throttle, err = newThrottle(cfg); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if a.active, err = newActiveCounter(cfg.MeterProvider); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	a.drain, a.endDrain = context.WithCancel(context.Background())
	var metrics http.Handler
	if cfg.Metrics != nil {
		metrics = a.metrics(cfg.Metrics, cfg.MetricsToken)
	}
	a.routes(metrics)
	return &Handler{a: a}, nil
}

// route is a pattern of the API's mux and its handler.
type route struct {
	pattern string
	handler http.Handler
}

// routeTable lists every route of the API; openapi.yaml describes each, and
// a test holds the two together.
func (a *api) routeTable(metrics http.Handler) []route {
	rs := []route{
		{"POST /v1/editors", a.admin(a.createEditor)},
		{"GET /v1/editors", a.admin(a.listEditors)},
		{"GET /v1/editors/{id}", a.admin(a.getEditor)},
		{"PATCH /v1/editors/{id}", a.admin(a.updateEditor)},
		{"POST /v1/editors/{id}/disable", a.admin(a.disableEditor)},
		{"POST /v1/editors/{id}/enable", a.admin(a.enableEditor)},
		{"POST /v1/editors/{id}/token", a.admin(a.newEditorToken)},
		{"GET /v1/editors/{id}/time", a.admin(a.editorTime)},
		{"POST /v1/tasks", a.admin(a.addTasks)},
		{"GET /v1/tasks", a.admin(a.listTasks)},
		{"GET /v1/tasks/{id}", a.admin(a.getTask)},
		{"GET /v1/tasks/{id}/events", a.admin(a.taskEvents)},
		{"GET /v1/tasks/{id}/results", a.admin(a.taskResults)},
		{"POST /v1/admin/tasks/{id}/release", a.admin(a.forceRelease)},
		{"POST /v1/admin/tasks/{id}/requeue", a.admin(a.requeueTask)},
		{"POST /v1/admin/tasks/{id}/cancel", a.admin(a.cancelTask)},
		{"POST /v1/admin/tasks/requeue", a.admin(a.requeueMatching)},
		{"POST /v1/admin/tasks/cancel", a.admin(a.cancelMatching)},
		{"POST /v1/admin/categories/{category}/pause", a.admin(a.pauseCategory)},
		{"POST /v1/admin/categories/{category}/resume", a.admin(a.resumeCategory)},
		{"GET /v1/admin/categories/paused", a.admin(a.pausedCategories)},
		{"GET /v1/admin/agreement", a.admin(a.agreement)},
		{"PUT /v1/admin/categories/{category}/instructions", a.admin(a.setInstructions)},
		{"PUT /v1/admin/tasks/{id}/gold", a.admin(a.markGold)},
		{"GET /v1/admin/gold", a.admin(a.goldAccuracy)},
		{"DELETE /v1/admin/gold/pauses/{editor}/{category}", a.admin(a.liftGoldPause)},
		{"GET /v1/admin/categories/{category}/instructions", a.admin(a.getInstructions)},
		{"GET /v1/admin/categories/{category}/instructions/versions", a.admin(a.instructionVersions)},
		{"GET /v1/stats", a.admin(a.stats)},
		{"GET /v1/stats/history", a.admin(a.history)},
		{"GET /v1/results", a.admin(a.results)},

		{"GET /v1/me", a.editor(a.me)},
		{"GET /v1/me/instructions", a.editor(a.myInstructions)},
		{"GET /v1/me/time", a.editor(a.myTime)},
		{"POST /v1/me/instructions/{category}/ack", a.editor(a.confirmInstructions)},

		{"GET /v1/assignments", a.editor(a.assignments)},
		{"POST /v1/assignments/next", a.longPoll(a.editor(a.next))},
		{"POST /v1/assignments/{task}/heartbeat", a.editor(a.heartbeat)},
		{"POST /v1/assignments/{task}/submit", a.editor(a.submit)},
		{"POST /v1/assignments/{task}/release", a.editor(a.release)},
		{"GET /v1/assignments/{task}/earlier", a.editor(a.earlier)},

		{"GET /v1/openapi.json", a.handle(a.openapi)},
		{"GET /healthz", a.handle(a.healthz)},
		{"GET /readyz", a.handle(a.readyz)},
	}
	if metrics != nil {
		rs = append(rs, route{"GET /metrics", metrics})
	}
	return rs
}

func (a *api) routes(metrics http.Handler) {
	for _, r := range a.routeTable(metrics) {
		a.mux.Handle(r.pattern, r.handler)
	}
}

// ServeHTTP routes r. The mux answers requests that match no route with plain
// text; those become JSON errors with the same status (and Allow header).
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern != "" {
		a.mux.ServeHTTP(w, r)
		return
	}
	rec := &statusRecorder{header: make(http.Header)}
	a.mux.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.status == http.StatusMethodNotAllowed {
		a.writeError(w, r, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	a.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no route for %s %s", r.Method, r.URL.Path))
}

// statusRecorder keeps the status and headers of the mux's own answer to an
// unrouted request, and drops its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header { return s.header }

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(b), nil
}
