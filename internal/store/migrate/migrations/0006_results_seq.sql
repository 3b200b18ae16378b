-- 0006: results in the order they became visible. task_results.seq numbers each
-- accepted result once it is committed; GET /v1/results and `taskd export` read by
-- seq, so a reader that follows its cursor sees every result exactly once even though
-- submit transactions commit out of order (see tasks/results.go).
--
-- Re-running it after a failure works: the table is created only if missing, and the
-- ALTER, one statement applied whole or not at all, comes last.

-- The last seq given out, in the one row id = 1 (created by the first numbering). Its
-- row lock makes numberings take turns, so they commit in seq order.
CREATE TABLE IF NOT EXISTS task_results_feed (
  id       TINYINT UNSIGNED NOT NULL,
  last_seq BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- seq is NULL until the result is numbered. The key serves both reads: seq > ? in seq
-- order, and the results still unnumbered (seq IS NULL) in submission order, without
-- a sort (the primary key columns follow submitted_at in the key).
ALTER TABLE task_results ADD COLUMN seq BIGINT UNSIGNED NULL, ADD KEY task_results_seq (seq, submitted_at);
