-- 0024: hedged re-offers near a deadline.
--
-- task_hedges holds, per task, the one editor a held task was also offered to
-- because it is near its due_at and its holder went inactive (a hedge). Its
-- fence is the holder's plus one, the fence the task's next claim would get:
-- the hedger's writes name it. A hedge is live while expires_at has not passed
-- and the task is still assigned under fence - 1 (the holder's claim it
-- hedges); whichever of the two submits first ends the other's claim in the
-- conditional UPDATE of the task's row (internal/store/hedge.go). Every write
-- of a row here is made under the lock of its task's row. A row that is no
-- longer live stays as the record of whose hedge it was until the task's next
-- hedge replaces it or the task is purged (the foreign key). A new table:
-- nothing is copied.
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
