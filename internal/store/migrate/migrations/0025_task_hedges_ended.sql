-- 0025: the record of hedges that ended without a win.
--
-- task_hedges keeps one row per task, so a task's next hedge replaces the
-- row of the one before. task_hedges_ended keeps, from then on, whose hedge
-- (task, fence) was, so that a late write of its editor is refused as a claim
-- it once held (409 stale_fence), not as one it never held (403). A row is
-- written, under the task's lock, only when a new hedge replaces an ended
-- one: a task that is never hedged twice writes none. Rows go with their task
-- (the foreign key). A new table: nothing is copied.
CREATE TABLE IF NOT EXISTS task_hedges_ended (
  task_id   BIGINT UNSIGNED NOT NULL,
  fence     BIGINT UNSIGNED NOT NULL,
  editor_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (task_id, fence, editor_id),
  CONSTRAINT task_hedges_ended_task FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
