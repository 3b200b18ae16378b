-- 0003: idempotent inserts, deadlines and the task list.
--
-- task_key is an optional unique external id: inserting a task whose key exists
-- returns the existing task instead (tasks.Store.Insert). Only inserts write it, so
-- its unique key's duplicate checks never meet a claim's locks.
--
-- due_at orders the pool within a priority: tasks with a due_at first, earliest
-- first, then those without, oldest first. due_order is due_at with NULL as the far
-- future, stored so that tasks_candidate can hold it and read that order without a
-- filesort; it is not part of the API.
--
-- The list keys serve GET /v1/tasks (tasks.Store.ListTasks): newest or oldest first
-- by (created_at, id), filtered by status, category, holder or time, read in index
-- order (tasks/EXPLAIN.md).
--
-- One statement, so it applies whole or not at all. (MySQL has no ADD COLUMN IF NOT
-- EXISTS: unlike 0002, a re-run after it applied fails on the existing column.)
ALTER TABLE tasks
  ADD COLUMN task_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  ADD COLUMN due_at DATETIME(3) NULL,
  ADD COLUMN due_order DATETIME(3) AS (COALESCE(due_at, TIMESTAMP'9999-12-31 23:59:59.999')) STORED,
  DROP INDEX tasks_candidate,
  ADD KEY tasks_candidate (status, category, priority DESC, due_order, id),
  ADD UNIQUE KEY tasks_key (task_key),
  ADD KEY tasks_created (created_at, id),
  ADD KEY tasks_status_created (status, created_at, id),
  ADD KEY tasks_category_created (category, status, created_at, id),
  ADD KEY tasks_holder_created (holder, created_at, id),
  ADD KEY tasks_done (status, done_at, id);
