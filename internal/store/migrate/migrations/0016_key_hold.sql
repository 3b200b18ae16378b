-- 0016: a task's key is unique for as long as its key_hold says, not forever.
--
-- key_hold_secs is how long the key stays taken: NULL while the task's row exists (the
-- only kind before this migration, so every existing keyed task keeps its key as it
-- did), 0 only while the task is pending or assigned, n > 0 until n seconds after it
-- ended (done_at). key_held is the key while it is taken and NULL after: the unique
-- key moves from task_key to it, and UNIQUE allows any number of NULLs, so a freed
-- key can be inserted again while the database still refuses a second holder under
-- any concurrency. It is a stored generated column, so every statement that ends a
-- task frees a live-only key in the same write without naming it, and a task without
-- a key keeps NULL (no index entry moves). key_free_at is when a key held for a period
-- becomes free; the sweeper frees those past it in batches (key_hold_secs = 0).
-- task_key stays, for the list by key: tasks_key, no longer unique, reads the tasks
-- that had a key in the list's order (several may have had it over time).
--
-- One statement, so it applies whole or not at all.
ALTER TABLE tasks
  ADD COLUMN key_hold_secs INT UNSIGNED NULL AFTER task_key,
  ADD COLUMN key_held VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
    AS (IF(status IN ('pending', 'assigned') OR key_hold_secs IS NULL OR key_hold_secs > 0, task_key, NULL)) STORED AFTER key_hold_secs,
  ADD COLUMN key_free_at DATETIME(3)
    AS (IF(task_key IS NOT NULL AND key_hold_secs > 0 AND status IN ('done', 'dead', 'cancelled'), done_at + INTERVAL key_hold_secs SECOND, NULL)) STORED AFTER key_held,
  DROP KEY tasks_key,
  ADD KEY tasks_key (task_key, created_at, id),
  ADD UNIQUE KEY tasks_key_held (key_held),
  ADD KEY tasks_key_free (key_free_at);
