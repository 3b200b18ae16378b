-- 0022: gold tasks (tasks with a known answer), their per-editor copies and
-- scores, and the editors paused from a category by their gold accuracy.
--
-- gold_tasks names the tasks whose answer is known (the source rows stay in
-- tasks: a source that was pending is held out of the pool by a run_after in
-- the far future). An editor is served a gold task as a copy: a tasks row of
-- its own, inserted already assigned to the editor, whose gold_copies row
-- names the source, the editor and, once submitted, the score. The UNIQUE
-- key serves each editor a gold task at most once. The result of a copy is
-- kept here and nowhere else: never in task_results, so never in the results
-- feed, the export, webhooks, review stages or agreement. gold_pauses holds
-- the editors whose accuracy fell under a category's floor, until an admin
-- lifts the pause. All three tables are new: nothing is copied.
CREATE TABLE IF NOT EXISTS gold_tasks (
  task_id    BIGINT UNSIGNED NOT NULL,
  category   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  answer     JSON NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task_id),
  KEY gold_tasks_category (category, task_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

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
