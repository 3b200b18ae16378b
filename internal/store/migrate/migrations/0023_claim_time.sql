-- 0023: working time. claim_time keeps, per claim an editor ended by a submit or a
-- release, the time the editor was present and active on it: what the workspace
-- measured (reported_ms), and what was kept (active_ms), never more than the claim's
-- wall time (claimed_at to ended_at, from its events) nor than its counted heartbeats
-- allow (see internal/store/worktime.go). A row is written after the submit or
-- release committed, in a statement of its own, and only for a client that measured:
-- the claim's hot path writes nothing here. No foreign keys: the row outlives nothing
-- it names (retention purges it with its task), and a check would lock the task's or
-- the editor's row. The table is new: nothing is copied.
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
