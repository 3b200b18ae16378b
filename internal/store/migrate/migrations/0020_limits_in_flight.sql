-- 0020: limits in flight across processes.
--
-- A category may limit its tasks assigned at once (max_in_flight), and the tasks of
-- one limit key in it (key_limit). tasks.limit_key is a task's optional key. Every
-- claim of a task of a limited category, in the transaction of its fenced UPDATE,
-- first writes the category's row in category_limits (which locks it, and on a
-- Galera cluster makes two nodes' claims of the category conflict at
-- certification), then counts the category's assigned tasks (and the key's) and
-- claims no more than the room left.
--
-- limit_status is the status of a task with a limit key while it is pending or
-- assigned, NULL otherwise and for every task without a key, so that the claims and
-- completions of tasks without a key never move an entry of tasks_limit, which
-- counts a key's assigned tasks and reads a key's pending ones in candidate order.
--
-- No table is copied: each column is added on its own with ALGORITHM=INSTANT (the
-- virtual column is computed on read; MariaDB adds a virtual column instantly only
-- alone) and the index is built in place without locking
-- (checked on MariaDB 10.6 and 10.11, and MySQL 8.0).
ALTER TABLE tasks
  ADD COLUMN limit_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  ALGORITHM = INSTANT;

ALTER TABLE tasks
  ADD COLUMN limit_status ENUM('pending', 'assigned') AS (IF(limit_key IS NULL OR status NOT IN ('pending', 'assigned'), NULL, status)) VIRTUAL,
  ALGORITHM = INSTANT;

ALTER TABLE tasks
  ADD KEY tasks_limit (limit_status, category, limit_key, priority DESC, due_order, id),
  ALGORITHM = INPLACE, LOCK = NONE;

CREATE TABLE IF NOT EXISTS category_limits (
  category VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  claims   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (category)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
