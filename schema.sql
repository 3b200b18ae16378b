-- taskd schema for MariaDB 10.6+ and MySQL 8.0+ (InnoDB, utf8mb4).
--
-- The model
--
-- A task is handed to at most one holder at a time: an editor ("editor:<id>") or a worker
-- process. MySQL is the source of truth and the fencing authority:
--
--   * Every claim moves a task to 'assigned' and increments tasks.fence in one conditional
--     UPDATE. The fence identifies that claim.
--   * Every later write about the claim (heartbeat, submit, release, fail, recycle) is
--     fenced: WHERE id = ? AND fence = ? AND status = 'assigned' ..., and is refused as
--     stale unless it matches exactly one row. Connections must use clientFoundRows=true
--     so that "matched" and not "changed" rows are counted.
--   * Lease deadlines (assigned_at, lease_expires_at, run_after) come from the database
--     clock (NOW(3)), never from a client clock. A claim whose lease_expires_at has passed
--     is dead: it can be taken over by the next claim even before a sweep recycles it.
--   * tasks.editor_id is set only while an editor holds the claim. The editor's limit
--     (editors.capacity, one task by default) is kept by the claim transactions
--     themselves: a claim locks the editor's row, counts under that lock the tasks that
--     name the editor, and only then sets editor_id (see
--     internal/store/claim.go). A UNIQUE key on editor_id would say it declaratively, but its
--     duplicate checks lock neighbouring editors' index entries and made concurrent
--     claims deadlock. task_results is keyed by (task_id, fence): one accepted submission
--     per claim.
--   * Every transaction runs at READ COMMITTED (set on each connection by store.Open):
--     decisions are made on locked rows, and no locking read takes gap locks.
--
-- Status moves: pending -> assigned (claim), -> cancelled (an operator's cancel);
-- assigned -> done (submit), -> pending (release, recycle, fail with attempts left, a
-- worker's snooze), -> dead (fail with no attempts left, a snooze past the limit),
-- -> cancelled (a cancel, which ends the claim: its fence stays, and the holder's
-- writes are refused as they need 'assigned'); dead -> pending (an operator's requeue,
-- which resets attempts and snoozes). done and cancelled are final.
-- tasks.holder and tasks.assigned_at keep the last holder once a task is done or dead,
-- or cancelled while assigned;
-- they are cleared when it goes back to pending, but that a submit moving a task to
-- its next stage (or sending it back) keeps assigned_at, the time of the claim it ended.
--
-- Workflows. A task may have stages (tasks.stages, e.g. "edit,review"): a submit at a
-- stage before the last moves it back to pending at the next stage in the UPDATE that
-- ends the claim, and a reviewer's send back moves it to the stage before, reserved
-- for the editor who did that stage for a while. Nobody claims a stage of a task whose
-- other stage they did (the four-eyes rule; a sent-back stage goes back to the editor
-- who did it), nor a stage editor_categories.stages does not give them. A task that
-- asks for N independent results is N rows sharing a group_id, each claimed, fenced,
-- expired and submitted on its own; an editor holds or submits at most one row of a
-- group. These checks are made by the claim statements under the lock of the
-- claiming editor's row (internal/store/cycle.go), which on a Galera cluster the
-- claim also writes (editors.claims). An editor holds at most editors.capacity claims.
--
-- A category with a row in paused_categories is paused: every claim statement checks,
-- by that table's primary key, that the task's category is not paused, so nothing in
-- it is handed out on any replica from the moment the pause commits. Live claims end
-- as usual.
--
-- This file is the complete current schema, for readers and DBAs. It is the sum of the
-- numbered migrations in internal/store/migrate/migrations/, which `taskd migrate` applies in
-- order and records in the table taskd_schema_migrations (bookkeeping, not shown
-- here); a test proves that applying them all to an empty database gives exactly these
-- tables. A schema change is a new migration plus the matching change here, in the
-- same commit; a migration that was released is never edited.
--
-- Rules for this file and the migrations: statements end with ';' at the end of a line;
-- there are no procedures, triggers or DELIMITER changes, so they can be split on those
-- semicolons. Keep the ENUMs in sync with the Status, EventKind, WebhookEvent and
-- DeliveryStatus constants in package tasks.

CREATE TABLE IF NOT EXISTS tasks (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  category         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- Higher priority is handed out first; within a priority, tasks with a due_at first
  -- (earliest first), then the others, older (lower id) first.
  priority         INT NOT NULL DEFAULT 0,
  title            VARCHAR(512) NOT NULL,
  -- A JSON object. On MariaDB, JSON is LONGTEXT with a json_valid check.
  payload          JSON NOT NULL,
  status           ENUM('pending', 'assigned', 'done', 'dead', 'cancelled') NOT NULL DEFAULT 'pending',
  -- Epoch of the current or last claim; bumped by every claim and by a forced release.
  fence            BIGINT UNSIGNED NOT NULL DEFAULT 0,
  -- Who holds (or, once done or dead, last held) the claim: "editor:<id>" or a worker id.
  holder           VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  -- Set only while an editor holds the claim; NULL otherwise.
  editor_id        BIGINT UNSIGNED NULL,
  assigned_at      DATETIME(3) NULL,
  lease_expires_at DATETIME(3) NULL,
  -- Number of claims so far, but those a snooze ended; fail turns the task dead once
  -- attempts >= max_attempts.
  attempts         INT NOT NULL DEFAULT 0,
  max_attempts     INT NOT NULL DEFAULT 5,
  -- A pending task is not handed out before run_after (retry backoff). Every write that
  -- makes a task pending sets it to when the task became claimable, and a claim to
  -- when the attempt it claims did (the queue wait runs from there to assigned_at).
  run_after        DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  last_error       TEXT NULL,
  -- W3C traceparent of the span that made the current claim.
  trace_context    VARCHAR(255) NULL,
  created_at       DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at       DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  done_at          DATETIME(3) NULL,
  -- Optional external id: inserting a task with a key that is held returns the task
  -- that holds it instead (idempotent inserts). Several tasks may have had the same
  -- key over time; at most one holds it (key_held).
  task_key         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  -- How long the key stays held: NULL while the row exists, 0 only while the task is
  -- pending or assigned, n > 0 until n seconds after it ended (done_at); the sweeper
  -- sets it to 0 once key_free_at has passed.
  key_hold_secs    INT UNSIGNED NULL,
  -- The key while it is held, NULL after: the unique key. Generated, so a statement
  -- that ends a task frees a live-only key in the same write, and a task without a
  -- key keeps NULL. Only inserts and a requeue make it non-NULL (a duplicate check);
  -- a claim, recycle or release never changes it. Not part of the API.
  key_held         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin AS (IF(status IN ('pending', 'assigned') OR key_hold_secs IS NULL OR key_hold_secs > 0, task_key, NULL)) STORED,
  -- When a key held for a period becomes free, NULL for every other task. Not part
  -- of the API.
  key_free_at      DATETIME(3) AS (IF(task_key IS NOT NULL AND key_hold_secs > 0 AND status IN ('done', 'dead', 'cancelled'), done_at + INTERVAL key_hold_secs SECOND, NULL)) STORED,
  -- Optional deadline; orders the pool within a priority (see priority).
  due_at           DATETIME(3) NULL,
  -- due_at with NULL as the far future, so that an index reads tasks with a due_at
  -- first, earliest first, then the others. Not part of the API.
  due_order        DATETIME(3) AS (COALESCE(due_at, TIMESTAMP'9999-12-31 23:59:59.999')) STORED,
  -- status once the task has ended (done, dead or cancelled), NULL while it is pending
  -- or assigned, for the list keys below: a claim, a recycle or a release leaves it
  -- NULL and so moves no entry in them. Not part of the API.
  ended_status     ENUM('done', 'dead', 'cancelled') AS (IF(status IN ('pending', 'assigned'), NULL, status)) STORED,
  -- status while the task waits in a pool: pending (the claims') or dead (the
  -- requeues'); NULL while it is assigned and once it is done or cancelled, for the
  -- keys the pools are read from: a completion (assigned -> done) leaves it NULL and
  -- so moves no entry in them. Not part of the API.
  pool_status      ENUM('pending', 'dead') AS (IF(status IN ('pending', 'dead'), status, NULL)) STORED,
  -- due_at while the task is pending, NULL otherwise, for tasks_overdue: a task
  -- without a due_at never moves in it. Not part of the API.
  pending_due_at   DATETIME(3) AS (IF(status = 'pending', due_at, NULL)) STORED,
  -- Workflows (see the header). The task's stages in order, comma-separated, NULL for
  -- a task of one stage; the stage it is at (from 0) and how many there are.
  stages           VARCHAR(264) CHARACTER SET ascii COLLATE ascii_bin NULL,
  stage            TINYINT UNSIGNED NOT NULL DEFAULT 0,
  stage_count      TINYINT UNSIGNED NOT NULL DEFAULT 1,
  -- The current stage's name and, for the stage-restricted candidate reads, status:
  -- both NULL for a task without stages, so that its claims move no entry in
  -- tasks_stage_candidate. Not part of the API.
  stage_name       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin AS (SUBSTRING_INDEX(SUBSTRING_INDEX(stages, ',', stage + 1), ',', -1)) STORED,
  stage_status     ENUM('pending', 'assigned', 'done', 'dead', 'cancelled') AS (IF(stages IS NULL, NULL, status)) STORED,
  -- A task that asks for several independent results is one row per result: group_id
  -- is the first row's id in each of them, NULL for a task that asks for one; overlap
  -- is how many rows the group has.
  group_id         BIGINT UNSIGNED NULL,
  overlap          TINYINT UNSIGNED NOT NULL DEFAULT 1,
  -- A task sent back is offered only to reserved_for (the editor who did the stage it
  -- went back to) until reserved_until. A claim clears both.
  reserved_for     BIGINT UNSIGNED NULL,
  reserved_until   DATETIME(3) NULL,
  -- 1 while the current claim has no 'claimed' event: a worker's batch claim writes
  -- none. Its successful submit leaves the task_results row (claimed_at set) as the
  -- record of the claim and the submit; any other end of it writes the missing
  -- 'claimed' event first and sets 0 (see migration 0017). In no index. Not part of
  -- the API.
  claim_unlogged   TINYINT NOT NULL DEFAULT 0,
  -- Number of claims a worker's snooze ended (the handler asked to run the task
  -- later: pending again, the attempt not counted) since the task was added or last
  -- requeued; a snooze once it reaches the worker's limit makes the task dead instead
  -- (see migration 0019). In no index.
  snoozes          INT NOT NULL DEFAULT 0,
  -- Optional limit key: in a category with a key_limit, at most that many tasks of
  -- one key are assigned at once (see category_limits).
  limit_key        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  -- status while a task with a limit key is pending or assigned, NULL otherwise and
  -- for every task without one, for tasks_limit: the claims of tasks without a key
  -- move no entry in it. Virtual (see migration 0020). Not part of the API.
  limit_status     ENUM('pending', 'assigned') AS (IF(limit_key IS NULL OR status NOT IN ('pending', 'assigned'), NULL, status)) VIRTUAL,
  PRIMARY KEY (id),
  -- Candidate reads: per category, pool_status = 'pending', ORDER BY priority DESC,
  -- due_order, id, read in index order with no filesort, so the cost does not grow
  -- with the pool; and the dead tasks of a category in the same order (requeues).
  -- Assigned and ended tasks are all in its NULL range, which nothing reads: a
  -- claim moves an entry, a completion none.
  KEY tasks_candidate (pool_status, category, priority DESC, due_order, id),
  KEY tasks_key (task_key, created_at, id),
  UNIQUE KEY tasks_key_held (key_held),
  -- Keys held for a period whose period has passed: key_free_at < NOW(3).
  KEY tasks_key_free (key_free_at),
  -- The task list (GET /v1/tasks): newest or oldest first by (created_at, id), read in
  -- index order per filter; tasks_done orders by done time. The keys by status hold
  -- ended_status, not status, so that claims and recycles do not move their entries.
  -- A completion moves an entry in each of the three (and a claim one in
  -- tasks_holder_created, setting the holder): keyed on columns neither changes, a
  -- list of the done tasks, or of a holder's, would pass over every other task in
  -- the key's order to find a page, a read bounded by nothing.
  KEY tasks_created (created_at, id),
  KEY tasks_ended_created (ended_status, created_at, id),
  KEY tasks_category_created (category, ended_status, created_at, id),
  KEY tasks_holder_created (holder, created_at, id),
  KEY tasks_done (ended_status, done_at, id),
  -- Claims: status = 'assigned', per category by lease. The expired claims of a
  -- category (candidate reads) are the start of its range; the sweep reads every
  -- claim's entry, without locking, and takes the expired ones (lease_expires_at <
  -- NOW(3)), a read bounded by the claims, not by the pool or the finished tasks. A
  -- claim and a completion move an entry each: the lease is set, then cleared.
  KEY tasks_expiry (status, category, lease_expires_at),
  -- The oldest claimable task per category (the first run_after of each pending
  -- range: every write that makes a task pending sets run_after to when it became
  -- claimable), and the pending tasks past their due_at (see migration 0015).
  -- tasks_claimable is keyed on pool_status, as tasks_candidate: a completion moves
  -- no entry in it. tasks_overdue is keyed on pending_due_at: a claim moves the
  -- entry of a task with a due_at, and nothing moves one without.
  KEY tasks_claimable (pool_status, category, run_after),
  KEY tasks_overdue (pending_due_at, category, run_after),
  -- The tasks an editor holds (at most editors.capacity: see the header).
  KEY tasks_editor (editor_id),
  -- Candidate reads of an editor limited to some stages of a category: per category
  -- and stage, in the order of tasks_candidate. Tasks without stages are all in its
  -- NULL range, and never move in it.
  KEY tasks_stage_candidate (stage_status, category, stage_name, priority DESC, due_order, id),
  KEY tasks_group (group_id),
  KEY tasks_reserved (reserved_for),
  -- A limit key's assigned tasks (counted by a claim) and its pending ones in the
  -- order of tasks_candidate, per category.
  KEY tasks_limit (limit_status, category, limit_key, priority DESC, due_order, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS editors (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name       VARCHAR(128) NOT NULL,
  -- SHA-256 of the name's confusable skeleton (Unicode TR39), set by taskd with the
  -- name: its UNIQUE key refuses a name that looks like another editor's ("rеv" with a
  -- Cyrillic е beside "rev"). NULL only for an editor made before it whose name looks
  -- like an older editor's (see migration 0013).
  name_skeleton BINARY(32) NULL,
  -- SHA-256 of the editor's 256-bit random API token; the token itself is never stored.
  token_hash BINARY(32) NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  -- When the editor was disabled; NULL while enabled. A disabled editor's token is
  -- refused, and a claim checks this column under the lock of the editor's row.
  disabled_at DATETIME(3) NULL,
  -- The editor's claims so far, raised by every claim on a Galera cluster, where a
  -- row lock holds on its own node only and written rows are what certification
  -- orders: two claims of one editor on two nodes conflict there.
  claims     BIGINT UNSIGNED NOT NULL DEFAULT 0,
  -- How many claims the editor may hold at once.
  capacity   TINYINT UNSIGNED NOT NULL DEFAULT 1,
  -- Raised by every disable: a page session that began under a lower value is
  -- refused, so that none begun before a disable works after the enable.
  session_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  UNIQUE KEY editors_name (name),
  UNIQUE KEY editors_token_hash (token_hash),
  UNIQUE KEY editors_name_skeleton (name_skeleton)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS editor_categories (
  editor_id BIGINT UNSIGNED NOT NULL,
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The stages of the category the editor may take, comma-separated; NULL: every one.
  stages    VARCHAR(264) CHARACTER SET ascii COLLATE ascii_bin NULL,
  PRIMARY KEY (editor_id, category),
  CONSTRAINT editor_categories_editor FOREIGN KEY (editor_id) REFERENCES editors (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- An editor's last-seen time: raised by each accepted heartbeat of one of its claims
-- (a heartbeat writes no task_events row). A table of its own, not a column of editors,
-- so that a heartbeat never writes a row a claim locks, and with no foreign key, whose
-- check would lock the editor's row (see migration 0014).
CREATE TABLE IF NOT EXISTS editor_seen (
  editor_id    BIGINT UNSIGNED NOT NULL,
  last_seen_at DATETIME(3) NOT NULL,
  PRIMARY KEY (editor_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Append-only audit trail. fence is the fence of the claim the event is about (for
-- 'claimed', the new fence; for 'expired' on a takeover, the fence that expired).
-- 'heartbeat' is kept for the rows written before migration 0014: heartbeats write
-- none since. A worker job that succeeds on its first claim has no row here: its
-- task_results row (claimed_at set) records its claim and its submit (see migration
-- 0017); every other end of a claim has its events.
CREATE TABLE IF NOT EXISTS task_events (
  id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  task_id   BIGINT UNSIGNED NOT NULL,
  kind      ENUM('claimed', 'heartbeat', 'submitted', 'released', 'skipped', 'expired', 'recycled', 'failed', 'dead', 'requeued', 'cancelled', 'snoozed') NOT NULL,
  fence     BIGINT UNSIGNED NOT NULL,
  holder    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  editor_id BIGINT UNSIGNED NULL,
  detail    VARCHAR(1024) NULL,
  -- The W3C trace id of the sampled span the event was written under (the claim's,
  -- the submit's, the sweep's...), NULL when it was not traced.
  trace_id  BINARY(16) NULL,
  `at`      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY task_events_task (task_id, id),
  -- Per-editor counts by kind, today's from UTC midnight on (GET /v1/editors): each is
  -- one range of this key holding exactly the rows it counts.
  KEY task_events_editor (editor_id, kind, `at`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Accepted submissions; the key makes "one accepted submission per claim" a database fact.
CREATE TABLE IF NOT EXISTS task_results (
  task_id      BIGINT UNSIGNED NOT NULL,
  fence        BIGINT UNSIGNED NOT NULL,
  holder       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  editor_id    BIGINT UNSIGNED NULL,
  result       JSON NOT NULL,
  submitted_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  -- The result's place in the results feed (GET /v1/results, taskd export): NULL until
  -- the result is committed and numbered, then unique and never changed. Numberings
  -- take turns on task_results_feed's row lock and so commit in seq order: a reader
  -- sees every seq up to the highest it sees (see internal/store/results.go).
  seq          BIGINT UNSIGNED NULL,
  -- The stage the result was submitted at (its index and name, NULL for a task
  -- without stages), and the submitter's decision and notes, if any.
  stage        TINYINT UNSIGNED NOT NULL DEFAULT 0,
  stage_name   VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  decision     VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  notes        TEXT NULL,
  -- Set only on the result of a claim that wrote no 'claimed' event (tasks.claim_unlogged):
  -- then the row is the record of the claim and the submit, and no task_events row is
  -- (see migration 0017). claimed_at is the claim's time (its assigned_at), claim_trace_id
  -- and trace_id the W3C trace ids of the claim and of the submit, NULL when untraced.
  -- A task's history shows the row as the 'claimed' and 'submitted' events it stands
  -- for. All NULL on any other result.
  claimed_at   DATETIME(3) NULL,
  claim_trace_id BINARY(16) NULL,
  trace_id     BINARY(16) NULL,
  PRIMARY KEY (task_id, fence),
  -- The feed in seq order; and the unnumbered results (seq IS NULL) in submission
  -- order, the primary key columns following submitted_at.
  KEY task_results_seq (seq, submitted_at),
  CONSTRAINT task_results_task FOREIGN KEY (task_id) REFERENCES tasks (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The results feed's counter: the last seq given out to task_results, in the row
-- id = 1 (made by the first numbering). Its row lock makes numberings take turns.
-- The row id = 2, made by the first purge of a numbered result, holds the highest seq
-- retention purged: a feed cursor below it is answered as expired (see
-- internal/store/retention.go).
CREATE TABLE IF NOT EXISTS task_results_feed (
  id       TINYINT UNSIGNED NOT NULL,
  last_seq BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Skip memory: a task an editor skipped is not offered to that editor again before
-- `until`. Rows past `until` are dead weight and may be purged (index on until).
CREATE TABLE IF NOT EXISTS task_skips (
  task_id   BIGINT UNSIGNED NOT NULL,
  editor_id BIGINT UNSIGNED NOT NULL,
  `until`   DATETIME(3) NOT NULL,
  PRIMARY KEY (task_id, editor_id),
  KEY task_skips_until (`until`),
  CONSTRAINT task_skips_task FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE,
  CONSTRAINT task_skips_editor FOREIGN KEY (editor_id) REFERENCES editors (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Paused categories: claims leave their tasks alone (see the header). A few rows at
-- most, each read by its primary key.
CREATE TABLE IF NOT EXISTS paused_categories (
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  paused_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (category)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Limits in flight (internal/store/limits.go): one row per category with a
-- max_in_flight or key_limit, written by every claim of a task of it before it
-- counts the category's assigned tasks: the write locks the row, so that two claims
-- of the category count one after the other, and on a Galera cluster makes claims
-- on two nodes conflict at certification. claims counts those writes.
CREATE TABLE IF NOT EXISTS category_limits (
  category VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  claims   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (category)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Instructions per category (internal/store/instructions.go): every version kept,
-- numbered from 1 per category, never updated. An editor confirms a version once
-- (editor_instruction_acks); until it confirmed a category's current version, the
-- API leaves that category out of the editor's next claim. Live claims are not
-- affected; a category without instructions never holds anything back.
CREATE TABLE IF NOT EXISTS category_instructions (
  category   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  version    INT UNSIGNED NOT NULL,
  body       MEDIUMTEXT NOT NULL,
  source     ENUM('config', 'api') NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (category, version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS editor_instruction_acks (
  editor_id BIGINT UNSIGNED NOT NULL,
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  version   INT UNSIGNED NOT NULL,
  `at`      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (editor_id, category, version),
  CONSTRAINT editor_instruction_acks_editor FOREIGN KEY (editor_id) REFERENCES editors (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Gold tasks (internal/store/gold.go): tasks whose answer is known, served to
-- each editor at most once as a copy (a tasks row of its own, inserted already
-- assigned to the editor: claimed, heartbeated, fenced and submitted as any
-- other), scored in gold_copies and never written to task_results. A gold
-- task's own row, when it was pending, is held out of the pool by a run_after
-- in the far future (tasks.GoldRunAfter), as every copy is, so that neither is
-- ever claimed by anyone else, released or expired included. gold_pauses keeps
-- an editor from a category whose gold accuracy floor it fell under.
CREATE TABLE IF NOT EXISTS gold_tasks (
  task_id    BIGINT UNSIGNED NOT NULL,
  category   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The expected answer: {"decision": ...} and/or {"result": {...}}.
  answer     JSON NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task_id),
  KEY gold_tasks_category (category, task_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- One row per copy served: its editor (at most once per gold task: the UNIQUE
-- key) and, once submitted, the score (correct, the fields that differed) and
-- what was submitted.
CREATE TABLE IF NOT EXISTS gold_copies (
  copy_id     BIGINT UNSIGNED NOT NULL,
  gold_id     BIGINT UNSIGNED NOT NULL,
  editor_id   BIGINT UNSIGNED NOT NULL,
  category    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  served_at   DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  answered_at DATETIME(3) NULL,
  correct     TINYINT NULL,
  differed    VARCHAR(1024) NULL,
  result      JSON NULL,
  decision    VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  PRIMARY KEY (copy_id),
  UNIQUE KEY gold_copies_editor (editor_id, gold_id),
  -- Accuracy per category over a window (answered_at).
  KEY gold_copies_answered (category, answered_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS gold_pauses (
  editor_id BIGINT UNSIGNED NOT NULL,
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  reason    VARCHAR(255) NOT NULL,
  paused_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  -- When an admin lifted the pause; NULL while it holds. The floor judges only
  -- the answers given after the last lift.
  lifted_at DATETIME(3) NULL,
  PRIMARY KEY (editor_id, category)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Working time: per claim an editor ended by a submit or a release, the time the editor
-- was present and active on it, as the workspace measured it (reported_ms) and as kept
-- (active_ms: at most the claim's wall time, claimed_at to ended_at, and what its
-- counted heartbeats allow; see internal/store/worktime.go). Written after the submit
-- or release committed, and only for a client that measured; no foreign keys (see
-- migration 0023). Per-editor figures read claim_time_editor's range.
CREATE TABLE IF NOT EXISTS claim_time (
  task_id     BIGINT UNSIGNED NOT NULL,
  fence       BIGINT UNSIGNED NOT NULL,
  editor_id   BIGINT UNSIGNED NOT NULL,
  category    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  stage       TINYINT UNSIGNED NOT NULL DEFAULT 0,
  stage_name  VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  outcome     ENUM('submitted', 'released') NOT NULL,
  claimed_at  DATETIME(3) NOT NULL,
  ended_at    DATETIME(3) NOT NULL,
  active_ms   BIGINT UNSIGNED NOT NULL,
  reported_ms BIGINT UNSIGNED NOT NULL,
  beats       INT UNSIGNED NULL,
  PRIMARY KEY (task_id, fence),
  KEY claim_time_editor (editor_id, ended_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Hedged re-offers (internal/store/hedge.go): the one editor a held task near its
-- due_at, whose holder went inactive, was also offered to. fence is the holder's
-- plus one; the hedge is live while expires_at has not passed and the task is still
-- assigned under fence - 1. Whichever of the two submits first ends the other's
-- claim in the conditional UPDATE of the task's row. Rows are written under the
-- lock of their task's row; one no longer live stays as the record of whose hedge it
-- was until the task's next hedge replaces it (see migration 0024).
CREATE TABLE IF NOT EXISTS task_hedges (
  task_id     BIGINT UNSIGNED NOT NULL,
  editor_id   BIGINT UNSIGNED NOT NULL,
  fence       BIGINT UNSIGNED NOT NULL,
  stage       TINYINT UNSIGNED NOT NULL DEFAULT 0,
  assigned_at DATETIME(3) NOT NULL,
  expires_at  DATETIME(3) NOT NULL,
  PRIMARY KEY (task_id),
  KEY task_hedges_editor (editor_id, expires_at),
  CONSTRAINT task_hedges_task FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The hedges a task's next hedge replaced (internal/store/hedge.go): whose
-- hedge (task, fence) was, so that its editor's late writes are 409, not 403.
CREATE TABLE IF NOT EXISTS task_hedges_ended (
  task_id   BIGINT UNSIGNED NOT NULL,
  fence     BIGINT UNSIGNED NOT NULL,
  editor_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (task_id, fence, editor_id),
  CONSTRAINT task_hedges_ended_task FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Webhooks (internal/store/webhooks.go). The outbox holds task events for webhooks, written in
-- the transaction of the change each reports (submit, fail to dead, expiry, release),
-- and only for the kinds some configured webhook subscribes to. Its id is the event id
-- receivers deduplicate by. Rows are appended by the hot paths and never updated by
-- them; the delivering process fans each new event out (fanned_out) to a delivery per
-- subscribed webhook. A submitted event's result is read from task_results at delivery.
-- Writing an event waits for no lock: it appends a row (auto-increment id, no unique
-- secondary key) after the change's own locks are taken, so the lock order of the
-- writes is unchanged; the fan-out locks committed rows only, skipping locked ones.
CREATE TABLE IF NOT EXISTS webhook_outbox (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  kind       ENUM('submitted', 'dead', 'expired', 'released') NOT NULL,
  task_id    BIGINT UNSIGNED NOT NULL,
  -- The fence, holder and editor of the claim the event is about.
  fence      BIGINT UNSIGNED NOT NULL,
  holder     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  editor_id  BIGINT UNSIGNED NULL,
  category   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- What caused it (tasks.WebhookCause): submit, fail, snooze, sweep, takeover,
  -- reclaim, release, skip or force.
  cause      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- The holder's release reason, or the error of a dead task.
  detail     VARCHAR(1024) NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  fanned_out TINYINT(1) NOT NULL DEFAULT 0,
  -- For a submitted event of a task with stages: the stage and the decision.
  stage_name VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  decision   VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  PRIMARY KEY (id),
  KEY webhook_outbox_new (fanned_out, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- One event to one webhook: pending until the receiver answers 2xx (delivered) or
-- attempts or age run out (failed; kept, visible in stats and the log).
CREATE TABLE IF NOT EXISTS webhook_deliveries (
  event_id        BIGINT UNSIGNED NOT NULL,
  webhook         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  status          ENUM('pending', 'delivered', 'failed') NOT NULL DEFAULT 'pending',
  attempts        INT NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  last_error      VARCHAR(1024) NULL,
  created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  done_at         DATETIME(3) NULL,
  PRIMARY KEY (event_id, webhook),
  -- Due deliveries of a webhook: status = 'pending' AND next_attempt_at <= NOW(3).
  KEY webhook_deliveries_due (webhook, status, next_attempt_at),
  KEY webhook_deliveries_status (status),
  CONSTRAINT webhook_deliveries_event FOREIGN KEY (event_id) REFERENCES webhook_outbox (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The delivery log: one row per POST, with the answer's status code or the error.
CREATE TABLE IF NOT EXISTS webhook_attempts (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id    BIGINT UNSIGNED NOT NULL,
  webhook     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  attempt     INT NOT NULL,
  status_code INT NULL,
  error       VARCHAR(1024) NULL,
  duration_ms INT NOT NULL,
  `at`        DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY webhook_attempts_delivery (event_id, webhook, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
