-- 0001: the initial schema, statement for statement the schema.sql that taskd applied
-- before versioned migrations (commit 612f499). Databases made by it are adopted: Migrate
-- finds these tables without the version table and records 0001 as applied.
--
-- CREATE TABLE IF NOT EXISTS lets a run that stopped halfway through this migration be
-- re-run: the tables it created are left alone and the rest are created.
--
-- Never edit an applied migration: change the schema in a new one (see schema.sql).

CREATE TABLE IF NOT EXISTS tasks (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  category         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- Higher priority is handed out first; within a priority, older (lower id) first.
  priority         INT NOT NULL DEFAULT 0,
  title            VARCHAR(512) NOT NULL,
  -- A JSON object. On MariaDB, JSON is LONGTEXT with a json_valid check.
  payload          JSON NOT NULL,
  status           ENUM('pending', 'assigned', 'done', 'dead') NOT NULL DEFAULT 'pending',
  -- Epoch of the current or last claim; bumped by every claim and by a forced release.
  fence            BIGINT UNSIGNED NOT NULL DEFAULT 0,
  -- Who holds (or, once done or dead, last held) the claim: "editor:<id>" or a worker id.
  holder           VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  -- Set only while an editor holds the claim; NULL otherwise.
  editor_id        BIGINT UNSIGNED NULL,
  assigned_at      DATETIME(3) NULL,
  lease_expires_at DATETIME(3) NULL,
  -- Number of claims so far; fail turns the task dead once attempts >= max_attempts.
  attempts         INT NOT NULL DEFAULT 0,
  max_attempts     INT NOT NULL DEFAULT 5,
  -- A pending task is not handed out before run_after (retry backoff).
  run_after        DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  last_error       TEXT NULL,
  -- W3C traceparent of the span that made the current claim.
  trace_context    VARCHAR(255) NULL,
  created_at       DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at       DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  done_at          DATETIME(3) NULL,
  PRIMARY KEY (id),
  -- Candidate reads: per category, status = 'pending', ORDER BY priority DESC, id ASC,
  -- read in index order with no filesort, so the cost does not grow with the pool.
  KEY tasks_candidate (status, category, priority DESC, id),
  -- Expired claims: status = 'assigned' AND lease_expires_at < NOW(3).
  KEY tasks_expiry (status, lease_expires_at),
  -- One live task per editor.
  UNIQUE KEY tasks_editor (editor_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS editors (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name       VARCHAR(128) NOT NULL,
  -- SHA-256 of the editor's 256-bit random API token; the token itself is never stored.
  token_hash BINARY(32) NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY editors_name (name),
  UNIQUE KEY editors_token_hash (token_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS editor_categories (
  editor_id BIGINT UNSIGNED NOT NULL,
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (editor_id, category),
  CONSTRAINT editor_categories_editor FOREIGN KEY (editor_id) REFERENCES editors (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Append-only audit trail. fence is the fence of the claim the event is about (for
-- 'claimed', the new fence; for 'expired' on a takeover, the fence that expired).
CREATE TABLE IF NOT EXISTS task_events (
  id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  task_id   BIGINT UNSIGNED NOT NULL,
  kind      ENUM('claimed', 'heartbeat', 'submitted', 'released', 'skipped', 'expired', 'recycled', 'failed', 'dead') NOT NULL,
  fence     BIGINT UNSIGNED NOT NULL,
  holder    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  editor_id BIGINT UNSIGNED NULL,
  detail    VARCHAR(1024) NULL,
  `at`      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY task_events_task (task_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Accepted submissions; the key makes "one accepted submission per claim" a database fact.
CREATE TABLE IF NOT EXISTS task_results (
  task_id      BIGINT UNSIGNED NOT NULL,
  fence        BIGINT UNSIGNED NOT NULL,
  holder       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  editor_id    BIGINT UNSIGNED NULL,
  result       JSON NOT NULL,
  submitted_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task_id, fence),
  CONSTRAINT task_results_task FOREIGN KEY (task_id) REFERENCES tasks (id)
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
