-- 0004: operators' actions on the pool. A pending task can be cancelled (a terminal
-- status), a dead one requeued (audited as 'requeued'), and a category paused: while
-- a category has a row in paused_categories, no claim takes its tasks.
--
-- Values are appended at the end of the ENUMs, which changes only the table's
-- definition, not its rows. Each statement can be run again.

ALTER TABLE tasks MODIFY COLUMN status ENUM('pending', 'assigned', 'done', 'dead', 'cancelled') NOT NULL DEFAULT 'pending';

ALTER TABLE task_events MODIFY COLUMN kind ENUM('claimed', 'heartbeat', 'submitted', 'released', 'skipped', 'expired', 'recycled', 'failed', 'dead', 'requeued', 'cancelled') NOT NULL;

CREATE TABLE IF NOT EXISTS paused_categories (
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  paused_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (category)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
