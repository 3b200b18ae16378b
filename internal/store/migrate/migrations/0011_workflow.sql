-- 0011: editorial workflows: stages, overlap, send-back, capacity.
--
-- A task with stages (tasks.stages, the names in order, comma-separated) is at one of
-- them (tasks.stage, from 0): a submit at a stage before the last puts it back in the
-- pool at the next stage, in the same UPDATE that ends the claim; a reviewer's send
-- back puts it at the stage before, reserved for the editor who did that stage until
-- reserved_until. A task that asks for several independent results (overlap) is one
-- row per result, each its own fenced claim: the first row's id is the group_id of all
-- of them. stage_count and overlap repeat what stages and the group say, for the
-- statements that need them in a row.
--
-- Claims read stage_name and the keys below only for tasks with stages, a group or a
-- reservation: for the others stage_status, stage_name, group_id and reserved_for stay
-- NULL, so that a claim, a recycle or a submit moves no entry in tasks_stage_candidate,
-- tasks_group or tasks_reserved.
--
-- Editors may hold up to capacity claims at once; editor_categories.stages limits an
-- editor to some stages of a category (NULL: every stage). Each result keeps the stage
-- it was submitted at, the reviewer's decision and notes.
--
-- One statement per table, each applied whole or not at all.
ALTER TABLE tasks
  ADD COLUMN stages VARCHAR(264) CHARACTER SET ascii COLLATE ascii_bin NULL,
  ADD COLUMN stage TINYINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN stage_count TINYINT UNSIGNED NOT NULL DEFAULT 1,
  ADD COLUMN stage_name VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin AS (SUBSTRING_INDEX(SUBSTRING_INDEX(stages, ',', stage + 1), ',', -1)) STORED,
  ADD COLUMN stage_status ENUM('pending', 'assigned', 'done', 'dead', 'cancelled') AS (IF(stages IS NULL, NULL, status)) STORED,
  ADD COLUMN group_id BIGINT UNSIGNED NULL,
  ADD COLUMN overlap TINYINT UNSIGNED NOT NULL DEFAULT 1,
  ADD COLUMN reserved_for BIGINT UNSIGNED NULL,
  ADD COLUMN reserved_until DATETIME(3) NULL,
  ADD KEY tasks_stage_candidate (stage_status, category, stage_name, priority DESC, due_order, id),
  ADD KEY tasks_group (group_id),
  ADD KEY tasks_reserved (reserved_for);
ALTER TABLE editors
  ADD COLUMN capacity TINYINT UNSIGNED NOT NULL DEFAULT 1;
ALTER TABLE editor_categories
  ADD COLUMN stages VARCHAR(264) CHARACTER SET ascii COLLATE ascii_bin NULL;
ALTER TABLE task_results
  ADD COLUMN stage TINYINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN stage_name VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  ADD COLUMN decision VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  ADD COLUMN notes TEXT NULL;
ALTER TABLE webhook_outbox
  ADD COLUMN stage_name VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
  ADD COLUMN decision VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
