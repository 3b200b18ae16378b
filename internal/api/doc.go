// Package api is taskd's HTTP API: editors ask for assignments, keep them alive
// and hand them in; an operator (the admin token) creates editors, adds tasks and
// watches the pool. New returns the router; the caller owns the http.Server.
//
// It sits beside internal/web, the pages, which serve the editor's workspace
// and the ops console in front of it and run its handlers for signed-in
// browsers. The engine (package taskd, Engine.HTTPHandler) builds both. The
// API reaches the pool through the interfaces it declares (Store, History,
// Sessions) and the dispatcher, never through the MySQL store: the engine
// passes values of its own, so that every write takes the engine's locks and
// sends its wake-ups. The JSON of a new task and of a result line is package
// internal/wire's, which `taskd import` and `taskd export` read and write too,
// with the workflow's fields (a task's stages and overlap, a result's stage,
// decision and notes) added here.
// openapi.yaml describes every route, and GET /v1/openapi.json serves it.
//
// # Routes
//
//	POST /v1/editors                      admin   {name, categories, capacity?, stages?} → 201 {id, name, categories,
//	                                              capacity, stages?, token}
//	GET  /v1/editors?limit=&cursor=       admin   → 200 {editors, next_cursor}
//	GET  /v1/editors/{id}                 admin   → 200 the editor as listed, with its stats
//	PATCH /v1/editors/{id}                admin   {name?, categories?, capacity?, stages?} → 200 as GET
//	POST /v1/editors/{id}/disable         admin   → 200 as GET, with released: {task_id, fence} or null
//	                                              (and released_all when it revoked several)
//	POST /v1/editors/{id}/enable          admin   → 200 as GET
//	POST /v1/editors/{id}/token           admin   → 200 {id, token}: a new token, once; the old one is refused
//	GET  /v1/editors/{id}/time?days=      admin   → 200 {editor_id, days, since, total, categories, daily}: working time
//	POST /v1/tasks                        admin   [{category, priority, title, payload?, max_attempts?, key?, run_after?, due_at?,
//	                                              stages?, overlap?}]
//	                                              → 201 (200 when every key existed) {ids, tasks: [{id, created, slots?}], created, existing}
//	GET  /v1/tasks                        admin   ?status&category&holder&editor_id&key&created_after&created_before
//	                                              &done_after&done_before&order&limit&cursor → 200 {tasks, next_cursor}
//	GET  /v1/tasks/{id}                   admin   → 200 the task, its claim state, its accepted result and its latest
//	                                              50 events {…, history, history_more, history_before}, with results
//	                                              (and group) for a task with stages or of a group
//	GET  /v1/tasks/{id}/events?before=&limit=  admin  → 200 {events, more, before}: older events, a page at a time
//	POST /v1/admin/tasks/{id}/release     admin   → 204 (force release: the fence is bumped)
//	POST /v1/admin/tasks/{id}/requeue     admin   {reason?} → 204 (dead → pending, attempts reset)
//	POST /v1/admin/tasks/{id}/cancel      admin   {reason?} → 204 (pending or assigned → cancelled; an
//	                                              assigned task's claim ends, its holder is told task_cancelled)
//	POST /v1/admin/tasks/requeue          admin   {category?, ids?, created_before?, limit?, reason?, dry_run?} → 200 {matched, changed, more, ids?}
//	POST /v1/admin/tasks/cancel           admin   {category?, ids?, created_before?, limit?, reason?, dry_run?} → 200 {matched, changed, more, ids?}
//	POST /v1/admin/categories/{category}/pause  admin  → 200 {category, paused, paused_at, changed}
//	POST /v1/admin/categories/{category}/resume admin  → 200 {category, paused, paused_at, changed}
//	GET  /v1/admin/categories/paused      admin   → 200 {paused: [{category, paused_at}]}
//	PUT  /v1/admin/categories/{category}/instructions  admin  {markdown} → 200 {category, version, markdown, html, source,
//	                                              created_at, changed} (a new version unless the text is the current one's)
//	GET  /v1/admin/categories/{category}/instructions?version=  admin  → 200 {category, version, markdown, html, source, created_at}
//	GET  /v1/admin/categories/{category}/instructions/versions  admin  → 200 {category, versions: [{version, source, created_at}]}
//	GET  /v1/admin/agreement              admin   ?category&since&until&limit → 200 {category, since, until, field, values,
//	                                              truncated, units, pairable_values, alpha: {nominal, interval?}, editors, pairs}
//	GET  /v1/stats                        admin   → 200 counts by status and category (and by stage), claims, paused
//	GET  /v1/stats/history?minutes=       admin   → 200 {minutes: [{start, claims, submits, next_p50_ms, next_p99_ms}], total, flush_interval_ms}
//	GET  /v1/results?after=&limit=        admin   → 200 accepted results as JSON lines, then {next_cursor, count, more}
//	GET  /v1/me                           editor  → 200 {id, name, categories, created_at, capacity, stages?, assignment, today,
//	                                              all_time, median…, last_active_at}
//	GET  /v1/me/instructions              editor  → 200 {instructions: [{category, version, confirmed_version, pending, html, created_at}]}
//	GET  /v1/me/time?days=                editor  → 200 as GET /v1/editors/{id}/time, the editor's own
//	POST /v1/me/instructions/{category}/ack  editor  {version} → 200 {category, confirmed_version}; an older version 409
//	                                              instructions_changed. Until then the editor's claims leave the category
//	                                              out and name it in the Taskd-Instructions-Pending header.
//	GET  /v1/assignments                  editor  → 200 {assignments: [assignment], capacity}: every live claim, oldest first
//	POST /v1/assignments/next             editor  {wait_ms?} → 200 assignment, or 204 when none
//	POST /v1/assignments/{task}/heartbeat editor  {fence, active_ms?} → 200 {lease_expires_at}
//	POST /v1/assignments/{task}/submit    editor  {fence, result, decision?, notes?, active_ms?} → 200 {next: assignment or null}
//	POST /v1/assignments/{task}/release   editor  {fence, reason?, skip?, active_ms?} → 204 (not offered to this editor again
//	                                              for dispatch.release_cooldown, or dispatch.skip_for with skip)
//	GET  /healthz                         anyone  → 200 {status: "ok"}
//	GET  /readyz                          anyone  → 200 or 503 {status, checks: {name: "ok" or error}}
//	GET  /metrics                         anyone  Config.Metrics, when set (Config.MetricsToken)
//	GET  /v1/openapi.json                 anyone  → 200 the OpenAPI document of every route above
//
// An assignment is
//
//	{"task":{"id":1,"category":"news","priority":0,"title":"…","payload":{…}},
//	 "fence":3,"assigned_at":"2026-01-02T15:04:05.000Z","lease_expires_at":"…"}
//
// with times in RFC 3339, UTC, to the millisecond (the database's precision),
// and the payload as stored.
//
// The token of a new editor is in the answer to POST /v1/editors and nowhere
// else: the store keeps only its hash. POST /v1/tasks takes 1..MaxTasksPerRequest
// tasks and inserts all or none; a missing or null payload is {}. A task whose
// key exists is not inserted again: its entry names the existing task with
// created false. run_after and due_at are RFC 3339
// times. A submit
// whose result was committed answers 200 even when finding the next
// assignment failed (Redis down, say): next is then null, and the editor's
// POST /v1/assignments/next reports the trouble.
//
// # Results feed
//
// GET /v1/results streams the accepted results after a cursor as JSON lines
// (application/x-ndjson), one object per result, then a last line
// {"next_cursor":"…","count":N,"more":bool}. A client that always asks again
// after the last cursor it received gets every result exactly once, however
// submits interleave (the MySQL store's Results explains why). limit is
// 1..tasks.ResultsLimitMax, default tasks.ResultsLimitDefault; a bad cursor or
// limit, or a cursor never handed out, is 422 invalid. An answer without its
// last line was cut short: its whole lines stand.
//
// # Authentication
//
// Every /v1 route takes "Authorization: Bearer <token>": the admin token from
// Config on admin routes, an editor's own token on editor routes. A missing or
// unknown token is 401 with WWW-Authenticate; a valid token on the other kind
// of route is 403 (the admin is not an editor, and an editor is no admin). A
// disabled editor's token is 403 editor_disabled on editor routes: on the
// process that disabled it at once, on others within Config.EditorCacheTTL,
// and the store refuses a disabled editor any claim whatever a cache says.
//
// Wrong tokens are throttled per client address, with Config.Redis: each
// token that is nobody's (at GET /metrics, each wrong metrics token) is logged
// (route, address, reason; never the token), counted in taskd.auth.failures,
// and counted in Redis, in a window of Config.AuthFailureWindow shared by
// every replica. Past Config.AuthFailures in a window, the address's wrong
// tokens, and its requests without one, are answered 429 throttled with
// Retry-After until the window ends, without a MySQL read. Its right tokens
// are served: the throttle protects the store, and a token of 256 random
// bits is not guessed. A token is known to be right without MySQL when this
// process remembers its editor, or when Redis has the mark every token hash
// gets for 30 days when MySQL answers for it or taskd makes it; a token
// without either waits for the window's end, as a wrong one does. The pages'
// sign-ins count against the browser's address in the same counter
// (WithRoute). A token found to be nobody's is remembered for
// Config.EditorCacheTTL, so sending it again costs no MySQL read.
//
// The client address is the host of the request's RemoteAddr, unless that
// is one of Config.TrustedProxies: then it is the right-most hop of
// X-Forwarded-For or Forwarded that is no trusted proxy. An IPv6 address
// counts with its /64.
//
// # Whose claim
//
// An editor acts only on its own claim. Heartbeat, submit and release go to
// the dispatcher, whose fenced writes refuse anything but the caller's live
// claim; only when the store refused does the API look up why, in the audit
// trail:
//
//   - a (task, fence) the editor once held: 409 stale_fence, whatever became
//     of that claim since (its lease passed, it was released, skipped,
//     submitted, force-released, or another editor or worker holds the task
//     now). A client treats this one answer as "my claim is gone" and asks for
//     its next assignment;
//   - a (task, fence) the editor held until an operator cancelled the task
//     (the task is cancelled under that fence): 409 task_cancelled, which a
//     client shows as such and then treats as stale_fence;
//   - no such task: 404 not_found;
//   - a (task, fence) the editor never held (another holder's claim, a fence
//     that never was the editor's): 403 forbidden.
//
// A refused request changes nothing in the stores.
//
// # Errors
//
// Errors are {"error":{"code":"…","message":"…"}} with these codes:
//
//	400 bad_request          malformed JSON, unknown fields, wrong types (a string
//	                         or a fraction for an integer), trailing data, a body
//	                         over MaxBodyBytes, a bad id in the path
//	401 unauthorized         no token, or an unknown one
//	403 forbidden            the wrong kind of token, or a claim the editor never held
//	403 editor_disabled      the editor is disabled
//	404 not_found            no such task or route
//	405 method_not_allowed   the route exists for other methods (see Allow)
//	409 stale_fence          a claim the editor held is gone (expired, released,
//	                         submitted, revoked or taken over)
//	409 task_cancelled       a claim the editor held ended because its task was
//	                         cancelled (a heartbeat, submit or release of it);
//	                         ask for the next assignment
//	409 done_by_other        the task was also offered to another editor near its
//	                         due date (a hedge: the assignment's hedge is true for
//	                         the second), and the other submitted first; nothing
//	                         of the refused write is kept
//	409 hold_limit           a heartbeat cannot extend the claim past the maximum hold
//	409 duplicate            an editor name that is taken, or that looks like
//	                         another editor's (the message names that editor)
//	409 barred               a task the editor may not take at its stage (the
//	                         dispatcher passes such tasks by; not expected)
//	409 not_assigned         a force release of a task nobody holds
//	409 wrong_status         a requeue of a task that is not dead, a cancel of one
//	                         that has ended (the message names its status)
//	410 cursor_expired       a results feed cursor older than what retention
//	                         kept; oldest_cursor is the oldest still kept
//	422 invalid              a well-formed request with bad values (see Values);
//	                         the message names the field
//	422 send_back_limit      a send back of a task sent back its category's
//	                         max_send_backs times; the claim stays live
//	429 throttled            the client's address sent too many wrong tokens; see
//	                         Retry-After
//	503 unavailable          MySQL or Redis cannot be reached; see Retry-After
//	500 internal             a fault of the server, never of the request (logged;
//	                         the message says nothing more)
//
// # Values
//
// Whatever the database would refuse is refused first, with 422 invalid:
//
//   - text: valid UTF-8, with no \u escape of a lone UTF-16 surrogate
//     ("\ud800"), anywhere in the body (payload and result included; the
//     message gives the place, such as "[0].title" or "result.notes[2]");
//     lengths in characters: category 1..64 (no leading or trailing spaces),
//     title 1..512, editor name 1..128, reason at most MaxReasonLen;
//   - a reason (release, skip, requeue, cancel, by filter too) and a
//     category are one line: no control character, C0 (U+0000..U+001F, line
//     breaks and tabs included), DEL or C1 (U+0080..U+009F), no line or
//     paragraph separator (U+2028, U+2029) and no bidi control
//     (U+202A..U+202E, U+2066..U+2069); the message names the first;
//   - an editor's name is kept in NFC; it is not blank, has no space at
//     either end, and holds nothing invisible or that changes how the rest is
//     shown: no control character, line break or tab, format character (bidi
//     controls, zero-width spaces and joiners), variation selector or space
//     other than U+0020. A name that looks like another editor's (the same
//     confusable skeleton, Unicode TR39) is 409 duplicate, as a taken name is;
//   - integers: priority fits in 32 bits, max_attempts 1..100, fence at least
//     1, wait_ms not negative; a well-formed integer too big for 64 bits is
//     422 too;
//   - payload (a JSON object) and result (any JSON value but null): at most
//     tasks.MaxJSONDepth (31) levels of nested arrays and objects, the most
//     MariaDB stores, and at most tasks.MaxJSONBytes (4 MiB; a request body
//     is at most MaxBodyBytes anyway);
//   - an editor: 1..64 distinct categories (tasks.MaxCategories), capacity
//     1..100, stages only of its own categories that have stages in the
//     config, each listing 1..8 stage names (lowercase letters, digits, '_'
//     or '-', starting with a letter);
//   - a task: stages at most 8 distinct stage names, overlap 1..9; a submit:
//     decision a word of at most 32 lowercase letters, digits, '_' or '-'
//     (starting with a letter or a digit), notes at most 4096 characters in
//     lines (line breaks and tabs allowed, no other control character and no
//     bidi control), and send_back only
//     at a task's later stages.
//
// Should the database still refuse a value (a schema changed by hand, say),
// the answer is 422 invalid too, never 500.
//
// # Long polling
//
// wait_ms of POST /v1/assignments/next is how long to wait for a task when none
// is claimable: 0 (the default) answers at once, a negative value is 422, and a
// value over Config.MaxWait is lowered to it (a client cannot know the server's
// cap, and waiting less is always correct). The wait ends early when a task
// arrives through this process (POST /v1/tasks wakes waiters) or when the
// client goes away. The http.Server's WriteTimeout must exceed MaxWait.
//
// An editor holds at most Config.MaxPollsPerEditor waiting requests in one
// process (default 4): one more answers its oldest 204 at once, as a wait
// that found nothing would, and the newest waits. A client that lost track
// of its requests keeps the one it waits on; a token cannot hold a thousand.
// New categories for the editor (PATCH /v1/editors/{id}) end the polls it
// holds in the process that made the change, answered 204 too, since they
// wait for the old categories: its next poll waits for the new ones. (Its
// polls on other processes keep the old categories until they end.)
//
// # Workflows
//
// A task with stages (its own, or its category's) is done after its last
// stage: a submit at an earlier one puts it back in the pool at the next, and
// a submit with decision send_back at a later one puts it back at the stage
// before, offered first to the editor who did it. A task that asks for
// overlap results is a group of that many tasks, each its own claim, given
// to distinct editors. The answers say so only about such tasks: stages,
// stage, group_id, overlap and reserved_* of a task and an assignment,
// earlier (the task's results so far) of an assignment of a task with
// stages, results and group of GET /v1/tasks/{id}, and stage, decision and
// notes of a result are left out for the rest, which read as they always
// did. earlier and results hold the latest tasks.TaskResultsLimitDefault
// results, with a cursor (earlier_before, results_before) to the older ones:
// GET /v1/assignments/{task}/earlier and GET /v1/tasks/{id}/results answer
// them a page at a time, so that an answer does not grow with the rounds a
// task went through; a task is sent back at most its category's
// max_send_backs times (422 send_back_limit past it, changing nothing). An editor may hold up to its capacity (default 1) claims at once: GET
// /v1/assignments lists them, and next answers the oldest once it is full.
//
// # Answers
//
// Every answer carries X-Content-Type-Options: nosniff and Cache-Control:
// no-store (GET /v1/openapi.json alone may be cached). GET /metrics is open
// unless Config.MetricsToken is set; see MetricsHandler.
package api
